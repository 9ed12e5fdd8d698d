//! `herald demo`: runs `herald::demo` and prints what it observed.

use anyhow::Result;
use herald::demo::{DemoReport, RECEIPT_EVENTS};

#[derive(clap::Args)]
pub struct Args {
    /// Database to run the demo in: a file path or sqlite://PATH, postgres://… or mariadb://… / mysql://… It gets
    /// herald's schema plus a few demo_* tables. Defaults to its own SQLite file, so the
    /// demo never touches your real herald.db.
    #[arg(long, default_value = "herald-demo.db")]
    db: String,
    /// Print JSON instead of the report.
    #[arg(long)]
    json: bool,
}

/// The URL prints without its password.
impl std::fmt::Debug for Args {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Args")
            .field("db", &herald_core::redact_url(&self.db))
            .field("json", &self.json)
            .finish()
    }
}

pub async fn run(args: Args) -> Result<()> {
    let report = herald::demo::run(&args.db).await?;
    if args.json {
        println!("{}", json(&report));
    } else {
        print!("{}", human(&report));
    }
    Ok(())
}

fn json(r: &DemoReport) -> serde_json::Value {
    let runs = |x: &herald::demo::Runs| {
        serde_json::json!({
            "closure_runs": x.closure_runs,
            "effects_fired": x.effects_fired,
            "job_rows": x.job_rows,
        })
    };
    serde_json::json!({
        "backend": r.backend.name(),
        "naive": runs(&r.naive),
        "herald": runs(&r.herald),
        "herald_attempts": r.herald_attempts,
        "competing_writer_waited_ms": r.competing_writer_waited.map(|d| d.as_millis() as u64),
        "plain_error": { "closure_runs": r.plain_error_runs, "error": r.plain_error },
        "receipts": { "total": r.receipts.0, "identities": r.receipts.1 },
        "receipts_reopened": { "total": r.receipts_reopened.0, "identities": r.receipts_reopened.1 },
        "lock_wait": {
            "deadline_ms": r.lock_wait.deadline.as_millis() as u64,
            "elapsed_ms": r.lock_wait.elapsed.as_millis() as u64,
            "closure_runs": r.lock_wait.closure_runs,
            "error": r.lock_wait.error,
            "server_lock_wait_ms": r.lock_wait.server_lock_wait.map(|d| d.as_millis() as u64),
        },
    })
}

fn human(r: &DemoReport) -> String {
    let conflict = match r.backend {
        herald::Backend::Postgres => {
            "a second connection locks two rows in the opposite order; PostgreSQL's deadlock detector aborts the closure (40P01)"
        }
        herald::Backend::Sqlite => {
            "a second connection commits a write under the closure's read snapshot (SQLITE_BUSY_SNAPSHOT)"
        }
        herald::Backend::MySql => {
            "a second connection locks two rows in the opposite order; InnoDB rolls back the closure's transaction (1213)"
        }
    };
    let mut out = format!("herald demo on {}\n\n", r.backend.name());
    out += "1. A retried transaction with the side effect inline (a framework's `attempts: 5`)\n";
    out += &format!("   conflict: {conflict}\n");
    out += &format!(
        "   closure ran: {} | side effect fired: {}\n\n",
        r.naive.closure_runs, r.naive.effects_fired
    );
    out += "2. The same work through herald's runner, the effect registered with after_commit\n";
    out += &format!(
        "   closure ran: {} | side effect fired: {} | job rows enqueued in the closure: {} | runner attempts: {}\n",
        r.herald.closure_runs, r.herald.effects_fired, r.herald.job_rows, r.herald_attempts
    );
    if let Some(waited) = r.competing_writer_waited {
        out += &format!(
            "   (BEGIN IMMEDIATE took the write lock first: the competing writer waited {} ms instead of forcing a retry)\n",
            waited.as_millis()
        );
    }
    out += "\n3. A closure that fails with an ordinary error\n";
    out += &format!("   closure ran: {} | error: {}\n\n", r.plain_error_runs, r.plain_error);
    let events: Vec<String> =
        RECEIPT_EVENTS.iter().map(|(id, units)| format!("{id} ({units})")).collect();
    out += &format!("4. Receipts: events {} through once()\n", events.join(", "));
    out += &format!("   {} {}\n", r.receipts.0, r.receipts.1);
    out += &format!(
        "   after closing and reopening the database: {} {}\n",
        r.receipts_reopened.0, r.receipts_reopened.1
    );
    let w = &r.lock_wait;
    out += "\n5. A lock another connection holds past the call's deadline\n";
    out += &format!(
        "   deadline: {} ms | answered after: {} ms | closure ran: {} | error: {}\n",
        w.deadline.as_millis(),
        w.elapsed.as_millis(),
        w.closure_runs,
        w.error
    );
    out += &match (r.backend, w.server_lock_wait) {
        (herald::Backend::Sqlite, _) => {
            "   (a writer waits at BEGIN IMMEDIATE for the busy timeout, which herald sets to the time left)\n"
                .to_string()
        }
        (_, Some(server)) => format!(
            "   (the server's own bound on one lock wait is {} s: a framework's `attempts: 5` behind this lock would wait up to {} s)\n",
            server.as_secs(),
            5 * server.as_secs()
        ),
        (_, None) => "   (the server's own bound on one lock wait: none — a framework's `attempts: 5` behind this lock would wait until it is released)\n".to_string(),
    };
    out
}
