//! The HTTP/1.1 server loop: every connection has a deadline for its request head, a
//! request body has a deadline, so has a stalled answer, a request head has a size
//! limit, and the number of open connections is capped — and at the cap, connections
//! kept alive between requests give their places up. `axum::serve` exposes none of
//! these, so the router is served with hyper directly.

use crate::head_errors::JsonHeadErrors;
use crate::write_stall::WriteStall;
use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use herald::CancellationToken;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tower::ServiceExt;
use tower_http::timeout::RequestBodyDeadlineLayer;

/// Header fields per request (hyper's own default); the 101st is a 431.
pub const HEADERS_MAX: usize = 100;
/// Request line plus header fields, in bytes: room for hyper's longest URI (65,534 bytes,
/// fixed in hyper, above which it answers 414) and 32 KiB of fields. Larger is a 431.
pub const HEAD_BYTES_MAX: usize = 96 * 1024;
/// Longest request URI (path and query), in bytes; longer is a 414. herald's own URIs
/// are under 1 KiB (ids, a cursor, two filters).
pub const URI_BYTES_MAX: usize = 8 * 1024;
/// `HERALD_HTTP_HEADER_TIMEOUT`: a connection must deliver a complete request head this
/// soon after it opens or after its previous answer, or it is closed. hyper's timer runs
/// whenever a connection waits for a request, so this is also the keep-alive idle limit.
pub const HEADER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// `HERALD_HTTP_BODY_TIMEOUT`: a request body must have arrived completely this soon after
/// its head (408). 80 KiB at 64 kbit/s takes 10 s.
pub const BODY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// An answer whose write makes no progress this long (the client reads nothing) ends its
/// connection.
pub const WRITE_STALL_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// `HERALD_HTTP_CONNECTIONS_MAX`: open connections; nginx's default per worker, and well
/// under the common 1,024 open-files limit, which the database and webhooks share.
pub const CONNECTIONS_MAX_DEFAULT: usize = 512;
/// Upper bound of `HERALD_HTTP_CONNECTIONS_MAX`.
pub const CONNECTIONS_MAX_LIMIT: usize = 65_536;
/// Pause after a failed accept (out of file descriptors, …) before the next one.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// Connections the kernel may hold completed but not yet accepted (capped by Linux's
/// `net.core.somaxconn`, 4096 by default). tokio's `bind` asks for 1,024: a burst of new
/// connections past it overflows the queue, the kernel drops their handshakes and each
/// client's SYN is retried after 1, 3, 7, 15 s — measured 13.8 s answers in the bench's
/// open loop at twice capacity, where admission control had answered everything else
/// within a second.
pub const LISTEN_BACKLOG: u32 = 4096;

/// At the connection limit, a connection kept alive this long without a new request is
/// closed to give its place up. A client's pool reuses its most recently used connection
/// first, so one idle this long is seldom about to carry a request.
pub const IDLE_GIVE_UP: Duration = Duration::from_secs(1);

/// The connection limit's warning is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// A listener on `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as tokio's own bind).
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How the HTTP face treats its connections.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub write_stall_timeout: Duration,
    pub connections_max: usize,
    /// How long answers in progress may finish on shutdown before their connections are
    /// dropped (`HERALD_SHUTDOWN_GRACE`).
    pub shutdown_grace: Duration,
    /// The names a request's `Host` may give besides loopback names and IP addresses
    /// (`HERALD_ALLOWED_HOSTS`, `HERALD_PUBLIC_URL`; [`crate::hosts`]).
    pub allowed_hosts: crate::hosts::AllowedHosts,
    /// A dashboard session unused this long is over (`HERALD_UI_IDLE_TIMEOUT`).
    pub ui_idle: Duration,
}

impl Default for HttpOptions {
    fn default() -> HttpOptions {
        HttpOptions {
            header_timeout: HEADER_TIMEOUT_DEFAULT,
            body_timeout: BODY_TIMEOUT_DEFAULT,
            write_stall_timeout: WRITE_STALL_TIMEOUT_DEFAULT,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            shutdown_grace: herald_core::limits::SHUTDOWN_GRACE_DEFAULT,
            allowed_hosts: crate::hosts::AllowedHosts::default(),
            ui_idle: herald::UI_SESSION_IDLE,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` is cancelled; then stops accepting,
/// lets every connection finish the answer it is giving (at most `shutdown_grace`), drops
/// the rest and returns once every connection task has ended.
///
/// When `connections_max` connections are open, the next is not accepted until one
/// closes: it waits in the kernel's backlog. Accepting it only to answer 503 would cost a
/// write and a lingering close per excess connection just when the server is flooded.
/// Instead, as nginx frees its reusable connections, places are given up: while the limit
/// holds, every answer says `Connection: close`, and a connection kept alive that has
/// waited [`IDLE_GIVE_UP`] for its next request is closed — so a connection waiting in the
/// backlog is accepted soon after a client's pool leaves one idle, not after the header
/// timeout (10 s by default; measured: 10 s answers in 4 of 30 runs of the bench's open
/// loop at twice capacity, whose client pool held the places idle). Closing a connection
/// kept alive races with a client sending on it at that instant — the race every idle
/// timeout has — which closing only connections idle that long makes rare.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: HttpOptions,
    shutdown: CancellationToken,
) {
    assert!(options.connections_max > 0, "connections_max must be positive");
    let slots = Arc::new(Semaphore::new(options.connections_max));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout)
        .max_headers(HEADERS_MAX)
        .max_header_size(HEAD_BYTES_MAX);
    let router = router.layer(RequestBodyDeadlineLayer::new(options.body_timeout));
    let stop_connections = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut warned = None;
    let pressure = Arc::new(Pressure {
        full: AtomicBool::new(false),
        idle_close: watch::Sender::new(()),
        started: tokio::time::Instant::now(),
    });
    loop {
        // Reap finished connection tasks so the set stays as small as what is open.
        while let Some(ended) = connections.try_join_next() {
            if let Err(e) = ended {
                tracing::error!(error = %e, "an HTTP connection task failed");
            }
        }
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                pressure.full.store(true, Ordering::Relaxed);
                if warned.is_none_or(|at: tokio::time::Instant| at.elapsed() >= WARN_EVERY) {
                    warned = Some(tokio::time::Instant::now());
                    tracing::warn!(
                        connections_max = options.connections_max,
                        "HTTP connection limit reached; idle connections close, new ones wait"
                    );
                }
                let waited = loop {
                    // Connections idle long enough close now; the rest are asked again.
                    pressure.idle_close.send_replace(());
                    tokio::select! {
                        _ = shutdown.cancelled() => break None,
                        slot = slots.clone().acquire_owned() => break slot.ok(),
                        _ = tokio::time::sleep(IDLE_GIVE_UP / 2) => {}
                    }
                };
                match waited {
                    Some(slot) => slot,
                    None => break,
                }
            }
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting an HTTP connection failed");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => continue,
                    }
                }
            },
        };
        if slots.available_permits() > 0 {
            pressure.full.store(false, Ordering::Relaxed);
        }
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, %peer, "TCP_NODELAY not set");
        }
        let io = JsonHeadErrors::new(WriteStall::new(stream, options.write_stall_timeout));
        // Each request knows its client's address (`ConnectInfo`: the failed-key limits),
        // and the connection how many of its requests are in the router.
        let busy = Arc::new(Busy { requests: AtomicUsize::new(0), answered_at: AtomicU64::new(0) });
        let service = {
            let (router, busy, pressure) = (router.clone(), busy.clone(), pressure.clone());
            tower::service_fn(move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                let in_router = InRouter::new(&busy, &pressure);
                let (router, pressure) = (router.clone(), pressure.clone());
                async move {
                    let _in_router = in_router;
                    let mut response = router.oneshot(request).await?;
                    if pressure.full.load(Ordering::Relaxed) {
                        // The client learns it from the answer: no request of its own
                        // meets a closing connection.
                        response
                            .headers_mut()
                            .insert(CONNECTION, HeaderValue::from_static("close"));
                    }
                    Ok::<_, std::convert::Infallible>(response)
                }
            })
        };
        let connection = http.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        let stop = stop_connections.clone();
        let (mut idle_close, pressure) = (pressure.idle_close.subscribe(), pressure.clone());
        connections.spawn(async move {
            let _slot = slot;
            let mut connection = std::pin::pin!(connection);
            let result = loop {
                tokio::select! {
                    result = connection.as_mut() => break result,
                    _ = stop.cancelled() => {}
                    Ok(()) = idle_close.changed() => {
                        if !busy.idle_since(pressure.now_ms(), IDLE_GIVE_UP) {
                            continue;
                        }
                    }
                }
                // Closes a connection kept alive between requests at once, any other after
                // the answer it is giving.
                connection.as_mut().graceful_shutdown();
                break connection.await;
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, %peer, "HTTP connection ended with an error");
            }
        });
    }
    drop(listener);
    stop_connections.cancel();
    let drained = tokio::time::timeout(options.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "HTTP connections still open after the shutdown grace; closing them"
        );
        connections.shutdown().await;
    }
}

/// The connection limit's state, shared by the accept loop and the connections.
struct Pressure {
    /// The limit is reached (cleared when a place is free after an accept).
    full: AtomicBool,
    /// Sent while the limit holds: connections idle for [`IDLE_GIVE_UP`] close.
    idle_close: watch::Sender<()>,
    started: tokio::time::Instant,
}

impl Pressure {
    /// Milliseconds since the server started, never 0.
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64 + 1
    }
}

/// One connection's requests in the router, and when the last one left it.
struct Busy {
    requests: AtomicUsize,
    /// [`Pressure::now_ms`] when a request last left the router; 0 for a new connection
    /// whose first request is on its way (the header timeout bounds those).
    answered_at: AtomicU64,
}

impl Busy {
    /// Kept alive between requests for at least `idle` by `now`.
    fn idle_since(&self, now: u64, idle: Duration) -> bool {
        let at = self.answered_at.load(Ordering::Relaxed);
        self.requests.load(Ordering::Relaxed) == 0
            && at > 0
            && now.saturating_sub(at) >= idle.as_millis() as u64
    }
}

/// A request in the router, for as long as its handler runs.
struct InRouter {
    busy: Arc<Busy>,
    pressure: Arc<Pressure>,
}

impl InRouter {
    fn new(busy: &Arc<Busy>, pressure: &Arc<Pressure>) -> InRouter {
        busy.requests.fetch_add(1, Ordering::Relaxed);
        InRouter { busy: busy.clone(), pressure: pressure.clone() }
    }
}

impl Drop for InRouter {
    fn drop(&mut self) {
        self.busy.answered_at.store(self.pressure.now_ms(), Ordering::Relaxed);
        self.busy.requests.fetch_sub(1, Ordering::Relaxed);
    }
}
