//! Prometheus metrics. The engine (the `herald` crate) counts through the `metrics`
//! facade; this module installs the exporter once per process and refreshes the gauges
//! that need the database (deliveries by state, queue age, reserved quota) at most every
//! `GAUGE_REFRESH_EVERY`, not on every scrape.
//!
//! No series in the process-wide recorder carries a tenant id: a tenant id is not public
//! and the number of tenants is unbounded. The series by tenant are kept aside and added
//! to a scrape only where `HERALD_METRICS_PER_TENANT` is set, for at most
//! `TENANT_SERIES_MAX` tenants.

use herald::Herald;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Database-backed gauges are recomputed at most this often per process.
pub const GAUGE_REFRESH_EVERY: Duration = Duration::from_secs(10);

/// Tenants shown by the per-tenant series: those with the largest reservations.
pub const TENANT_SERIES_MAX: usize = 1000;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
static LAST_REFRESH: Mutex<Option<Instant>> = Mutex::new(None);
/// Reserved units by tenant as of the last refresh, largest first, at most
/// `TENANT_SERIES_MAX`.
static RESERVED_BY_TENANT: Mutex<Vec<(herald::TenantId, i64)>> = Mutex::new(Vec::new());

/// The process-wide exporter (installed on first use).
pub fn handle() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| match PrometheusBuilder::new().install_recorder() {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::warn!(error = %e, "metrics exporter not installed");
                None
            }
        })
        .clone()
}

/// Counts a submit by result: created, duplicate, reused, quota_exhausted, invalid, busy
/// (refused by admission control or an empty pool, nothing written), error.
pub fn submit(result: &'static str) {
    metrics::counter!("herald_submits_total", "result" => result).increment(1);
}

/// Recomputes the database gauges if they are older than `GAUGE_REFRESH_EVERY`
/// (`force` for tests).
pub async fn refresh_gauges(herald: &Herald, force: bool) {
    // This process's group commit, fresh on every scrape (no database needed).
    let group = herald.group_commit_stats();
    metrics::gauge!("herald_submits_waiting").set(group.waiting as f64);
    metrics::gauge!("herald_submits_running").set(group.running as f64);
    {
        let mut last = LAST_REFRESH.lock().unwrap_or_else(|e| e.into_inner());
        if !force && last.is_some_and(|at| at.elapsed() < GAUGE_REFRESH_EVERY) {
            return;
        }
        *last = Some(Instant::now());
    }
    match herald.queue_stats().await {
        Ok(stats) => {
            for state in herald::DeliveryState::ALL {
                let n = stats.by_state.iter().find(|(s, _)| *s == state).map_or(0, |(_, n)| *n);
                metrics::gauge!("herald_deliveries", "state" => state.as_str()).set(n as f64);
            }
            let age_s = stats.oldest_due_age.map_or(0.0, |age| age.as_secs_f64());
            metrics::gauge!("herald_oldest_due_age_seconds").set(age_s);
            let reserved = stats.reserved_by_tenant;
            let total = reserved.iter().fold(0i64, |sum, (_, units)| sum.saturating_add(*units));
            metrics::gauge!("herald_quota_reserved").set(total as f64);
            let mut by_tenant = reserved;
            by_tenant.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            by_tenant.truncate(TENANT_SERIES_MAX);
            *RESERVED_BY_TENANT.lock().unwrap_or_else(|e| e.into_inner()) = by_tenant;
        }
        Err(e) => tracing::warn!(error = %e, "metrics gauges not refreshed"),
    }
}

/// The series labelled by tenant id (`HERALD_METRICS_PER_TENANT`), in the Prometheus text
/// format, as of the last refresh. Its own name, so that `herald_quota_reserved` stays
/// one total and `sum(herald_quota_reserved)` counts nothing twice.
pub fn render_per_tenant() -> String {
    let by_tenant = RESERVED_BY_TENANT.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::from("# TYPE herald_quota_reserved_by_tenant gauge\n");
    for (tenant, units) in by_tenant.iter() {
        out.push_str(&format!("herald_quota_reserved_by_tenant{{tenant=\"{tenant}\"}} {units}\n"));
    }
    out
}
