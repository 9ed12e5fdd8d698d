//! The figures of `herald bench`: each with its ratio to the floor measured in the same
//! run and to each peer's figure for the same phase, printed as one table (and written as
//! JSON by the caller).

use super::peers::PeerRun;
use herald::bench::Work;
use std::collections::BTreeMap;
/// How a figure compares to a peer's: which peer phase, and which of its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PeerMetric {
    Insert,
    /// The insert phase from as many callers as herald's 64-task submit.
    InsertWide,
    Drain,
    EndToEnd,
    LatencyP50,
    LatencyP99,
}

/// What the database did per delivery (or per job) in a phase: `herald::bench::Work`
/// divided by the phase's count. `None` where the backend has no such counter.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct PerDelivery {
    /// WAL bytes on PostgreSQL, redo log bytes on MariaDB.
    log_bytes: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    wal_records: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wal_full_pages: Option<f64>,
    rows_inserted: f64,
    rows_updated: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    rows_hot_updated: Option<f64>,
    rows_deleted: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    transactions: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    statements: Option<f64>,
    /// Pages the server looked at (logical reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pages_read: Option<f64>,
    /// The deliveries the counts were divided by.
    n: usize,
}

pub(super) fn per_delivery(work: Option<Work>, n: usize) -> Option<PerDelivery> {
    let w = work?;
    let each = |v: i64| v as f64 / n.max(1) as f64;
    Some(PerDelivery {
        log_bytes: each(w.log_bytes),
        wal_records: w.wal_records.map(each),
        wal_full_pages: w.wal_full_pages.map(each),
        rows_inserted: each(w.rows_inserted),
        rows_updated: each(w.rows_updated),
        rows_hot_updated: w.rows_hot_updated.map(each),
        rows_deleted: each(w.rows_deleted),
        transactions: w.transactions.map(each),
        statements: w.statements.map(each),
        pages_read: w.pages_read.map(each),
        n,
    })
}

/// A peer's value for one figure.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(super) struct PeerCell {
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<f64>,
    unit: &'static str,
    /// herald's value divided by the peer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    herald_per_peer: Option<f64>,
    phase: &'static str,
    n: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_per_sec: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
    /// The phase's achieved rate (for latency: the insert rate actually reached).
    #[serde(skip_serializing_if = "Option::is_none")]
    per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<String>,
    /// The database's work per job in the peer's phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    work: Option<PerDelivery>,
}

/// One measured figure.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct Figure {
    name: String,
    value: f64,
    unit: &'static str,
    floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_floor: Option<f64>,
    /// Deliveries (or operations) the figure was measured over.
    n: usize,
    /// The floor's passes when it ran more than once (`floor` is their mean).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    floor_passes: Vec<f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    peers: BTreeMap<String, PeerCell>,
    /// The database's work per delivery in herald's phase, and in the floor's.
    #[serde(skip_serializing_if = "Option::is_none")]
    work: Option<PerDelivery>,
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_work: Option<PerDelivery>,
    #[serde(skip)]
    compare: Option<PeerMetric>,
}

impl Figure {
    /// The work counted in herald's phase and in the floor's, each over its own count.
    pub(super) fn work(mut self, herald: Option<PerDelivery>, floor: Option<PerDelivery>) -> Self {
        self.work = herald;
        self.floor_work = floor;
        self
    }

    pub(super) fn floor_passes(mut self, passes: &[f64]) -> Self {
        self.floor_passes = passes.to_vec();
        self
    }
}

pub(super) fn figure(
    name: impl Into<String>,
    value: f64,
    unit: &'static str,
    floor: Option<f64>,
    n: usize,
    compare: Option<PeerMetric>,
) -> Figure {
    Figure {
        name: name.into(),
        value,
        unit,
        floor,
        ratio_to_floor: floor.map(|f| value / f),
        n,
        floor_passes: Vec::new(),
        peers: BTreeMap::new(),
        work: None,
        floor_work: None,
        compare,
    }
}

pub(super) fn attach_peers(figures: &mut [Figure], peers: &[PeerRun]) {
    for f in figures.iter_mut() {
        let Some(metric) = f.compare else { continue };
        for p in peers {
            // Work is counted for the insert and e2e phases only (as the difference of a
            // run of N jobs and one of N/2: peers::counted_phase); the drain phase's count
            // would include its untimed bulk insert.
            let (phase, result, n, rate, work) = match metric {
                PeerMetric::Insert => ("insert", &p.insert, p.sizes.insert, None, p.insert_work),
                PeerMetric::InsertWide => ("insert", &p.insert_wide, p.sizes.insert, None, None),
                PeerMetric::Drain => ("drain", &p.drain, p.sizes.drain, None, None),
                PeerMetric::EndToEnd => ("e2e", &p.e2e, p.sizes.e2e, None, p.e2e_work),
                PeerMetric::LatencyP50 | PeerMetric::LatencyP99 => {
                    ("latency", &p.latency, p.sizes.latency, Some(p.sizes.rate), None)
                }
            };
            let mut cell =
                PeerCell { unit: f.unit, phase, n, rate_per_sec: rate, ..PeerCell::default() };
            match result {
                Ok(line) => {
                    let value = match metric {
                        PeerMetric::Insert
                        | PeerMetric::InsertWide
                        | PeerMetric::Drain
                        | PeerMetric::EndToEnd => Some(line.per_sec),
                        PeerMetric::LatencyP50 => line.p50_ms,
                        PeerMetric::LatencyP99 => line.p99_ms,
                    };
                    cell.value = value;
                    cell.herald_per_peer = value.filter(|v| *v > 0.0).map(|v| f.value / v);
                    cell.version = Some(line.version.clone());
                    cell.config = Some(line.config.clone());
                    cell.seconds = Some(line.seconds);
                    cell.per_sec = Some(line.per_sec);
                    cell.n = line.count as usize;
                    cell.work = work.and_then(|(w, jobs)| per_delivery(Some(w), jobs));
                }
                Err(e) => cell.failed = Some(e.clone()),
            }
            f.peers.insert(p.name.clone(), cell);
        }
    }
}

fn number(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    match unit {
        "/s" => format!("{value:.0}/s"),
        u => format!("{value:.1} {u}"),
    }
}

fn peer_text(cell: &PeerCell) -> String {
    if let Some(e) = &cell.failed {
        let mut text = format!("failed: {e}");
        if text.chars().count() > 48 {
            text = text.chars().take(47).collect::<String>() + "…";
        }
        return text;
    }
    let Some(value) = cell.value else { return "–".to_string() };
    let mut text = number(value, cell.unit);
    if cell.unit == "ms"
        && let Some(rate) = cell.rate_per_sec.filter(|r| *r != 200)
    {
        text.push_str(&format!(" @{rate}/s"));
    }
    if let Some(r) = cell.herald_per_peer {
        text.push_str(&format!(" [{r:.2}]"));
    }
    text
}

pub(super) fn print_table(figures: &[Figure], peers: &[PeerRun]) {
    let mut header: Vec<String> =
        ["figure", "herald", "floor", "ratio to floor"].iter().map(|s| s.to_string()).collect();
    header.extend(peers.iter().map(|p| p.name.clone()));
    let mut rows = vec![header];
    for f in figures {
        let mut row = vec![
            f.name.clone(),
            number(f.value, f.unit),
            f.floor.map(|v| number(v, f.unit)).unwrap_or_default(),
            f.ratio_to_floor.map(|r| format!("{r:.2}")).unwrap_or_default(),
        ];
        for p in peers {
            row.push(f.peers.get(&p.name).map(peer_text).unwrap_or_default());
        }
        rows.push(row);
    }
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let line = |row: &[String]| {
        row.iter()
            .enumerate()
            .map(|(c, cell)| {
                let w = widths.get(c).copied().unwrap_or(0);
                if c == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") }
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    for (i, row) in rows.iter().enumerate() {
        println!("{}", line(row));
        if i == 0 {
            println!("{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-|-"));
        }
    }
    println!(
        "\nfloor: submit = the claim (PostgreSQL: its CTE as one statement, \"in a transaction\": \
         between BEGIN and COMMIT; MariaDB: four statements between BEGIN and COMMIT); drain = \
         100 rows per transaction (PostgreSQL: one CTE; MariaDB: four statements), the mean of \
         a pass before herald's submit and drain phases and one after; end-to-end = both at \
         once, no HTTP call."
    );
    print_work(figures, peers);
    if !peers.is_empty() {
        println!(
            "peers: [herald ÷ peer] — above 1 herald is faster (rates), below 1 herald is \
             quicker (latencies). submit vs the peer's insert, drain vs the peer's drain \
             (jobs inserted before its clock starts), end-to-end vs the peer's e2e (insert \
             from C clients while its worker drains, no-op handler), latency vs the peer's \
             latency phase."
        );
        for p in peers {
            println!(
                "  {}: insert {} (from the run's clients, and from {} against the {}-task \
                 figure), drain {}, e2e {}, latency {} at {}/s",
                p.name,
                p.sizes.insert,
                super::phases::WIDE,
                super::phases::WIDE,
                p.sizes.drain,
                p.sizes.e2e,
                p.sizes.latency,
                p.sizes.rate
            );
        }
    }
}

/// The work per delivery of every figure that counted it — herald's, the floor's, each
/// peer's — one row each.
fn print_work(figures: &[Figure], peers: &[PeerRun]) {
    let mut rows: Vec<(String, PerDelivery)> = Vec::new();
    // Only figures whose own phase was counted: a peer's cell shows under each figure
    // compared with it (its insert under both submit_alone figures).
    for f in figures.iter().filter(|f| f.work.is_some()) {
        rows.extend(f.work.map(|w| (format!("{}: herald", f.name), w)));
        rows.extend(f.floor_work.map(|w| (format!("{}: floor", f.name), w)));
        for p in peers {
            let work = f.peers.get(&p.name).and_then(|c| c.work.map(|w| (c.phase, w)));
            rows.extend(work.map(|(phase, w)| (format!("{}: {} ({phase})", f.name, p.name), w)));
        }
    }
    if rows.is_empty() {
        return;
    }
    let header = [
        "work per delivery",
        "log bytes",
        "WAL records",
        "full pages",
        "rows inserted",
        "updated (HOT)",
        "deleted",
        "transactions",
        "statements",
        "pages read",
    ];
    let maybe =
        |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for (name, w) in &rows {
        table.push(vec![
            name.clone(),
            format!("{:.0}", w.log_bytes),
            maybe(w.wal_records, 1),
            maybe(w.wal_full_pages, 2),
            format!("{:.2}", w.rows_inserted),
            match w.rows_hot_updated {
                Some(hot) => format!("{:.2} ({hot:.2})", w.rows_updated),
                None => format!("{:.2}", w.rows_updated),
            },
            format!("{:.2}", w.rows_deleted),
            maybe(w.transactions, 3),
            maybe(w.statements, 2),
            maybe(w.pages_read, 1),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| table.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    println!();
    for (i, row) in table.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let w = widths[c];
                if c == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") }
            })
            .collect();
        println!("{}", cells.join(" | "));
        if i == 0 {
            println!("{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-|-"));
        }
    }
    println!(
        "\nwork: the database's own counters over the phase, divided by its deliveries (jobs, \
         for a peer) — server-wide, so they hold only with nothing else running. PostgreSQL: \
         WAL bytes and records (pg_current_wal_lsn, pg_stat_wal), rows and transactions \
         (pg_stat_database), HOT updates (pg_stat_user_tables), top-level statements \
         (pg_stat_statements, – when the server does not preload it). MariaDB: redo log bytes \
         (Innodb_os_log_written), rows through the storage engines (Handler_write, _update, \
         _delete), statements sent (Questions, not a procedure's own) and explicit COMMITs \
         and ROLLBACKs. A statement is not a round trip: herald's BEGIN carries its session \
         settings in the same query. The harness's own reads (a few per phase) are included."
    );
}
