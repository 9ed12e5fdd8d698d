//! The OpenAPI document as served: utoipa's, generated from the handlers and the wire
//! types (which carry their own lengths, ranges and patterns), completed with what
//! depends on this server (the channels it delivers) and what utoipa's attributes cannot
//! say: the rules on `to` and `payload` that depend on the channel, the headers and path
//! parameters, the error body, the API-key scheme and the links from a created delivery
//! or tenant to the calls that take its id.
//!
//! Every constraint the server enforces is stated here, so that a request valid by this
//! document is accepted (schemathesis checks it). Byte limits are stated as the number of
//! characters that can never exceed them (a quarter: UTF-8 is at most 4 bytes a
//! character), with the byte limit in the description. Three rules are in descriptions
//! only, because no schema that client generators read can state them: `operation_key`
//! or the `Idempotency-Key` header is required, and they are equal when both are sent; a
//! payload is at most 64 KiB as sent and follows herald's JSON rules in every nested
//! value (only a recursive schema could say so); a cursor is valid only with the filters
//! it was issued for.

use herald_core::limits::{
    CHANNEL_LEN_MAX, DELIVERY_ATTEMPTS_MAX, EMAIL_PAYLOAD_BYTES_MAX, JSON_DEPTH_MAX,
    NUMBER_FRACTION_DIGITS_MAX, NUMBER_INTEGER_DIGITS_MAX, OPERATION_KEY_LEN_MAX,
    PAYLOAD_BYTES_MAX, QUOTA_KEY_LEN_MAX, RECIPIENT_LEN_MAX,
};
use herald_core::{AttemptOutcome, DeliveryState};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// No control character (Unicode Cc) nor bidirectional formatting character: what
/// `herald_core::ident::is_refused_in_names` refuses.
pub const NO_CONTROL: &str =
    r"^[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+$";

/// A rendered email (`raw`): header fields (a name of printable ASCII but `:`, then `:`,
/// perhaps folded onto lines that begin with a space or tab) up to an empty line or the
/// end, then the body. herald::channels::raw_email checks the same grammar.
pub const RAW_EMAIL: &str = r"^(?:[!-9;-~]+:[^\r\n]*(?:(?:\r\n|\r|\n)[ \t][^\r\n]*)*(?:\r\n|\r|\n|$))+(?:(?:\r\n|\r|\n)[\s\S]*)?$";

/// Standard base64 with padding.
pub const BASE64: &str = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$";

/// An `http(s)` URL that every URL parser reads the same way: DNS-style host names
/// whose last label starts with a letter (so it is never read as an IPv4 number), no
/// `--` (so never a malformed punycode label), a port of at most 4 digits, then any
/// visible ASCII. The server accepts more (IP literals, any WHATWG URL).
pub const WEBHOOK_URL: &str = r"^https?://([A-Za-z0-9]+(-[A-Za-z0-9]+)*\.)*[A-Za-z][A-Za-z0-9]*(-[A-Za-z0-9]+)*(:[0-9]{1,4})?(/[!-~]*)?$";

/// A cursor: 24 bytes, base64url without padding.
pub const CURSOR: &str = r"^[A-Za-z0-9_-]{32}$";

/// An `Idempotency-Key` header: visible ASCII, no space at either end (HTTP trims it).
pub const HEADER_KEY: &str = r"^[!-~]([ -~]*[!-~])?$";

/// The characters that can never be more than `bytes` bytes of UTF-8.
const fn chars_within(bytes: usize) -> usize {
    bytes / 4
}

/// The document served at `/openapi.json` by a server delivering `channels`.
pub fn document(channels: &BTreeSet<String>) -> Value {
    let mut doc = serde_json::to_value(crate::openapi_document()).unwrap_or(Value::Null);
    add_error_body(&mut doc);
    add_delivery_rules(&mut doc, channels);
    add_hold_rules(&mut doc);
    add_destination_rules(&mut doc);
    add_parameters(&mut doc);
    add_response_rules(&mut doc);
    add_links(&mut doc);
    add_security(&mut doc);
    doc
}

/// A hold's `value` follows its `kind`: a channel name, a tenant id, a destination host.
fn add_hold_rules(doc: &mut Value) {
    let Some(hold) = schemas(doc).and_then(|s| s.get_mut("HoldRequest")) else { return };
    let value = |rule: Value| json!({"properties": {"value": rule}});
    hold["allOf"] = json!([
        {"if": {"properties": {"kind": {"const": "channel"}}},
         "then": value(json!({"maxLength": chars_within(CHANNEL_LEN_MAX), "pattern": NO_CONTROL}))},
        {"if": {"properties": {"kind": {"const": "tenant"}}},
         "then": value(json!({"format": "uuid"}))},
        {"if": {"properties": {"kind": {"const": "destination"}}},
         "then": value(json!({"pattern": DESTINATION}))},
    ]);
}

/// Limits name a destination or `*` (every destination's default); enabling a lane names
/// a destination; a tenant's events webhook is a URL, as a webhook's `to`.
fn add_destination_rules(doc: &mut Value) {
    let Some(schemas) = schemas(doc) else { return };
    let limited = format!(r"^(\*|{})$", &DESTINATION[1..DESTINATION.len() - 1]);
    for (schema, field, pattern) in [
        ("LimitRequest", "destination", limited.as_str()),
        ("LimitRemoveRequest", "destination", limited.as_str()),
        ("EnableRequest", "destination", DESTINATION),
        ("EventsUrl", "url", WEBHOOK_URL),
    ] {
        if let Some(property) = schemas
            .get_mut(schema)
            .and_then(|s| s.pointer_mut(&format!("/properties/{field}")))
            .and_then(Value::as_object_mut)
        {
            property.insert("pattern".into(), json!(pattern));
        }
    }
}

/// A destination as a hold or a bulk filter names it: a host's characters, or `smtp`.
pub const DESTINATION: &str = r"^[A-Za-z0-9._:\[\]-]+$";

fn schemas(doc: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    doc.pointer_mut("/components/schemas")?.as_object_mut()
}

fn operations(doc: &mut Value) -> impl Iterator<Item = (String, String, &mut Value)> {
    doc.pointer_mut("/paths").and_then(Value::as_object_mut).into_iter().flat_map(|paths| {
        paths.iter_mut().flat_map(|(path, item)| {
            let path = path.clone();
            item.as_object_mut().into_iter().flat_map(move |methods| {
                let path = path.clone();
                methods.iter_mut().map(move |(method, op)| (path.clone(), method.clone(), op))
            })
        })
    })
}

/// Every error answer is `{"error": {"code", "message"}}`; every response has the
/// description OpenAPI requires.
fn add_error_body(doc: &mut Value) {
    if let Some(schemas) = schemas(doc) {
        schemas.insert(
            "Error".into(),
            json!({
                "type": "object",
                "required": ["error"],
                "additionalProperties": false,
                "properties": {"error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "additionalProperties": false,
                    "properties": {
                        "code": {"type": "string", "description": "Stable; classify by it, never by the message."},
                        "message": {"type": "string"},
                        "field": {"type": "string", "description": "For a 400 that refuses one field of the request: which (operation_key, channel, to, payload, quota_key, cost, send_at, max_attempts, ...)."},
                        "reason": {"type": "string", "description": "Why that field was refused, in the vocabulary every face shares (empty, too_long, control_character, out_of_range, not_a_time, syntax, duplicate_key, ...; README, \"Refusal codes\")."}
                    }
                }}
            }),
        );
    }
    for (_, _, op) in operations(doc) {
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        for (status, response) in responses.iter_mut() {
            let Some(response) = response.as_object_mut() else { continue };
            if !response.contains_key("description") || response["description"] == "" {
                response.insert("description".into(), json!(describe(status)));
            }
            if status.starts_with('4') || status.starts_with('5') {
                response.insert(
                    "content".into(),
                    json!({"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}),
                );
            }
        }
    }
}

fn describe(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created",
        "400" => "invalid_request: the request is malformed or out of bounds",
        "401" => "unauthorized: a valid key is required",
        "402" => "quota_exhausted",
        "403" => "forbidden: this call needs the admin key",
        "404" => "not_found",
        "409" => "conflict: the resource's state refuses the request",
        "413" => "payload_too_large",
        "422" => "idempotency_key_reused: the key was used with a different request",
        "503" => "the database cannot do it now (busy, outcome_unknown, unavailable, storage_full)",
        _ => "see the error code",
    }
}

/// `channel` is one this server delivers; `to` and `payload` follow the channel.
fn add_delivery_rules(doc: &mut Value, channels: &BTreeSet<String>) {
    let Some(schemas) = schemas(doc) else { return };
    schemas.insert(
        "EmailPayload".into(),
        json!({
            "oneOf": [
                {
                    "type": "object",
                    "title": "EmailParts",
                    "description": "herald writes the message, from HERALD_SMTP_FROM to `to`.",
                    "required": ["subject", "text"],
                    "additionalProperties": false,
                    "properties": {
                        "subject": {"type": "string", "pattern": r"^[^\r\n\u0000]*$", "description": "One line."},
                        "text": {"type": "string", "pattern": r"^[^\u0000]*$"},
                        "html": {"type": ["string", "null"], "pattern": r"^[^\u0000]*$"}
                    }
                },
                {
                    "type": "object",
                    "title": "RenderedEmail",
                    "description": "A message the application's mailer rendered (RFC 5322), sent byte for byte but for herald's Message-ID, without a Bcc field, lines ended by CRLF.",
                    "oneOf": [{"required": ["raw"]}, {"required": ["raw_base64"]}],
                    "additionalProperties": false,
                    "properties": {
                        "raw": {"type": "string", "pattern": RAW_EMAIL, "description": "The message as text: header fields, an empty line, the body."},
                        "raw_base64": {"type": "string", "pattern": BASE64, "description": "The message's bytes in base64, for a message that is not UTF-8 text; decoded, it follows raw's pattern."},
                        "envelope": {
                            "type": "object",
                            "additionalProperties": false,
                            "properties": {
                                "from": {"type": "string", "format": "email", "description": "The return path (MAIL FROM); default HERALD_SMTP_FROM."},
                                "to": {"type": "array", "minItems": 1, "maxItems": herald::channels::raw_email::RECIPIENTS_MAX, "items": {"type": "string", "format": "email"}, "description": "Every recipient (To, Cc and Bcc); default the delivery's `to`."}
                            }
                        }
                    }
                }
            ]
        }),
    );
    let Some(create) = schemas.get_mut("CreateDelivery").and_then(Value::as_object_mut) else {
        return;
    };
    let mut rules = Vec::new();
    let others: Vec<&String> =
        channels.iter().filter(|c| !matches!(c.as_str(), "webhook" | "email")).collect();
    if channels.contains("webhook") {
        rules.push(json!({
            "if": {"properties": {"channel": {"const": "webhook"}}},
            "then": {"properties": {"to": {
                "maxLength": RECIPIENT_LEN_MAX,
                "pattern": WEBHOOK_URL,
                "description": "An http:// or https:// URL. Private and loopback targets are refused when sending unless HERALD_ALLOW_PRIVATE_TARGETS."
            }}}
        }));
    }
    if channels.contains("email") {
        rules.push(json!({
            "if": {"properties": {"channel": {"const": "email"}}},
            "then": {"properties": {
                "to": {"format": "email", "maxLength": chars_within(RECIPIENT_LEN_MAX)},
                "payload": {"$ref": "#/components/schemas/EmailPayload"}
            }}
        }));
    }
    if !others.is_empty() {
        rules.push(json!({
            "if": {"properties": {"channel": {"enum": others}}},
            "then": {"properties": {"to": {"maxLength": chars_within(RECIPIENT_LEN_MAX)}}}
        }));
    }
    if let Some(payload) = create.get_mut("properties").and_then(|p| p.get_mut("payload")) {
        // herald's JSON rules reach into every nested value: only a recursive schema could
        // state them, and client generators do not read recursive unions.
        *payload = json!({
            "type": "object",
            "description": format!("Any JSON object, at most {PAYLOAD_BYTES_MAX} bytes as sent ({EMAIL_PAYLOAD_BYTES_MAX} for the email channel, whose payload is `{{subject, text, html?}}` or a rendered message `{{raw, envelope?}}`), stored and delivered byte for byte. In every nested value: no duplicate key, no NUL (U+0000) and no lone surrogate in a string or key, at most {JSON_DEPTH_MAX} levels of arrays and objects, and numbers whose exact value has at most {NUMBER_INTEGER_DIGITS_MAX} digits before and {NUMBER_FRACTION_DIGITS_MAX} after the decimal point."),
        });
    }
    if let Some(channel) = create.get_mut("properties").and_then(|p| p.get_mut("channel")) {
        *channel = json!({
            "type": "string",
            "enum": channels,
            "description": format!("A channel this server delivers (at most {CHANNEL_LEN_MAX} bytes)."),
        });
    }
    create.insert("allOf".into(), Value::Array(rules));
}

fn header_key(description: &str) -> Value {
    json!({
        "name": "Idempotency-Key",
        "in": "header",
        "required": false,
        "description": description,
        "schema": {"type": "string", "minLength": 1, "maxLength": OPERATION_KEY_LEN_MAX, "pattern": HEADER_KEY}
    })
}

/// W3C Trace Context: with traces on, the parent of the request's span and so of every
/// attempt of what it submits. Any text is taken; one that does not read as a traceparent
/// is ignored, as W3C asks.
fn traceparent() -> Value {
    json!({
        "name": "traceparent",
        "in": "header",
        "required": false,
        "description": "W3C Trace Context (`00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`). With traces on (HERALD_TRACES=otlp) the request's span, the submit's and each attempt's of its deliveries join this trace; a value that does not read as one is ignored.",
        "schema": {"type": "string"}
    })
}

fn add_parameters(doc: &mut Value) {
    let quota_key = json!({
        "type": "string",
        "minLength": 1,
        "maxLength": chars_within(QUOTA_KEY_LEN_MAX),
        "pattern": NO_CONTROL,
        "description": format!("1 to {QUOTA_KEY_LEN_MAX} bytes without control characters."),
    });
    let states: Vec<&str> = DeliveryState::ALL.iter().map(|s| s.as_str()).collect();
    for (path, method, op) in operations(doc) {
        let Some(op) = op.as_object_mut() else { continue };
        let params = op.entry("parameters").or_insert_with(|| json!([]));
        let Some(params) = params.as_array_mut() else { continue };
        for param in params.iter_mut() {
            let schema = match param["name"].as_str() {
                Some("id" | "tenant") => json!({"type": "string", "format": "uuid"}),
                Some("key_id") => json!({"type": "string", "pattern": "^[0-9a-f]{16}$"}),
                Some("quota_key") => quota_key.clone(),
                Some("state") => json!({"type": "string", "enum": states}),
                Some("channel") => json!({
                    "type": "string", "minLength": 1, "maxLength": chars_within(CHANNEL_LEN_MAX),
                    "pattern": NO_CONTROL
                }),
                Some("limit") => json!({
                    "type": "integer", "minimum": 1, "maximum": crate::routes::deliveries::PAGE_MAX,
                    "default": crate::routes::deliveries::PAGE_DEFAULT
                }),
                Some("cursor") => json!({
                    "type": "string", "pattern": CURSOR,
                    "description": "A next_cursor this server returned for the same state and channel; any other is a 400."
                }),
                _ => continue,
            };
            param["schema"] = schema;
        }
        if matches!(
            (path.as_str(), method.as_str()),
            ("/v1/deliveries" | "/v1/deliveries/batch", "post")
        ) {
            params.push(traceparent());
        }
        match (path.as_str(), method.as_str()) {
            ("/v1/deliveries", "post") => params.push(header_key(
                "Stands for operation_key; when both are sent they must be equal, and one of them is required.",
            )),
            ("/v1/tenants/{tenant}/quotas/{quota_key}/grant", "post") => params.push(header_key(
                "Makes a retried grant count once on this account; the same key with another amount is a 422.",
            )),
            _ => {}
        }
    }
}

/// Formats and enums of what the server answers.
fn add_response_rules(doc: &mut Value) {
    let Some(schemas) = schemas(doc) else { return };
    let states: Vec<&str> = DeliveryState::ALL.iter().map(|s| s.as_str()).collect();
    let outcomes: Vec<&str> = [
        AttemptOutcome::Sent,
        AttemptOutcome::Transient,
        AttemptOutcome::Terminal,
        AttemptOutcome::Lost,
        AttemptOutcome::LateSent,
    ]
    .iter()
    .map(|o| o.as_str())
    .collect();
    let mut set = |schema: &str, field: &str, value: Value| {
        if let Some(slot) =
            schemas.get_mut(schema).and_then(|s| s.pointer_mut(&format!("/properties/{field}")))
        {
            *slot = value;
        }
    };
    let uuid = json!({"type": "string", "format": "uuid"});
    let time = json!({"type": "string", "format": "date-time"});
    // `anyOf` with null rather than a type list: generators read it as an optional value.
    let time_or_null = json!({"anyOf": [time, {"type": "null"}]});
    set("DeliveryView", "id", uuid.clone());
    set("DeliveryView", "tenant", uuid.clone());
    set("DeliveryView", "state", json!({"type": "string", "enum": states}));
    set(
        "DeliveryView",
        "max_attempts",
        json!({"type": "integer", "minimum": 1, "maximum": DELIVERY_ATTEMPTS_MAX}),
    );
    for field in ["next_attempt_at", "created_at", "updated_at"] {
        set("DeliveryView", field, time.clone());
    }
    set("DeliveryView", "sent_at", time_or_null.clone());
    set("AttemptView", "started_at", time);
    set("AttemptView", "finished_at", time_or_null);
    set(
        "AttemptView",
        "outcome",
        json!({"anyOf": [{"type": "string", "enum": outcomes}, {"type": "null"}], "description": "null while the attempt runs"}),
    );
    set("TenantCreated", "id", uuid);
}

/// From a created delivery to the calls on it, and from a created tenant to its keys,
/// grants and secret rotation.
fn add_links(doc: &mut Value) {
    let delivery = |operation: &str, description: &str| json!({"operationId": operation, "parameters": {"id": "$response.body#/id"}, "description": description});
    let tenant = |operation: &str, description: &str| json!({"operationId": operation, "parameters": {"tenant": "$response.body#/id"}, "description": description});
    let links = [
        (
            "/paths/~1v1~1deliveries/post/responses/201",
            json!({
                "show": delivery("show", "The delivery."),
                "attempts": delivery("attempts", "Its attempts."),
                "replay": delivery("replay", "Replay it once it failed or was cancelled."),
                "cancel": delivery("cancel", "Cancel it while pending."),
            }),
        ),
        (
            "/paths/~1v1~1tenants/post/responses/201",
            json!({
                "create_key": tenant("create_tenant_key", "Another API key for the tenant."),
                "grant": tenant("grant", "Quota for the tenant (quota_key is yours to choose)."),
                "rotate": tenant("rotate_webhook_secret", "Rotate the tenant's webhook secret."),
            }),
        ),
    ];
    for (pointer, value) in links {
        if let Some(response) = doc.pointer_mut(pointer).and_then(Value::as_object_mut) {
            response.insert("links".into(), value);
        }
    }
}

/// `Authorization: Bearer <key>`: a tenant's API key, or the admin key for `/v1/tenants`.
fn add_security(doc: &mut Value) {
    if let Some(components) = doc.pointer_mut("/components").and_then(Value::as_object_mut) {
        components.insert(
            "securitySchemes".into(),
            json!({"bearer": {"type": "http", "scheme": "bearer", "description": "A tenant's API key (hk_…), or HERALD_ADMIN_KEY for the admin calls."}}),
        );
    }
    for (path, _, op) in operations(doc) {
        let Some(op) = op.as_object_mut() else { continue };
        let open = ["/healthz", "/readyz", "/openapi.json", "/metrics"].contains(&path.as_str());
        op.insert("security".into(), if open { json!([]) } else { json!([{"bearer": []}]) });
        // One tag per kind of caller, rather than utoipa's module paths.
        let tag = match path.as_str() {
            p if p.starts_with("/v1/tenants") => "admin",
            "/v1/audit" => "audit",
            p if p.starts_with("/v1/holds") => "holds",
            p if p.starts_with("/v1/") => "deliveries",
            _ => "system",
        };
        op.insert("tags".into(), json!([tag]));
    }
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use herald_core::limits::{COST_MAX, GRANT_MAX};

    fn doc() -> Value {
        document(&["email".to_string(), "sms".to_string(), "webhook".to_string()].into())
    }

    #[test]
    fn the_document_states_the_limits() {
        let doc = doc();
        let s = |p: &str| doc.pointer(p).cloned().unwrap_or(Value::Null);
        let create = "/components/schemas/CreateDelivery/properties";
        // (pointer, expected): each bound is the named limit, or its safe character count.
        let cases = [
            (format!("{create}/operation_key/maxLength"), json!(OPERATION_KEY_LEN_MAX / 4)),
            (format!("{create}/operation_key/minLength"), json!(1)),
            (format!("{create}/quota_key/maxLength"), json!(QUOTA_KEY_LEN_MAX / 4)),
            (format!("{create}/cost/minimum"), json!(0)),
            (format!("{create}/cost/maximum"), json!(COST_MAX)),
            (format!("{create}/max_attempts/minimum"), json!(1)),
            (format!("{create}/max_attempts/maximum"), json!(DELIVERY_ATTEMPTS_MAX)),
            (format!("{create}/channel/enum"), json!(["email", "sms", "webhook"])),
            ("/components/schemas/Grant/properties/amount/minimum".into(), json!(1)),
            ("/components/schemas/Grant/properties/amount/maximum".into(), json!(GRANT_MAX)),
            ("/components/schemas/CreateTenant/properties/name/maxLength".into(), json!(50)),
            ("/components/schemas/CreateDelivery/additionalProperties".into(), json!(false)),
            ("/components/schemas/CreateTenant/additionalProperties".into(), json!(false)),
            ("/components/schemas/Grant/additionalProperties".into(), json!(false)),
        ];
        for (pointer, expected) in cases {
            assert_eq!(s(&pointer), expected, "{pointer}");
        }
        let list = s("/paths/~1v1~1deliveries/get/parameters");
        let limit = list.as_array().and_then(|ps| ps.iter().find(|p| p["name"] == "limit"));
        assert_eq!(
            limit.map(|p| p["schema"]["maximum"].clone()),
            Some(json!(crate::routes::deliveries::PAGE_MAX))
        );
    }

    #[test]
    fn created_deliveries_and_tenants_link_to_the_calls_on_them() {
        let doc = doc();
        let ops: BTreeSet<String> = {
            let mut d = doc.clone();
            operations(&mut d)
                .filter_map(|(_, _, op)| op["operationId"].as_str().map(String::from))
                .collect()
        };
        for (pointer, names) in [
            (
                "/paths/~1v1~1deliveries/post/responses/201/links",
                &["show", "attempts", "replay", "cancel"][..],
            ),
            (
                "/paths/~1v1~1tenants/post/responses/201/links",
                &["create_key", "grant", "rotate"][..],
            ),
        ] {
            let links = doc
                .pointer(pointer)
                .and_then(Value::as_object)
                .unwrap_or_else(|| panic!("{pointer}"));
            assert_eq!(links.len(), names.len(), "{pointer}");
            for name in names {
                let op = links[*name]["operationId"].as_str().unwrap_or_default();
                assert!(ops.contains(op), "{pointer}/{name}: no operation {op:?}");
            }
        }
    }
}
