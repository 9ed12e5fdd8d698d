"""schemathesis hooks for herald: the rules herald's OpenAPI document states only in
prose, because no schema that client generators read can state them (see
crates/herald-server/src/openapi.rs). Each is applied to a generated request just before
it is sent, so positive data stays valid by the document and by the server."""

import schemathesis


def _string(s):
    # No NUL, no lone surrogate.
    return "".join(c for c in s if c != "\x00" and not 0xD800 <= ord(c) <= 0xDFFF)


def _within_rules(value, depth=0):
    """herald's JSON rules on a payload: no NUL, no lone surrogate, numbers of at most 35
    integer and 30 fraction digits, at most 32 levels of arrays and objects."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return value if abs(value) < 10**35 else 0
    if isinstance(value, float):
        # A float's exact value can have hundreds of digits (5e-324); 10 decimals are a
        # number with at most 10 fraction digits in its shortest form.
        return round(value, 10) if abs(value) < 1e30 else 0
    if isinstance(value, list):
        return [] if depth >= 30 else [_within_rules(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if depth >= 30:
            return {}
        return {_string(k): _within_rules(v, depth + 1) for k, v in value.items()}
    return value


def _instant(text):
    """An RFC 3339 time as a comparable instant (the document's format: date-time)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("-inf")


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.operation.method.upper() != "POST":
        return
    if case.operation.path == "/v1/deliveries/batch":
        # Each item follows the single submit's rules, with its operation_key in the item
        # (an item without one is answered 400 in its place, inside the 200).
        items = case.body.get("deliveries") if isinstance(case.body, dict) else None
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict):
                if "payload" in item:
                    item["payload"] = _within_rules(item["payload"])
                item.setdefault("operation_key", f"schemathesis-{i}")
        return
    if case.operation.path in ("/v1/deliveries/replay", "/v1/deliveries/cancel"):
        # A time range's `from` must be before its `to` (one field against another).
        body = case.body if isinstance(case.body, dict) else {}
        start, end = body.get("from"), body.get("to")
        if isinstance(start, str) and isinstance(end, str) and _instant(start) >= _instant(end):
            del body["from"]
        return
    if case.operation.path != "/v1/deliveries":
        return
    if not isinstance(case.body, dict):
        return
    # herald's JSON rules, which reach into every nested value of a payload.
    if "payload" in case.body:
        case.body["payload"] = _within_rules(case.body["payload"])
    # operation_key or the Idempotency-Key header is required, and equal when both are sent.
    headers = dict(case.headers or {})
    key, header = case.body.get("operation_key"), headers.get("Idempotency-Key")
    if header is not None and key is not None and key != header:
        del headers["Idempotency-Key"]
    elif header is None and key is None:
        headers["Idempotency-Key"] = "schemathesis"
    case.headers = headers
