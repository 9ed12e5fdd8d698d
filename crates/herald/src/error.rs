//! The library's error type. Causes are kept as sources; messages are lowercase and never
//! contain payloads or secrets.

use herald_core::IdentError;
use herald_store::{Concurrency, ErrorClass, StoreError};
use std::time::Duration;

/// Any error an application's code wants to return from a transaction closure.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A database error that is not a concurrency conflict (or one raised inside a closure
    /// and not yet judged by the runner).
    #[error(transparent)]
    Store(#[from] StoreError),

    /// Every attempt lost to a concurrency conflict (or a connection lost before COMMIT).
    #[error(
        "transaction gave up after {attempts} attempts, each lost to a concurrency conflict or a broken connection"
    )]
    AttemptsExhausted {
        attempts: u32,
        #[source]
        last: StoreError,
    },

    /// The deadline passed (while waiting for a lock, running the closure or backing off).
    #[error("transaction deadline of {deadline:?} passed after {attempts} attempt(s)")]
    DeadlineExceeded {
        deadline: Duration,
        attempts: u32,
        #[source]
        last: Option<StoreError>,
    },

    /// The database could not take the work in time, and nothing was done: no connection
    /// was free within the pool's acquire timeout (or none could be opened), or the group
    /// commit's admission control refused a submit (`EngineOptions::queue_wait`); the
    /// source says which. Retry later; an HTTP caller gets 503 `busy` with Retry-After.
    #[error("the database was too busy to take this in time; nothing was done")]
    Busy {
        #[source]
        source: StoreError,
    },

    /// The connection broke during COMMIT: the transaction may or may not have committed.
    /// Check the database (a receipt or the claim row) before doing the work again.
    #[error("the outcome of COMMIT is unknown: the connection was lost during it")]
    CommitOutcomeUnknown {
        attempts: u32,
        #[source]
        source: StoreError,
    },

    /// `Herald::transaction` was called inside a running transaction closure. Its retries
    /// could never happen (the outer transaction owns the rollback), so it is refused
    /// rather than silently reduced to one attempt. Use [`crate::Tx::savepoint`].
    #[error(
        "a transaction with its own retries cannot start inside another transaction's closure; use Tx::savepoint"
    )]
    NestedTransaction,

    /// A receipt was asked for on a connection that is not inside a transaction, where the
    /// receipt and the state change could not commit together.
    #[error("once() needs a connection inside a transaction")]
    NotInTransaction,

    /// Bad input (an empty or oversized identifier, an impossible option): which field,
    /// why, and a message. Nothing was written.
    #[error("invalid input: {0}")]
    Invalid(Invalid),

    /// The same identity was submitted before with a different request.
    #[error("idempotency key reused: this operation key was used with a different request")]
    IdempotencyKeyReused,

    /// A grant's idempotency key was used on this account before, for another amount.
    /// Nothing changed; the first grant stands.
    #[error(
        "idempotency key reused: this key already granted {amount_first} on {quota_key:?}, not {amount}"
    )]
    GrantKeyReused { quota_key: String, amount: i64, amount_first: i64 },

    /// A grant would take the account's granted total past `QUOTA_GRANTED_MAX`. Nothing
    /// changed.
    #[error(
        "granting {amount} on {quota_key:?} would take its granted total from {granted} past {limit}"
    )]
    GrantOverLimit { quota_key: String, amount: i64, granted: i64, limit: i64 },

    /// A tenant with this name exists (names are unique).
    #[error("a tenant named {name:?} exists")]
    TenantExists { name: String },

    /// The tenant's quota account cannot cover the cost (or does not exist).
    #[error("quota exhausted for {quota_key:?}")]
    QuotaExhausted { quota_key: String },

    /// No tenant with this id.
    #[error("unknown tenant")]
    UnknownTenant,

    /// No such delivery (for this tenant).
    #[error("delivery not found")]
    NotFound,

    /// The delivery's state does not allow the operation.
    #[error("delivery is {state}: {operation} is not allowed")]
    WrongState { state: herald_core::DeliveryState, operation: &'static str },

    /// A stored value this build cannot read (a time out of range, say): nothing is
    /// guessed in its place. `what` names the value and the row.
    #[error("a stored value cannot be read: {what}")]
    Unreadable { what: String },

    /// An error from the application's own code inside a closure.
    #[error(transparent)]
    App(BoxError),
}

impl Error {
    /// Wraps an application error so a closure can return it.
    pub fn app(error: impl Into<BoxError>) -> Error {
        Error::App(error.into())
    }

    /// Whether the database could not do the work *now* — no connection free, a broken
    /// one, a deadline spent waiting, no room left on its disk, or a COMMIT whose outcome
    /// is unknown — so that the same idempotent call may succeed later. (For a call that is
    /// not idempotent, an unknown outcome must be looked up before it is repeated.)
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Busy { .. }
            | Error::DeadlineExceeded { .. }
            | Error::AttemptsExhausted { .. }
            | Error::CommitOutcomeUnknown { .. } => true,
            Error::Store(e) => {
                matches!(
                    e.class(),
                    ErrorClass::ConnectionLost
                        | ErrorClass::PoolExhausted
                        | ErrorClass::StorageFull
                )
            }
            _ => false,
        }
    }

    /// The concurrency conflict this error is, if it is one.
    pub fn concurrency(&self) -> Option<Concurrency> {
        match self {
            Error::Store(e) => match e.class() {
                ErrorClass::Concurrency(c) => Some(c),
                _ => None,
            },
            _ => None,
        }
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Store(StoreError::Database(e))
    }
}

impl From<IdentError> for Error {
    fn from(e: IdentError) -> Self {
        Error::Invalid(Invalid::field(e.field(), e.code(), e.to_string()))
    }
}

/// Why herald refused an input. `field` and `code` are the vocabulary every face shares —
/// the SQL API's `field` and `code` columns, the HTTP API's `error.field` and
/// `error.reason`, the PHP package's `InvalidSubmission` — listed in README.md ("Refusal
/// codes"); `message` says it for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The request's field at fault (`operation_key`, `to`, `payload`, ...), when one is.
    pub field: Option<&'static str>,
    /// The reason: `empty`, `too_long`, `control_character`, `out_of_range`, a payload's
    /// JSON problem (`syntax`, `duplicate_key`, ...), or `invalid` for anything else.
    pub code: &'static str,
    pub message: String,
}

impl Invalid {
    /// A refusal of one field for a reason of the shared vocabulary.
    pub fn field(field: &'static str, code: &'static str, message: impl Into<String>) -> Invalid {
        Invalid { field: Some(field), code, message: message.into() }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error {
    /// Bad input that is no one field's (an option, a combination): code `invalid`.
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::Invalid(Invalid { field: None, code: "invalid", message: message.into() })
    }

    /// Bad input in `field`, for the shared reason `code`.
    pub fn invalid_field(
        field: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Error {
        Error::Invalid(Invalid::field(field, code, message))
    }
}
