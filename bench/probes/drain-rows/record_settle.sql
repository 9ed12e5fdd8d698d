WITH s AS (SELECT id FROM deliveries WHERE state = 'sending' AND lease_owner = 'w' || :client_id),
 d AS (UPDATE deliveries u SET state = 'sent', sent_at = now(), updated_at = now(),
           lease_owner = NULL, lease_until = NULL, settle_kind = 'commit',
           settle_id = nextval('quota_movements_id_seq'), settled_at = now()
       WHERE u.id = ANY(ARRAY(SELECT id FROM s)) RETURNING u.id, u.tenant_id, u.cost),
 n AS (SELECT tenant_id, sum(cost) AS c FROM d GROUP BY tenant_id)
UPDATE quota_accounts q SET reserved = q.reserved - n.c, spent = q.spent + n.c
FROM n WHERE q.tenant_id = n.tenant_id AND q.quota_key = 'webhook' AND stripe = 0;
