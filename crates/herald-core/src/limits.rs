//! Named limits. Every bound on input or work in herald lives here, with the reason for
//! its value, so that the README and the error messages can quote one number.

use std::time::Duration;

/// Longest receipt scope, in bytes. Scopes are code-chosen names ("invoice-adjustments").
pub const SCOPE_LEN_MAX: usize = 200;

/// Longest operation id, in bytes: room for a UUID, a provider event id or a composite
/// key, short enough that the unique index stays compact.
pub const OPERATION_ID_LEN_MAX: usize = 255;

/// Default attempts of the transaction runner. Each retry re-runs the whole closure, so
/// more attempts mostly mean more waiting; the deadline bounds the call anyway.
pub const TX_ATTEMPTS_DEFAULT: u32 = 5;

/// Hard ceiling on runner attempts, whatever the caller asks for.
pub const TX_ATTEMPTS_MAX: u32 = 100;

/// Default deadline of one runner call, across all its attempts and waits. A lock wait
/// can never hang a caller for longer than this.
pub const TX_DEADLINE_DEFAULT: Duration = Duration::from_secs(10);

/// Default first backoff ceiling between runner attempts.
pub const TX_BACKOFF_BASE_DEFAULT: Duration = Duration::from_millis(10);

/// Default cap on the backoff between runner attempts.
pub const TX_BACKOFF_MAX_DEFAULT: Duration = Duration::from_millis(500);

/// SQLite busy timeout for statements outside the runner (which sets its own per attempt).
pub const SQLITE_BUSY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);

/// How long to wait for a database connection when opening a store.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
