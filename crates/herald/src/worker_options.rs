//! A worker's settings ([`WorkerOptions`]), each with a documented default, and the checks
//! that keep them consistent: above all, a send ends before its lease does.

use crate::error::Error;
use herald_core::RetryPolicy;
use herald_core::limits::{
    LANE_TAKE_MAX_DEFAULT, LEASE_DEFAULT, LEASE_SAFETY_MARGIN, POLL_INTERVAL_DEFAULT,
    RELEASE_LEN_MAX, SEND_TIMEOUT_DEFAULT, SHUTDOWN_GRACE_DEFAULT, WORKER_ID_LEN_MAX,
    WORKER_SLOTS_DEFAULT, WORKER_SLOTS_MAX,
};
use std::net::SocketAddr;
use std::time::Duration;

/// The release a worker records when `HERALD_RELEASE` does not say: herald's version.
pub const RELEASE_DEFAULT: &str = env!("CARGO_PKG_VERSION");

/// Worker settings; every field has a documented default.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// This worker's lease-owner name; unique per process.
    pub id: String,
    /// The release this process runs (`HERALD_RELEASE`; default herald's version),
    /// recorded once for the worker id before its first lease: every attempt names its
    /// worker, so every attempt's release is known. A worker id already recorded with
    /// another release is refused (it would relabel that release's attempts).
    pub release: String,
    /// Concurrent sends (`HERALD_WORKERS`).
    pub slots: usize,
    /// Lease length (`HERALD_LEASE`).
    pub lease: Duration,
    /// Longest a single send may take (`HERALD_SEND_TIMEOUT`).
    pub send_timeout: Duration,
    /// Fallback polling when no wake-up arrives (`HERALD_POLL_INTERVAL`).
    pub poll_interval: Duration,
    /// How long started sends may finish after shutdown (`HERALD_SHUTDOWN_GRACE`).
    pub shutdown_grace: Duration,
    /// Backoff and Retry-After cap for transient failures.
    pub retry: RetryPolicy,
    /// How often a running send extends its lease; `None`: a third of the lease.
    pub heartbeat_every: Option<Duration>,
    /// Most rows one lease takes of one lane while other lanes have work too (found by a
    /// lease within the last second): leases stay short, so what arrives in another lane
    /// waits little behind one lane's backlog. A lane alone takes a whole batch.
    pub lane_take_max: usize,
    /// Where a running worker hears wake-ups from other processes, on a database without
    /// NOTIFY (MariaDB, SQLite: `datagram.rs`) (`HERALD_WAKE_LISTEN`): default
    /// [`WAKE_LISTEN_DEFAULT`], a free UDP port on loopback, which reaches processes on
    /// this machine; `None`: none, other processes' work is found by polling.
    pub wake_listen: Option<SocketAddr>,
    /// The `host:port` other processes send wake-ups to (`HERALD_WAKE_ADVERTISE`);
    /// default the address bound. Needed when `wake_listen` is an unspecified address
    /// (`0.0.0.0:7070`, `[::]:7070`), which other machines cannot send to as such.
    pub wake_advertise: Option<String>,
}

/// A free UDP port on loopback.
pub const WAKE_LISTEN_DEFAULT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);
/// The longest `wake_advertise` (the column's width).
pub const WAKE_ADVERTISE_LEN_MAX: usize = 300;

impl Default for WorkerOptions {
    fn default() -> Self {
        let suffix = uuid::Uuid::now_v7().simple().to_string();
        WorkerOptions {
            id: format!("w{}-{}", std::process::id(), &suffix[suffix.len() - 8..]),
            release: RELEASE_DEFAULT.to_string(),
            slots: WORKER_SLOTS_DEFAULT,
            lease: LEASE_DEFAULT,
            send_timeout: SEND_TIMEOUT_DEFAULT,
            poll_interval: POLL_INTERVAL_DEFAULT,
            shutdown_grace: SHUTDOWN_GRACE_DEFAULT,
            retry: RetryPolicy::default(),
            heartbeat_every: None,
            lane_take_max: LANE_TAKE_MAX_DEFAULT,
            wake_listen: Some(WAKE_LISTEN_DEFAULT),
            wake_advertise: None,
        }
    }
}

impl WorkerOptions {
    /// Checks the settings against each other: above all, a send must end (timeout plus
    /// a safety margin) before its lease does, or a slow send could overlap a re-lease.
    pub fn validate(&self) -> Result<(), Error> {
        if self.id.is_empty() || self.id.len() > WORKER_ID_LEN_MAX {
            return Err(Error::invalid(format!(
                "worker id must be 1 to {WORKER_ID_LEN_MAX} bytes"
            )));
        }
        if self.release.is_empty()
            || self.release.len() > RELEASE_LEN_MAX
            || self.release.chars().any(char::is_control)
        {
            return Err(Error::invalid(format!(
                "release must be 1 to {RELEASE_LEN_MAX} bytes without control characters"
            )));
        }
        if !(1..=WORKER_SLOTS_MAX).contains(&self.slots) {
            return Err(Error::invalid(format!(
                "workers must be 1 to {WORKER_SLOTS_MAX}, got {}",
                self.slots
            )));
        }
        if self.lane_take_max == 0 {
            return Err(Error::invalid("lane_take_max must be positive"));
        }
        if self.send_timeout.is_zero() || self.poll_interval.is_zero() {
            return Err(Error::invalid("send timeout and poll interval must be positive"));
        }
        if self.send_timeout + LEASE_SAFETY_MARGIN >= self.lease {
            return Err(Error::invalid(format!(
                "the send timeout ({:?}) plus the safety margin ({:?}) must be shorter than the lease ({:?})",
                self.send_timeout, LEASE_SAFETY_MARGIN, self.lease
            )));
        }
        if let Some(every) = self.heartbeat_every
            && (every.is_zero() || every >= self.lease)
        {
            return Err(Error::invalid(format!(
                "the heartbeat ({every:?}) must be positive and shorter than the lease ({:?})",
                self.lease
            )));
        }
        self.validate_wake()
    }

    fn validate_wake(&self) -> Result<(), Error> {
        if let Some(advertise) = &self.wake_advertise {
            let port = advertise.rsplit_once(':').and_then(|(host, port)| {
                (!host.is_empty()).then(|| port.parse::<u16>().ok()).flatten()
            });
            if advertise.len() > WAKE_ADVERTISE_LEN_MAX
                || advertise.chars().any(|c| c.is_control() || c.is_whitespace())
                || port.is_none_or(|p| p == 0)
            {
                return Err(Error::invalid(format!(
                    "the wake-up address to advertise (HERALD_WAKE_ADVERTISE) must be host:port \
                     (a port from 1 to 65535, at most {WAKE_ADVERTISE_LEN_MAX} bytes), got \
                     {advertise:?}"
                )));
            }
        }
        match (self.wake_listen, &self.wake_advertise) {
            (Some(listen), None) if listen.ip().is_unspecified() => Err(Error::invalid(format!(
                "listening for wake-ups on {listen} needs the address other processes send to \
                 (HERALD_WAKE_ADVERTISE, host:port)"
            ))),
            (None, Some(_)) => Err(Error::invalid(
                "a wake-up address to advertise needs one to listen on (HERALD_WAKE_LISTEN)",
            )),
            _ => Ok(()),
        }
    }
}
