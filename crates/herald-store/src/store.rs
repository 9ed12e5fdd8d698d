//! The store handle: a connection pool to one database, SQLite, PostgreSQL or MariaDB.

use crate::conn::{AsConn, Conn};
use crate::error::{ErrorClass, StoreError};
use crate::mysql::dialect::Flavor;
use crate::url::DbUrl;
use herald_core::limits::{CONNECT_TIMEOUT, SQLITE_BUSY_TIMEOUT_DEFAULT};
use sqlx::mysql::{MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgSslMode};
use sqlx::sqlite::{SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, Connection};
use sqlx::{MySql, Postgres, Sqlite};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A pooled PostgreSQL connection idle longer than this is pinged before it is used.
const PING_WHEN_IDLE_FOR: Duration = Duration::from_secs(1);
/// A ping that takes longer than this finds a connection not worth keeping: it is closed
/// and the pool opens another (a silently dropped connection would otherwise hold the
/// caller for the whole acquire timeout).
pub const PING_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between tries to open a SQLite file another process holds locked.
const OPEN_BUSY_PAUSE: Duration = Duration::from_millis(20);
/// The longest `Store::close` waits for connections in use to come back.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The server ends a session of herald's idle longer than this (PostgreSQL
/// `idle_session_timeout`, MariaDB `wait_timeout`, set per session): a connection herald
/// gave up on — a ping or COMMIT that never answered, a flow a firewall dropped — may
/// still be open on the server's side, where nothing else ends it (TCP keepalive takes
/// hours, and never fires behind a proxy that keeps its leg open). Without it every such
/// connection stayed a server session for good, beyond the pool's bound (issue 32: 62
/// sessions for a pool of 26). A pooled connection idle this long is closed by the server
/// too; herald pings any connection idle over [`PING_WHEN_IDLE_FOR`] before use, so that
/// costs one reconnect, never a wait. Whole seconds (MariaDB's unit).
pub const SESSION_IDLE_MAX: Duration = Duration::from_secs(5);

/// TCP keepalive on the server's side of each session (PostgreSQL), so a client whose host
/// or network vanished is noticed within about 11 s, not the kernel's two hours:
/// idle seconds, then probes this many seconds apart, this many times.
const SERVER_KEEPALIVE: (u64, u64, u64) = (5, 2, 3);

/// Prepared statements kept per MariaDB connection (sqlx's default is 100).
pub const MYSQL_STATEMENT_CACHE: usize = 256;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    Sqlite,
    Postgres,
    /// MariaDB 10.11+, through sqlx's MySQL driver (MySQL 8.4 through the subset both
    /// servers share, untested).
    MySql,
}

impl Backend {
    /// Whether a claim is one statement here, and so may run autocommitted (one round
    /// trip) when there is no transaction to commit it with. On SQLite and MariaDB (no
    /// writing CTEs) a claim is several statements and needs a transaction.
    pub fn claims_in_one_statement(self) -> bool {
        match self {
            Backend::Sqlite | Backend::MySql => false,
            Backend::Postgres => true,
        }
    }

    /// Whether a batch of claims is a fixed number of statements here
    /// ([`crate::deliveries::deliveries_claim_many`]: PostgreSQL, MariaDB), rather than one
    /// claim after another (SQLite, where one writer and no round trips make that cheap).
    pub fn claims_in_batches(self) -> bool {
        match self {
            Backend::Sqlite => false,
            Backend::Postgres | Backend::MySql => true,
        }
    }

    /// Whether committed work wakes other processes' workers through the database itself
    /// (PostgreSQL's LISTEN/NOTIFY); elsewhere they hear of it by datagram
    /// ([`crate::notify::WakeTarget`]) or by polling.
    pub fn notifies_across_processes(self) -> bool {
        matches!(self, Backend::Postgres)
    }

    /// Whether a quick lease is one statement here
    /// ([`crate::deliveries::deliveries_lease_quick`]): on PostgreSQL, whose statements
    /// can lock, update and return in one.
    pub fn leases_quickly(self) -> bool {
        matches!(self, Backend::Postgres)
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::MySql => "mysql",
        }
    }
}

/// Pool settings, each with a named default.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Connections in the pool. SQLite still has one writer at a time; the others read.
    pub connections_max: u32,
    /// How long to wait for a connection (or for the server to answer) before giving up.
    pub connect_timeout: Duration,
    /// SQLite's busy timeout for statements that do not set their own.
    pub sqlite_busy_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            connections_max: 10,
            connect_timeout: CONNECT_TIMEOUT,
            sqlite_busy_timeout: SQLITE_BUSY_TIMEOUT_DEFAULT,
        }
    }
}

/// A pool of connections to one database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: Pool,
    /// What the store is connected to, without secrets, for messages.
    target: String,
    losses: Arc<Losses>,
    /// This process's SQLite writer (unused on a server): every write of herald's through
    /// this store — a transaction of the runner's, an autocommitted write — holds it, so
    /// the process's writes queue here, in order, and none waits in SQLite's busy handler
    /// for another of the same process. Shared by the store's clones.
    writer: Arc<tokio::sync::Mutex<()>>,
}

/// For this long after a connection broke, every pooled connection is pinged before it is
/// handed out, however briefly it sat idle.
const SUSPECT_AFTER_LOSS: Duration = Duration::from_secs(1);

/// When this store last saw a connection break. A network fault rarely breaks one
/// connection alone: every connection that sat idle since then is suspect, and is pinged
/// (within [`PING_TIMEOUT`]) before it is handed out, so a retry gets a live connection
/// instead of the next dead one in the idle queue.
#[derive(Debug)]
struct Losses {
    since: std::time::Instant,
    /// Microseconds after `since` of the latest loss; 0: none yet.
    latest_us: AtomicU64,
}

impl Losses {
    fn new() -> Losses {
        Losses { since: std::time::Instant::now(), latest_us: AtomicU64::new(0) }
    }

    fn note(&self) {
        let us = self.since.elapsed().as_micros().clamp(1, u64::MAX as u128) as u64;
        self.latest_us.fetch_max(us, Ordering::Relaxed);
    }

    /// Whether a connection idle for `idle_for` has been idle since the latest loss — or
    /// the loss was less than [`SUSPECT_AFTER_LOSS`] ago, when any connection is: one that
    /// was on its way back to the pool while the fault struck went idle only after it, and
    /// is as dead as the others.
    fn suspect(&self, idle_for: Duration) -> bool {
        let latest = self.latest_us.load(Ordering::Relaxed);
        latest != 0
            && Duration::from_micros(latest) + idle_for.max(SUSPECT_AFTER_LOSS)
                >= self.since.elapsed()
    }
}

#[derive(Debug, Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    MySql(MySqlPool, Flavor),
}

/// A connection taken from the pool, returned to it when dropped.
#[derive(Debug)]
pub enum PooledConn {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
    MySql(PoolConnection<MySql>),
}

impl PooledConn {
    /// Closes the connection instead of returning it to the pool (its place in the pool is
    /// free at once): for a connection whose statement was cut short or broke on the wire.
    pub fn discard(self) {
        match self {
            PooledConn::Sqlite(c) => crate::tx::discard(c),
            PooledConn::Postgres(c) => crate::tx::discard(c),
            PooledConn::MySql(c) => crate::tx::discard(c),
        }
    }
}

impl AsConn for PooledConn {
    fn as_conn(&mut self) -> Conn<'_> {
        match self {
            PooledConn::Sqlite(c) => Conn::Sqlite(c),
            PooledConn::Postgres(c) => Conn::Postgres(c),
            PooledConn::MySql(c) => Conn::MySql(c),
        }
    }
}

impl Store {
    /// Waits (at most `wait`) for this process's SQLite writer and holds it until the
    /// guard is dropped: what every write of herald's on SQLite does first, so the
    /// process's writes take turns in arrival order instead of racing for SQLite's lock
    /// (another process on the same file still meets them there, in the busy handler).
    /// Running out of `wait` is [`StoreError::WriterBusy`], nothing done — a concurrency
    /// conflict, as SQLITE_BUSY is.
    pub async fn sqlite_writer(
        &self,
        wait: Duration,
    ) -> Result<tokio::sync::OwnedMutexGuard<()>, StoreError> {
        tokio::time::timeout(wait, self.writer.clone().lock_owned())
            .await
            .map_err(|_| StoreError::WriterBusy { waited: wait })
    }

    /// Parses `url`, connects (one connection is made at once, so a bad URL or an
    /// unreachable server fails here) and applies pending migrations.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Store, StoreError> {
        let store = Store::connect(&DbUrl::parse(url)?, options).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects without migrating.
    pub async fn connect(url: &DbUrl, options: &StoreOptions) -> Result<Store, StoreError> {
        let target = format!("{url:?}");
        let connect_error =
            |source| StoreError::Connect { target: target.clone(), source: tls_as_tls(source) };
        let losses = Arc::new(Losses::new());
        let pool = match url {
            DbUrl::Sqlite(o) => {
                // WAL: readers never block the writer. synchronous=FULL: a committed
                // delivery survives power loss, not only a process crash (herald's promise
                // is "nothing lost after commit"). Foreign keys are off by default in SQLite.
                let o = (**o)
                    .clone()
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full)
                    .foreign_keys(true)
                    .busy_timeout(options.sqlite_busy_timeout);
                // The busy timeout belongs to the connection, not to a transaction: one
                // that a transaction set to its wait bound (`Store::begin`), or an
                // application to its own, would stay on the pooled connection for every
                // later use. So each connection gets the store's again when it comes back
                // to the pool (in sqlx's release task, off the caller's path).
                //
                // A connection that sqlx still counts inside a transaction by then (its
                // rollback on drop ran before this statement, and failed) is closed, not
                // pooled. SQLite rolls a transaction back by itself when its COMMIT fails
                // with SQLITE_FULL (or IOERR, NOMEM); sqlx counts it open, its ROLLBACK then
                // finds none, and every later BEGIN on that connection would be refused
                // ("begin_with at non-zero transaction depth") long after room was made.
                let restore = format!(
                    "PRAGMA busy_timeout = {}",
                    options.sqlite_busy_timeout.as_millis().min(i32::MAX as u128)
                );
                let pool_options = SqlitePoolOptions::new()
                    .max_connections(options.connections_max.max(2))
                    .acquire_timeout(options.connect_timeout)
                    .after_release(move |conn, _meta| {
                        let restore = AssertSqlSafe(restore.clone());
                        Box::pin(async move {
                            sqlx::raw_sql(restore).execute(&mut *conn).await?;
                            Ok(!conn.is_in_transaction())
                        })
                    });
                // Opening a fresh file sets WAL mode, which needs the file to itself: while
                // another process migrates it (holding the write lock), the open answers
                // SQLITE_BUSY at once rather than through the busy handler. Wait for it,
                // within the connect timeout, as a statement would.
                let give_up_at = std::time::Instant::now() + options.connect_timeout;
                let pool = loop {
                    match pool_options.clone().connect_with(o.clone()).await {
                        Err(e)
                            if matches!(crate::error::classify(&e), ErrorClass::Concurrency(_))
                                && std::time::Instant::now() < give_up_at =>
                        {
                            tokio::time::sleep(OPEN_BUSY_PAUSE).await;
                        }
                        opened => break opened.map_err(connect_error)?,
                    }
                };
                Pool::Sqlite(pool)
            }
            DbUrl::Postgres(o) => {
                // TLS follows the URL's sslmode (prefer by default, as in libpq). sqlx hands
                // rustls its ring provider, except under verify-ca, where the verifier takes
                // rustls' process-wide one; rustls picks that itself only when exactly one
                // provider is compiled in, and panics in an application that also links
                // aws-lc-rs. So install ring, as the channels do: a provider already
                // installed stays, and every later call is a no-op.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let o = (**o).clone().application_name("herald").options([
                    ("idle_session_timeout", format!("{}ms", SESSION_IDLE_MAX.as_millis())),
                    (
                        "idle_in_transaction_session_timeout",
                        // The session's, not each transaction's `SET LOCAL`: a transaction
                        // that aborts reverts those, and stayed "idle in transaction
                        // (aborted)" for good when its client then went silent.
                        format!("{}ms", crate::tx::IDLE_IN_TRANSACTION_MAX.as_millis()),
                    ),
                    ("tcp_keepalives_idle", SERVER_KEEPALIVE.0.to_string()),
                    ("tcp_keepalives_interval", SERVER_KEEPALIVE.1.to_string()),
                    ("tcp_keepalives_count", SERVER_KEEPALIVE.2.to_string()),
                ]);
                // The pool retries refused connections until its timeout and then reports
                // only "timed out"; one direct attempt first surfaces the real reason.
                let probe = |o: PgConnectOptions| async move {
                    match tokio::time::timeout(
                        options.connect_timeout,
                        PgConnection::connect_with(&o),
                    )
                    .await
                    {
                        Ok(Ok(probe)) => {
                            let _ = probe.close().await;
                            Ok(o)
                        }
                        Ok(Err(source)) => Err(source),
                        Err(_elapsed) => Err(sqlx::Error::PoolTimedOut),
                    }
                };
                // On a loopback host under prefer (the default), TLS would encrypt traffic
                // that never leaves the machine, unverified, and cost the drain two fifths
                // of its rate (docs/perf.md, issue 34 point 1): plain first, as libpq's
                // `allow`, and prefer's TLS only if the server refuses a plain session (a
                // `hostssl`-only server, or an SSH tunnel to one). require and verify-* stay.
                let plain_first = matches!(o.get_ssl_mode(), PgSslMode::Prefer)
                    && crate::url::is_loopback(o.get_host());
                let o = match plain_first {
                    true => match probe(o.clone().ssl_mode(PgSslMode::Disable)).await {
                        Ok(plain) => plain,
                        // The server answered and refused: perhaps only to a plain session.
                        Err(sqlx::Error::Database(_)) => probe(o).await.map_err(connect_error)?,
                        Err(other) => return Err(connect_error(other)),
                    },
                    false => probe(o).await.map_err(connect_error)?,
                };
                // sqlx pings every connection it hands out, a round trip before each
                // transaction (and before each autocommitted claim, which is one round
                // trip otherwise). Only a connection idle long enough to have been cut
                // off is pinged; a busy one is used at once, and a dead one still fails
                // its first statement as it would between a ping and the statement.
                let pool = PgPoolOptions::new()
                    .max_connections(options.connections_max.max(2))
                    .acquire_timeout(options.connect_timeout)
                    .test_before_acquire(false)
                    .before_acquire({
                        let losses = losses.clone();
                        move |conn, meta| {
                            let suspect = losses.suspect(meta.idle_for);
                            let losses = losses.clone();
                            Box::pin(async move {
                                if suspect || meta.idle_for > PING_WHEN_IDLE_FOR {
                                    // An error closes the connection without a goodbye,
                                    // and is a loss like any other: the connections idle
                                    // beside it are as suspect as after a failed statement.
                                    let pinged =
                                        tokio::time::timeout(PING_TIMEOUT, conn.ping()).await;
                                    if !matches!(pinged, Ok(Ok(()))) {
                                        losses.note();
                                    }
                                    pinged.map_err(|_| crate::tx::timed_out("ping"))??;
                                }
                                Ok(true)
                            })
                        }
                    })
                    .connect_with(o)
                    .await
                    .map_err(connect_error)?;
                Pool::Postgres(pool)
            }
            DbUrl::MySql(o) => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                // Room for every statement text herald prepares on MariaDB (a hundred or so,
                // and a dozen of each IN-list statement: see `Now::mysql_sql`), so none is
                // ever evicted in steady state.
                let o = (**o).clone().statement_cache_capacity(MYSQL_STATEMENT_CACHE);
                // The probe also tells MariaDB from MySQL (see `mysql::dialect`).
                let probe = async {
                    let mut c = MySqlConnection::connect_with(&o).await?;
                    let version: String =
                        sqlx::query_scalar("SELECT VERSION()").fetch_one(&mut c).await?;
                    let _ = c.close().await;
                    Ok::<_, sqlx::Error>(version)
                };
                let flavor = match tokio::time::timeout(options.connect_timeout, probe).await {
                    Ok(Ok(version)) => Flavor::of_version(&version),
                    Ok(Err(source)) => return Err(connect_error(source)),
                    Err(_elapsed) => return Err(connect_error(sqlx::Error::PoolTimedOut)),
                };
                // A transaction sets its wait bounds on the session (`Store::begin`) and
                // leaves them there: the next transaction sets its own in its BEGIN, and a
                // use outside a transaction puts the server's defaults back first
                // (`Store::acquire`). Resetting on release instead was a round trip per
                // transaction (issue 41, docs/perf.md).
                let pool = MySqlPoolOptions::new()
                    .max_connections(options.connections_max.max(2))
                    .acquire_timeout(options.connect_timeout)
                    .test_before_acquire(false)
                    // The server ends a session idle past SESSION_IDLE_MAX (see there).
                    .after_connect(move |conn, _meta| {
                        Box::pin(async move {
                            sqlx::raw_sql(flavor.session_idle_bound()).execute(conn).await?;
                            Ok(())
                        })
                    })
                    .before_acquire({
                        let losses = losses.clone();
                        move |conn, meta| {
                            let suspect = losses.suspect(meta.idle_for);
                            let losses = losses.clone();
                            Box::pin(async move {
                                if suspect || meta.idle_for > PING_WHEN_IDLE_FOR {
                                    // A failed ping is a loss (see PostgreSQL's above).
                                    let pinged =
                                        tokio::time::timeout(PING_TIMEOUT, conn.ping()).await;
                                    if !matches!(pinged, Ok(Ok(()))) {
                                        losses.note();
                                    }
                                    pinged.map_err(|_| crate::tx::timed_out("ping"))??;
                                }
                                Ok(true)
                            })
                        }
                    })
                    // MySQL bounds a transaction's idle time with the session's own
                    // `wait_timeout` (`mysql::dialect`), which must not stay at 2 s on an
                    // idle pooled connection: there the reset stays on release.
                    .after_release(move |conn, _meta| {
                        Box::pin(async move {
                            if flavor == Flavor::MySql {
                                sqlx::raw_sql(flavor.session_defaults()).execute(conn).await?;
                            }
                            Ok(true)
                        })
                    })
                    .connect_with(o)
                    .await
                    .map_err(connect_error)?;
                Pool::MySql(pool, flavor)
            }
        };
        Ok(Store { pool, target, losses, writer: Arc::default() })
    }

    /// Tells the store that one of its connections broke, so that connections idle since
    /// are checked before they are used again.
    pub fn note_connection_lost(&self) {
        self.losses.note();
    }

    /// What the store is connected to (no password), e.g. `postgres://u@host:5432/db`.
    pub fn target(&self) -> &str {
        &self.target
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
            Pool::MySql(..) => Backend::MySql,
        }
    }

    /// The SQLite pool, for applications that run their own SQL next to herald's.
    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        match &self.pool {
            Pool::Sqlite(p) => Some(p),
            _ => None,
        }
    }

    /// The PostgreSQL pool, for applications that run their own SQL next to herald's.
    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match &self.pool {
            Pool::Postgres(p) => Some(p),
            _ => None,
        }
    }

    /// MariaDB or MySQL, for a store on either (`None` on SQLite and PostgreSQL).
    pub fn mysql_flavor(&self) -> Option<Flavor> {
        match &self.pool {
            Pool::MySql(_, flavor) => Some(*flavor),
            _ => None,
        }
    }

    /// The MariaDB pool, for applications that run their own SQL next to herald's.
    pub fn mysql_pool(&self) -> Option<&MySqlPool> {
        match &self.pool {
            Pool::MySql(p, _) => Some(p),
            _ => None,
        }
    }

    /// Closes every connection; waits up to [`CLOSE_TIMEOUT`] for connections in use to
    /// come back (one stuck on a dead server must not hold up a shutdown).
    pub async fn close(&self) {
        let closed = match &self.pool {
            Pool::Sqlite(p) => tokio::time::timeout(CLOSE_TIMEOUT, p.close()).await,
            Pool::Postgres(p) => tokio::time::timeout(CLOSE_TIMEOUT, p.close()).await,
            Pool::MySql(p, _) => tokio::time::timeout(CLOSE_TIMEOUT, p.close()).await,
        };
        if closed.is_err() {
            tracing::warn!("connections still in use after {CLOSE_TIMEOUT:?}; closing anyway");
        }
    }

    /// A pooled connection for statements that need no transaction (single reads),
    /// within the pool's acquire timeout. On MariaDB its session has the server's own
    /// bounds and isolation back first (one round trip): a transaction leaves its bounds
    /// on the session (`Store::begin` sets them at every BEGIN), and a read must not run
    /// under what is left of another caller's deadline.
    pub async fn acquire(&self) -> Result<PooledConn, StoreError> {
        Ok(match &self.pool {
            Pool::MySql(p, flavor) => {
                let mut conn = p.acquire().await?;
                if let Err(e) = sqlx::raw_sql(flavor.session_defaults()).execute(&mut *conn).await {
                    crate::tx::discard(conn);
                    return Err(e.into());
                }
                PooledConn::MySql(conn)
            }
            _ => self.acquire_as_left().await?,
        })
    }

    /// A pooled connection as the last user left its session (on MariaDB, perhaps with a
    /// transaction's bounds and isolation): for the bench's floors, which begin with their
    /// own isolation and whose statements no bound reaches.
    pub(crate) async fn acquire_as_left(&self) -> Result<PooledConn, StoreError> {
        Ok(match &self.pool {
            Pool::Sqlite(p) => PooledConn::Sqlite(p.acquire().await?),
            Pool::Postgres(p) => PooledConn::Postgres(p.acquire().await?),
            Pool::MySql(p, _) => PooledConn::MySql(p.acquire().await?),
        })
    }

    /// One round trip to the database (readiness).
    /// Bounded by the acquire timeout plus [`PING_TIMEOUT`].
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.acquire().await?;
        let ping = async {
            match &mut conn {
                PooledConn::Sqlite(c) => sqlx::query("SELECT 1").execute(&mut **c).await.map(drop),
                PooledConn::Postgres(c) => {
                    sqlx::query("SELECT 1").execute(&mut **c).await.map(drop)
                }
                PooledConn::MySql(c) => sqlx::query("SELECT 1").execute(&mut **c).await.map(drop),
            }
        };
        match tokio::time::timeout(PING_TIMEOUT, ping).await {
            Ok(result) => result.map_err(StoreError::from),
            Err(_elapsed) => {
                conn.discard();
                Err(StoreError::Database(crate::tx::timed_out("ping")))
            }
        }
    }
}

/// rustls reports a refused certificate (unknown issuer, a name not in it) through the
/// socket, so sqlx returns it as an I/O error, "error communicating with database". Tagged
/// as the TLS error it is, the message says TLS and a caller can tell it by its variant.
fn tls_as_tls(err: sqlx::Error) -> sqlx::Error {
    match err {
        sqlx::Error::Io(io) if io.get_ref().is_some_and(|e| e.is::<rustls::Error>()) => {
            sqlx::Error::Tls(Box::new(io))
        }
        other => other,
    }
}
