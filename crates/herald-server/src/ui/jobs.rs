//! The dashboard's long actions: a confirmed bulk replay or cancel runs as a task of the
//! server, and the page reads its progress (`GET /ui/api/bulk/{job}`) until it is done.
//! Jobs live in this process only: a restart ends them where they were (what they did is
//! done, each delivery in its own transaction; the rest can be counted and confirmed
//! again). Finished jobs are forgotten after [`JOB_KEPT`].

use crate::error::{ApiError, ApiResult};
use crate::wire::BulkResult;
use herald::{BulkProgress, TenantId};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a finished job's result stays readable.
pub const JOB_KEPT: Duration = Duration::from_secs(600);
/// Most jobs kept at once (running or finished); past it a new one is refused.
pub const JOBS_MAX: usize = 100;

/// One running or finished job.
#[derive(Debug)]
pub struct Job {
    /// The tenant whose session started it (`None`: the admin's); only it, or the admin,
    /// reads it.
    owner: Option<TenantId>,
    pub progress: BulkProgress,
    /// What the dry run counted: the most it will match.
    expected: u64,
    ended: Mutex<Option<(Instant, Result<BulkResult, String>)>>,
}

/// The jobs of this process.
#[derive(Debug, Default)]
pub struct Jobs {
    jobs: Mutex<HashMap<String, Arc<Job>>>,
}

impl Jobs {
    /// A new job's id and handle, or `busy` when [`JOBS_MAX`] are kept.
    pub fn start(&self, owner: Option<TenantId>, expected: u64) -> ApiResult<(String, Arc<Job>)> {
        let mut jobs = self.jobs.lock().map_err(|_| ApiError::internal())?;
        jobs.retain(|_, j| {
            j.ended
                .lock()
                .map_or(true, |e| e.as_ref().is_none_or(|(at, _)| at.elapsed() < JOB_KEPT))
        });
        if jobs.len() >= JOBS_MAX {
            return Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "too many bulk actions at once; wait for one to finish",
            ));
        }
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|_| ApiError::internal())?;
        let id = herald_core::hex(&bytes);
        let job = Arc::new(Job {
            owner,
            progress: BulkProgress::default(),
            expected,
            ended: Mutex::new(None),
        });
        jobs.insert(id.clone(), job.clone());
        Ok((id, job))
    }

    /// The job `id` as `reader` (a tenant, or `None`: the admin) may see it.
    pub fn get(&self, id: &str, reader: Option<TenantId>) -> ApiResult<Arc<Job>> {
        let jobs = self.jobs.lock().map_err(|_| ApiError::internal())?;
        match jobs.get(id) {
            Some(job) if reader.is_none() || reader == job.owner => Ok(job.clone()),
            _ => Err(ApiError::not_found("job")),
        }
    }
}

impl Job {
    pub fn finish(&self, result: Result<BulkResult, String>) {
        if let Ok(mut ended) = self.ended.lock() {
            *ended = Some((Instant::now(), result));
        }
    }

    /// What the page shows: the counts so far, and the result once done.
    pub fn view(&self) -> Value {
        let (matched, changed, skipped) = self.progress.counts();
        let ended = self.ended.lock().ok().and_then(|e| e.as_ref().map(|(_, r)| r.clone()));
        json!({
            "expected": self.expected,
            "matched": matched,
            "changed": changed,
            "skipped": skipped,
            "done": ended.is_some(),
            "result": ended.as_ref().and_then(|r| r.as_ref().ok()),
            "error": ended.as_ref().and_then(|r| r.as_ref().err()),
        })
    }
}
