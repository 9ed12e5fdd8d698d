//! Wake-ups across processes by datagram, where the database has no NOTIFY (MariaDB,
//! SQLite): each running worker listens on a UDP port and keeps a row saying where
//! (`herald_wake_targets`: address and a random token; written again every
//! `TARGET_BEAT`, deleted when the worker stops). A process that committed due work sends
//! each fresh target one datagram, `herald-wake/1 ` followed by the target's token, at
//! most one round per `DATAGRAM_EVERY`, to the targets it read at most `TARGETS_MAX_AGE`
//! ago. A worker that hears its token wakes (`Wake::here`); any other datagram is ignored,
//! so only who can read herald's tables can wake a worker, and a wake-up only makes it
//! look for due work sooner. Applications on the SQL API send the same datagrams after
//! their commit (MariaDB's `wake_targets_v1`; the PHP package does). Fire and forget: a
//! datagram lost leaves the delivery to the worker's poll.

use crate::error::Error;
use crate::handle::Herald;
use herald_store::notify::{
    WAKE_TARGET_FRESH_MS, WakeTarget, wake_target_drop, wake_target_put, wake_targets,
};
use herald_store::{AsConn, Now, Store};
use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What every wake datagram starts with; the target's token follows.
pub const DATAGRAM_PREFIX: &str = "herald-wake/1 ";
/// A listening worker writes its target row again this often (`wake_targets_v1` and the
/// senders take a row as live for `WAKE_TARGET_FRESH_MS`, three beats).
pub const TARGET_BEAT: Duration = Duration::from_secs(10);
/// The next beat of any worker deletes rows not written for this long (a worker that
/// stopped without deleting its own).
pub const TARGET_FORGET: Duration = Duration::from_secs(3600);
/// A sender reads the targets again when its copy is older than this.
pub const TARGETS_MAX_AGE: Duration = Duration::from_secs(2);
/// At most one round of datagrams per this interval per process: a worker woken stays
/// hot (`HOT_FOR`), which covers the commits of the interval.
pub const DATAGRAM_EVERY: Duration = Duration::from_millis(5);
/// The longest a read of the targets or a beat may take.
const STATEMENT_BOUND: Duration = Duration::from_secs(5);

/// The sending side of one process, shared by its handles.
#[derive(Debug)]
pub(crate) struct Datagrams {
    store: Store,
    started: Instant,
    /// Milliseconds since `started` of the last round sent.
    last_sent_ms: AtomicI64,
    peers: Mutex<Peers>,
    v4: OnceLock<Option<UdpSocket>>,
    v6: OnceLock<Option<UdpSocket>>,
}

#[derive(Debug, Default)]
struct Peers {
    /// Each target's address and its datagram.
    sends: Arc<Vec<(SocketAddr, Vec<u8>)>>,
    read_at: Option<Instant>,
    reading: bool,
    /// The workers listening in this process, which its own `Notify` wakes already.
    own: HashSet<String>,
}

impl Datagrams {
    pub(crate) fn new(store: Store) -> Datagrams {
        Datagrams {
            store,
            started: Instant::now(),
            last_sent_ms: AtomicI64::new(-1_000_000),
            peers: Mutex::new(Peers::default()),
            v4: OnceLock::new(),
            v6: OnceLock::new(),
        }
    }

    /// One round of datagrams to the other processes' workers (coalesced), and a new read
    /// of the targets when the copy is stale (that round is sent once it is read).
    pub(crate) fn send(self: &Arc<Self>) {
        let now = self.started.elapsed().as_millis() as i64;
        let last = self.last_sent_ms.load(Ordering::Relaxed);
        if now - last < DATAGRAM_EVERY.as_millis() as i64
            || self
                .last_sent_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let (sends, read) = {
            let Ok(mut peers) = self.peers.lock() else { return };
            let stale = peers.read_at.is_none_or(|at| at.elapsed() >= TARGETS_MAX_AGE);
            let read = stale && !peers.reading;
            peers.reading |= read;
            (peers.sends.clone(), read)
        };
        self.send_to(&sends);
        if read && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let this = self.clone();
            runtime.spawn(async move {
                let read = this.read_targets().await;
                let sends = {
                    let Ok(mut peers) = this.peers.lock() else { return };
                    peers.reading = false;
                    match read {
                        Ok(targets) => {
                            let sends = targets
                                .into_iter()
                                .filter(|(worker, _)| !peers.own.contains(worker))
                                .map(|(_, send)| send)
                                .collect::<Vec<_>>();
                            peers.sends = Arc::new(sends);
                            peers.read_at = Some(Instant::now());
                            peers.sends.clone()
                        }
                        Err(e) => {
                            // Tried again at the next send after TARGETS_MAX_AGE.
                            peers.read_at = Some(Instant::now());
                            tracing::debug!(error = %e, "reading the wake targets failed");
                            return;
                        }
                    }
                };
                this.send_to(&sends);
            });
        } else if read && let Ok(mut peers) = self.peers.lock() {
            peers.reading = false;
        }
    }

    fn send_to(&self, sends: &[(SocketAddr, Vec<u8>)]) {
        for (addr, datagram) in sends {
            let socket = match addr {
                SocketAddr::V4(_) => self.v4.get_or_init(|| unbound("0.0.0.0:0")),
                SocketAddr::V6(_) => self.v6.get_or_init(|| unbound("[::]:0")),
            };
            if let Some(socket) = socket
                && let Err(e) = socket.send_to(datagram, addr)
            {
                tracing::trace!(error = %e, %addr, "a wake datagram was not sent");
            }
        }
    }

    /// The fresh targets, as (worker, (address resolved, datagram)).
    async fn read_targets(&self) -> Result<Vec<(String, (SocketAddr, Vec<u8>))>, Error> {
        let read = async {
            let mut conn = self.store.acquire().await?;
            wake_targets(conn.as_conn(), Now::Database, WAKE_TARGET_FRESH_MS).await
        };
        let targets = tokio::time::timeout(STATEMENT_BOUND, read)
            .await
            .map_err(|_| Error::app("reading the wake targets timed out"))??;
        let mut resolved = Vec::with_capacity(targets.len());
        for WakeTarget { worker, address, token } in targets {
            // An address that does not resolve is skipped: its worker polls.
            let Ok(Ok(mut addrs)) =
                tokio::time::timeout(STATEMENT_BOUND, tokio::net::lookup_host(address.as_str()))
                    .await
            else {
                continue;
            };
            if let Some(addr) = addrs.next() {
                resolved.push((worker, (addr, datagram(&token))));
            }
        }
        Ok(resolved)
    }

    fn own(&self, worker: &str, listening: bool) {
        if let Ok(mut peers) = self.peers.lock() {
            if listening {
                peers.own.insert(worker.to_string());
            } else {
                peers.own.remove(worker);
            }
            peers.read_at = None;
        }
    }
}

fn unbound(addr: &str) -> Option<UdpSocket> {
    let socket = UdpSocket::bind(addr).ok()?;
    socket.set_nonblocking(true).ok()?;
    Some(socket)
}

fn datagram(token: &str) -> Vec<u8> {
    format!("{DATAGRAM_PREFIX}{token}").into_bytes()
}

/// A worker's listening side: the socket's task (datagrams and beats) and its row.
pub(crate) struct Hearing {
    task: tokio::task::JoinHandle<()>,
    herald: Herald,
    worker: String,
}

impl Hearing {
    /// Listens on `listen` for `worker` and writes its target (the bound address, or
    /// `advertise`), where the database has no NOTIFY; `None` elsewhere or with no address.
    pub(crate) async fn start(
        herald: &Herald,
        worker: &str,
        listen: Option<SocketAddr>,
        advertise: Option<&str>,
    ) -> Result<Option<Hearing>, Error> {
        let (Some(datagrams), Some(listen)) = (herald.wake().datagrams(), listen) else {
            return Ok(None);
        };
        let socket = tokio::net::UdpSocket::bind(listen)
            .await
            .map_err(|e| Error::invalid(format!("cannot listen for wake-ups on {listen}: {e}")))?;
        let bound = socket.local_addr().map_err(|e| Error::app(format!("wake socket: {e}")))?;
        let address = advertise.map_or_else(|| bound.to_string(), str::to_string);
        let token = token()?;
        let target = WakeTarget { worker: worker.to_string(), address, token };
        // Written once before the first lease, so a submit right after the start wakes it;
        // if that fails, the next beat writes it.
        if let Err(e) = beat(herald, &target).await {
            tracing::warn!(error = %e, "writing the wake target failed; trying again in {TARGET_BEAT:?}");
        }
        datagrams.own(worker, true);
        let expected = datagram(&target.token);
        let task = tokio::spawn(hear(herald.clone(), socket, expected, target));
        tracing::info!(%bound, worker, "listening for wake-ups from other processes");
        Ok(Some(Hearing { task, herald: herald.clone(), worker: worker.to_string() }))
    }

    /// Stops listening and deletes the target row (bounded; a row left behind goes stale).
    pub(crate) async fn stop(self) {
        self.task.abort();
        if let Some(d) = self.herald.wake().datagrams() {
            d.own(&self.worker, false);
        }
        let worker = self.worker.as_str();
        let dropped = tokio::time::timeout(
            STATEMENT_BOUND,
            self.herald.transaction(|tx| {
                Box::pin(async move { Ok(wake_target_drop(tx.conn(), worker).await?) })
            }),
        )
        .await;
        if !matches!(dropped, Ok(Ok(_))) {
            tracing::debug!(worker, "the wake target was not deleted; it goes stale");
        }
    }
}

async fn hear(
    herald: Herald,
    socket: tokio::net::UdpSocket,
    expected: Vec<u8>,
    target: WakeTarget,
) {
    let mut buf = [0u8; 128];
    let mut beats = tokio::time::interval(TARGET_BEAT);
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beats.tick().await; // the first tick is now: `start` wrote the row
    loop {
        tokio::select! {
            got = socket.recv_from(&mut buf) => match got {
                Ok((n, _)) if constant_time_eq(&buf[..n], &expected) => herald.wake().here(),
                Ok(_) => {}
                Err(e) => {
                    // Not a tight loop on an error that repeats; the poll covers the gap.
                    tracing::trace!(error = %e, "receiving a wake datagram failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = beats.tick() => {
                if let Err(e) = beat(&herald, &target).await {
                    tracing::warn!(error = %e, "writing the wake target failed; other processes may not wake this worker");
                }
            }
        }
    }
}

async fn beat(herald: &Herald, target: &WakeTarget) -> Result<(), Error> {
    let forget = TARGET_FORGET.as_millis() as i64;
    let put = herald.transaction(|tx| {
        Box::pin(
            async move { Ok(wake_target_put(tx.conn(), target, Now::Database, forget).await?) },
        )
    });
    tokio::time::timeout(STATEMENT_BOUND, put)
        .await
        .map_err(|_| Error::app("writing the wake target timed out"))??;
    Ok(())
}

/// 128 random bits as hex.
fn token() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| Error::app(format!("no randomness: {e}")))?;
    Ok(herald_core::hex(&bytes))
}

/// Equal bytes, in a time that does not depend on where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
