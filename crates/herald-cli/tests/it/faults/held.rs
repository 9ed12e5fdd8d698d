//! What the database server holds for a `herald serve` behind the fault proxy: its
//! sessions, counted on the server's side (`pg_stat_activity`, MariaDB's processlist) by
//! the proxy's upstream ports, so a connection the process gave up on but the server
//! still keeps open counts too. Sampled on a connection of the test's own, not through
//! the proxy.

use crate::support::*;
use herald_faults::FaultProxy;

/// How often the server's sessions are counted.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The most sessions the server held at once for the process, and when.
#[derive(Debug, Clone, Default)]
pub struct Held {
    pub max: i64,
    pub max_at: Duration,
    pub samples: usize,
    /// The count once a second, for the message when the bound is broken.
    pub by_second: Vec<i64>,
}

/// Counts the server's sessions from the proxy's upstream ports every
/// [`SAMPLE_EVERY`] until `stop` turns true; returns the most seen at once.
pub fn sample(
    base: &str,
    proxy: Arc<FaultProxy>,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Held> {
    let base = base.to_string();
    tokio::spawn(async move {
        let mut stop = stop;
        let mut counter = Counter::connect(&base).await;
        let started = Instant::now();
        let mut held = Held::default();
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => break,
            }
            let n = counter.count(&proxy.upstream_ports()).await;
            held.samples += 1;
            if held.samples % 10 == 1 {
                held.by_second.push(n);
            }
            if n > held.max {
                held.max = n;
                held.max_at = started.elapsed();
            }
        }
        held
    })
}

/// A connection of the test's own to the server, straight (not through the proxy).
enum Counter {
    Postgres(PgConnection),
    MySql(sqlx::MySqlConnection),
}

impl Counter {
    async fn connect(base: &str) -> Counter {
        if base.starts_with("postgres") {
            Counter::Postgres(PgConnection::connect(base).await.expect("connect to count"))
        } else {
            Counter::MySql(sqlx::MySqlConnection::connect(base).await.expect("connect to count"))
        }
    }

    /// Sessions whose client port is one of `ports` (all on loopback, from the proxy), on
    /// PostgreSQL also started within a second of the proxy's connection from that port:
    /// a port a reset freed can be taken by another test's connection to the same server
    /// (CI once counted 20 for a bound of 18 that way, in the last sample, with nothing
    /// of herald's left to do).
    async fn count(&mut self, ports: &[(u16, i64)]) -> i64 {
        match self {
            Counter::Postgres(c) => {
                let (ports, opened): (Vec<i32>, Vec<i64>) =
                    ports.iter().map(|&(p, at)| (i32::from(p), at)).unzip();
                sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity a WHERE EXISTS (
                         SELECT 1 FROM unnest($1::int4[], $2::int8[]) AS u (port, opened_ms)
                         WHERE a.client_port = u.port
                           AND abs(extract(epoch FROM a.backend_start) * 1000 - u.opened_ms)
                               < 1000)",
                )
                .bind(ports)
                .bind(opened)
                .fetch_one(c)
                .await
                .expect("count pg_stat_activity")
            }
            Counter::MySql(c) => {
                // HOST is `address:port`.
                let hosts: Vec<String> =
                    sqlx::query_scalar("SELECT HOST FROM information_schema.PROCESSLIST")
                        .fetch_all(c)
                        .await
                        .expect("read the processlist");
                let ports: BTreeSet<u16> = ports.iter().map(|&(p, _)| p).collect();
                hosts
                    .iter()
                    .filter_map(|h| h.rsplit_once(':')?.1.parse::<u16>().ok())
                    .filter(|p| ports.contains(p))
                    .count() as i64
            }
        }
    }
}
