//! Fair sending: how a worker shares its free send slots among the work that is due.
//!
//! A **lane** is one tenant's deliveries to one destination ([`crate::hold::destination_of`]).
//! The lease no longer takes the oldest due rows of the whole database, which let one
//! tenant's backlog (or one slow receiver) hold every slot: it finds the lanes with due
//! work and [`allot`]s the free slots among them —
//!
//! - **tenants first, by turns**: the tenant with the fewest sends in flight in this worker
//!   picks first; each round gives every tenant its weight in slots (`send_weight`,
//!   1 by default), so a tenant with one due delivery gets a slot as soon as one is free,
//!   however deep another's backlog;
//! - **then its lanes, by turns**, so one slow destination of a tenant does not hold back
//!   its others;
//! - **never the whole worker**: a tenant holds at most [`tenant_cap`] of the worker's
//!   slots, and a lane at most [`lane_cap`], so a receiver that answers slowly (or hangs
//!   until the send timeout) always leaves slots for everyone else;
//! - **within the destination's limits** (`herald_destination_limits`: sends in flight and
//!   sends per second across every process), given as each lane's `room`.
//!
//! Rows over a cap or a limit stay pending and due; no attempt is spent on them.

use std::collections::HashMap;
use std::time::Duration;
use uuid::Uuid;

/// One tenant's deliveries to one destination.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane {
    pub tenant: Uuid,
    pub destination: String,
}

/// A lane with due work, as the lease found it.
#[derive(Debug, Clone, PartialEq)]
pub struct DueLane {
    pub lane: Lane,
    /// Due rows found (the lease counts at most as many as it could take).
    pub due: usize,
    /// The tenant's share against other tenants (1 to 100).
    pub weight: u32,
    /// Which of the `rooms` given to [`allot`] bounds this lane (a destination limit
    /// shared by the lanes it covers), `None` when no limit applies.
    pub room: Option<usize>,
}

/// The sends a worker has in flight, per lane and per tenant.
#[derive(Debug, Default, Clone)]
pub struct Busy {
    lanes: HashMap<Lane, usize>,
    tenants: HashMap<Uuid, usize>,
}

impl Busy {
    pub fn add(&mut self, lane: &Lane) {
        *self.lanes.entry(lane.clone()).or_default() += 1;
        *self.tenants.entry(lane.tenant).or_default() += 1;
    }

    pub fn remove(&mut self, lane: &Lane) {
        if let Some(n) = self.lanes.get_mut(lane) {
            *n -= 1;
            if *n == 0 {
                self.lanes.remove(lane);
            }
        }
        if let Some(n) = self.tenants.get_mut(&lane.tenant) {
            *n -= 1;
            if *n == 0 {
                self.tenants.remove(&lane.tenant);
            }
        }
    }

    pub fn lane(&self, lane: &Lane) -> usize {
        self.lanes.get(lane).copied().unwrap_or(0)
    }

    pub fn tenant(&self, tenant: Uuid) -> usize {
        self.tenants.get(&tenant).copied().unwrap_or(0)
    }

    /// The lanes with sends in flight.
    pub fn lanes(&self) -> impl Iterator<Item = &Lane> {
        self.lanes.keys()
    }
}

/// The most of a worker's `slots` one tenant may hold: all but a quarter of them (at
/// least one is kept for the others, when there are two or more).
pub const fn tenant_cap(slots: usize) -> usize {
    let quarter = if slots / 4 == 0 { 1 } else { slots / 4 };
    if slots <= 1 { slots } else { slots - quarter }
}

/// The most of a worker's `slots` one lane may hold: a tenant's cap of the tenant's cap,
/// so a tenant's other destinations keep a share of its own.
pub const fn lane_cap(slots: usize) -> usize {
    tenant_cap(tenant_cap(slots))
}

/// How many rows of each of `due`'s lanes to lease now, `free` slots in all, for a worker
/// of `slots` slots with `busy` in flight. `rooms[i]`: sends a destination limit still
/// allows (spent here as lanes get rows). `first`: the tenant to start after among those
/// equally busy (the one served first last time), so turns rotate between leases.
pub fn allot(
    free: usize,
    slots: usize,
    due: &[DueLane],
    busy: &Busy,
    rooms: &mut [usize],
    after: Option<Uuid>,
) -> Vec<usize> {
    let mut given = vec![0usize; due.len()];
    let (tenant_max, lane_max) = (tenant_cap(slots), lane_cap(slots));
    // Tenants in the order they are served: fewest in flight first; among equals, the
    // lanes' order rotated to start after `after`.
    let mut tenants: Vec<(Uuid, Vec<usize>)> = Vec::new();
    for (i, d) in due.iter().enumerate() {
        match tenants.iter_mut().find(|(t, _)| *t == d.lane.tenant) {
            Some((_, lanes)) => lanes.push(i),
            None => tenants.push((d.lane.tenant, vec![i])),
        }
    }
    if let Some(pos) = after.and_then(|a| tenants.iter().position(|(t, _)| *t == a)) {
        tenants.rotate_left(pos + 1);
    }
    tenants.sort_by_key(|(t, _)| busy.tenant(*t));
    let mut next_lane = vec![0usize; tenants.len()];
    let mut tenant_given = vec![0usize; tenants.len()];
    let mut left = free;
    while left > 0 {
        let mut progress = false;
        for (ti, (tenant, lanes)) in tenants.iter().enumerate() {
            let weight = lanes.first().map_or(1, |&i| due[i].weight.max(1)) as usize;
            for _ in 0..weight {
                if left == 0 || busy.tenant(*tenant) + tenant_given[ti] >= tenant_max {
                    break;
                }
                let open = (0..lanes.len()).map(|k| (next_lane[ti] + k) % lanes.len()).find(|&k| {
                    let i = lanes[k];
                    let d = &due[i];
                    given[i] < d.due
                        && busy.lane(&d.lane) + given[i] < lane_max
                        && d.room.is_none_or(|r| rooms.get(r).is_some_and(|&n| n > 0))
                });
                let Some(k) = open else { break };
                let i = lanes[k];
                given[i] += 1;
                tenant_given[ti] += 1;
                if let Some(r) = due[i].room
                    && let Some(n) = rooms.get_mut(r)
                {
                    *n -= 1;
                }
                next_lane[ti] = (k + 1) % lanes.len();
                left -= 1;
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    given
}

/// A destination's limit, across every process on the database: at most `max_in_flight`
/// sends at once and `per_second` started per second (a token bucket holding one second's
/// worth, at least one token). `destination` `*` is the default of every destination
/// without a limit of its own (each destination counted apart); `tenant` narrows it to
/// that tenant's sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub destination: String,
    pub tenant: Option<Uuid>,
    pub max_in_flight: Option<u32>,
    pub per_second: Option<f64>,
}

/// The destination of a limit that is every destination's default.
pub const ANY_DESTINATION: &str = "*";
/// The most sends in flight a limit may allow.
pub const IN_FLIGHT_MAX: u32 = 100_000;
/// The highest rate a limit may allow, per second.
pub const PER_SECOND_MAX: f64 = 1_000_000.0;

impl Limit {
    /// Checks a limit as an operator gives it: a destination (or `*`), and at least one of
    /// `max_in_flight` (1 to [`IN_FLIGHT_MAX`]) and `per_second` (above 0, at most
    /// [`PER_SECOND_MAX`]). Returns it with the destination as stored.
    pub fn checked(mut self) -> Result<Limit, String> {
        if self.destination.trim() != ANY_DESTINATION {
            self.destination = crate::hold::check_destination(&self.destination)?;
        } else {
            self.destination = ANY_DESTINATION.to_string();
        }
        if self.max_in_flight.is_none() && self.per_second.is_none() {
            return Err("a limit sets max_in_flight, per_second or both".to_string());
        }
        if self.max_in_flight.is_some_and(|n| !(1..=IN_FLIGHT_MAX).contains(&n)) {
            return Err(format!("max_in_flight must be 1 to {IN_FLIGHT_MAX}"));
        }
        if self.per_second.is_some_and(|r| !(r > 0.0 && r <= PER_SECOND_MAX)) {
            return Err(format!("per_second must be above 0 and at most {PER_SECOND_MAX}"));
        }
        Ok(self)
    }

    /// A token bucket's size: one second's worth, at least one.
    pub fn bucket(&self) -> Option<f64> {
        self.per_second.map(|r| r.max(1.0))
    }
}

/// The limit that governs `lane`, the most specific first: the lane's tenant's own for its
/// destination, every tenant's for it, the default for its tenant, the default for all.
pub fn limit_for<'a>(limits: &'a [Limit], lane: &Lane) -> Option<&'a Limit> {
    let find = |destination: &str, tenant: Option<Uuid>| {
        limits.iter().find(|l| l.destination == destination && l.tenant == tenant)
    };
    find(&lane.destination, Some(lane.tenant))
        .or_else(|| find(&lane.destination, None))
        .or_else(|| find(ANY_DESTINATION, Some(lane.tenant)))
        .or_else(|| find(ANY_DESTINATION, None))
}

/// A bucket's tokens at `now_ms`, refilled at `per_second` from `tokens` at `then_ms`, up
/// to `full`.
pub fn refill(tokens: f64, then_ms: i64, now_ms: i64, per_second: f64, full: f64) -> f64 {
    let elapsed = (now_ms.saturating_sub(then_ms)).max(0) as f64 / 1000.0;
    (tokens + elapsed * per_second).min(full).max(0.0)
}

/// A lane's health, as stored (`herald_lanes`): a healthy lane has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaneHealth {
    /// The lane sends again from this instant (Unix ms): after a receiver's Retry-After, or
    /// at an open circuit's next probe.
    pub until_ms: i64,
    /// Consecutive failed sends (transient: timeouts, 5xx, refused connections).
    pub failures: u32,
    /// When the first of them happened.
    pub failing_since_ms: Option<i64>,
    /// An open circuit's current probe interval.
    pub probe_ms: Option<i64>,
    /// When the circuit's current wait began (it opened, or its last probe failed): a send
    /// that started before then was in flight as it opened, and its failure changes no
    /// schedule.
    pub opened_ms: Option<i64>,
    /// When the circuit was disabled (failing for [`CircuitPolicy::disable_after`]).
    pub disabled_ms: Option<i64>,
}

/// Where a disabled lane's `until_ms` stands: far past every time herald judges.
pub const DISABLED_UNTIL_MS: i64 = i64::MAX / 4;

/// What a failure did to a lane's circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitChange {
    /// Still closed (fewer failures than [`CircuitPolicy::open_after`]), or open already.
    None,
    /// The circuit opened: the lane waits for its first probe.
    Opened,
    /// The lane has failed for [`CircuitPolicy::disable_after`]: it waits until an
    /// operator or its tenant enables it again.
    Disabled,
}

/// When a lane's circuit opens, how it is probed, when it is disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitPolicy {
    /// Consecutive failures that open the circuit (`HERALD_CIRCUIT_FAILURES`, 5).
    pub open_after: u32,
    /// The first probe's wait after the circuit opens; each failed probe doubles it
    /// (`HERALD_CIRCUIT_PROBE`, 30 s) ...
    pub probe_first: Duration,
    /// ... up to this (1 hour).
    pub probe_max: Duration,
    /// Failing this long disables the lane (`HERALD_CIRCUIT_DISABLE_AFTER`, 5 days: Svix's
    /// rule).
    pub disable_after: Duration,
}

impl Default for CircuitPolicy {
    fn default() -> Self {
        CircuitPolicy {
            open_after: 5,
            probe_first: Duration::from_secs(30),
            probe_max: Duration::from_secs(3600),
            disable_after: Duration::from_secs(5 * 24 * 3600),
        }
    }
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

impl CircuitPolicy {
    /// Whether a lane with this health has its circuit open (or disabled).
    pub fn is_open(&self, h: &LaneHealth) -> bool {
        h.disabled_ms.is_some() || h.failures >= self.open_after.max(1)
    }

    /// The health after one more failed send, started at `started_ms`, failing at `now_ms`.
    pub fn failed(
        &self,
        mut h: LaneHealth,
        started_ms: i64,
        now_ms: i64,
    ) -> (LaneHealth, CircuitChange) {
        if h.disabled_ms.is_some() {
            return (h, CircuitChange::None);
        }
        h.failures = h.failures.saturating_add(1);
        if h.opened_ms.is_some_and(|opened| started_ms < opened) {
            // In flight as the circuit opened (or before the last probe): not a probe.
            return (h, CircuitChange::None);
        }
        let since = *h.failing_since_ms.get_or_insert(now_ms);
        if h.failures < self.open_after.max(1) {
            return (h, CircuitChange::None);
        }
        if now_ms.saturating_sub(since) >= ms(self.disable_after) {
            h.disabled_ms = Some(now_ms);
            h.until_ms = DISABLED_UNTIL_MS;
            return (h, CircuitChange::Disabled);
        }
        let opened = h.probe_ms.is_none();
        let probe = match h.probe_ms {
            None => ms(self.probe_first),
            Some(p) => p.saturating_mul(2).min(ms(self.probe_max)),
        }
        .max(1);
        h.probe_ms = Some(probe);
        h.opened_ms = Some(now_ms);
        // From now: this replaces the wait a lease set while its probe was out.
        h.until_ms = now_ms.saturating_add(probe);
        (h, if opened { CircuitChange::Opened } else { CircuitChange::None })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn lane(t: u128, d: &str) -> Lane {
        Lane { tenant: Uuid::from_u128(t), destination: d.to_string() }
    }

    fn due(t: u128, d: &str, n: usize) -> DueLane {
        DueLane { lane: lane(t, d), due: n, weight: 1, room: None }
    }

    #[test]
    fn caps_keep_a_quarter_of_the_slots_for_the_others() {
        assert_eq!(tenant_cap(8), 6);
        assert_eq!(lane_cap(8), 5);
        assert_eq!(tenant_cap(16), 12);
        assert_eq!(lane_cap(16), 9);
        assert_eq!((tenant_cap(1), lane_cap(1)), (1, 1));
        assert_eq!((tenant_cap(2), lane_cap(2)), (1, 1));
        assert_eq!(tenant_cap(0), 0);
    }

    #[test]
    fn one_tenant_alone_takes_its_cap_not_the_worker() {
        let given = allot(16, 16, &[due(1, "slow", 64)], &Busy::default(), &mut [], None);
        assert_eq!(given, vec![lane_cap(16)]);
    }

    #[test]
    fn a_tenant_with_one_due_delivery_gets_the_next_free_slot() {
        let mut busy = Busy::default();
        for _ in 0..5 {
            busy.add(&lane(1, "slow"));
        }
        let lanes = [due(1, "slow", 59), due(2, "fast", 1)];
        assert_eq!(allot(1, 8, &lanes, &busy, &mut [], None), vec![0, 1]);
        // Two free: the slow lane is at its cap (5 of 8); the other tenant takes its one.
        assert_eq!(allot(3, 8, &lanes, &busy, &mut [], None), vec![0, 1]);
    }

    #[test]
    fn tenants_take_turns_by_weight_and_lanes_within_a_tenant_take_turns() {
        let mut lanes = [due(1, "a", 100), due(1, "b", 100), due(2, "c", 100)];
        lanes[2].weight = 3;
        let given = allot(8, 64, &lanes, &Busy::default(), &mut [], None);
        assert_eq!(given, vec![1, 1, 6]);
        let given = allot(40, 64, &lanes, &Busy::default(), &mut [], None);
        assert_eq!(given.iter().sum::<usize>(), 40);
        assert_eq!(given[0], given[1]);
        assert_eq!(given[2], 30);
    }

    #[test]
    fn the_least_busy_tenant_picks_first_and_turns_rotate_among_equals() {
        let lanes = [due(1, "a", 10), due(2, "b", 10)];
        assert_eq!(allot(1, 8, &lanes, &Busy::default(), &mut [], None), vec![1, 0]);
        let after = Some(Uuid::from_u128(1));
        assert_eq!(allot(1, 8, &lanes, &Busy::default(), &mut [], after), vec![0, 1]);
        let mut busy = Busy::default();
        busy.add(&lane(2, "b"));
        assert_eq!(allot(1, 8, &lanes, &busy, &mut [], after), vec![1, 0]);
        busy.remove(&lane(2, "b"));
        assert_eq!(busy.tenant(Uuid::from_u128(2)), 0);
    }

    #[test]
    fn a_destination_limit_is_shared_by_the_lanes_it_covers() {
        let mut lanes = [due(1, "h", 10), due(2, "h", 10), due(3, "other", 10)];
        lanes[0].room = Some(0);
        lanes[1].room = Some(0);
        let mut rooms = [3];
        let given = allot(12, 64, &lanes, &Busy::default(), &mut rooms, None);
        assert_eq!(given[0] + given[1], 3);
        assert_eq!(given[2], 9);
        assert_eq!(rooms, [0]);
    }

    #[test]
    fn the_most_specific_limit_governs_a_lane() {
        let t = Uuid::from_u128(7);
        let limit = |d: &str, tenant: Option<Uuid>, n: u32| Limit {
            destination: d.to_string(),
            tenant,
            max_in_flight: Some(n),
            per_second: None,
        };
        let all = [
            limit("*", None, 1),
            limit("*", Some(t), 2),
            limit("h", None, 3),
            limit("h", Some(t), 4),
        ];
        let n = |limits: &[Limit], l: &Lane| limit_for(limits, l).and_then(|l| l.max_in_flight);
        assert_eq!(n(&all, &lane(7, "h")), Some(4));
        assert_eq!(n(&all, &lane(8, "h")), Some(3));
        assert_eq!(n(&all, &lane(7, "other")), Some(2));
        assert_eq!(n(&all, &lane(8, "other")), Some(1));
        assert_eq!(n(&all[2..3], &lane(8, "other")), None);
    }

    #[test]
    fn limits_are_checked_and_buckets_refill_to_one_second() {
        let limit = Limit {
            destination: " Hooks.Example.com ".into(),
            tenant: None,
            max_in_flight: None,
            per_second: Some(0.5),
        };
        let checked = limit.clone().checked().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (checked.destination.as_str(), checked.bucket()),
            ("hooks.example.com", Some(1.0))
        );
        assert!(Limit { per_second: None, ..limit.clone() }.checked().is_err());
        assert!(Limit { per_second: Some(0.0), ..limit.clone() }.checked().is_err());
        assert!(Limit { per_second: Some(f64::NAN), ..limit.clone() }.checked().is_err());
        assert!(Limit { max_in_flight: Some(0), ..limit.clone() }.checked().is_err());
        assert!(Limit { destination: "a b".into(), ..limit }.checked().is_err());
        assert_eq!(refill(0.0, 0, 500, 10.0, 10.0), 5.0);
        assert_eq!(refill(9.0, 0, 60_000, 10.0, 10.0), 10.0);
        assert_eq!(refill(3.0, 1_000, 0, 10.0, 10.0), 3.0, "a clock that went back adds nothing");
    }

    #[test]
    fn a_circuit_opens_after_its_failures_probes_later_each_time_and_disables() {
        let p = CircuitPolicy {
            open_after: 3,
            probe_first: Duration::from_secs(1),
            probe_max: Duration::from_secs(3),
            disable_after: Duration::from_secs(10),
        };
        let (mut h, mut changes) = (LaneHealth::default(), Vec::new());
        for at in [0, 100, 200, 1_300, 3_400, 6_500, 10_100] {
            let (next, change) = p.failed(h, at - 10, at);
            h = next;
            changes.push((change, h.until_ms, p.is_open(&h)));
        }
        assert_eq!(
            changes,
            [
                (CircuitChange::None, 0, false),
                (CircuitChange::None, 0, false),
                (CircuitChange::Opened, 1_200, true),
                (CircuitChange::None, 3_300, true),
                (CircuitChange::None, 6_400, true),
                (CircuitChange::None, 9_500, true),
                (CircuitChange::Disabled, DISABLED_UNTIL_MS, true),
            ]
        );
        assert_eq!(p.failed(h, 20_000, 20_000).1, CircuitChange::None, "disabled stays disabled");
        // Sends in flight as the circuit opened fail without moving its probe.
        let (open, _) = p.failed(LaneHealth { failures: 2, ..LaneHealth::default() }, 0, 500);
        let (later, change) = p.failed(open, 400, 600);
        assert_eq!(
            (later.until_ms, later.failures, change),
            (open.until_ms, 4, CircuitChange::None)
        );
    }

    #[test]
    fn never_more_than_due_or_free() {
        let lanes = [due(1, "a", 2), due(2, "b", 1)];
        assert_eq!(allot(100, 100, &lanes, &Busy::default(), &mut [], None), vec![2, 1]);
        assert_eq!(allot(0, 100, &lanes, &Busy::default(), &mut [], None), vec![0, 0]);
    }
}
