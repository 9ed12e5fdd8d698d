//! Deliveries end to end in one process: a channel of your own, a submit (and its
//! retry, a duplicate), one pass of a worker and of a reconciler, the ledger after.
//!
//!     cargo run -p herald --example deliveries

use herald::{
    Channel, Herald, Leased, Outcome, Reconciler, ReconcilerOptions, SubmitRequest, Worker,
    WorkerOptions,
};
use std::sync::Arc;

/// Your provider's adapter. It knows which failures are worth retrying.
struct Sms;

impl Channel for Sms {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            // Call the provider with d.id as its idempotency key; map its answer:
            // Outcome::transient(..) for timeouts and 5xx, Outcome::terminal(..) for an
            // invalid number.
            println!(
                "sms to {} (delivery {}, attempt {}): {}",
                d.to,
                d.id,
                d.attempt,
                d.payload.as_str()
            );
            Outcome::Sent
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), herald::Error> {
    let dir = std::env::temp_dir().join(format!("herald-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(herald::Error::app)?;
    let herald = Herald::open(&dir.join("example.db").display().to_string()).await?;
    let tenant = herald.tenant_create("acme").await?.id;
    herald.quota_grant(tenant, "sms", 10, None).await?;

    // The claim commits (or rolls back) with your business change.
    let request = SubmitRequest::new(
        tenant,
        "ticket-42-status-7",
        "sms",
        "+15550100",
        serde_json::json!({"text": "Your repair is ready"}),
    );
    let submitted = herald.submit_alone(&request).await?;
    let again = herald.submit_alone(&request).await?; // a retry: the same delivery
    println!("submitted {} (repeat is a duplicate: {})", submitted.delivery.id, again.duplicate);

    let sms: Arc<dyn Channel> = Arc::new(Sms);
    let worker = Worker::new(herald.clone(), WorkerOptions::default(), [("sms".to_string(), sms)])?;
    let reconciler = Reconciler::new(herald.clone(), ReconcilerOptions::default());
    // One pass each (a service would call `run(token)` and cancel the token on SIGTERM).
    let report = worker.run_once().await?;
    let reconciled = reconciler.run_once().await?;
    println!("worker: {report:?}; reconciler: {reconciled:?}");

    let delivery = herald.delivery(tenant, submitted.delivery.id).await?;
    let quota = herald.quotas(tenant).await?;
    println!("state {}; quota spent {} of {}", delivery.state, quota[0].spent, quota[0].granted);
    herald.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
