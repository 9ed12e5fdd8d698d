//! The `Channel` trait: how a delivery leaves the building. An adapter knows its
//! provider's errors and classifies every failure as transient (retry, keep the
//! reservation) or terminal (stop, release it); herald does the rest.

use crate::BoxFuture;
use herald_core::{DeliveryId, Payload, TenantId};
use std::time::Duration;

/// A leased delivery, as a channel sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Leased {
    /// Stable across attempts: the provider idempotency key (webhook-id, Message-ID).
    pub id: DeliveryId,
    pub tenant: TenantId,
    pub operation_key: String,
    pub channel: String,
    pub to: String,
    /// The payload's JSON text exactly as submitted ([`Payload::to_value`] reads fields).
    pub payload: Payload,
    /// This attempt's number (1 for the first lease; never reused).
    pub attempt: u32,
    /// The W3C traceparent of this attempt's span when traces are on (`crate::traces`):
    /// a channel that can carry it to the provider does (the webhook's `traceparent`).
    pub traceparent: Option<String>,
}

/// What a send did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    /// Try again later (timeouts, 5xx, 429, a relay that is down, …). `retry_after` is the
    /// provider's request, honoured when longer than the backoff, capped.
    Transient {
        retry_after: Option<Duration>,
        code: String,
        message: String,
    },
    /// Never going to work (invalid address, a refused request): fail and release quota.
    Terminal {
        code: String,
        message: String,
    },
}

impl Outcome {
    pub fn transient(code: impl Into<String>, message: impl Into<String>) -> Outcome {
        Outcome::Transient { retry_after: None, code: code.into(), message: message.into() }
    }

    pub fn terminal(code: impl Into<String>, message: impl Into<String>) -> Outcome {
        Outcome::Terminal { code: code.into(), message: message.into() }
    }
}

/// A way to perform deliveries of one channel. Implementations must be safe to call
/// concurrently; a panic inside `send` is caught and treated as transient.
pub trait Channel: Send + Sync + 'static {
    fn send<'a>(&'a self, delivery: &'a Leased) -> BoxFuture<'a, Outcome>;
}
