"""README's quick start through a client generated from herald's /openapi.json by
openapi-python-client: a tenant, a grant, a delivery under an Idempotency-Key (twice),
the delivery, its attempts and the tenant's quotas. Every answer is checked.

Usage: python quickstart.py CLIENT_DIR BASE_URL ADMIN_KEY
"""

import sys
import uuid

client_dir, base_url, admin_key = sys.argv[1:4]
sys.path.insert(0, client_dir)

from herald_client import AuthenticatedClient  # noqa: E402
from herald_client.api.admin import create_tenant, grant  # noqa: E402
from herald_client.api.deliveries import attempts, create, quotas, show  # noqa: E402
from herald_client.models import (  # noqa: E402
    CreateDelivery,
    CreateDeliveryChannel,
    CreateDeliveryPayload,
    CreateTenant,
    DeliveryView,
    Grant,
    Granted,
    TenantCreated,
)


def expect(response, status, kind):
    assert response.status_code == status, (status, response.status_code, response.content)
    assert isinstance(response.parsed, kind), (kind, response.parsed)
    return response.parsed


admin = AuthenticatedClient(base_url=base_url, token=admin_key, raise_on_unexpected_status=True)
tenant = expect(
    create_tenant.sync_detailed(client=admin, body=CreateTenant(name="acme")), 201, TenantCreated
)
assert tenant.name == "acme" and tenant.api_key.startswith("hk_"), tenant
assert tenant.webhook_secret.startswith("whsec_"), tenant

granted = expect(
    grant.sync_detailed(
        tenant=tenant.id,
        quota_key="webhook",
        client=admin,
        body=Grant(amount=100),
        idempotency_key="acme-initial",
    ),
    200,
    Granted,
)
assert (granted.applied, granted.granted, granted.available) == (True, 100, 100), granted
again = expect(
    grant.sync_detailed(
        tenant=tenant.id,
        quota_key="webhook",
        client=admin,
        body=Grant(amount=100),
        idempotency_key="acme-initial",
    ),
    200,
    Granted,
)
assert (again.applied, again.granted) == (False, 100), again

client = AuthenticatedClient(base_url=base_url, token=tenant.api_key)
payload = CreateDeliveryPayload.from_dict({"event": "order.ready"})
# A loopback target: this server refuses it when sending (HERALD_ALLOW_PRIVATE_TARGETS is
# not set), so the quick start sends nothing anywhere.
body = CreateDelivery(
    channel=CreateDeliveryChannel.WEBHOOK, to="https://localhost/hooks", payload=payload
)
created = expect(
    create.sync_detailed(client=client, body=body, idempotency_key="order-42-ready"),
    201,
    DeliveryView,
)
assert created.duplicate is False and created.operation_key == "order-42-ready", created
assert isinstance(created.id, uuid.UUID), created.id
retried = expect(
    create.sync_detailed(client=client, body=body, idempotency_key="order-42-ready"),
    200,
    DeliveryView,
)
assert retried.duplicate is True and retried.id == created.id, retried

seen = expect(show.sync_detailed(id=created.id, client=client), 200, DeliveryView)
assert seen.id == created.id and seen.channel == "webhook" and seen.cost == 1, seen
assert seen.state.value in ("pending", "sending", "failed"), seen.state
listed = attempts.sync_detailed(id=created.id, client=client)
assert listed.status_code == 200 and isinstance(listed.parsed.attempts, list), listed
accounts = quotas.sync_detailed(client=client)
assert accounts.status_code == 200, accounts
(webhook,) = [q for q in accounts.parsed.quotas if q.quota_key == "webhook"]
# The send is refused (a loopback target) and its unit released, or still reserved.
assert webhook.granted == 100 and webhook.spent == 0, webhook
assert (webhook.available, webhook.reserved) in [(99, 1), (100, 0)], webhook
print("quick start through the generated client: ok")
