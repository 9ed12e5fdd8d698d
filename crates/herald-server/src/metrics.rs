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
use herald_store::deliveries::{deliveries_count_by_state, oldest_due_age_ms};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Database-backed gauges are recomputed at most this often per process.
pub const GAUGE_REFRESH_EVERY: Duration = Duration::from_secs(10);

/// Tenants shown by the per-tenant series: those with the largest reservations.
pub const TENANT_SERIES_MAX: usize = 1000;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
static LAST_REFRESH: Mutex<Option<Instant>> = Mutex::new(None);
/// Reserved units by tenant as of the last refresh, largest first, at most
/// `TENANT_SERIES_MAX`.
static RESERVED_BY_TENANT: Mutex<Vec<(Uuid, i64)>> = Mutex::new(Vec::new());

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

/// Counts a submit by result: created, duplicate, reused, quota_exhausted, invalid, error.
pub fn submit(result: &'static str) {
    metrics::counter!("herald_submits_total", "result" => result).increment(1);
}

/// Recomputes the database gauges if they are older than `GAUGE_REFRESH_EVERY`
/// (`force` for tests).
pub async fn refresh_gauges(herald: &Herald, force: bool) {
    {
        let mut last = LAST_REFRESH.lock().unwrap_or_else(|e| e.into_inner());
        if !force && last.is_some_and(|at| at.elapsed() < GAUGE_REFRESH_EVERY) {
            return;
        }
        *last = Some(Instant::now());
    }
    let now = herald.clock().now_ms();
    let result = herald
        .read(|mut conn, _| {
            Box::pin(async move {
                let states = deliveries_count_by_state(conn.reborrow()).await?;
                let age = oldest_due_age_ms(conn.reborrow(), now).await?;
                let reserved = herald_store::quota::quota_reserved_by_tenant(conn).await?;
                Ok((states, age, reserved))
            })
        })
        .await;
    match result {
        Ok((states, age, reserved)) => {
            for state in herald::DeliveryState::ALL {
                let n = states.iter().find(|(s, _)| s == state.as_str()).map_or(0, |(_, n)| *n);
                metrics::gauge!("herald_deliveries", "state" => state.as_str()).set(n as f64);
            }
            let age_s = age.map_or(0.0, |ms| ms.max(0) as f64 / 1000.0);
            metrics::gauge!("herald_oldest_due_age_seconds").set(age_s);
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
