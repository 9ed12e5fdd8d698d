//! Destination limits (herald_core::fair::Limit): at most N sends in flight and R started
//! per second to a destination, across every process on the database, set per tenant or
//! for all, with `*` as every destination's default; and the pauses receivers ask for.
//!
//! The lease applies them in its own transaction: for the due lanes a limit governs, it
//! locks the limit's token bucket (`herald_destination_pace`, one row per destination and
//! scope, in one order, so leases of one destination take turns across processes and never
//! deadlock), counts what is in flight to the destination, gives each limit its `room`,
//! and spends the bucket's tokens on what it leased. A delivery over a limit stays pending
//! and due: no attempt is spent. A receiver's 429 or 503 with Retry-After pauses its lane —
//! that tenant's sends to that destination — until then ([`pause_lane`]).

use crate::error::Error;
use crate::handle::Herald;
use herald_core::TenantId;
use herald_core::fair::{
    CircuitChange, CircuitPolicy, DueLane, Lane, LaneHealth, Limit, limit_for, refill,
};
use herald_store::destinations::{
    LimitRow, deliveries_in_flight, lane_health, lane_health_clear, lane_health_put, lane_pause,
    lanes_failing, limit_remove, limit_set, limits_list, pace_lock, pace_save, scope_key,
    tenant_events_url, tenant_events_url_set, tenant_send_weight,
};
use herald_store::{Conn, StoreError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The largest `send_weight` a tenant may have.
pub const SEND_WEIGHT_MAX: u32 = 100;

/// A limit as the library shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationLimit {
    pub limit: Limit,
    pub updated_ms: i64,
    pub actor: String,
}

/// What a lease's limits allow: one room per (destination, scope) that governs a due lane.
#[derive(Debug, Default)]
pub(crate) struct Rooms {
    /// (destination, scope key) → the governing limit; the index of each is its room.
    keys: Vec<((String, String), Limit)>,
    /// Sends each allows now (what `allot` spends).
    pub(crate) rooms: Vec<usize>,
    /// Each bucket's tokens as refilled for this lease (`None`: no rate), and as of when:
    /// never before the time the bucket was last counted, so a lease that waited for the
    /// bucket's lock behind another never moves its clock back (and counts no refill twice).
    tokens: Vec<Option<(f64, i64)>>,
}

impl Rooms {
    /// Marks each lane of `due` with the room of the limit that governs it, reading and
    /// locking what those limits need. Nothing is read when no limit governs a due lane.
    pub(crate) async fn of(
        mut conn: Conn<'_>,
        limits: &[Limit],
        due: &mut [DueLane],
        now_ms: i64,
    ) -> Result<Rooms, StoreError> {
        let mut by_key: BTreeMap<(String, String), Limit> = BTreeMap::new();
        for d in due.iter() {
            if let Some(limit) = limit_for(limits, &d.lane) {
                by_key.insert(key_of(&d.lane, limit), limit.clone());
            }
        }
        let mut rooms = Rooms { keys: by_key.into_iter().collect(), ..Rooms::default() };
        for d in due.iter_mut() {
            d.room = limit_for(limits, &d.lane).and_then(|limit| {
                let key = key_of(&d.lane, limit);
                rooms.keys.iter().position(|(k, _)| *k == key)
            });
        }
        // In key order: every lease locks buckets in the one order.
        let mut in_flight: BTreeMap<String, Vec<(uuid::Uuid, i64)>> = BTreeMap::new();
        for ((destination, scope), limit) in &rooms.keys {
            let full = limit.bucket().unwrap_or(1.0);
            let (tokens, then_ms) =
                pace_lock(conn.reborrow(), destination, scope, full, now_ms).await?;
            let at_ms = now_ms.max(then_ms);
            let tokens = limit.per_second.map(|r| (refill(tokens, then_ms, at_ms, r, full), at_ms));
            let mut room = tokens.map_or(usize::MAX, |(t, _)| t.floor() as usize);
            if let Some(max) = limit.max_in_flight {
                if !in_flight.contains_key(destination) {
                    let counts = deliveries_in_flight(conn.reborrow(), destination).await?;
                    in_flight.insert(destination.clone(), counts);
                }
                let busy: i64 = in_flight[destination]
                    .iter()
                    .filter(|(t, _)| limit.tenant.is_none_or(|own| own == *t))
                    .map(|(_, n)| n)
                    .sum();
                room = room.min((max as i64).saturating_sub(busy).max(0) as usize);
            }
            rooms.rooms.push(room);
            rooms.tokens.push(tokens);
        }
        Ok(rooms)
    }

    /// Spends each bucket's tokens on the rows leased in the lanes it governs.
    pub(crate) async fn spend(
        &self,
        mut conn: Conn<'_>,
        due: &[DueLane],
        leased: &BTreeMap<Lane, usize>,
    ) -> Result<(), StoreError> {
        for (i, ((destination, scope), _)) in self.keys.iter().enumerate() {
            let Some((tokens, at_ms)) = self.tokens[i] else { continue };
            let spent: usize = due
                .iter()
                .filter(|d| d.room == Some(i))
                .map(|d| leased.get(&d.lane).copied().unwrap_or(0))
                .sum();
            let left = (tokens - spent as f64).max(0.0);
            pace_save(conn.reborrow(), destination, scope, left, at_ms).await?;
        }
        Ok(())
    }
}

/// A limit's bucket for `lane`: the lane's destination (a default limit counts each
/// destination apart) and the limit's scope.
fn key_of(lane: &Lane, limit: &Limit) -> (String, String) {
    (lane.destination.clone(), scope_key(limit.tenant))
}

/// The limits: `cached` (the handle's copy) when fresh, else read here — and returned to
/// be kept.
pub(crate) async fn limits_now(
    conn: Conn<'_>,
    cached: Option<Arc<Vec<Limit>>>,
) -> Result<(Arc<Vec<Limit>>, Option<Arc<Vec<Limit>>>), StoreError> {
    match cached {
        Some(limits) => Ok((limits, None)),
        None => {
            let read: Vec<Limit> = limits_list(conn).await?.into_iter().map(|r| r.limit).collect();
            let read = Arc::new(read);
            Ok((read.clone(), Some(read)))
        }
    }
}

/// Pauses `lane` for `after` (a receiver's Retry-After): its due deliveries wait, no
/// attempt spent, while every other lane goes on. Best effort: a pause that cannot be
/// written leaves the lane to its own retries.
async fn pause_lane(herald: &Herald, lane: &Lane, after: Duration) {
    let now_ms = herald.clock().wall_ms();
    let until_ms = now_ms.saturating_add(after.as_millis().min(i64::MAX as u128) as i64);
    let paused = herald
        .transaction(|tx| {
            Box::pin(async move {
                Ok(lane_pause(tx.conn(), lane.tenant, &lane.destination, until_ms, now_ms).await?)
            })
        })
        .await;
    match paused {
        Ok(_) => {
            tracing::info!(destination = %lane.destination, ?after, "the receiver asked to wait: lane paused")
        }
        Err(e) => tracing::warn!(error = %e, "pausing the lane failed"),
    }
}

/// An endpoint herald stopped sending to: its tenant hears of it on its events webhook.
pub const ENDPOINT_DISABLED: &str = "endpoint_disabled";

/// A lane with failures, as the library shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneState {
    pub tenant: TenantId,
    pub destination: String,
    pub health: LaneHealth,
    /// `closed` (failing, not yet open), `open` or `disabled`.
    pub circuit: &'static str,
}

/// What a send's outcome says of its lane: a receiver that asked to wait (429 or 503 with
/// Retry-After, at most `retry_after_max`) pauses the lane, not only this delivery; a
/// failure counts toward the lane's circuit; a send that worked closes it.
pub(crate) async fn lane_outcome(
    herald: &Herald,
    lanes: &crate::lanes::Lanes,
    row: &herald_store::deliveries::LeasedRow,
    outcome: &crate::channel::Outcome,
    retry_after_max: Duration,
) {
    use crate::channel::Outcome;
    let lane = crate::lanes::lane_of(row);
    match outcome {
        Outcome::Transient { retry_after: Some(after), .. } => {
            pause_lane(herald, &lane, (*after).min(retry_after_max)).await;
        }
        Outcome::Transient { retry_after: None, .. } => {
            // When its lease began, by the lease's clock (the database's, or a manual one).
            let d = &row.delivery;
            let started = d.attempt_started_at.unwrap_or(d.updated_at);
            lane_failed(herald, &lane, started, &herald.options.circuit).await;
        }
        Outcome::Sent if lanes.healed(&lane) => lane_recovered(herald, &lane).await,
        Outcome::Sent | Outcome::Terminal { .. } => {}
    }
}

/// Counts a send that failed (transient) in its lane: the lane's circuit may open (its
/// deliveries wait for a probe, no attempt spent) or, failing for long, be disabled — an
/// operator alert, and an event to the tenant's events webhook. Best effort, as a pause.
async fn lane_failed(herald: &Herald, lane: &Lane, started_ms: i64, policy: &CircuitPolicy) {
    let now_ms = herald.clock().wall_ms();
    let changed = herald
        .transaction(|tx| {
            Box::pin(async move {
                let mut conn = tx.conn();
                let health = lane_health(conn.reborrow(), lane.tenant, &lane.destination)
                    .await?
                    .unwrap_or_default();
                let (health, change) = policy.failed(health, started_ms, now_ms);
                lane_health_put(conn, lane.tenant, &lane.destination, &health, now_ms).await?;
                Ok((health, change))
            })
        })
        .await;
    let (health, change) = match changed {
        Ok(c) => c.value,
        Err(e) => return tracing::warn!(error = %e, "counting a lane's failure failed"),
    };
    match change {
        CircuitChange::None => {}
        CircuitChange::Opened => {
            metrics::counter!("herald_circuit_changes_total", "change" => "opened").increment(1);
            tracing::warn!(destination = %lane.destination, failures = health.failures,
                "the lane's circuit opened: its deliveries wait for a probe");
        }
        CircuitChange::Disabled => {
            metrics::counter!("herald_circuit_changes_total", "change" => "disabled").increment(1);
            crate::alerts::raise(ENDPOINT_DISABLED);
            tracing::error!(destination = %lane.destination, tenant = %lane.tenant,
                "the lane failed for too long and is disabled: its deliveries wait until it is enabled");
            tell_tenant(herald, lane, &health).await;
        }
    }
}

/// Tells a tenant, on its events webhook (when it has one), that `lane` was disabled: a
/// delivery of herald's own, cost 0, one per disabling.
async fn tell_tenant(herald: &Herald, lane: &Lane, health: &LaneHealth) {
    let tenant = lane.tenant;
    let url =
        herald.read(|conn, _| Box::pin(async move { tenant_events_url(conn, tenant).await })).await;
    let Ok(Some(url)) = url else { return };
    let at = |ms: Option<i64>| {
        ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()).map(|t| t.to_string())
    };
    let payload = serde_json::json!({
        "type": "endpoint.disabled",
        "destination": lane.destination,
        "failing_since": at(health.failing_since_ms),
        "disabled_at": at(health.disabled_ms),
        "failures": health.failures,
    });
    let key = format!(
        "herald.endpoint.disabled:{}:{}",
        lane.destination,
        health.disabled_ms.unwrap_or_default()
    );
    let mut event =
        crate::SubmitRequest::new(TenantId::from_uuid(tenant), key, "webhook", url, payload);
    event.cost = Some(0);
    if let Err(e) = herald.submit_alone(&event).await {
        tracing::warn!(error = %e, "telling the tenant of a disabled endpoint failed");
    }
}

/// A send worked in a lane that had failures: its circuit closes.
async fn lane_recovered(herald: &Herald, lane: &Lane) {
    let cleared = herald
        .transaction(|tx| {
            Box::pin(async move {
                Ok(lane_health_clear(tx.conn(), lane.tenant, &lane.destination).await?)
            })
        })
        .await;
    if matches!(cleared, Ok(c) if c.value) {
        metrics::counter!("herald_circuit_changes_total", "change" => "closed").increment(1);
        tracing::info!(destination = %lane.destination, "the lane sends again: its circuit closed");
        herald.wake().soon();
    }
}

impl Herald {
    /// Lanes with failures — failing, open or disabled — `tenant`'s when given, the most
    /// failures first (at most 500).
    pub async fn lanes_failing(&self, tenant: Option<TenantId>) -> Result<Vec<LaneState>, Error> {
        let policy = self.options.circuit;
        let tenant = tenant.map(|t| t.as_uuid());
        let rows = self
            .read(|conn, _| Box::pin(async move { lanes_failing(conn, tenant, 500).await }))
            .await?;
        Ok(rows
            .into_iter()
            .map(|(tenant, destination, health)| LaneState {
                tenant: TenantId::from_uuid(tenant),
                destination,
                circuit: if health.disabled_ms.is_some() {
                    "disabled"
                } else if policy.is_open(&health) {
                    "open"
                } else {
                    "closed"
                },
                health,
            })
            .collect())
    }

    /// Enables a lane again (a disabled one, or an open circuit, at once): what waited is
    /// due now. `false` when it had no failures.
    pub async fn enable_lane(&self, tenant: TenantId, destination: &str) -> Result<bool, Error> {
        let (tenant, destination) = (tenant.as_uuid(), destination.trim().to_ascii_lowercase());
        let cleared = self
            .transaction(|tx| {
                let destination = &destination;
                Box::pin(
                    async move { Ok(lane_health_clear(tx.conn(), tenant, destination).await?) },
                )
            })
            .await?
            .value;
        if cleared {
            metrics::counter!("herald_circuit_changes_total", "change" => "enabled").increment(1);
            self.wake().soon();
        }
        Ok(cleared)
    }

    /// Sets (or, `None`, removes) where `tenant` hears of herald's events: a webhook URL
    /// (an endpoint disabled, …).
    pub async fn set_events_url(&self, tenant: TenantId, url: Option<&str>) -> Result<(), Error> {
        if let Some(url) = url {
            crate::channels::validate("webhook", url, &crate::Payload::from_text("{}".to_string()))
                .map_err(|u| Error::invalid_field("url", u.code, u.message))?;
        }
        let tenant = tenant.as_uuid();
        let set = self
            .transaction(|tx| {
                Box::pin(async move { Ok(tenant_events_url_set(tx.conn(), tenant, url).await?) })
            })
            .await?
            .value;
        if set { Ok(()) } else { Err(Error::NotFound) }
    }

    /// Sets a destination limit (replacing the one of the same destination and scope).
    /// `actor` says who set it.
    pub async fn set_destination_limit(&self, limit: &Limit, actor: &str) -> Result<Limit, Error> {
        let limit =
            limit.clone().checked().map_err(|m| Error::invalid_field("limit", "invalid", m))?;
        if let Some(tenant) = limit.tenant {
            self.tenant_name(TenantId::from_uuid(tenant)).await?;
        }
        let row = LimitRow {
            limit: limit.clone(),
            updated_ms: self.clock().wall_ms(),
            actor: actor.chars().take(64).collect(),
        };
        self.transaction(|tx| {
            let row = &row;
            Box::pin(async move { Ok(limit_set(tx.conn(), row).await?) })
        })
        .await?;
        self.limits.forget();
        Ok(limit)
    }

    /// Removes the limit of (`destination`, `tenant`); `false` when there was none. What it
    /// held back is due at once.
    pub async fn remove_destination_limit(
        &self,
        destination: &str,
        tenant: Option<TenantId>,
    ) -> Result<bool, Error> {
        let probe = Limit {
            destination: destination.to_string(),
            tenant: None,
            max_in_flight: Some(1),
            per_second: None,
        };
        let destination = probe
            .checked()
            .map_err(|m| Error::invalid_field("destination", "not_a_destination", m))?
            .destination;
        let tenant = tenant.map(|t| t.as_uuid());
        let removed = self
            .transaction(|tx| {
                let destination = &destination;
                Box::pin(async move { Ok(limit_remove(tx.conn(), destination, tenant).await?) })
            })
            .await?
            .value;
        self.limits.forget();
        self.wake().soon();
        Ok(removed)
    }

    /// Sets `tenant`'s share of every worker's slots against other tenants with due work
    /// (`send_weight`, 1 to 100; 1 by default): a tenant of weight 3 gets three turns to
    /// another's one.
    pub async fn set_send_weight(&self, tenant: TenantId, weight: u32) -> Result<(), Error> {
        if !(1..=SEND_WEIGHT_MAX).contains(&weight) {
            return Err(Error::invalid_field(
                "send_weight",
                "out_of_range",
                format!("send_weight must be 1 to {SEND_WEIGHT_MAX}"),
            ));
        }
        let tenant = tenant.as_uuid();
        let set = self
            .transaction(|tx| {
                Box::pin(async move { Ok(tenant_send_weight(tx.conn(), tenant, weight).await?) })
            })
            .await?
            .value;
        if set { Ok(()) } else { Err(Error::NotFound) }
    }

    /// Every destination limit; `tenant`'s own and those over every tenant when given.
    pub async fn destination_limits(
        &self,
        tenant: Option<TenantId>,
    ) -> Result<Vec<DestinationLimit>, Error> {
        let rows = self.read(|conn, _| Box::pin(async move { limits_list(conn).await })).await?;
        Ok(rows
            .into_iter()
            .filter(|r| tenant.is_none_or(|t| r.limit.tenant.is_none_or(|own| own == t.as_uuid())))
            .map(|r| DestinationLimit { limit: r.limit, updated_ms: r.updated_ms, actor: r.actor })
            .collect())
    }
}
