//! Deliveries: the rows, and the store's functions on them, by concern — the claim (a row
//! under a unique identity), the lease, applying a transition the library decided, replay,
//! reads, retention. Each function here is the contract: its documentation says what it
//! does on every backend, and its body hands the call to the backend's module
//! (`crate::sqlite`, `crate::postgres`) through [`crate::per_backend`]. What an outcome
//! *means* is not here: `herald` decides (with `herald_core::decide`) and hands the store a
//! [`Transition`] to apply.

mod apply;
mod claim;
mod lease;
mod manage;
mod read;
mod retention;

pub use apply::{
    AttemptEnd, Settlement, StateChange, Transition, deliveries_sent_fenced, delivery_apply,
    lease_expired,
};
pub use claim::{Claim, NewDelivery, deliveries_claim_many, delivery_claim};
pub(crate) use claim::{
    LockedStripes, Planned, batch_answers, batch_available, batch_needs, claim_plan, gathered,
    stripe_plan,
};
pub use lease::{
    ExpiredLease, LaneFound, LanesDue, Lease, LeaseLanes, QuickLease, deliveries_expired,
    deliveries_lanes, deliveries_lease, deliveries_lease_lanes, deliveries_lease_quick,
    deliveries_leased_by, delivery_hand_back, delivery_lease_extend,
};
pub(crate) use lease::{WalkRow, lanes_found, lanes_walk_sql};
pub use manage::delivery_replay_apply;
pub(crate) use read::{
    FailingDialect, FailingTuple, ListBind, ListDialect, deliveries_failing_fn, deliveries_list_fn,
    list_where,
};
pub use read::{
    FailingRow, ListFilter, SelectFilter, Selected, deliveries_count_by_channel,
    deliveries_count_by_state, deliveries_failing, deliveries_list, deliveries_select,
    delivery_attempts, delivery_by_identity, delivery_get, delivery_payload, oldest_due_age_ms,
};
pub use retention::{Pruned, retention_prune};

use herald_core::DeliveryState;
use sqlx::types::Uuid;

/// The fingerprint version of a row whose fingerprint was not computed at its claim (the
/// SQL API's: PostgreSQL schema 8, MariaDB schema 15): computed from the row when a repeat
/// needs it.
pub const FINGERPRINT_NOT_COMPUTED: i16 = 0;

/// A delivery row (times in Unix milliseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub operation_key: String,
    pub channel: String,
    pub recipient: String,
    pub fingerprint: Vec<u8>,
    /// The version `fingerprint` was computed in (`herald_core::fingerprint`). A row the
    /// SQL API created may hold [`FINGERPRINT_NOT_COMPUTED`] until read by
    /// [`delivery_by_identity`], which computes its version-2 fingerprint.
    pub fingerprint_version: i16,
    pub quota_key: String,
    pub cost: i64,
    pub state: DeliveryState,
    pub attempts: i32,
    pub max_attempts: i32,
    pub attempts_base: i32,
    pub reservation_seq: i32,
    pub next_attempt_at: i64,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub sent_at: Option<i64>,
    /// The latest attempt's worker, set by the lease and kept only while the row stands for
    /// that attempt (`sending`, or `sent` by it): such an attempt has no `delivery_attempts`
    /// row, and listing reads it from here. Any other transition clears it.
    pub attempt_worker: Option<String>,
    /// When the latest attempt was leased (kept after it ends, for its row's start).
    pub attempt_started_at: Option<i64>,
}

/// A leased delivery with its payload (JSON text, as it was submitted).
#[derive(Clone, PartialEq, Eq)]
pub struct LeasedRow {
    pub delivery: DeliveryRow,
    pub payload: String,
    /// The quota stripe its reservation sits on (`None`: no reservation, cost 0). Read by
    /// the lease so that the recorder locks the stripes it settles without looking them up
    /// again: a reservation's stripe never changes (a replay makes a new reservation).
    pub stripe: Option<i16>,
    /// The `send_at` (Unix ms) the request gave, kept for a row whose fingerprint herald
    /// did not compute (`herald_core::fingerprint::FINGERPRINT_CLIENT`, or
    /// [`FINGERPRINT_NOT_COMPUTED`]): the due time moves with retries, and the check
    /// before a send needs what the request said.
    pub fingerprint_send_at: Option<i64>,
    /// Its destination as stored (herald_core::hold::destination_of): with its tenant, the
    /// lane whose share of the worker it uses.
    pub destination: String,
    /// The W3C traceparent it was submitted under, if any (herald_core::trace).
    pub traceparent: Option<String>,
}

impl std::fmt::Debug for LeasedRow {
    /// Without the payload: it is the tenant's data, and may hold secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedRow")
            .field("delivery", &self.delivery)
            .field("payload", &format_args!("<{} bytes>", self.payload.len()))
            .field("stripe", &self.stripe)
            .field("fingerprint_send_at", &self.fingerprint_send_at)
            .field("destination", &self.destination)
            .field("traceparent", &self.traceparent)
            .finish()
    }
}

/// One attempt row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRow {
    pub n: i32,
    pub worker: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub outcome: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

/// Decodes a [`DeliveryRow`] from a row of either backend (the columns are each
/// backend's `DELIVERY_COLS`). A state this build does not know is a decode error that
/// names it, never a default.
macro_rules! delivery_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = &$row;
        let state: String = row.try_get("state")?;
        $crate::deliveries::DeliveryRow {
            id: row.try_get("id")?,
            tenant_id: row.try_get("tenant_id")?,
            operation_key: row.try_get("operation_key")?,
            channel: row.try_get("channel")?,
            recipient: row.try_get("recipient")?,
            fingerprint: row.try_get("fingerprint")?,
            fingerprint_version: row.try_get("fingerprint_version")?,
            quota_key: row.try_get("quota_key")?,
            cost: row.try_get("cost")?,
            state: state
                .parse()
                .map_err(|e: herald_core::state::UnknownState| sqlx::Error::Decode(e.into()))?,
            attempts: row.try_get("attempts")?,
            max_attempts: row.try_get("max_attempts")?,
            attempts_base: row.try_get("attempts_base")?,
            reservation_seq: row.try_get("reservation_seq")?,
            next_attempt_at: row.try_get("next_attempt_at")?,
            lease_owner: row.try_get("lease_owner")?,
            lease_until: row.try_get("lease_until")?,
            last_error: row.try_get("last_error")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            sent_at: row.try_get("sent_at")?,
            attempt_worker: row.try_get("attempt_worker")?,
            attempt_started_at: row.try_get("attempt_started_at")?,
        }
    }};
}
pub(crate) use delivery_row;

/// Decodes a [`LeasedRow`] from a lease's row on PostgreSQL or MariaDB: the delivery and
/// its `payload`, `stripe`, `fingerprint_send_at_ms` and `destination`.
macro_rules! leased_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = &$row;
        $crate::deliveries::LeasedRow {
            delivery: $crate::deliveries::delivery_row!(row),
            payload: row.try_get("payload")?,
            stripe: row.try_get("stripe")?,
            fingerprint_send_at: row.try_get("fingerprint_send_at_ms")?,
            destination: row.try_get("destination")?,
            traceparent: row.try_get("traceparent")?,
        }
    }};
}
pub(crate) use leased_row;

/// Decodes an [`AttemptRow`] from a row of either backend.
macro_rules! attempt_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = &$row;
        $crate::deliveries::AttemptRow {
            n: row.try_get("n")?,
            worker: row.try_get("worker")?,
            started_at: row.try_get("started_at")?,
            finished_at: row.try_get("finished_at")?,
            outcome: row.try_get("outcome")?,
            error_code: row.try_get("error_code")?,
            error_message: row.try_get("error_message")?,
        }
    }};
}
pub(crate) use attempt_row;

/// An error message as stored: at most `ERROR_MESSAGE_LEN_MAX` bytes, cut at a character
/// boundary.
pub(crate) fn truncate_error(message: &str) -> String {
    let max = herald_core::limits::ERROR_MESSAGE_LEN_MAX;
    if message.len() <= max {
        return message.to_string();
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}
