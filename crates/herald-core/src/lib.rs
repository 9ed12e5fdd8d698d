//! herald's sans-IO core: the retry backoff, the named limits and the validated
//! identifiers every other crate shares. Nothing here touches a database, a socket or an
//! async runtime, so all of it is tested with plain (property) tests.

pub mod backoff;
pub mod ident;
pub mod limits;

pub use backoff::Backoff;
pub use ident::{IdentError, OperationId, Scope};
