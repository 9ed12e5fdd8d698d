//! What is failing, at a glance (the incident console): the deliveries that failed within
//! a window and those pending after an attempt, grouped by destination, error code, tenant
//! and channel, each group with its counts and when it was first and last seen.
//!
//! Read from two bounded index reads ([`FAILING_READ_MAX`] rows each), so the answer is
//! the recent failures, never a scan of history; `truncated` says when there were more.

use crate::error::Error;
use crate::handle::Herald;
use herald_core::TenantId;
use herald_core::hold::destination_of;
use herald_store::deliveries::{FailingRow, deliveries_failing};
use herald_store::holds::HELD_DUE_MS;
use std::collections::HashMap;
use std::time::Duration;

/// Rows read per part (failed, retrying).
pub const FAILING_READ_MAX: usize = 5_000;

/// One group: a destination, an error code, a tenant or a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureGroup {
    pub key: String,
    /// Failed for good within the window.
    pub failed: u64,
    /// Pending after a failed attempt (retrying, or held).
    pub retrying: u64,
    /// Of those, held (an operator's pause).
    pub held: u64,
    /// The latest attempts' earliest and latest ends (Unix ms).
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
    /// The most frequent error code in the group.
    pub top_error: Option<String>,
    /// Tenants in the group.
    pub tenants: u64,
}

/// The groups, largest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failures {
    pub destinations: Vec<FailureGroup>,
    pub errors: Vec<FailureGroup>,
    pub tenants: Vec<FailureGroup>,
    pub channels: Vec<FailureGroup>,
    /// Rows read.
    pub examined: usize,
    /// A part hit [`FAILING_READ_MAX`]: older failures are not counted.
    pub truncated: bool,
}

#[derive(Default)]
struct Acc {
    failed: u64,
    retrying: u64,
    held: u64,
    first_ms: Option<i64>,
    last_ms: Option<i64>,
    errors: HashMap<String, u64>,
    tenants: std::collections::HashSet<uuid::Uuid>,
}

impl Acc {
    fn add(&mut self, row: &FailingRow) {
        if row.state == "failed" {
            self.failed += 1;
        } else {
            self.retrying += 1;
            self.held += u64::from(row.next_attempt_at == HELD_DUE_MS);
        }
        if let Some(at) = row.finished_at {
            self.first_ms = Some(self.first_ms.map_or(at, |f| f.min(at)));
            self.last_ms = Some(self.last_ms.map_or(at, |l| l.max(at)));
        }
        *self.errors.entry(row.error_code.clone().unwrap_or_else(|| "-".into())).or_default() += 1;
        self.tenants.insert(row.tenant_id);
    }

    fn group(self, key: String) -> FailureGroup {
        let top_error = self
            .errors
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|(code, _)| code);
        FailureGroup {
            key,
            failed: self.failed,
            retrying: self.retrying,
            held: self.held,
            first_ms: self.first_ms,
            last_ms: self.last_ms,
            top_error,
            tenants: self.tenants.len() as u64,
        }
    }
}

fn grouped(map: HashMap<String, Acc>) -> Vec<FailureGroup> {
    let mut groups: Vec<FailureGroup> = map.into_iter().map(|(k, acc)| acc.group(k)).collect();
    groups.sort_by(|a, b| {
        (b.failed + b.retrying).cmp(&(a.failed + a.retrying)).then_with(|| a.key.cmp(&b.key))
    });
    groups
}

impl Herald {
    /// What is failing for `tenant` (or every tenant): failed within `window`, or pending
    /// after a failed attempt.
    pub async fn failures(
        &self,
        tenant: Option<TenantId>,
        window: Duration,
    ) -> Result<Failures, Error> {
        let since = self.clock().wall_ms() - window.as_millis() as i64;
        let tenant_uuid = tenant.map(|t| t.as_uuid());
        let rows = self
            .read(|conn, _| {
                Box::pin(async move {
                    deliveries_failing(conn, tenant_uuid, since, FAILING_READ_MAX).await
                })
            })
            .await?;
        let failed = rows.iter().filter(|r| r.state == "failed").count();
        let truncated = failed >= FAILING_READ_MAX || rows.len() - failed >= FAILING_READ_MAX;
        let mut by_destination: HashMap<String, Acc> = HashMap::new();
        let mut by_error: HashMap<String, Acc> = HashMap::new();
        let mut by_tenant: HashMap<String, Acc> = HashMap::new();
        let mut by_channel: HashMap<String, Acc> = HashMap::new();
        for row in &rows {
            by_destination
                .entry(destination_of(&row.channel, &row.recipient))
                .or_default()
                .add(row);
            let code = row.error_code.clone().unwrap_or_else(|| "-".into());
            by_error.entry(code).or_default().add(row);
            by_tenant.entry(row.tenant_id.to_string()).or_default().add(row);
            by_channel.entry(row.channel.clone()).or_default().add(row);
        }
        Ok(Failures {
            destinations: grouped(by_destination),
            errors: grouped(by_error),
            tenants: grouped(by_tenant),
            channels: grouped(by_channel),
            examined: rows.len(),
            truncated,
        })
    }
}
