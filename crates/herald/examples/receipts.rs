//! Receipts: apply an event once per (scope, operation id), durably, in your transaction.
//! The seed fixture: evt-17 (10), evt-17 (10), evt-18 (5) → 15 units over 2 identities.
//!
//!     cargo run -p herald --example receipts

use herald::{Herald, Once, once};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

#[tokio::main]
async fn main() -> Result<(), herald::Error> {
    let dir = std::env::temp_dir().join(format!("herald-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(herald::Error::app)?;
    let herald = Herald::open(&dir.join("example.db").display().to_string()).await?;

    // A stand-in for the state change (in an application: an UPDATE on tx.conn()).
    let total = Arc::new(AtomicI64::new(0));
    for (event, units) in [("evt-17", 10), ("evt-17", 10), ("evt-18", 5)] {
        let total = total.clone();
        let outcome = herald
            .transaction(|tx| {
                let total = total.clone();
                Box::pin(async move {
                    once(tx, "invoice-adjustments", event, |tx| {
                        Box::pin(async move {
                            tx.after_commit(move || {
                                total.fetch_add(units, Ordering::SeqCst);
                            });
                            Ok(())
                        })
                    })
                    .await
                })
            })
            .await?
            .value;
        let what = if matches!(outcome, Once::Applied(())) { "applied" } else { "already applied" };
        println!("{event} ({units}): {what}");
    }
    println!("total {}", total.load(Ordering::SeqCst));
    herald.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
