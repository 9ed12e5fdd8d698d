//! On SQLite, herald's reads never take the write lock: while another connection holds it
//! (a writer mid-transaction, in this process or another), every read of the library still
//! answers at once — WAL readers do not wait for the writer — and only writes queue.

use herald::sqlx::{self, Connection, SqliteConnection};
use herald::{Error, Herald, SubmitRequest, TxOptions};
use std::time::Duration;

/// Far below the runner's 10 s deadline and the 5 s busy timeout: a read that waited for
/// the write lock could not answer within it.
const PROMPT: Duration = Duration::from_secs(2);

async fn promptly<T>(what: &str, call: impl Future<Output = Result<T, Error>>) -> T {
    match tokio::time::timeout(PROMPT, call).await {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => panic!("{what} failed under another writer's lock: {e}"),
        Err(_) => panic!("{what} waited for the write lock (no answer within {PROMPT:?})"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_answer_while_another_connection_holds_the_write_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let herald = Herald::open(&url).await.expect("open");
    let tenant = herald.tenant_create("acme").await.unwrap().id;
    herald.quota_grant(tenant, "email", 10, None).await.unwrap();
    let req = SubmitRequest::new(
        tenant,
        "order-17",
        "email",
        "a@example.com",
        serde_json::json!({"subject": "s", "text": "t"}),
    );
    let id = herald.submit_alone(&req).await.unwrap().delivery.id;

    // Another connection takes the write lock and writes, uncommitted.
    let mut writer = SqliteConnection::connect(&url).await.expect("connect");
    sqlx::raw_sql("BEGIN IMMEDIATE; UPDATE quota_accounts SET granted = granted")
        .execute(&mut writer)
        .await
        .expect("hold the write lock");

    let delivery = promptly("Herald::delivery", herald.delivery(tenant, id)).await;
    assert_eq!(delivery.id, id);
    let attempts = promptly("Herald::attempts", herald.attempts(tenant, id)).await;
    assert!(attempts.is_empty(), "{attempts:?}");
    let quotas = promptly("Herald::quotas", herald.quotas(tenant)).await;
    assert_eq!(quotas.len(), 1, "{quotas:?}");
    assert_eq!((quotas[0].available, quotas[0].reserved), (9, 1), "{quotas:?}");
    let key = promptly(
        "Herald::api_key",
        herald.api_key(&herald::KeyId::parse("0123456789abcdef").unwrap()),
    )
    .await;
    assert!(key.is_none(), "{key:?}");

    // The lock is real: a write does wait for it, and gives up at its deadline.
    let short = TxOptions { deadline: Duration::from_millis(200), ..TxOptions::default() };
    let write = herald
        .transaction_with(&short, |tx| {
            Box::pin(async move {
                sqlx::query("UPDATE quota_accounts SET granted = granted")
                    .execute(tx.sqlite().expect("sqlite"))
                    .await?;
                Ok(())
            })
        })
        .await;
    assert!(matches!(write, Err(Error::DeadlineExceeded { .. })), "{write:?}");

    sqlx::raw_sql("ROLLBACK").execute(&mut writer).await.expect("rollback");
    writer.close().await.ok();
    herald.close().await;
}
