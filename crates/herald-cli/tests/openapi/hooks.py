"""schemathesis hooks for herald: the rules herald's OpenAPI document states only in
prose, because no schema that client generators read can state them (see
crates/herald-server/src/openapi.rs). Each is applied to a generated request just before
it is sent, so positive data stays valid by the document and by the server."""

import schemathesis


def _without_nul(value):
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    return value


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.operation.method.upper() != "POST" or case.operation.path != "/v1/deliveries":
        return
    if not isinstance(case.body, dict):
        return
    # No NUL in any string of a payload (PostgreSQL's jsonb cannot store it).
    if "payload" in case.body:
        case.body["payload"] = _without_nul(case.body["payload"])
    # operation_key or the Idempotency-Key header is required, and equal when both are sent.
    headers = dict(case.headers or {})
    key, header = case.body.get("operation_key"), headers.get("Idempotency-Key")
    if header is not None and key is not None and key != header:
        del headers["Idempotency-Key"]
    elif header is None and key is None:
        headers["Idempotency-Key"] = "schemathesis"
    case.headers = headers
