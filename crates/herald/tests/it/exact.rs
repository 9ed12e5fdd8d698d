//! What herald keeps exactly, on every backend: identities compared byte for byte (case,
//! trailing spaces, Unicode normalisation: MariaDB's usual collations fold or pad them),
//! payloads and recipients as sent (64 KiB of text with emoji and escapes, more than
//! MariaDB's `TEXT` holds), times beyond 2038 (no `TIMESTAMP`). And on MariaDB, an
//! application's own transaction: at REPEATABLE READ (MySQL's default) its plain reads
//! keep their snapshot, yet a submit in it answers what was committed; and one InnoDB
//! transaction spans the application's database and herald's.

use crate::common::backends;
use herald::sqlx::{self, Connection};
use herald::{Backend, Conn, Error, Herald, Payload, SubmitRequest};
use herald_store::deliveries::{Lease, deliveries_lease};
use serde_json::json;
use std::time::Duration;

fn request(tenant: herald::TenantId, operation_key: &str) -> SubmitRequest {
    SubmitRequest::new(tenant, operation_key, "email", "ada@example.com", json!({"n": 1}))
}

async fn funded(herald: &Herald) -> herald::TenantId {
    let tenant = herald.tenant_create("acme").await.unwrap().id;
    herald.quota_grant(tenant, "email", 1_000, None).await.unwrap();
    herald.settings().await.unwrap();
    tenant
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_keys_that_differ_in_any_byte_are_different_identities() {
    // Case, a trailing space, NFC against NFD, ß against ss, a trailing NUL-free control.
    let keys =
        ["Order-1", "order-1", "k", "k ", "caf\u{e9}", "cafe\u{301}", "stra\u{df}e", "strasse"];
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = funded(&herald).await;
        let mut ids = Vec::new();
        for key in keys {
            let first = herald.submit_alone(&request(tenant, key)).await.unwrap();
            assert!(!first.duplicate, "{name}: {key:?} was taken as a duplicate");
            ids.push(first.delivery.id);
            let again = herald.submit_alone(&request(tenant, key)).await.unwrap();
            assert!(again.duplicate, "{name}: {key:?} again");
            assert_eq!(again.delivery.id, first.delivery.id, "{name}: {key:?} again");
            assert_eq!(again.delivery.operation_key, key, "{name}: the key as sent");
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), keys.len(), "{name}: one delivery per key");
        let account = &herald.quotas(tenant).await.unwrap()[0];
        assert_eq!(account.reserved, keys.len() as i64, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_recipients_and_far_times_round_trip_exactly() {
    // 64 KiB of JSON text as a client wrote it (the limit): spacing, an escape kept as an escape,
    // emoji (four bytes in UTF-8), a key order no serializer would choose.
    let mut text = String::from(
        "{ \"z\" : \"\\u00e9 and \u{e9}\", \"emoji\":\"\u{1f980}\u{1f389}\",\n  \"pad\": \"",
    );
    // Exactly the limit (64 KiB), most of it four-byte characters.
    while text.len() + 7 + 3 <= herald_core::limits::PAYLOAD_BYTES_MAX {
        text.push_str("\u{1f980}abc");
    }
    while text.len() + 3 < herald_core::limits::PAYLOAD_BYTES_MAX {
        text.push('x');
    }
    text.push_str("\" }");
    assert_eq!(text.len(), 64 * 1024);
    let to = "Zo\u{eb} \u{1f980} <zoe@example.com>";
    // 2100-01-01T00:00:00.123Z: past 2038 and past TIMESTAMP's range.
    let send_at = jiff::Timestamp::from_millisecond(4_102_444_800_123).unwrap();
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = funded(&herald).await;
        let mut req = SubmitRequest::new(tenant, "big", "email", to, Payload::from_text(&text));
        req.send_at = Some(send_at);
        let submitted = herald.submit_alone(&req).await.unwrap();
        let d = herald.delivery(tenant, submitted.delivery.id).await.unwrap();
        assert_eq!(d.to, to, "{name}");
        assert_eq!(d.next_attempt_at, send_at, "{name}: the time to the millisecond");
        // A lease at the due time reads the payload back as it was sent.
        let channels = ["email".to_string()];
        let lease = Lease {
            worker: "w",
            channels: &channels,
            limit: 10,
            lease: Duration::from_secs(60),
            now: herald_store::Now::At(send_at.as_millisecond()),
        };
        let lease = &lease;
        let leased = herald
            .transaction(|tx| {
                Box::pin(async move { Ok(deliveries_lease(tx.conn(), lease).await?) })
            })
            .await
            .unwrap()
            .value;
        assert_eq!(leased.len(), 1, "{name}");
        assert!(leased[0].payload == text, "{name}: the payload came back changed");
        // And the same request again is a duplicate: the fingerprint of what was kept.
        assert!(herald.submit_alone(&req).await.unwrap().duplicate, "{name}");
    }
}

/// MariaDB, the application's own transaction at REPEATABLE READ (MySQL's default): after
/// its first read, a plain read keeps its snapshot and does not see a claim another
/// connection commits; a locking read does; and a submit of that identity inside the
/// transaction answers the committed claim (a duplicate), never a second delivery — or,
/// with `innodb_snapshot_isolation` on, a concurrency error to retry (1020).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb_a_submit_in_a_repeatable_read_transaction_answers_what_was_committed() {
    for db in backends().await {
        if db.backend != Backend::MySql {
            continue;
        }
        let herald = db.herald().await;
        let tenant = funded(&herald).await;
        let pool = herald.store().mysql_pool().unwrap().clone();
        let mut app = pool
            .begin_with("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; BEGIN")
            .await
            .unwrap();
        let count =
            "SELECT CAST(COUNT(*) AS SIGNED) FROM deliveries WHERE operation_key = 'order-1'";
        let seen: i64 = sqlx::query_scalar(count).fetch_one(&mut *app).await.unwrap();
        assert_eq!(seen, 0);

        let other = herald.submit_alone(&request(tenant, "order-1")).await.unwrap();
        assert!(!other.duplicate);

        let plain: i64 = sqlx::query_scalar(count).fetch_one(&mut *app).await.unwrap();
        assert_eq!(plain, 0, "a plain read keeps the transaction's snapshot");
        let locking = format!("{count} LOCK IN SHARE MODE");
        let latest: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(locking)).fetch_one(&mut *app).await.unwrap();
        assert_eq!(latest, 1, "a locking read sees the committed claim");

        let snapshot_isolation: i64 =
            sqlx::query_scalar("SELECT CAST(@@innodb_snapshot_isolation AS SIGNED)")
                .fetch_one(&mut *app)
                .await
                .unwrap();
        let mine = match herald.submit_in(&mut *app, &request(tenant, "order-1")).await {
            Ok(mine) => mine,
            // With innodb_snapshot_isolation on (11.6's default), the account the submit
            // locks changed after this transaction's snapshot: 1020, a concurrency error
            // for the application's retry loop (Laravel's `attempts`), never a wrong
            // answer. The retry, in a fresh transaction, answers the committed claim.
            Err(e) if snapshot_isolation == 1 && e.concurrency().is_some() => {
                app.rollback().await.unwrap();
                app = pool
                    .begin_with("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; BEGIN")
                    .await
                    .unwrap();
                herald.submit_in(&mut *app, &request(tenant, "order-1")).await.unwrap()
            }
            Err(e) => panic!("the submit failed: {e:?}"),
        };
        assert!(mine.duplicate, "the submit answers the committed claim");
        assert_eq!(mine.delivery.id, other.delivery.id);
        app.commit().await.unwrap();
        let account = &herald.quotas(tenant).await.unwrap()[0];
        assert_eq!(account.reserved, 1, "one reservation");
    }
}

/// MariaDB: herald in a database of its own on the application's server, and one InnoDB
/// transaction writing both — the application's order and herald's claim commit together
/// and roll back together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb_one_transaction_spans_the_applications_database_and_heralds() {
    let Some(base) = crate::common::mysql_url() else { return };
    let db = crate::common::mysql(&base).await;
    // Named like every test database, so `.ci/run` sweeps it if this test dies midway.
    let app_db = format!("t_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::MySqlConnection::connect(&base).await.unwrap();
    let setup = format!(
        "CREATE DATABASE {app_db}; CREATE TABLE {app_db}.orders (id VARCHAR(32) PRIMARY KEY) ENGINE = InnoDB"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(setup)).execute(&mut admin).await.unwrap();
    let herald = db.herald().await;
    let tenant = funded(&herald).await;

    for (order, fail) in [("order-1", false), ("order-2", true)] {
        let (herald2, app_db) = (herald.clone(), app_db.clone());
        let result = herald
            .transaction(|tx| {
                let (herald, app_db) = (herald2.clone(), app_db.clone());
                Box::pin(async move {
                    let insert = format!("INSERT INTO {app_db}.orders (id) VALUES (?)");
                    let Conn::MySql(c) = tx.conn() else { unreachable!("a MariaDB store") };
                    sqlx::query(sqlx::AssertSqlSafe(insert))
                        .bind(order)
                        .execute(c)
                        .await
                        .map_err(|e| Error::Store(e.into()))?;
                    herald.submit(tx, &request(tenant, order)).await?;
                    if fail {
                        return Err(Error::app("the order failed after the claim"));
                    }
                    Ok(())
                })
            })
            .await;
        assert_eq!(result.is_ok(), !fail, "{order}: {result:?}");
    }
    let orders: Vec<String> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT id FROM {app_db}.orders")))
            .fetch_all(&mut admin)
            .await
            .unwrap();
    assert_eq!(orders, ["order-1"], "the failed order rolled back");
    let claimed = herald.submit_alone(&request(tenant, "order-1")).await.unwrap();
    assert!(claimed.duplicate, "order-1's claim committed with it");
    let unclaimed = herald.submit_alone(&request(tenant, "order-2")).await.unwrap();
    assert!(!unclaimed.duplicate, "order-2's claim rolled back with it");
    let account = &herald.quotas(tenant).await.unwrap()[0];
    assert_eq!(account.reserved, 2, "order-1's reservation and order-2's new one");
    herald.close().await;
    let drop = format!("DROP DATABASE {app_db}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(drop)).execute(&mut admin).await.unwrap();
}
