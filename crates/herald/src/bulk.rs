//! Replay or cancel every delivery a filter matches — after an outage, hundreds of failed
//! deliveries at once — with a dry run that only counts. The matches are read in pages
//! (ascending id, no locks) and each is replayed or cancelled exactly as a single call
//! does, in its own transaction: it keeps its id and identity, a replay takes a new
//! reservation, a cancel releases its own. A delivery whose state changed since it was
//! read (or whose account is short) is skipped, never forced.

use crate::error::Error;
use crate::handle::Herald;
use herald_core::hold::destination_of;
use herald_core::{DeliveryState, TenantId};
use herald_store::deliveries::{SelectFilter, deliveries_select};
use jiff::Timestamp;
use std::sync::atomic::{AtomicU64, Ordering};
use uuid::Uuid;

/// Most deliveries one bulk call handles; `BulkReport::more` says when more matched.
pub const BULK_MAX: usize = 10_000;

/// Ids read per page.
const PAGE: usize = 500;

/// Most tenants a bulk call over every tenant goes through.
const TENANTS_MAX: usize = 100_000;

/// Which of a tenant's deliveries a bulk action takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkFilter {
    pub state: Option<DeliveryState>,
    pub channel: Option<String>,
    /// Created at or after.
    pub from: Option<Timestamp>,
    /// Created before.
    pub to: Option<Timestamp>,
    /// The error code of the delivery's latest attempt.
    pub error_code: Option<String>,
    /// Only deliveries to this destination (herald_core::hold::destination_of: a webhook's
    /// host, `smtp` for email), lowercase.
    pub destination: Option<String>,
    /// Only deliveries up to this one (ids are UUIDv7: created no later): what a dry run
    /// reported as its newest match, so a confirmation never takes one created since.
    pub through: Option<herald_core::DeliveryId>,
    /// At most this many matches: what a dry run counted, so a confirmation never does
    /// more than it said (a delivery that came to match since may take the place of one
    /// that no longer does, never add to them).
    pub max: Option<u64>,
}

/// A bulk call's counts so far, read while it runs.
#[derive(Debug, Default)]
pub struct BulkProgress {
    pub matched: AtomicU64,
    pub changed: AtomicU64,
    pub skipped: AtomicU64,
}

impl BulkProgress {
    /// (matched, changed, skipped) so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        (get(&self.matched), get(&self.changed), get(&self.skipped))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkAction {
    Replay,
    Cancel,
}

/// What a bulk call found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Deliveries the filter matched (at most `BULK_MAX`).
    pub matched: u64,
    /// Replayed or cancelled (0 on a dry run).
    pub changed: u64,
    /// Matched, but their state no longer allowed it or their account was short.
    pub skipped: u64,
    /// More than `BULK_MAX` matched: call again for the rest.
    pub more: bool,
    /// The newest delivery matched: pass it as [`BulkFilter::through`] (with
    /// [`BulkFilter::max`] = `matched`) to act on what a dry run counted.
    pub through: Option<herald_core::DeliveryId>,
}

/// The smallest UUIDv7 of millisecond `at`: ids are UUIDv7, so "created at or after `at`"
/// is "id ≥ this".
pub(crate) fn uuid_at(at: Timestamp) -> Uuid {
    let ms = at.as_millisecond().clamp(0, (1 << 48) - 1) as u128;
    Uuid::from_u128(ms << 80)
}

impl Herald {
    /// Replays or cancels the tenant's deliveries that `filter` matches (or, with
    /// `dry_run`, only counts them), up to [`BULK_MAX`].
    pub async fn bulk(
        &self,
        tenant: TenantId,
        action: BulkAction,
        filter: &BulkFilter,
        dry_run: bool,
    ) -> Result<BulkReport, Error> {
        self.bulk_tracked(tenant, action, filter, dry_run, &BulkProgress::default()).await
    }

    /// [`Herald::bulk`], counting into `progress` as it goes (a long one's progress bar).
    pub async fn bulk_tracked(
        &self,
        tenant: TenantId,
        action: BulkAction,
        filter: &BulkFilter,
        dry_run: bool,
        progress: &BulkProgress,
    ) -> Result<BulkReport, Error> {
        if let (Some(from), Some(to)) = (filter.from, filter.to)
            && from >= to
        {
            return Err(Error::invalid("from must be before to"));
        }
        let mut report = BulkReport::default();
        let mut after = None;
        // "Up to `through`" is "before the next id", within the filter's own `to`.
        let through =
            filter.through.map(|t| Uuid::from_u128(t.as_uuid().as_u128().saturating_add(1)));
        let to = match (filter.to.map(uuid_at), through) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let most = filter.max.map_or(BULK_MAX, |m| (m as usize).min(BULK_MAX));
        if most == 0 {
            return Ok(report);
        }
        loop {
            // A destination is read from each row: a page may hold fewer matches than rows.
            let want = match filter.destination {
                Some(_) => PAGE + 1,
                None => (most - report.matched as usize).min(PAGE) + 1,
            };
            let select = SelectFilter {
                tenant: tenant.as_uuid(),
                state: filter.state,
                channel: filter.channel.as_deref(),
                from: filter.from.map(uuid_at),
                to,
                error_code: filter.error_code.as_deref(),
                after,
                limit: want,
            };
            let mut rows = self
                .read(|conn, _| Box::pin(async move { deliveries_select(conn, &select).await }))
                .await?;
            let full = rows.len() == want;
            if full {
                rows.pop();
            }
            after = rows.last().map(|r| r.id);
            for row in rows {
                if let Some(destination) = &filter.destination
                    && destination_of(&row.channel, &row.recipient) != *destination
                {
                    continue;
                }
                if report.matched as usize >= most {
                    // Past a confirmation's bound there is nothing more it asked for.
                    report.more = most == BULK_MAX && filter.max.is_none();
                    return Ok(report);
                }
                report.matched += 1;
                progress.matched.fetch_add(1, Ordering::Relaxed);
                report.through = Some(herald_core::DeliveryId::from_uuid(row.id));
                if dry_run {
                    continue;
                }
                let id = herald_core::DeliveryId::from_uuid(row.id);
                let done = match action {
                    BulkAction::Replay => self.replay(tenant, id).await.map(drop),
                    BulkAction::Cancel => self.cancel(tenant, id).await.map(drop),
                };
                match done {
                    Ok(()) => {
                        report.changed += 1;
                        progress.changed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(
                        Error::WrongState { .. } | Error::QuotaExhausted { .. } | Error::NotFound,
                    ) => {
                        report.skipped += 1;
                        progress.skipped.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => return Err(e),
                }
            }
            if !full {
                return Ok(report);
            }
            if report.matched as usize >= most && filter.destination.is_none() {
                report.more = most == BULK_MAX && filter.max.is_none();
                return Ok(report);
            }
        }
    }

    /// [`Herald::bulk`] over every tenant (the admin's incident console): the tenants one
    /// after another, `filter.max` and `BULK_MAX` bounding the whole, `through` the newest
    /// match of any tenant (ids are UUIDv7, so it bounds every tenant's alike).
    pub async fn bulk_all_tenants(
        &self,
        action: BulkAction,
        filter: &BulkFilter,
        dry_run: bool,
    ) -> Result<BulkReport, Error> {
        self.bulk_all_tenants_tracked(action, filter, dry_run, &BulkProgress::default()).await
    }

    /// [`Herald::bulk_all_tenants`], counting into `progress` as it goes.
    pub async fn bulk_all_tenants_tracked(
        &self,
        action: BulkAction,
        filter: &BulkFilter,
        dry_run: bool,
        progress: &BulkProgress,
    ) -> Result<BulkReport, Error> {
        let mut total = BulkReport::default();
        let most = filter.max.map_or(BULK_MAX as u64, |m| m.min(BULK_MAX as u64));
        for (tenant, _) in self.tenants(TENANTS_MAX).await? {
            let left = most - total.matched;
            if left == 0 {
                total.more = filter.max.is_none() && total.matched as usize == BULK_MAX;
                break;
            }
            let narrowed = BulkFilter { max: Some(left), ..filter.clone() };
            let r = self.bulk_tracked(tenant, action, &narrowed, dry_run, progress).await?;
            total.matched += r.matched;
            total.changed += r.changed;
            total.skipped += r.skipped;
            total.more |= r.more;
            total.through = total.through.max(r.through);
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_bound_is_the_smallest_uuid_of_its_millisecond() {
        let at = Timestamp::from_millisecond(1_700_000_000_123).unwrap_or(Timestamp::UNIX_EPOCH);
        let bound = uuid_at(at);
        let ms = |u: Uuid| (u.as_u128() >> 80) as i64;
        assert_eq!(ms(bound), 1_700_000_000_123);
        assert!(bound.as_u128() & ((1u128 << 80) - 1) == 0);
        let before = uuid_at(Timestamp::now());
        assert!(before <= Uuid::now_v7(), "an id made after a time is at or above its bound");
        assert_eq!(uuid_at(Timestamp::UNIX_EPOCH), Uuid::nil());
    }
}
