//! A worker's lease, lane by lane (herald_core::fair says why and how slots are shared).
//!
//! One transaction: walk the lanes with pending rows from where the last lease stopped
//! (at most [`LEASE_LANES_MAX`] lanes, an index probe each), share the free slots among
//! those with due rows ([`herald_core::fair::allot`], given what this worker has in flight
//! per lane and tenant, and the room the destination limits leave, `destinations.rs`),
//! lease each lane's share with `SKIP LOCKED`, spend the limits' tokens, and hold back what
//! a hold covers. A lane a receiver paused (Retry-After) is passed over until the pause
//! ends.
//!
//! Each leased row comes with a [`Slot`]: this worker's count of that lane's sends in
//! flight, given back when the slot is dropped (the send recorded, handed back, or its
//! task gone), so the next lease's shares are computed from what is really in flight.

use crate::destinations::{Rooms, limits_now};
use crate::error::Error;
use crate::handle::Herald;
use herald_core::fair::{Busy, CircuitPolicy, DueLane, Lane, allot};
use herald_core::limits::LEASE_LANES_MAX;
use herald_store::Now;
use herald_store::deliveries::{
    LaneFound, LanesDue, LeaseLanes, LeasedRow, QuickLease, deliveries_lanes,
    deliveries_lease_lanes, deliveries_lease_quick,
};
use herald_store::destinations::lane_probe;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// A worker's lanes: what it has in flight, and where its next walk starts.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    busy: Busy,
    /// The last lane the previous walk visited when it stopped at [`LEASE_LANES_MAX`];
    /// `None`: the next walk starts at the first lane.
    cursor: Option<Lane>,
    /// The last tenant served, so that turns among equally busy tenants rotate.
    last_tenant: Option<Uuid>,
    /// Lanes the last walks found with failures: a send that works there closes them.
    unhealthy: HashSet<Lane>,
    /// When the soonest lane the last walk found waiting (a pause, a probe) sends again.
    wake_at: Option<std::time::Instant>,
    /// When a lease last found two lanes or more with due rows.
    shared_at: Option<std::time::Instant>,
}

/// One send's place in its lane's count of sends in flight; dropping it gives it back.
#[derive(Debug)]
pub(crate) struct Slot {
    lanes: Arc<Lanes>,
    lane: Lane,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut state) = self.lanes.state.lock() {
            state.busy.remove(&self.lane);
        }
    }
}

/// What one lease asks for.
pub(crate) struct Ask<'a> {
    pub worker: &'a str,
    pub channels: &'a [String],
    /// The worker's send slots (the caps are shares of these).
    pub slots: usize,
    /// Free slots to fill, at most.
    pub wanted: usize,
    pub lease: Duration,
    pub lane_take_max: usize,
    pub circuit: CircuitPolicy,
    /// A quick lease, started by a wake-up while another lease of this worker is in
    /// flight: one row of each lane with nothing in flight here, so that a delivery
    /// arriving in a new lane does not wait out a lease of another lane's backlog. It
    /// leaves the walk's cursor and the turns where they are.
    pub quick: bool,
}

impl Lanes {
    /// Leases up to `ask.wanted` rows, shared fairly among the lanes with due work.
    pub(crate) async fn lease(
        self: &Arc<Self>,
        herald: &Herald,
        ask: &Ask<'_>,
    ) -> Result<Vec<(LeasedRow, Slot)>, Error> {
        let (busy, cursor, last_tenant, shared_recently) = {
            let state = self.state.lock().map_err(|_| Error::app("worker lane state poisoned"))?;
            let shared = state.shared_at.is_some_and(|at| at.elapsed() < SHARED_FOR);
            (state.busy.clone(), state.cursor.clone(), state.last_tenant, shared)
        };
        let now = herald.clock().now();
        // A pause's end is written from this clock (Retry-After, seconds long).
        let now_ms = herald.clock().wall_ms();
        let (cached_holds, cached_limits) = (herald.holds.fresh(), herald.limits.fresh());
        let nothing_applies = cached_holds.as_ref().is_some_and(|h| h.is_empty())
            && cached_limits.as_ref().is_some_and(|l| l.is_empty());
        if ask.quick && nothing_applies && herald.store().backend().leases_quickly() {
            return self.lease_quickly(herald, ask, &busy, now, now_ms).await;
        }
        let taken = herald
            .transaction(|tx| {
                let (busy, cursor) = (&busy, cursor.clone());
                let (cached_holds, cached_limits) = (cached_holds.clone(), cached_limits.clone());
                Box::pin(async move {
                    let mut conn = tx.conn();
                    // What a lease could take of one lane: counting more reads for nothing.
                    let lane_most = herald_core::fair::lane_cap(ask.slots)
                        .min(if shared_recently { ask.lane_take_max } else { usize::MAX })
                        .min(if ask.quick { 1 } else { usize::MAX });
                    let due_max = ask.wanted.min(lane_most).max(1);
                    let (found, next_cursor) =
                        walk(conn.reborrow(), ask, now, cursor.as_ref(), due_max).await?;
                    let mut taken = Taken { next_cursor, ..Taken::default() };
                    // An open circuit whose probe is due sends one delivery (the probe); the
                    // lane waits again meanwhile, so no other lease probes it too.
                    let mut probes = Vec::new();
                    let mut due: Vec<DueLane> = Vec::new();
                    for f in found {
                        taken.failing.push((f.lane.clone(), f.failures > 0 || f.disabled));
                        let waiting = f.disabled || f.paused_until_ms.is_some_and(|u| u > now_ms);
                        if f.due > 0 && waiting && !f.disabled {
                            taken.soonest =
                                taken.soonest.min(f.paused_until_ms).or(f.paused_until_ms);
                        }
                        if f.due == 0 || waiting {
                            continue;
                        }
                        let open = f.failures >= ask.circuit.open_after.max(1);
                        if ask.quick && (open || busy.lane(&f.lane) > 0) {
                            continue; // the worker's own leases serve these
                        }
                        if open {
                            probes.push(f.lane.clone());
                        }
                        let due_now = if open { 1 } else { f.due };
                        due.push(DueLane {
                            lane: f.lane,
                            due: due_now,
                            weight: f.weight,
                            room: None,
                        });
                    }
                    // While other lanes have work, a lane takes a small share per lease, so
                    // leases stay short and what arrives elsewhere waits little; alone, it
                    // takes what the batch holds.
                    taken.shared = due.len() >= 2;
                    if taken.shared || shared_recently || ask.quick {
                        let most = if ask.quick { 1 } else { ask.lane_take_max };
                        for d in &mut due {
                            d.due = d.due.min(most);
                        }
                    }
                    if due.is_empty() {
                        return Ok(taken);
                    }
                    let (limits, limits_read) = limits_now(conn.reborrow(), cached_limits).await?;
                    taken.limits_read = limits_read;
                    let mut rooms = Rooms::of(conn.reborrow(), &limits, &mut due, now_ms).await?;
                    let given =
                        allot(ask.wanted, ask.slots, &due, busy, &mut rooms.rooms, last_tenant);
                    let plan: Vec<(Lane, usize)> = due
                        .iter()
                        .zip(&given)
                        .filter(|(_, n)| **n > 0)
                        .map(|(d, n)| (d.lane.clone(), *n))
                        .collect();
                    taken.served = plan.last().map(|(l, _)| l.tenant);
                    if plan.is_empty() {
                        return Ok(taken);
                    }
                    let probe_until = now_ms.saturating_add(ask.lease.as_millis() as i64);
                    for lane in probes.iter().filter(|l| plan.iter().any(|(p, _)| p == *l)) {
                        lane_probe(conn.reborrow(), lane.tenant, &lane.destination, probe_until)
                            .await?;
                    }
                    let lease = LeaseLanes {
                        worker: ask.worker,
                        channels: ask.channels,
                        lanes: &plan,
                        lease: ask.lease,
                        now,
                    };
                    let rows = deliveries_lease_lanes(conn.reborrow(), &lease).await?;
                    let mut per_lane: BTreeMap<Lane, usize> = BTreeMap::new();
                    for row in &rows {
                        *per_lane.entry(lane_of(row)).or_default() += 1;
                    }
                    rooms.spend(conn.reborrow(), &due, &per_lane).await?;
                    let (rows, holds_read) =
                        crate::holds::hold_leased(conn, rows, cached_holds, ask.worker).await?;
                    (taken.rows, taken.holds_read) = (rows, holds_read);
                    Ok(taken)
                })
            })
            .await?
            .value;
        if let Some(read) = taken.holds_read {
            herald.holds.store(read);
        }
        if let Some(read) = taken.limits_read {
            herald.limits.store(read);
        }
        let mut state = self.state.lock().map_err(|_| Error::app("worker lane state poisoned"))?;
        if !ask.quick {
            state.cursor = taken.next_cursor;
            state.wake_at = taken.soonest.map(|at| {
                let after = at.saturating_sub(now_ms).max(0) as u64;
                std::time::Instant::now() + Duration::from_millis(after)
            });
        }
        if taken.shared {
            state.shared_at = Some(std::time::Instant::now());
        }
        for (lane, unhealthy) in taken.failing {
            if unhealthy {
                state.unhealthy.insert(lane);
            } else {
                state.unhealthy.remove(&lane);
            }
        }
        if taken.served.is_some() && !ask.quick {
            state.last_tenant = taken.served;
        }
        Ok(self.slotted(&mut state, taken.rows))
    }

    /// Each leased row with its [`Slot`], counted in flight in its lane.
    fn slotted(
        self: &Arc<Self>,
        state: &mut State,
        rows: Vec<LeasedRow>,
    ) -> Vec<(LeasedRow, Slot)> {
        rows.into_iter()
            .map(|row| {
                let lane = lane_of(&row);
                state.busy.add(&lane);
                (row, Slot { lanes: self.clone(), lane })
            })
            .collect()
    }
}

impl Lanes {
    /// A quick lease in one statement, outside a transaction
    /// ([`herald_store::deliveries::deliveries_lease_quick`]): for a backend that has one,
    /// when no hold and no destination limit exists (the worker's copies of both are fresh
    /// and empty), since the statement applies neither. A lane waiting (paused, disabled,
    /// its circuit open) is left to the worker's other leases, as in [`Lanes::lease`].
    async fn lease_quickly(
        self: &Arc<Self>,
        herald: &Herald,
        ask: &Ask<'_>,
        busy: &Busy,
        now: Now,
        now_ms: i64,
    ) -> Result<Vec<(LeasedRow, Slot)>, Error> {
        let busy: Vec<Lane> = busy.lanes().cloned().collect();
        let quick = QuickLease {
            worker: ask.worker,
            channels: ask.channels,
            busy: &busy,
            room: ask.wanted,
            lanes_max: LEASE_LANES_MAX,
            open_after: ask.circuit.open_after,
            lease: ask.lease,
            now,
            now_ms,
        };
        let rows = herald
            .autocommit(|conn, _| {
                let quick = quick.clone();
                Box::pin(async move { deliveries_lease_quick(conn, &quick).await })
            })
            .await?
            .ok_or_else(|| Error::app("this backend has no one-statement quick lease"))?;
        let mut state = self.state.lock().map_err(|_| Error::app("worker lane state poisoned"))?;
        Ok(self.slotted(&mut state, rows))
    }
}

/// What one lease transaction took, and what it learned for the next.
#[derive(Default)]
struct Taken {
    rows: Vec<LeasedRow>,
    holds_read: Option<Arc<Vec<herald_core::HoldScope>>>,
    limits_read: Option<Arc<Vec<herald_core::fair::Limit>>>,
    next_cursor: Option<Lane>,
    /// Each lane walked, and whether it had failures.
    failing: Vec<(Lane, bool)>,
    /// When the soonest waiting lane with due rows sends again (Unix ms).
    soonest: Option<i64>,
    /// Two lanes or more had due rows.
    shared: bool,
    /// The last tenant given rows.
    served: Option<Uuid>,
}

/// How long after a lease that found other lanes with work a lane still takes only
/// `lane_take_max` rows per lease.
const SHARED_FOR: Duration = Duration::from_secs(1);

impl Lanes {
    /// Whether a lease found two lanes or more with due rows within [`SHARED_FOR`]: lanes
    /// share this worker, so a wake-up during a lease may start a quick one.
    pub(crate) fn shared_recently(&self) -> bool {
        self.state
            .lock()
            .is_ok_and(|state| state.shared_at.is_some_and(|at| at.elapsed() < SHARED_FOR))
    }

    /// When the soonest waiting lane the last walk met may send again: the worker looks
    /// then, not only at its next poll.
    pub(crate) fn wake_at(&self) -> Option<std::time::Instant> {
        self.state.lock().ok().and_then(|state| state.wake_at)
    }

    /// Whether the last walk that met `lane` found failures there, forgetting them: a
    /// send there just worked, and closes the lane's circuit.
    pub(crate) fn healed(&self, lane: &Lane) -> bool {
        self.state.lock().is_ok_and(|mut state| state.unhealthy.remove(lane))
    }
}

/// The lane a leased row belongs to.
pub(crate) fn lane_of(row: &LeasedRow) -> Lane {
    Lane { tenant: row.delivery.tenant_id, destination: row.destination.clone() }
}

/// The lanes after `cursor`, wrapping to the first lanes when the walk reaches the last
/// one before [`LEASE_LANES_MAX`]; and where the next walk starts.
async fn walk(
    mut conn: herald_store::Conn<'_>,
    ask: &Ask<'_>,
    now: Now,
    cursor: Option<&Lane>,
    due_max: usize,
) -> Result<(Vec<LaneFound>, Option<Lane>), herald_store::StoreError> {
    let walk = LanesDue {
        channels: ask.channels,
        now,
        after: cursor,
        lanes_max: LEASE_LANES_MAX,
        due_max,
    };
    let mut found = deliveries_lanes(conn.reborrow(), &walk).await?;
    if let Some(cursor) = cursor
        && found.len() < LEASE_LANES_MAX
    {
        let rest = LanesDue { after: None, lanes_max: LEASE_LANES_MAX - found.len(), ..walk };
        let wrapped = deliveries_lanes(conn, &rest).await?;
        found.extend(wrapped.into_iter().take_while(|f| &f.lane <= cursor));
    }
    let next = (found.len() >= LEASE_LANES_MAX).then(|| found.last().map(|f| f.lane.clone()));
    Ok((found, next.flatten()))
}
