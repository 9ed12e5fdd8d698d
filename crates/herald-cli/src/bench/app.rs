//! Issue 33's measure, the application-transaction phases of `herald bench`: an
//! application's transaction — BEGIN, its own write, a submit through the library or the
//! SQL API, 10 ms of its own time, COMMIT — against the same transaction without the
//! submit, in the same run.

use super::Args;
use super::harness::{Bench, bar, rate, spawn_clients};
use super::report::{Figure, figure};
use anyhow::{Result, bail};
use herald::Herald;
use indicatif::ProgressBar;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The application's own time inside each transaction of the application-transaction
/// phases (issue 33): what a checkout or a ticket update does between BEGIN and COMMIT.
const APP_WORK: Duration = Duration::from_millis(10);
/// The client counts of those phases.
pub(super) const APP_CLIENTS: [usize; 2] = [8, 64];

/// How an application-transaction phase submits: through the library in herald's runner,
/// or through the SQL API on the application's own transaction.
#[derive(Debug, Clone, Copy)]
enum AppVia {
    Library,
    Sql,
    /// The SQL API's v2, the fingerprint computed by the client.
    SqlV2,
    /// The floor's claim (its rows, no more), each transaction on a stripe of its own
    /// (transaction i on stripe i % 64): what any claim writing these rows costs.
    Floor,
}

/// Issue 33's measure: an application's transaction — BEGIN, its own write, a submit
/// (library in a caller's transaction, or the SQL API), 10 ms of its own time, COMMIT —
/// against the same transaction without the submit, in the same run; with every
/// transaction on one tenant (the case a tenant-wide lock serialises) and spread over the
/// bench's tenants; 8 and 64 clients; and once with cost 0 (no reservation).
pub(super) async fn app_transaction_figures(
    args: &Args,
    bench: &Bench,
    herald: &Herald,
    n_max: usize,
) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    let one = &bench.tenants[..1];
    let many = &bench.tenants[..];
    for clients in APP_CLIENTS {
        // Enough transactions that each client runs a few dozen (the slowest case, one at
        // a time at ~10 ms each, runs for seconds), within the run's `--n`.
        let n = (clients * if args.quick { 24 } else { 48 }).min(n_max).max(clients);
        let without = app_transactions(bench, herald, clients, n, AppVia::Sql, None).await?;
        for via in [AppVia::Floor, AppVia::Library, AppVia::Sql, AppVia::SqlV2] {
            // (The floor always reserves 1: it has no cost-0 case.)
            let cases: &[(&str, &[herald::TenantId], i64)] = if clients == APP_CLIENTS[0]
                && !matches!(via, AppVia::Floor)
            {
                &[("one tenant", one, 1), ("one tenant, cost 0", one, 0), ("many tenants", many, 1)]
            } else {
                &[("one tenant", one, 1), ("many tenants", many, 1)]
            };
            for (label, tenants, cost) in cases {
                let with = app_transactions(bench, herald, clients, n, via, Some((tenants, *cost)))
                    .await?;
                let face = match via {
                    AppVia::Library => "a library submit",
                    AppVia::Sql => "an SQL API submit",
                    AppVia::SqlV2 => "an SQL API v2 submit",
                    AppVia::Floor => "the floor's claim",
                };
                figures.push(figure(
                    format!(
                        "app transaction, 10 ms of work, {clients} clients: with {face}, {label} (vs. without)"
                    ),
                    with,
                    "/s",
                    Some(without),
                    n,
                    None,
                ));
            }
        }
    }
    Ok(figures)
}

/// One application-transaction phase: `n` transactions from `clients` clients, with a
/// submit for one of `submit`'s tenants at its cost, or without; transactions per second.
async fn app_transactions(
    bench: &Bench,
    herald: &Herald,
    clients: usize,
    n: usize,
    via: AppVia,
    submit: Option<(&[herald::TenantId], i64)>,
) -> Result<f64> {
    bench.reset().await?;
    let label = match submit {
        None => format!("app transactions, {clients} clients, without a submit"),
        Some((tenants, cost)) => format!(
            "app transactions, {clients} clients, {via:?} submit, {} tenant(s), cost {cost}",
            tenants.len()
        ),
    };
    let tenants: Vec<herald::TenantId> = submit.map(|(t, _)| t.to_vec()).unwrap_or_default();
    let cost = submit.map_or(0, |(_, c)| c);
    // Untimed first: two transactions per client, so that no timed transaction pays for a
    // connection's first use of a statement or a function (preparing it, PL/pgSQL's
    // compile), which only the first phase of a run would otherwise pay.
    let warm = bar(2 * clients, &format!("{label} (warm-up)"));
    let round = AppRound { herald, clients, via, tenants: &tenants, cost, with: submit.is_some() };
    round.run(2 * clients, &warm).await?;
    warm.finish();
    let b = bar(n, &label);
    let started = Instant::now();
    round.run(n, &b).await?;
    let value = rate(n, started.elapsed());
    b.finish();
    Ok(value)
}

/// One round of an application-transaction phase: `count` transactions from `clients`
/// clients, each on the next of `tenants` (with a submit) or without one.
struct AppRound<'a> {
    herald: &'a Herald,
    clients: usize,
    via: AppVia,
    tenants: &'a [herald::TenantId],
    cost: i64,
    with: bool,
}

impl AppRound<'_> {
    async fn run(&self, count: usize, b: &ProgressBar) -> Result<()> {
        let h = self.herald.clone();
        let (tenants, cost, with, via) = (self.tenants.to_vec(), self.cost, self.with, self.via);
        let phase = Uuid::now_v7().simple().to_string();
        spawn_clients(self.clients, count, b, move |i| {
            let h = h.clone();
            let tenant = with.then(|| tenants[i % tenants.len()]);
            let order = format!("app33-{phase}-{i}");
            async move {
                match via {
                    AppVia::Library => {
                        let submit = tenant.map(|t| (t, cost));
                        herald::bench::app_transaction(&h, &order, submit, APP_WORK).await?
                    }
                    AppVia::Floor => {
                        let (tenant, stripe) = match tenant {
                            Some(t) => (t.as_uuid(), (i % 64) as i16),
                            None => bail!("the floor's face runs with a submit only"),
                        };
                        herald::bench::app_floor_commit(&h, &order, tenant, stripe, APP_WORK)
                            .await?
                    }
                    AppVia::Sql | AppVia::SqlV2 => {
                        let submit = tenant.map(|t| (t.as_uuid(), cost));
                        let version = match via {
                            AppVia::SqlV2 => herald::bench::SqlSubmit::V2ClientFingerprint,
                            _ => herald::bench::SqlSubmit::V1,
                        };
                        herald::bench::app_commit(&h, &order, submit, APP_WORK, version).await?
                    }
                }
                Ok(())
            }
        })
        .await
    }
}
