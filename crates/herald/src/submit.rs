//! Submit: claim a delivery under its identity and reserve its quota, in the caller's
//! transaction (the transactional outbox: the claim row *is* the job).
//!
//! Order of checks (SPEC guarantee 1): validation → duplicate or reused → quota →
//! created. The store's claim inserts the row, its payload and its reservation or says
//! why not (`herald_store::deliveries::delivery_claim`), locking the quota account before
//! the identity on every path; when it inserted nothing, the identity is looked up, since
//! a duplicate is reported before short quota. No statement fails on a duplicate or on
//! short quota, so the caller's transaction stays usable.
//!
//! `submit_alone` runs the same claim autocommitted where it is one statement
//! (PostgreSQL): one round trip instead of three (ARCHITECTURE.md, "A delivery's transactions and round trips").

use crate::delivery::{Delivery, ts};
use crate::error::Error;
use crate::handle::Herald;
use crate::settings::Settings;
use crate::tx::Tx;
use herald_core::fingerprint::{FINGERPRINT_VERSION, Resolved, fingerprint, fingerprint_in};
use herald_core::limits::SUBMIT_BATCH_MAX;
use herald_core::limits::{
    CHANNEL_LEN_MAX, COST_MAX, DELIVERY_ATTEMPTS_MAX, QUOTA_KEY_LEN_MAX, RECIPIENT_LEN_MAX,
    payload_bytes_max,
};
use herald_core::{DeliveryId, TenantId};
use herald_core::{OperationKey, Payload, json};
use herald_store::deliveries::{
    Claim, DeliveryRow, NewDelivery, deliveries_claim_many, delivery_by_identity, delivery_claim,
};
use herald_store::{AsConn, Conn, StoreError};
use jiff::Timestamp;
use tracing::Instrument as _;

/// A request to deliver something once.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitRequest {
    pub tenant: TenantId,
    /// The caller's stable identity for this effect (an event id, never a per-attempt key).
    pub operation_key: String,
    pub channel: String,
    pub to: String,
    /// JSON text, stored and delivered exactly as given; build it with
    /// [`Payload::from_text`] to keep every digit of a number (a `serde_json::Value`
    /// converts too, as serde_json prints it).
    pub payload: Payload,
    /// Defaults to the channel name.
    pub quota_key: Option<String>,
    /// Defaults to 1; 0 means free (no reservation).
    pub cost: Option<i64>,
    /// Not before this time; defaults to now.
    pub send_at: Option<Timestamp>,
    /// Defaults to the database's shared setting ([`crate::Settings`]).
    pub max_attempts: Option<u32>,
}

impl SubmitRequest {
    /// A request with every optional field left to its default (quota key = channel,
    /// cost 1, now, the shared max attempts); set fields afterwards to change them.
    pub fn new(
        tenant: TenantId,
        operation_key: impl Into<String>,
        channel: impl Into<String>,
        to: impl Into<String>,
        payload: impl Into<Payload>,
    ) -> SubmitRequest {
        SubmitRequest {
            tenant,
            operation_key: operation_key.into(),
            channel: channel.into(),
            to: to.into(),
            payload: payload.into(),
            quota_key: None,
            cost: None,
            send_at: None,
            max_attempts: None,
        }
    }
}

/// What a submit returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    pub delivery: Delivery,
    /// `true` when the identity existed with the same request (nothing new was written).
    pub duplicate: bool,
}

/// The request after defaults and validation: everything a claim needs that the request
/// itself does not say, worked out before any SQL runs.
pub(crate) struct Checked {
    operation_key: OperationKey,
    quota_key: String,
    cost: i64,
    max_attempts: u32,
    send_at_ms: Option<i64>,
    /// The payload as herald's JSON rules read it.
    parsed: json::Value,
    fingerprint: [u8; 32],
    /// The submit span's traceparent, stored for the attempts' spans (traces on only).
    traceparent: Option<String>,
}

/// The latest `send_at` accepted (9999-12-30), so every stored time reads back exactly.
const SEND_AT_MS_MAX: i64 = 253_402_128_000_000;

/// `value` under herald's rule for text that names something (the same rule as the
/// identifiers': not empty, at most `max` bytes, no control character).
fn check_text(field: &'static str, value: &str, max: usize) -> Result<(), Error> {
    Ok(herald_core::ident::check(field, value, max)?)
}

pub(crate) fn check(req: &SubmitRequest, settings: Settings) -> Result<Checked, Error> {
    let operation_key = OperationKey::new(req.operation_key.as_str())?;
    check_text("channel", &req.channel, CHANNEL_LEN_MAX)?;
    check_text("to", &req.to, RECIPIENT_LEN_MAX)?;
    let quota_key = req.quota_key.as_deref().unwrap_or(&req.channel);
    check_text("quota_key", quota_key, QUOTA_KEY_LEN_MAX)?;
    let quota_key = quota_key.to_string();
    let cost = req.cost.unwrap_or(1);
    if !(0..=COST_MAX).contains(&cost) {
        return Err(Error::invalid_field(
            "cost",
            "out_of_range",
            format!("cost must be between 0 and {COST_MAX}, got {cost}"),
        ));
    }
    let max_attempts = req.max_attempts.unwrap_or(settings.max_attempts);
    if !(1..=DELIVERY_ATTEMPTS_MAX).contains(&max_attempts) {
        return Err(Error::invalid_field(
            "max_attempts",
            "out_of_range",
            format!(
                "max_attempts must be between 1 and {DELIVERY_ATTEMPTS_MAX}, got {max_attempts}"
            ),
        ));
    }
    let payload = req.payload.as_str();
    let limit = payload_bytes_max(&req.channel);
    if payload.len() > limit {
        return Err(Error::invalid_field(
            "payload",
            "too_long",
            format!(
                "payload is {} bytes long, the limit is {limit} for channel {}",
                payload.len(),
                req.channel
            ),
        ));
    }
    let parsed = json::parse(payload)
        .map_err(|e| Error::invalid_field("payload", e.problem.code(), format!("payload: {e}")))?;
    let send_at_ms = req.send_at.map(|t| t.as_millisecond());
    if let Some(ms) = send_at_ms
        && !(0..=SEND_AT_MS_MAX).contains(&ms)
    {
        return Err(Error::invalid_field(
            "send_at",
            "out_of_range",
            "send_at must be between 1970-01-01 and 9999-12-30",
        ));
    }
    let mut checked = Checked {
        operation_key,
        quota_key,
        cost,
        max_attempts,
        send_at_ms,
        parsed,
        fingerprint: [0; 32],
        traceparent: crate::traces::traceparent_of(&tracing::Span::current()),
    };
    checked.fingerprint = fingerprint(&checked.resolved(req, max_attempts));
    Ok(checked)
}

impl Checked {
    pub(crate) fn cost(&self) -> i64 {
        self.cost
    }

    /// The account the submit reserves from (when its cost is above 0).
    pub(crate) fn quota_key(&self) -> &str {
        &self.quota_key
    }

    /// The request's meaning with `max_attempts` resolved as given.
    fn resolved<'r>(&'r self, req: &'r SubmitRequest, max_attempts: u32) -> Resolved<'r> {
        Resolved {
            channel: &req.channel,
            to: &req.to,
            payload: &self.parsed,
            quota_key: &self.quota_key,
            cost: self.cost,
            send_at_ms: self.send_at_ms,
            max_attempts,
        }
    }
}

impl Herald {
    /// Submits inside a herald transaction; in-process workers are woken after commit.
    pub async fn submit(&self, tx: &mut Tx<'_>, req: &SubmitRequest) -> Result<Submitted, Error> {
        let submitted = self.submit_in(tx, req).await?;
        if !submitted.duplicate {
            let wake = self.wake().clone();
            tx.after_commit(move || wake.soon());
        }
        Ok(submitted)
    }

    /// Submits with no transaction of the caller's around it, for callers with no business
    /// change to commit alongside (the same checks and results as [`Herald::submit`]).
    ///
    /// Submits made this way at the same moment — from any task of this process, through
    /// any clone of this handle — are group-committed: they share one transaction and its
    /// one durable commit, and each is answered after that commit with what it would have
    /// had alone (`group.rs`). A lone submit commits at once; where the backend claims in
    /// one statement (PostgreSQL) it is that statement alone, autocommitted. A conflict
    /// runs the transaction again; a commit whose outcome is unknown is
    /// [`Error::CommitOutcomeUnknown`] (submit again with the same request to learn it); a
    /// submit still waiting for its turn at the deadline is [`Error::Busy`], with nothing
    /// written.
    pub async fn submit_alone(&self, req: &SubmitRequest) -> Result<Submitted, Error> {
        let mut answers = self.submit_many(std::slice::from_ref(req)).await?;
        answers.pop().unwrap_or_else(|| Err(Error::app("a submit had no answer")))
    }

    /// Submits many requests at once, with no transaction of the caller's around them:
    /// each item is checked and answered on its own (in the order given), and all of them
    /// go through the group commit of [`Herald::submit_alone`], so they share as few
    /// commits as the batch limit allows. An item's error is its own: one bad item never
    /// fails its neighbours. At most [`SUBMIT_BATCH_MAX`] items; more is
    /// [`Error::Invalid`] with nothing written.
    pub async fn submit_many(
        &self,
        reqs: &[SubmitRequest],
    ) -> Result<Vec<Result<Submitted, Error>>, Error> {
        if reqs.len() > SUBMIT_BATCH_MAX {
            return Err(Error::invalid(format!(
                "a batch holds at most {SUBMIT_BATCH_MAX} submits, got {}",
                reqs.len()
            )));
        }
        if crate::runner::in_runner() {
            // Outside the caller's transaction it could wait on that transaction's locks.
            return Err(Error::NestedTransaction);
        }
        let span = crate::traces::submit_span(reqs.len());
        async {
            let settings = self.settings_recent().await?;
            let checked = reqs.iter().map(|req| check(req, settings)).collect();
            Ok(self.group_commit(reqs, checked).await)
        }
        .instrument(span)
        .await
    }

    /// Submits on any connection inside a transaction — herald's or the application's own
    /// sqlx transaction, so the claim commits or rolls back with the business change.
    /// Workers are woken soon after (they look again shortly after a wake, so a wake that
    /// arrives before this transaction commits is not lost).
    pub async fn submit_in<C: AsConn + ?Sized>(
        &self,
        conn: &mut C,
        req: &SubmitRequest,
    ) -> Result<Submitted, Error> {
        let span = crate::traces::submit_span(1);
        async {
            let checked = check(req, self.submit_settings(conn.as_conn()).await?)?;
            if !conn.as_conn().in_transaction() {
                return Err(Error::NotInTransaction);
            }
            self.claim_in(conn.as_conn(), req, &checked).await?
        }
        .instrument(span)
        .await
    }

    /// Claims a checked request on `conn`, inside a transaction. The outer error is the
    /// database's (the transaction may be unusable after it); the inner result is the
    /// submit's answer, which leaves the transaction usable whatever it says.
    pub(crate) async fn claim_in(
        &self,
        mut conn: Conn<'_>,
        req: &SubmitRequest,
        checked: &Checked,
    ) -> Result<Result<Submitted, Error>, Error> {
        let id = DeliveryId::new_v7();
        let new = new_delivery(req, checked, id);
        for _ in 0..CLAIM_ROUNDS_MAX {
            let (now, notify) = (self.clock().now(), self.wake().take_pg_notify());
            let claim = delivery_claim(conn.reborrow(), &new, now, notify).await?;
            let existing = identity_after(conn.reborrow(), req, checked, claim).await?;
            if let Some(answer) = self.answer(req, checked, id, claim, existing, notify) {
                return Ok(answer);
            }
        }
        Ok(Err(vanished()))
    }

    /// Claims checked requests together on `conn` (inside a transaction), each answered as
    /// [`Herald::claim_in`] would have answered it had they run one after another in this
    /// order — where the backend claims many in a fixed number of statements
    /// (`deliveries_claim_many`); `None` where it claims one by one. The outer error is
    /// the database's, and names no request: the caller finds the one at fault by claiming
    /// them one by one.
    pub(crate) async fn claim_many_in(
        &self,
        mut conn: Conn<'_>,
        items: &[(&SubmitRequest, &Checked)],
    ) -> Result<Option<Vec<Result<Submitted, Error>>>, Error> {
        if !self.store().backend().claims_in_batches() {
            return Ok(None);
        }
        let ids: Vec<DeliveryId> = items.iter().map(|_| DeliveryId::new_v7()).collect();
        let news: Vec<NewDelivery<'_>> = items
            .iter()
            .zip(&ids)
            .map(|((req, checked), id)| new_delivery(req, checked, *id))
            .collect();
        let (now, notify) = (self.clock().now(), self.wake().take_pg_notify());
        let claimed = deliveries_claim_many(conn.reborrow(), &news, now, notify).await;
        let claims = match claimed {
            Ok(Some(claims)) => claims,
            Ok(None) | Err(_) => {
                if notify {
                    self.wake().pg_notify_unused();
                }
                return claimed.map(|_| None).map_err(Error::from);
            }
        };
        if notify && !claims.iter().any(|c| matches!(c, Claim::Inserted { .. })) {
            self.wake().pg_notify_unused();
        }
        let mut answers = Vec::with_capacity(items.len());
        for (((req, checked), id), claim) in items.iter().zip(&ids).zip(claims) {
            let existing = identity_after(conn.reborrow(), req, checked, claim).await?;
            answers.push(match self.answer(req, checked, *id, claim, existing, false) {
                Some(answer) => answer,
                // The row it ran into was gone by the lookup (retention): claim it again.
                None => self.claim_in(conn.reborrow(), req, checked).await?,
            });
        }
        Ok(Some(answers))
    }

    /// One checked submit in a transaction of its own, by `deadline`: the group commit's
    /// path for a batch of one. Where the backend claims in one statement (PostgreSQL)
    /// that transaction is the statement alone, autocommitted — one round trip instead of
    /// three.
    pub(crate) async fn submit_solo(
        &self,
        req: &SubmitRequest,
        checked: &Checked,
        deadline: tokio::time::Instant,
    ) -> Result<Submitted, Error> {
        if !self.store().backend().claims_in_one_statement() {
            let herald = self.clone();
            let options = crate::TxOptions {
                deadline: deadline.saturating_duration_since(tokio::time::Instant::now()),
                ..crate::TxOptions::default()
            };
            return self
                .transaction_with(&options, |tx| {
                    let herald = &herald;
                    Box::pin(async move {
                        let submitted = herald.claim_in(tx.conn(), req, checked).await??;
                        if !submitted.duplicate {
                            let wake = herald.wake().clone();
                            tx.after_commit(move || wake.soon());
                        }
                        Ok(submitted)
                    })
                })
                .await
                .map(|committed| committed.value);
        }
        let id = DeliveryId::new_v7();
        let new = new_delivery(req, checked, id);
        for _ in 0..CLAIM_ROUNDS_MAX {
            let (now, notify) = (self.clock().now(), self.wake().take_pg_notify());
            let claim = self
                .autocommit_until(deadline, |conn, _| {
                    let new = &new;
                    Box::pin(async move { delivery_claim(conn, new, now, notify).await })
                })
                .await?;
            let existing = match claim {
                Claim::Exists | Claim::QuotaShort => Some(
                    self.autocommit_until(deadline, |conn, _| {
                        let key = checked.operation_key.as_str();
                        Box::pin(async move {
                            delivery_by_identity(conn, req.tenant.as_uuid(), key, &req.channel)
                                .await
                        })
                    })
                    .await?,
                ),
                Claim::Inserted { .. } | Claim::UnknownTenant => None,
            };
            if let Some(answer) = self.answer(req, checked, id, claim, existing, notify) {
                return answer;
            }
        }
        Err(vanished())
    }

    /// The answer to a claim (and, when it inserted nothing, to the identity's lookup), in
    /// SPEC's order: duplicate or reused, then quota, then created. `None` when the row the
    /// claim ran into was gone by the lookup (retention pruned it in between): the caller
    /// claims again, and answers what that claim does.
    fn answer(
        &self,
        req: &SubmitRequest,
        checked: &Checked,
        id: DeliveryId,
        claim: Claim,
        existing: Option<Option<DeliveryRow>>,
        notified: bool,
    ) -> Option<Result<Submitted, Error>> {
        if notified && !matches!(claim, Claim::Inserted { .. }) {
            self.wake().pg_notify_unused();
        }
        Some(match (claim, existing.flatten()) {
            (Claim::Inserted { created_at, next_attempt_at }, _) => {
                self.wake().soon();
                created(req, checked, id, created_at, next_attempt_at)
            }
            (Claim::UnknownTenant, _) => Err(Error::UnknownTenant),
            (Claim::Exists | Claim::QuotaShort, Some(row)) => repeated(row, req, checked),
            (Claim::QuotaShort, None) => {
                Err(Error::QuotaExhausted { quota_key: checked.quota_key.clone() })
            }
            (Claim::Exists, None) => return None,
        })
    }
}

/// The row under the request's identity when the claim inserted nothing (a duplicate is
/// reported before short quota, so both look it up); `None` when there is nothing to look
/// up.
async fn identity_after(
    conn: Conn<'_>,
    req: &SubmitRequest,
    checked: &Checked,
    claim: Claim,
) -> Result<Option<Option<DeliveryRow>>, StoreError> {
    Ok(match claim {
        Claim::Exists | Claim::QuotaShort => Some(
            delivery_by_identity(
                conn,
                req.tenant.as_uuid(),
                checked.operation_key.as_str(),
                &req.channel,
            )
            .await?,
        ),
        Claim::Inserted { .. } | Claim::UnknownTenant => None,
    })
}

/// Claims tried at most per submit: another round only when the row a claim ran into was
/// deleted before it could be read (retention), which a second round cannot meet again
/// short of retention deleting a row created within its own window.
const CLAIM_ROUNDS_MAX: usize = 3;

fn vanished() -> Error {
    Error::app("the delivery with this identity was deleted each time it was about to be read")
}

fn new_delivery<'a>(
    req: &'a SubmitRequest,
    checked: &'a Checked,
    id: DeliveryId,
) -> NewDelivery<'a> {
    NewDelivery {
        id: id.as_uuid(),
        tenant_id: req.tenant.as_uuid(),
        operation_key: checked.operation_key.as_str(),
        channel: &req.channel,
        recipient: &req.to,
        payload: req.payload.as_str(),
        fingerprint: &checked.fingerprint,
        fingerprint_version: FINGERPRINT_VERSION,
        quota_key: &checked.quota_key,
        cost: checked.cost,
        max_attempts: checked.max_attempts as i32,
        send_at: checked.send_at_ms,
        traceparent: checked.traceparent.as_deref(),
    }
}

/// The identity exists: the same request is a duplicate, another one a reused key. The
/// request is compared in the version of the row's fingerprint. A version-1 row resolved
/// `max_attempts` from the submitting process's own flag, which is gone: a repeat that
/// leaves it out is compared with the row's own value, what that process resolved.
fn repeated(
    existing: DeliveryRow,
    req: &SubmitRequest,
    checked: &Checked,
) -> Result<Submitted, Error> {
    let same = if existing.fingerprint_version == FINGERPRINT_VERSION {
        existing.fingerprint == checked.fingerprint
    } else {
        let max_attempts = match (req.max_attempts, existing.fingerprint_version) {
            (None, 1) => u32::try_from(existing.max_attempts).unwrap_or(checked.max_attempts),
            _ => checked.max_attempts,
        };
        let r = checked.resolved(req, max_attempts);
        fingerprint_in(existing.fingerprint_version, &r).is_some_and(|f| existing.fingerprint == f)
    };
    if same {
        Ok(Submitted { delivery: existing.try_into()?, duplicate: true })
    } else {
        Err(Error::IdempotencyKeyReused)
    }
}

/// The delivery a claim just created, as the row reads (without reading it back).
fn created(
    req: &SubmitRequest,
    checked: &Checked,
    id: DeliveryId,
    created_at: i64,
    next_attempt_at: i64,
) -> Result<Submitted, Error> {
    let delivery = Delivery {
        id,
        tenant: req.tenant,
        operation_key: req.operation_key.clone(),
        channel: req.channel.clone(),
        to: req.to.clone(),
        state: herald_core::DeliveryState::Pending,
        attempts: 0,
        max_attempts: checked.max_attempts,
        attempts_base: 0,
        reservation_seq: 1,
        quota_key: checked.quota_key.clone(),
        cost: checked.cost,
        next_attempt_at: ts(next_attempt_at, || format!("next_attempt_at of delivery {id}"))?,
        // A new delivery in a held scope is held by the worker that first leases it.
        held: false,
        last_error: None,
        created_at: ts(created_at, || format!("created_at of delivery {id}"))?,
        updated_at: ts(created_at, || format!("updated_at of delivery {id}"))?,
        sent_at: None,
    };
    Ok(Submitted { delivery, duplicate: false })
}
