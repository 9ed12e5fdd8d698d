//! Named limits. Every bound on input or work in herald lives here, with the reason for
//! its value, so that the README and the error messages can quote one number.

use std::time::Duration;

/// Longest receipt scope, in bytes. Scopes are code-chosen names ("invoice-adjustments").
pub const SCOPE_LEN_MAX: usize = 200;

/// Longest API key looked up, in bytes (a presented `Authorization` value past it is
/// refused unread). herald's own keys are 63 bytes.
pub const API_KEY_LEN_MAX: usize = 200;

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

/// Longest operation key of a delivery, in bytes.
pub const OPERATION_KEY_LEN_MAX: usize = 255;

/// Longest idempotency key of a grant, in bytes (the `Idempotency-Key` header).
pub const IDEMPOTENCY_KEY_LEN_MAX: usize = 255;

/// Longest channel name, in bytes.
pub const CHANNEL_LEN_MAX: usize = 50;

/// Longest quota key, in bytes.
pub const QUOTA_KEY_LEN_MAX: usize = 100;

/// Longest recipient (`to`: an address, a phone number, a URL), in bytes.
pub const RECIPIENT_LEN_MAX: usize = 2048;

/// Largest payload, as sent (its JSON text), in bytes. Deliveries are notifications, not
/// file transfers; a larger body belongs in object storage with a link in the payload.
pub const PAYLOAD_BYTES_MAX: usize = 64 * 1024;

/// Largest payload of the `email` channel, in bytes: room for a message a framework's
/// mailer rendered whole (`{"raw": …}`: headers, parts and attachments, which base64
/// grows by a third), as mail relays take them (a few MiB). Larger files belong in
/// object storage with a link in the message.
pub const EMAIL_PAYLOAD_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The payload limit of a channel: [`EMAIL_PAYLOAD_BYTES_MAX`] for `email`, else
/// [`PAYLOAD_BYTES_MAX`]. Every face checks this (the SQL API's routines by the same rule).
pub fn payload_bytes_max(channel: &str) -> usize {
    if channel == "email" { EMAIL_PAYLOAD_BYTES_MAX } else { PAYLOAD_BYTES_MAX }
}

/// Deepest nesting of arrays and objects in a payload: the most MariaDB's JSON functions
/// read (their parser refuses a 32nd level), and the SQL API computes the fingerprint
/// with them. (32 until the MariaDB SQL API: measured then, against MariaDB 10.11.)
pub const JSON_DEPTH_MAX: usize = 31;

/// The most digits a number's exact value may have before and after its decimal point:
/// what MariaDB's widest exact type, `DECIMAL(65,30)`, holds, so the SQL API compares the
/// number exactly there too. A number beyond either is invalid on every face.
pub const NUMBER_INTEGER_DIGITS_MAX: usize = 35;
pub const NUMBER_FRACTION_DIGITS_MAX: usize = 30;

/// Largest cost of one delivery (`COST_MAX`).
pub const COST_MAX: i64 = 1_000_000;

/// Largest single quota grant.
pub const GRANT_MAX: i64 = 1_000_000_000_000;

/// Largest granted total of one quota account: 2^53 - 1, the largest integer every JSON
/// parser reads exactly (JavaScript's numbers are doubles), and far from i64's end, so no
/// balance can overflow. A grant that would pass it is refused and changes nothing.
pub const QUOTA_GRANTED_MAX: i64 = (1 << 53) - 1;

/// Default and ceiling of a delivery's attempts (`HERALD_MAX_ATTEMPTS`).
pub const DELIVERY_ATTEMPTS_DEFAULT: u32 = 8;
pub const DELIVERY_ATTEMPTS_MAX: u32 = 100;

/// Delivery retry backoff (`HERALD_BACKOFF_BASE`, `HERALD_BACKOFF_MAX`).
pub const DELIVERY_BACKOFF_BASE_DEFAULT: Duration = Duration::from_secs(1);
pub const DELIVERY_BACKOFF_MAX_DEFAULT: Duration = Duration::from_secs(3600);

/// The longest Retry-After honoured (`HERALD_RETRY_AFTER_MAX`).
pub const RETRY_AFTER_MAX_DEFAULT: Duration = Duration::from_secs(3600);

/// Lease length (`HERALD_LEASE`) and the send timeout (`HERALD_SEND_TIMEOUT`); the send
/// timeout plus `LEASE_SAFETY_MARGIN` must be shorter than the lease.
pub const LEASE_DEFAULT: Duration = Duration::from_secs(60);
pub const SEND_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
pub const LEASE_SAFETY_MARGIN: Duration = Duration::from_secs(5);

/// Concurrent sends per process (`HERALD_WORKERS`). 16: a lane may hold at most 9 of
/// them and a tenant 12 (herald_core::fair), so one slow receiver never holds them all
/// and still has more than the 8 it had before lanes.
pub const WORKER_SLOTS_DEFAULT: usize = 16;

/// Most rows one lease takes of one lane while others have work, by default (10: beside
/// one tenant's backlog, the other tenants' commit-to-start p99 was 1.0 to 2.0 × the
/// figure without it, where 25 gave 1.4 to 2.5 ×, 100 3.5 × and 1,000 8 ×; the backlog
/// itself drained at about 1,000-1,800/s meanwhile, counted since the bench's fix of
/// 2026-12-06; docs/perf.md; `WorkerOptions::lane_take_max`).
pub const LANE_TAKE_MAX_DEFAULT: usize = 10;

/// Most lanes one lease walks (herald_core::fair): an index probe each. A worker with more
/// lanes than this walks on from where its last lease stopped.
pub const LEASE_LANES_MAX: usize = 128;

/// Most deliveries leased in one statement (1,000: with many send slots, batches of 500
/// and 1,000 drained about 7 % and 20 % faster than 250 in `herald bench --drain-only`;
/// a worker with more free slots leases again at once).
pub const LEASE_BATCH_MAX: usize = 1000;
pub const RECONCILE_BATCH_MAX: usize = 500;

/// Fallback polling (`HERALD_POLL_INTERVAL`) and reconciler period (`HERALD_RECONCILE_EVERY`).
pub const POLL_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);
pub const RECONCILE_EVERY_DEFAULT: Duration = Duration::from_secs(10);

/// How long started sends may finish after a shutdown signal (`HERALD_SHUTDOWN_GRACE`).
pub const SHUTDOWN_GRACE_DEFAULT: Duration = Duration::from_secs(10);

/// Submits in one call of `Herald::submit_many` or one `POST /v1/deliveries/batch`, at
/// most.
pub const SUBMIT_BATCH_MAX: usize = 500;
/// Submits that share one group-committed transaction at most (a bigger gathering is
/// split over several transactions).
pub const GROUP_COMMIT_MAX: usize = 256;
/// Group-committed transactions in flight at once per process: while one commits, the
/// next gathers and runs its claims.
pub const GROUP_COMMIT_LANES: usize = 2;
/// A lane that has just run a batch of at most this many yields to the scheduler
/// [`GROUP_COMMIT_YIELDS`] times before it gathers again, so the callers it answered can
/// submit again into its next batch (docs/perf.md, "the lane lets its callers back").
/// Past it the queue fills by itself, and a lane that waits behind busy callers
/// only idles: yielding after every batch cut the 64-task batches by a sixth on MariaDB.
pub const GROUP_COMMIT_SMALL_BATCH: usize = 4;
/// Turns of the scheduler a lane gives after a small batch: of 1, 2, 4 and 8, two made
/// MariaDB's 8-client batches largest (3.0-3.9 submits where none made 2.5).
pub const GROUP_COMMIT_YIELDS: usize = 2;
/// Longest a group-committed submit of the library waits for a lane before it is answered
/// `Busy` with nothing written; new submits are refused at once while the oldest waiting
/// one has waited half of it (`EngineOptions::queue_wait`). As long as a transaction's
/// deadline: the library waits rather than sheds.
pub const QUEUE_WAIT_DEFAULT: Duration = TX_DEADLINE_DEFAULT;
/// `HERALD_QUEUE_WAIT` of `herald serve`: an HTTP caller is answered within about this
/// plus one batch's transaction, created or 503 `busy`, however far the offered rate
/// exceeds what the database can take.
pub const SERVE_QUEUE_WAIT_DEFAULT: Duration = Duration::from_millis(500);
/// The bounds of `HERALD_QUEUE_WAIT`.
pub const QUEUE_WAIT_MIN: Duration = Duration::from_millis(10);
pub const QUEUE_WAIT_MAX: Duration = Duration::from_secs(60);

/// Longest error message kept on an attempt row.
pub const ERROR_MESSAGE_LEN_MAX: usize = 1000;

/// Final deliveries (and receipts) deleted per retention statement, so a pass never holds
/// a long transaction.
pub const RETENTION_BATCH_MAX: usize = 1000;
/// How often a retention service prunes.
pub const RETENTION_EVERY_DEFAULT: std::time::Duration = std::time::Duration::from_secs(60);
/// Deliveries in one page of the HTTP API's listing, at most.
pub const PAGE_MAX: usize = 200;
/// Deliveries an operator's `herald deliveries list` prints, at most.
pub const OPERATOR_LIST_MAX: usize = 1000;
/// Outcomes a worker records together at most (one transaction, one set-based statement
/// for the fenced `sent` ones).
pub const RECORD_BATCH_MAX: usize = 1024;
/// A worker's live leases read at most per look for orphaned ones.
pub const ORPHANS_BATCH_MAX: usize = 10_000;
/// Longest worker id (its lease-owner name).
pub const WORKER_ID_LEN_MAX: usize = 200;
/// Longest release identifier (`HERALD_RELEASE`), in bytes.
pub const RELEASE_LEN_MAX: usize = 200;
/// Most send slots one worker may have (`HERALD_WORKERS`).
pub const WORKER_SLOTS_MAX: usize = 10_000;
/// Longest tenant name.
pub const TENANT_NAME_LEN_MAX: usize = 200;
