//! herald's fault tools for tests: [`FaultProxy`], a TCP proxy on loopback between
//! herald and its database that resets, stalls, delays and drops connections on command.
//!
//! It is real TCP, not a mock: herald's driver sees exactly what it would see when a
//! load balancer, a failover or a flaky network cuts a connection. A test (or the
//! `fault-proxy` example) points herald's `--db` at [`FaultProxy::addr`] and injects
//! faults while the work runs.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Bytes read per chunk on each direction of a connection.
const CHUNK_BYTES: usize = 16 * 1024;

/// What happens to one proxied connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Bytes flow (after the proxy's latency).
    Flow,
    /// Both sockets are closed with an RST (`SO_LINGER` 0): both ends see ECONNRESET.
    Reset,
    /// Nothing is forwarded any more and nothing is closed: both ends wait, as behind a
    /// firewall that dropped the flow. Only a timeout (or keepalive) on either side ends it.
    Blackhole,
}

/// The proxy's shared state.
#[derive(Debug)]
struct Shared {
    /// Where new connections go (a failover moves it).
    upstream: Mutex<SocketAddr>,
    /// Live connections by number, each with the sender of its fate.
    connections: Mutex<BTreeMap<u64, watch::Sender<Fate>>>,
    latency_us: AtomicU64,
    accepted: AtomicU64,
    faults: AtomicU64,
    /// The local port of every upstream connection the proxy opened, in order: how a test
    /// finds the server's side of herald's connections (`pg_stat_activity.client_port`,
    /// MariaDB's processlist `HOST`), whatever happened to the client's side.
    upstream_ports: Mutex<Vec<(u16, i64)>>,
}

/// A TCP proxy from a loopback port to `upstream`. Dropping it stops accepting and
/// resets every connection still open.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stall: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reset_all();
    }
}

impl FaultProxy {
    /// Listens on `127.0.0.1` (a free port) and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        FaultProxy::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), upstream).await
    }

    /// Listens on `listen` and forwards every connection to `upstream`.
    pub async fn start_on(listen: SocketAddr, upstream: SocketAddr) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            connections: Mutex::default(),
            latency_us: AtomicU64::default(),
            accepted: AtomicU64::default(),
            faults: AtomicU64::default(),
            upstream_ports: Mutex::default(),
        });
        let (stall, stalled) = watch::channel(false);
        let accept = tokio::spawn(accept_loop(listener, shared.clone(), stalled));
        Ok(FaultProxy { addr, shared, stall, accept })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the proxy connects new connections.
    pub fn upstream(&self) -> SocketAddr {
        *self.shared.upstream.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// From now on new connections go to `upstream` (a failover to a promoted standby);
    /// open ones stay where they are until they close or are faulted.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *self.shared.upstream.lock().unwrap_or_else(PoisonError::into_inner) = upstream;
    }

    /// Connections open now (blackholed ones included).
    pub fn open(&self) -> usize {
        self.connections().len()
    }

    /// Connections accepted since the start.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// The local ports of the upstream connections opened since the start, each with when it
    /// was opened (Unix milliseconds): the server sees each of herald's connections as coming
    /// from one of these, and as starting then. (A port closed by a reset is free at once,
    /// and another process's connection may take it: the opening time tells them apart.)
    pub fn upstream_ports(&self) -> Vec<(u16, i64)> {
        self.shared.upstream_ports.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Faults injected since the start (each reset or blackholed connection counts one).
    pub fn faults(&self) -> u64 {
        self.shared.faults.load(Ordering::Relaxed)
    }

    /// Resets one open connection chosen at random; `false` if none was open.
    pub fn reset_random(&self) -> bool {
        self.fault_random(Fate::Reset)
    }

    /// Stops forwarding on one open connection chosen at random, closing nothing.
    pub fn blackhole_random(&self) -> bool {
        self.fault_random(Fate::Blackhole)
    }

    /// Stops forwarding on every open connection, closing nothing; returns how many.
    pub fn blackhole_all(&self) -> usize {
        let connections = self.connections();
        let flowing: Vec<_> = connections.values().filter(|f| *f.borrow() == Fate::Flow).collect();
        for fate in &flowing {
            let _ = fate.send(Fate::Blackhole);
        }
        self.shared.faults.fetch_add(flowing.len() as u64, Ordering::Relaxed);
        flowing.len()
    }

    /// Resets every open connection; returns how many.
    pub fn reset_all(&self) -> usize {
        let connections = self.connections();
        for fate in connections.values() {
            let _ = fate.send(Fate::Reset);
        }
        self.shared.faults.fetch_add(connections.len() as u64, Ordering::Relaxed);
        connections.len()
    }

    /// Delays every chunk of bytes, in both directions, by `latency` from now on.
    pub fn set_latency(&self, latency: Duration) {
        let us = latency.as_micros().min(u64::MAX as u128) as u64;
        self.shared.latency_us.store(us, Ordering::Relaxed);
    }

    /// Holds back every byte on every connection (new ones too) until [`FaultProxy::resume`].
    pub fn stall(&self) {
        let _ = self.stall.send(true);
    }

    /// Ends a [`FaultProxy::stall`].
    pub fn resume(&self) {
        let _ = self.stall.send(false);
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, watch::Sender<Fate>>> {
        self.shared.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fault_random(&self, fate: Fate) -> bool {
        let connections = self.connections();
        let flowing: Vec<&watch::Sender<Fate>> =
            connections.values().filter(|f| *f.borrow() == Fate::Flow).collect();
        if flowing.is_empty() {
            return false;
        }
        let _ = flowing[fastrand::usize(..flowing.len())].send(fate);
        self.shared.faults.fetch_add(1, Ordering::Relaxed);
        true
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stalled: watch::Receiver<bool>) {
    loop {
        let Ok((client, _)) = listener.accept().await else { continue };
        let number = shared.accepted.fetch_add(1, Ordering::Relaxed);
        let (fate_tx, fate) = watch::channel(Fate::Flow);
        shared.connections.lock().unwrap_or_else(PoisonError::into_inner).insert(number, fate_tx);
        let upstream = *shared.upstream.lock().unwrap_or_else(PoisonError::into_inner);
        let (shared, stalled) = (shared.clone(), stalled.clone());
        tokio::spawn(async move {
            proxy(client, upstream, &shared, fate, stalled).await;
            shared.connections.lock().unwrap_or_else(PoisonError::into_inner).remove(&number);
        });
    }
}

/// Forwards one connection until either side closes or its fate changes.
async fn proxy(
    mut client: TcpStream,
    upstream: SocketAddr,
    shared: &Shared,
    mut fate: watch::Receiver<Fate>,
    stalled: watch::Receiver<bool>,
) {
    let Ok(mut server) = TcpStream::connect(upstream).await else { return };
    if let Ok(local) = server.local_addr() {
        let opened = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut ports = shared.upstream_ports.lock().unwrap_or_else(PoisonError::into_inner);
        ports.push((local.port(), opened));
    }
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let faulted = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let up = pump(client_read, server_write, shared, stalled.clone());
        let down = pump(server_read, client_write, shared, stalled);
        tokio::pin!(up, down);
        let (mut up_done, mut down_done) = (false, false);
        loop {
            tokio::select! {
                changed = fate.changed() => match changed {
                    Ok(()) if *fate.borrow() == Fate::Flow => {}
                    Ok(()) => break true,
                    Err(_) => break false, // the proxy is gone: just close
                },
                () = &mut up, if !up_done => up_done = true,
                () = &mut down, if !down_done => down_done = true,
            }
            if up_done && down_done {
                break false;
            }
        }
        // The pumps (and their borrows of both sockets) end here, mid-copy if faulted.
    };
    if !faulted {
        return;
    }
    if *fate.borrow() == Fate::Blackhole {
        // Both sockets stay open and silent until the proxy resets everything (or is
        // dropped): only a timeout or keepalive on either side can end the wait.
        let _ = fate.wait_for(|f| *f == Fate::Reset).await;
    }
    // SO_LINGER 0: closing sends an RST, so both ends see ECONNRESET, not a clean EOF.
    let _ = (client.set_zero_linger(), server.set_zero_linger());
}

/// Copies bytes from `from` to `to`, delayed by the proxy's latency and held back while
/// stalled, until `from` ends; then passes the end on (FIN).
async fn pump<R, W>(mut from: R, mut to: W, shared: &Shared, mut stalled: watch::Receiver<bool>)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let latency = shared.latency_us.load(Ordering::Relaxed);
        if latency > 0 {
            tokio::time::sleep(Duration::from_micros(latency)).await;
        }
        if stalled.wait_for(|s| !*s).await.is_err() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
