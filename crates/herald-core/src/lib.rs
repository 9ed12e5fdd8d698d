//! herald's sans-IO core: delivery states and the completion rules, retry backoff, the
//! submit fingerprint and the JSON rules under it, the named limits, the validated identifiers and the secret
//! redaction every other crate shares. Nothing here touches a database, a socket or an
//! async runtime, so all of it is tested with plain (property) tests.

pub mod backoff;
pub mod decide;
pub mod duration;
pub mod fair;
pub mod fingerprint;
pub mod grant;
pub mod hold;
pub mod ident;
pub mod json;
pub mod limits;
pub mod payload;
pub mod redact;
pub mod retry;
pub mod state;
pub mod trace;

pub use backoff::Backoff;
pub use decide::{Current, Decision, Report, decide};
pub use grant::{Grant, decide_grant};
pub use hold::{HoldKind, HoldScope, destination_of};
pub use ident::{DeliveryId, IdentError, KeyId, OperationId, OperationKey, Scope, TenantId, hex};
pub use payload::Payload;
pub use redact::{Redacted, redact_url};
pub use retry::RetryPolicy;
pub use state::{AttemptOutcome, DeliveryState};
pub use trace::TraceParent;
