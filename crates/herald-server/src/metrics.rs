//! Prometheus metrics. The engine (the `herald` crate) counts through the `metrics`
//! facade; this module installs the exporter once per process and refreshes the gauges
//! that need the database (deliveries by state, queue age, reserved quota) at most every
//! `GAUGE_REFRESH_EVERY`, not on every scrape.

use herald::Herald;
use herald_store::deliveries::{deliveries_count_by_state, oldest_due_age_ms};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Database-backed gauges are recomputed at most this often per process.
pub const GAUGE_REFRESH_EVERY: Duration = Duration::from_secs(10);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
static LAST_REFRESH: Mutex<Option<Instant>> = Mutex::new(None);

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
        .transaction(|tx| {
            Box::pin(async move {
                let states = deliveries_count_by_state(tx.conn()).await?;
                let age = oldest_due_age_ms(tx.conn(), now).await?;
                let reserved = herald_store::quota::quota_reserved_by_tenant(tx.conn()).await?;
                Ok((states, age, reserved))
            })
        })
        .await;
    match result {
        Ok(c) => {
            let (states, age, reserved) = c.value;
            for state in herald::DeliveryState::ALL {
                let n = states.iter().find(|(s, _)| s == state.as_str()).map_or(0, |(_, n)| *n);
                metrics::gauge!("herald_deliveries", "state" => state.as_str()).set(n as f64);
            }
            let age_s = age.map_or(0.0, |ms| ms.max(0) as f64 / 1000.0);
            metrics::gauge!("herald_oldest_due_age_seconds").set(age_s);
            for (tenant, units) in reserved {
                metrics::gauge!("herald_quota_reserved", "tenant" => tenant.to_string())
                    .set(units as f64);
            }
        }
        Err(e) => tracing::warn!(error = %e, "metrics gauges not refreshed"),
    }
}
