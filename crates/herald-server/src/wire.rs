//! Wire types: what goes over HTTP, exactly as SPEC.md spells it. Times are RFC 3339.

use herald::{Attempt, Delivery, QuotaAccount};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

// The channel-dependent rules on `to` and `payload`, and the configured channels, are
// added to the served document by `openapi::document`.
/// `POST /v1/deliveries`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDelivery {
    /// The caller's stable identity for this effect: 1 to 255 bytes of UTF-8 without
    /// control characters (the document's 63 characters can never be more bytes). The
    /// `Idempotency-Key` header may stand for it; when both are sent they must be equal.
    #[schema(
        min_length = 1,
        max_length = 63,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+$"
    )]
    pub operation_key: Option<String>,
    pub channel: String,
    /// The recipient: 1 to 2048 bytes without control characters; what it must be
    /// depends on the channel.
    #[schema(
        min_length = 1,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+$"
    )]
    pub to: String,
    /// Any JSON value, at most 64 KiB as sent, kept and delivered byte for byte. herald's
    /// JSON rules apply (ARCHITECTURE.md, "The fingerprint"): no duplicate keys, no
    /// `\u0000`, no lone surrogates, at most 32 levels of nesting, and numbers with at most
    /// 35 digits before and 30 after the decimal point.
    #[schema(value_type = Object)]
    pub payload: Box<serde_json::value::RawValue>,
    /// Defaults to the channel's name. 1 to 100 bytes without control characters.
    #[schema(
        min_length = 1,
        max_length = 25,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+$"
    )]
    pub quota_key: Option<String>,
    /// Units reserved on the quota account; default 1, 0 needs no account.
    #[serde(default, deserialize_with = "integral::opt")]
    #[schema(minimum = 0, maximum = 1_000_000)]
    pub cost: Option<i64>,
    /// RFC 3339; not before this time. Between 1970-01-02 and 9999-12-29 (in any offset).
    #[schema(format = DateTime, pattern = r"^(197[1-9]|19[89][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-")]
    pub send_at: Option<String>,
    /// Attempts before the delivery fails; default the database's shared setting
    /// (`herald settings`, seeded from the first server's `HERALD_MAX_ATTEMPTS`, 8).
    #[serde(default, deserialize_with = "integral::opt")]
    #[schema(minimum = 1, maximum = 100)]
    pub max_attempts: Option<u32>,
}

/// `POST /v1/deliveries/batch`: several submits, each answered on its own.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDeliveryBatch {
    /// 1 to 500 submits, each as `POST /v1/deliveries` takes it, with its `operation_key`
    /// in the item (there is no header per item).
    #[schema(min_items = 1, max_items = 500)]
    pub deliveries: Vec<CreateDelivery>,
}

/// The answer to a batch: one result per submitted item, in the order sent.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchResults {
    pub results: Vec<BatchResult>,
}

/// One item's answer: the status `POST /v1/deliveries` would have answered it with (201
/// created, 200 duplicate, 400, 402, 422, 503) and its delivery or its error.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchResult {
    #[schema(minimum = 200, maximum = 599)]
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorView>,
}

/// `{"code", "message"}`, as in every error body, and for a 400 that refuses one field,
/// `field` and `reason`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorView {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeliveryView {
    pub id: String,
    pub tenant: String,
    pub operation_key: String,
    pub channel: String,
    pub to: String,
    pub state: String,
    pub attempts: u32,
    pub max_attempts: u32,
    pub quota_key: String,
    pub cost: i64,
    /// When it is due (9999-12-30 while `held`).
    pub next_attempt_at: String,
    /// Pending in a held scope (an operator's pause): it waits, no attempt spent.
    pub held: bool,
    pub last_error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub sent_at: Option<String>,
    /// Only on `POST /v1/deliveries`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
}

impl From<Delivery> for DeliveryView {
    fn from(d: Delivery) -> DeliveryView {
        DeliveryView {
            id: d.id.to_string(),
            tenant: d.tenant.to_string(),
            operation_key: d.operation_key,
            channel: d.channel,
            to: d.to,
            state: d.state.to_string(),
            attempts: d.attempts,
            max_attempts: d.max_attempts,
            quota_key: d.quota_key,
            cost: d.cost,
            next_attempt_at: d.next_attempt_at.to_string(),
            held: d.held,
            last_error: d.last_error,
            created_at: d.created_at.to_string(),
            updated_at: d.updated_at.to_string(),
            sent_at: d.sent_at.map(|t| t.to_string()),
            duplicate: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeliveryList {
    pub deliveries: Vec<DeliveryView>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AttemptView {
    pub n: u32,
    pub worker: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub outcome: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// The release the attempt's worker ran (`HERALD_RELEASE`); null for a worker from
    /// before releases were recorded.
    pub release: Option<String>,
}

impl From<Attempt> for AttemptView {
    fn from(a: Attempt) -> AttemptView {
        AttemptView {
            n: a.n,
            worker: a.worker,
            started_at: a.started_at.to_string(),
            finished_at: a.finished_at.map(|t| t.to_string()),
            outcome: a.outcome,
            error_code: a.error_code,
            error_message: a.error_message,
            release: a.release,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AttemptList {
    pub attempts: Vec<AttemptView>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuotaView {
    pub quota_key: String,
    pub granted: i64,
    pub available: i64,
    pub reserved: i64,
    pub spent: i64,
}

impl From<QuotaAccount> for QuotaView {
    fn from(q: QuotaAccount) -> QuotaView {
        QuotaView {
            quota_key: q.quota_key,
            granted: q.granted,
            available: q.available,
            reserved: q.reserved,
            spent: q.spent,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuotaList {
    pub quotas: Vec<QuotaView>,
}

/// `POST /v1/tenants`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    /// Unique. Stored without leading and trailing white space; then 1 to 200 bytes
    /// without control characters (the document's 50 characters can never be more).
    #[schema(
        min_length = 1,
        max_length = 50,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069][^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]*$"
    )]
    pub name: String,
}

#[derive(Clone, Serialize, ToSchema)]
pub struct TenantCreated {
    pub id: String,
    pub name: String,
    /// Shown once.
    pub api_key: String,
    /// The Standard Webhooks signing secret (`whsec_…`), shown once.
    pub webhook_secret: String,
}

#[derive(Clone, Serialize, ToSchema)]
pub struct KeyCreated {
    pub key_id: String,
    /// Shown once.
    pub api_key: String,
}

#[derive(Clone, Serialize, ToSchema)]
pub struct SecretRotated {
    /// The new signing secret; the previous one keeps signing alongside until the next
    /// rotation.
    pub webhook_secret: String,
}

/// `POST /v1/tenants/{t}/quotas/{quota_key}/grant`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Units to add, 1 to 10^12; the account's granted total stays at most 2^53 - 1.
    #[serde(deserialize_with = "integral::i64")]
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    pub amount: i64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Granted {
    /// `false` when this Idempotency-Key had already been granted.
    pub applied: bool,
    #[serde(flatten)]
    pub quota: QuotaView,
}

/// Integer fields that also take an integral JSON number written as a float (`2120.0`,
/// `1e3`): JSON Schema's `integer` is any number without a fractional part, and clients
/// that hold numbers as doubles send them so.
pub(crate) mod integral {
    use serde::de::{Deserialize, Deserializer, Error};

    fn whole<E: Error>(n: &serde_json::Number) -> Result<i64, E> {
        if let Some(i) = n.as_i64() {
            return Ok(i);
        }
        // 2^63 as a double: the first value past i64's end.
        const END: f64 = 9_223_372_036_854_775_808.0;
        match n.as_f64() {
            Some(f) if f.fract() == 0.0 && (-END..END).contains(&f) => Ok(f as i64),
            Some(f) if f.fract() == 0.0 => Err(E::custom(format!("{n} is out of range"))),
            _ => Err(E::custom(format!("expected a whole number, got {n}"))),
        }
    }

    pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        whole(&serde_json::Number::deserialize(d)?)
    }

    /// A required field of any integer type: out of its range is an error.
    pub fn req<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<T, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        T::try_from(whole::<D::Error>(&n)?)
            .map_err(|_| D::Error::custom(format!("{n} is out of range")))
    }

    /// An optional field of any integer type (`i64`, `u32`, `u64`): out of its range is an error.
    pub fn opt<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<Option<T>, D::Error> {
        match Option::<serde_json::Number>::deserialize(d)? {
            None => Ok(None),
            Some(n) => T::try_from(whole::<D::Error>(&n)?)
                .map(Some)
                .map_err(|_| D::Error::custom(format!("{n} is out of range"))),
        }
    }
}

// The responses that carry a key or a secret (shown once, to the caller) print it as `***`.

impl std::fmt::Debug for TenantCreated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantCreated")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("api_key", &herald_core::Redacted)
            .field("webhook_secret", &herald_core::Redacted)
            .finish()
    }
}

impl std::fmt::Debug for KeyCreated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCreated")
            .field("key_id", &self.key_id)
            .field("api_key", &herald_core::Redacted)
            .finish()
    }
}

impl std::fmt::Debug for SecretRotated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRotated").field("webhook_secret", &herald_core::Redacted).finish()
    }
}

/// `POST /v1/deliveries/replay` and `/v1/deliveries/cancel`: which of the tenant's
/// deliveries to take (every given filter must match), or only count them.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// pending, sending, sent, failed or cancelled.
    #[schema(pattern = "^(pending|sending|sent|failed|cancelled)$")]
    pub state: Option<String>,
    /// 1 to 50 bytes without control characters (the document's 12 characters can never
    /// be more bytes).
    #[schema(
        min_length = 1,
        max_length = 12,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+$"
    )]
    pub channel: Option<String>,
    /// Created at or after (RFC 3339); before `to` when both are given.
    #[schema(format = DateTime, pattern = r"^(197[1-9]|19[89][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-")]
    pub from: Option<String>,
    /// Created before (RFC 3339).
    #[schema(format = DateTime, pattern = r"^(197[1-9]|19[89][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-")]
    pub to: Option<String>,
    /// The error code of the delivery's latest attempt (e.g. `http_500`): 1 to 100 bytes
    /// without control characters (the document's 25 characters can never be more bytes).
    #[schema(
        min_length = 1,
        max_length = 25,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+$"
    )]
    pub error_code: Option<String>,
    /// Only deliveries to this destination: a webhook's host (any case), or `smtp` for
    /// email.
    #[schema(min_length = 1, max_length = 255, pattern = r"^[A-Za-z0-9._:\[\]-]+$")]
    pub destination: Option<String>,
    /// Only deliveries up to this id (created no later): a dry run's `through`, so that
    /// confirming it never takes a delivery created since.
    #[schema(format = "uuid")]
    pub through: Option<String>,
    /// At most this many: a dry run's `matched`, so that confirming it never does more
    /// than it counted.
    #[serde(default, deserialize_with = "integral::opt")]
    #[schema(minimum = 0, maximum = 10_000)]
    pub max: Option<u64>,
    /// Only count the matches; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BulkResult {
    pub dry_run: bool,
    /// Deliveries the filter matched (at most 10,000 a call).
    pub matched: u64,
    /// Replayed or cancelled (0 on a dry run).
    pub changed: u64,
    /// Matched, but their state no longer allowed it or their account was short.
    pub skipped: u64,
    /// More matched than one call handles: call again for the rest.
    pub more: bool,
    /// The newest delivery matched: send it back as `through`, with `max` = `matched`, to
    /// act on exactly what a dry run counted.
    pub through: Option<String>,
}

impl BulkResult {
    pub fn new(dry_run: bool, r: herald::BulkReport) -> BulkResult {
        BulkResult {
            dry_run,
            matched: r.matched,
            changed: r.changed,
            skipped: r.skipped,
            more: r.more,
            through: r.through.map(|t| t.to_string()),
        }
    }
}

/// Unix milliseconds as RFC 3339 (UTC); the number itself if it is past what a timestamp
/// holds.
pub fn rfc3339_ms(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}
