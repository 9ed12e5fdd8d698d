//! Wire types: what goes over HTTP, exactly as SPEC.md spells it. Times are RFC 3339.

use herald::{Attempt, Delivery, QuotaAccount};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/deliveries`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDelivery {
    /// The caller's stable identity for this effect; the `Idempotency-Key` header may
    /// stand for it.
    pub operation_key: Option<String>,
    pub channel: String,
    pub to: String,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    pub quota_key: Option<String>,
    pub cost: Option<i64>,
    /// RFC 3339; not before this time.
    pub send_at: Option<String>,
    pub max_attempts: Option<u32>,
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
    pub next_attempt_at: String,
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
    pub amount: i64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Granted {
    /// `false` when this Idempotency-Key had already been granted.
    pub applied: bool,
    #[serde(flatten)]
    pub quota: QuotaView,
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
