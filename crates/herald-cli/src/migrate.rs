//! `herald migrate`: apply pending schema migrations and report the version.

use anyhow::Result;
use herald::{Herald, StoreOptions};

#[derive(clap::Args)]
pub struct Args {
    /// Database: a file path or sqlite://PATH (created if missing), postgres://… (its search_path names herald's schema, created if missing), or mariadb://… / mysql://… (a database of herald's own)
    #[arg(long, env = "HERALD_DB", default_value = crate::DB_DEFAULT)]
    db: String,
    /// Print JSON instead of a sentence.
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
    let report = Herald::migrate(&args.db, &StoreOptions::default()).await?;
    let backend = report.backend;
    if args.json {
        let value = serde_json::json!({
            "backend": backend.name(),
            "applied": report.applied,
            "version": report.version,
        });
        println!("{value}");
    } else if report.applied.is_empty() {
        println!("schema is current (version {}) on {}", report.version, backend.name());
    } else {
        let applied: Vec<String> = report.applied.iter().map(i64::to_string).collect();
        println!(
            "applied migration(s) {} on {}; schema version {}",
            applied.join(", "),
            backend.name(),
            report.version
        );
    }
    Ok(())
}
