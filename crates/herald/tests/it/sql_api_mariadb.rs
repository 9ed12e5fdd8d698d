//! The SQL API on MariaDB (`CALL submit_v1(…)`, migration 2): an application's own
//! connection and transaction claim a delivery, with the same fingerprint and answers as
//! every other face; the application's user needs no rights on herald's tables.

use crate::common;
use crate::sql_api::{SEND_AT_ANSWERS, SEND_AT_CASES, SEND_AT_DUE};
use herald::sqlx::{self, MySqlConnection, MySqlPool};
use herald::{Error, Herald, Payload, SubmitRequest, TenantId};
use std::sync::Arc;
use std::time::Duration;

/// (status, delivery id, field, code) of one `submit_v1` call.
type Answer = (Option<String>, Option<String>, Option<String>, Option<String>);

const TO: &str = "https://example.com/hooks";

/// `submit_v1` with the defaults (NULL) for quota_key, cost, send_at and max_attempts.
async fn submit_sql(conn: &mut MySqlConnection, tenant: &str, key: &str, payload: &str) -> Answer {
    submit_sql_in(conn, None, tenant, key, payload).await
}

/// `submit_v1` of herald's `database`, or of the connection's own.
async fn submit_sql_in(
    conn: &mut MySqlConnection,
    database: Option<&str>,
    tenant: &str,
    key: &str,
    payload: &str,
) -> Answer {
    let routine = match database {
        Some(d) => format!("`{d}`.submit_v1"),
        None => "submit_v1".to_string(),
    };
    let call = format!(
        "CALL {routine}(?, ?, 'webhook', ?, ?, NULL, NULL, NULL, NULL,
                        @status, @delivery_id, @field, @code)"
    );
    sqlx::query(sqlx::AssertSqlSafe(call))
        .bind(tenant)
        .bind(key)
        .bind(TO)
        .bind(payload)
        .execute(&mut *conn)
        .await
        .unwrap();
    answer(conn).await
}

/// The OUT parameters of the last call on `conn`.
async fn answer(conn: &mut MySqlConnection) -> Answer {
    sqlx::query_as("SELECT @status, @delivery_id, @field, @code")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

fn request(tenant: TenantId, key: &str, payload: &str) -> SubmitRequest {
    SubmitRequest::new(tenant, key, "webhook", TO, Payload::from_text(payload))
}

async fn count(pool: &MySqlPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string())).fetch_one(pool).await.unwrap()
}

async fn setup() -> Option<(common::TestDb, Herald, TenantId, MySqlPool)> {
    let base = common::mysql_url()?;
    let db = common::mysql(&base).await;
    let herald = db.herald().await;
    let tenant = herald.tenant_create("acme").await.unwrap().id;
    herald.quota_grant(tenant, "webhook", 3, None).await.unwrap();
    herald.settings().await.unwrap();
    // The tests' own user may submit for every tenant (the wall has its own test).
    assert!(herald.sql_grant("root", None).await.unwrap());
    let pool = herald.store().mysql_pool().unwrap().clone();
    sqlx::raw_sql("CREATE TABLE app_orders (id VARCHAR(64) PRIMARY KEY) ENGINE = InnoDB")
        .execute(&pool)
        .await
        .unwrap();
    Some((db, herald, tenant, pool))
}

/// The caller's W3C traceparent, from the session's `@herald_traceparent`, is kept beside
/// the payload for the attempts' spans; a value that does not read as one is not, and
/// never fails the submit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_traceparent_is_kept_for_the_attempts() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    herald.quota_grant(tenant, "webhook", 10, None).await.unwrap();
    let t = tenant.to_string();
    let cases = common::traceparent_cases(("unset", None, None));
    let mut app = pool.acquire().await.unwrap();
    for (key, setting, kept) in &cases {
        sqlx::query("SET @herald_traceparent = ?")
            .bind(setting.as_deref())
            .execute(&mut *app)
            .await
            .unwrap();
        let (status, id, ..) = submit_sql(&mut app, &t, key, "{}").await;
        assert_eq!(status.as_deref(), Some("created"), "{key}");
        let stored: Option<String> = sqlx::query_scalar(
            "SELECT traceparent FROM delivery_payloads WHERE delivery_id = UNHEX(REPLACE(?, '-', ''))",
        )
        .bind(id.unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(stored, *kept, "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_commits_with_the_application_and_is_one_request_everywhere() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let payload = r#"{"order": 17, "total": 1.50}"#;
    let mut app = pool.acquire().await.unwrap();

    // Rolled back with the application's change: nothing was ever claimed.
    sqlx::raw_sql("BEGIN; INSERT INTO app_orders VALUES ('o-17')")
        .execute(&mut *app)
        .await
        .unwrap();
    let (status, ..) = submit_sql(&mut app, &t, "order-17", payload).await;
    assert_eq!(status.as_deref(), Some("created"));
    sqlx::raw_sql("ROLLBACK").execute(&mut *app).await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM deliveries").await, 0);

    // Committed with it.
    sqlx::raw_sql("BEGIN; INSERT INTO app_orders VALUES ('o-17')")
        .execute(&mut *app)
        .await
        .unwrap();
    let (status, id, ..) = submit_sql(&mut app, &t, "order-17", payload).await;
    assert_eq!(status.as_deref(), Some("created"));
    let id = id.unwrap();
    sqlx::raw_sql("COMMIT").execute(&mut *app).await.unwrap();
    assert_eq!(herald.quotas(tenant).await.unwrap()[0].reserved, 1, "one reservation");
    // A payload MariaDB's own functions prove valid is not walked: its fingerprint waits
    // for the first repeat (version 0, schema 15), which each path below computes.
    let version: i16 = sqlx::query_scalar(
        "SELECT fingerprint_version FROM deliveries WHERE operation_key = 'order-17'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(version, 0);

    // The same request through the library (the HTTP API's path) is a duplicate of it;
    // the same meaning in another spelling too; a changed one reuses the key.
    let again = herald.submit_alone(&request(tenant, "order-17", payload)).await.unwrap();
    assert!(again.duplicate);
    assert_eq!(again.delivery.id.to_string(), id);
    let respelled = r#"{"total":15e-1,"order":17}"#;
    assert!(herald.submit_alone(&request(tenant, "order-17", respelled)).await.unwrap().duplicate);
    let (status, again_id, ..) = submit_sql(&mut app, &t, "order-17", respelled).await;
    assert_eq!((status.as_deref(), again_id.as_deref()), (Some("duplicate"), Some(id.as_str())));
    let changed = herald.submit_alone(&request(tenant, "order-17", r#"{"order": 18}"#)).await;
    assert!(matches!(changed, Err(Error::IdempotencyKeyReused)), "{changed:?}");
    let (status, ..) = submit_sql(&mut app, &t, "order-17", r#"{"order": 18}"#).await;
    assert_eq!(status.as_deref(), Some("reused"));
    // And the other way round: submitted by the library, repeated through SQL.
    let lib = herald.submit_alone(&request(tenant, "order-18", "[1, 2]")).await.unwrap();
    let (status, id18, ..) = submit_sql(&mut app, &t, "order-18", "[1,2]").await;
    assert_eq!((status.as_deref(), id18), (Some("duplicate"), Some(lib.delivery.id.to_string())));

    // Kept byte for byte, for the worker.
    let kept: String = sqlx::query_scalar(
        "SELECT p.payload FROM delivery_payloads p JOIN deliveries d ON d.id = p.delivery_id
         WHERE d.operation_key = 'order-17'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(kept, payload);
}

/// Every answer leaves the application's transaction going: its own writes around them
/// commit, and nothing is written for a refusal. Outside a transaction (autocommit) a call
/// commits its own claim, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_leaves_the_transaction_going() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let mut app = pool.acquire().await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut *app).await.unwrap();
    let mut answers = Vec::new();
    for (i, (tenant, key, payload)) in [
        (t.as_str(), "a", "{}"),                             // created
        (t.as_str(), "a", "{ }"),                            // duplicate
        (t.as_str(), "a", "[]"),                             // reused
        (t.as_str(), "b", r#"{"x":1,"x":2}"#),               // invalid payload
        (t.as_str(), "b", "[1.]"),                           // invalid (MariaDB lets it by)
        (t.as_str(), "", "{}"),                              // invalid operation key
        ("not-a-uuid", "c", "{}"),                           // invalid tenant
        ("01900000-0000-7000-8000-000000000009", "c", "{}"), // unknown tenant
        (t.as_str(), "c", "{}"),                             // created
        (t.as_str(), "d", "{}"),                             // created (the third unit)
        (t.as_str(), "e", "{}"),                             // quota exhausted
    ]
    .into_iter()
    .enumerate()
    {
        let (status, _, field, code) = submit_sql(&mut app, tenant, key, payload).await;
        answers.push(format!(
            "{}/{}/{}",
            status.unwrap_or_default(),
            field.unwrap_or_default(),
            code.unwrap_or_default()
        ));
        sqlx::query("INSERT INTO app_orders VALUES (?)")
            .bind(format!("after-{i}"))
            .execute(&mut *app)
            .await
            .unwrap();
    }
    sqlx::raw_sql("COMMIT").execute(&mut *app).await.unwrap();
    assert_eq!(
        answers,
        [
            "created//",
            "duplicate//",
            "reused//",
            "invalid/payload/duplicate_key",
            "invalid/payload/syntax",
            "invalid/operation_key/empty",
            "invalid/tenant/not_a_uuid",
            "invalid/tenant/unknown_tenant",
            "created//",
            "created//",
            "quota_exhausted//",
        ]
    );
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM app_orders").await, 11);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM deliveries").await, 3, "a, c and d");
    let account = &herald.quotas(tenant).await.unwrap()[0];
    assert_eq!((account.available, account.reserved), (0, 3));
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM quota_journal WHERE kind = 'reserve'").await, 3);

    // Autocommit: the claim commits by itself (a second connection sees it at once).
    herald.quota_grant(tenant, "webhook", 1, Some("more")).await.unwrap();
    let (status, ..) = submit_sql(&mut app, &t, "f", r#"{"n": 1}"#).await;
    assert_eq!(status.as_deref(), Some("created"));
    let other = count(&pool, "SELECT COUNT(*) FROM deliveries WHERE operation_key = 'f'").await;
    assert_eq!(other, 1);
    let in_tx: i64 = sqlx::query_scalar("SELECT CAST(@@in_transaction AS SIGNED)")
        .fetch_one(&mut *app)
        .await
        .unwrap();
    assert_eq!(in_tx, 0, "no transaction left open on the application's connection");
}

/// Bytes that are not UTF-8 (a cut character, an encoded surrogate, a stray byte) and NUL
/// reach the procedures from any language's driver: each is answered `invalid` with its
/// field (`not_utf8`, `control_character`), never raised (a text parameter used to refuse
/// them with error 1366), and the caller's transaction goes on; nothing of herald's is
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_that_are_not_utf8_and_nul_are_answered_never_raised() {
    let Some((_db, _herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let mut app = pool.acquire().await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut *app).await.unwrap();
    let good: [&[u8]; 5] = [t.as_bytes(), b"order-7", b"webhook", TO.as_bytes(), b"{}"];
    // (field index, bytes, expected "field/code")
    let cases: [(usize, &[u8], &str); 11] = [
        (1, b"order-7\xE2\x82", "operation_key/not_utf8"),
        // U+202E (a bidirectional override) and U+2069, refused as control characters.
        (1, b"order-17\xE2\x80\xAEgpj.exe", "operation_key/control_character"),
        (3, b"https://example.com/\xE2\x81\xA9", "to/control_character"),
        (1, b"order-\xED\xA0\x80", "operation_key/not_utf8"),
        (1, b"order-7\x00-a", "operation_key/control_character"),
        (1, b"order-\xC0\x80", "operation_key/not_utf8"),
        (0, b"\xFF", "tenant/not_utf8"),
        (2, b"web\x80hook", "channel/not_utf8"),
        (3, b"https://example.com/\xED\xBF\xBF", "to/not_utf8"),
        (4, b"{\"a\":\"\xE2\x82\"}", "payload/not_utf8"),
        (4, b"{\"a\":\"\xED\xA0\x80\"}", "payload/not_utf8"),
    ];
    let mut answers = Vec::new();
    for (i, (at, bytes, _)) in cases.iter().enumerate() {
        let mut args = good;
        args[*at] = bytes;
        sqlx::query(
            "CALL submit_v1(?, ?, ?, ?, ?, NULL, NULL, NULL, NULL,
                            @status, @delivery_id, @field, @code)",
        )
        .bind(args[0])
        .bind(args[1])
        .bind(args[2])
        .bind(args[3])
        .bind(args[4])
        .execute(&mut *app)
        .await
        .unwrap_or_else(|e| panic!("case {i}: raised {e}"));
        let (status, field, code): (Option<String>, Option<String>, Option<String>) =
            sqlx::query_as("SELECT @status, @field, @code").fetch_one(&mut *app).await.unwrap();
        assert_eq!(status.as_deref(), Some("invalid"), "case {i}");
        answers.push(format!("{}/{}", field.unwrap_or_default(), code.unwrap_or_default()));
        sqlx::query("INSERT INTO app_orders VALUES (?)")
            .bind(format!("after-{i}"))
            .execute(&mut *app)
            .await
            .unwrap();
    }
    let expected: Vec<&str> = cases.iter().map(|(_, _, e)| *e).collect();
    assert_eq!(answers, expected);
    // Receipts: the same rule for the scope and the operation id.
    for (scope, id, expected) in [
        (&b"invoices"[..], &b"evt\x00-1"[..], "operation_id/control_character"),
        (b"invoices", b"evt-\xE2\x82", "operation_id/not_utf8"),
        (b"inv\xED\xA0\x80", b"evt-1", "scope/not_utf8"),
    ] {
        sqlx::query("CALL receipt_v1(?, ?, @status, @field, @code)")
            .bind(scope)
            .bind(id)
            .execute(&mut *app)
            .await
            .unwrap_or_else(|e| panic!("{expected}: raised {e}"));
        let (status, field, code): (Option<String>, Option<String>, Option<String>) =
            sqlx::query_as("SELECT @status, @field, @code").fetch_one(&mut *app).await.unwrap();
        assert_eq!(status.as_deref(), Some("invalid"), "{expected}");
        assert_eq!(format!("{}/{}", field.unwrap_or_default(), code.unwrap_or_default()), expected);
    }
    sqlx::raw_sql("COMMIT").execute(&mut *app).await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM app_orders").await, cases.len() as i64);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM deliveries").await, 0);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM receipts").await, 0);
    // Valid UTF-8 beyond ASCII is a key like any other.
    let (status, ..) = submit_sql(&mut app, &t, "order-\u{e9}-\u{1f600}", "{}").await;
    assert_eq!(status.as_deref(), Some("created"));
}

/// Issue 33, point 5: on a database whose shared settings row was never written (a fresh
/// `herald migrate`, no `herald serve` yet), concurrent first submits inside applications'
/// transactions all claim; none gets `1048 Column 'fingerprint' cannot be null`. The first
/// writes the row and holds its transaction open while the others wait for the row's
/// lock; once it commits they must read the row it wrote, which their snapshots (taken
/// before) do not hold: a plain read saw none. Under REPEATABLE READ (10.11's default)
/// every first submit claims at its first try. With `innodb_snapshot_isolation` on
/// (11.6's default) a write over a row committed after the snapshot is MariaDB's 1020,
/// a concurrency error: the application's retry loop runs the transaction again and it
/// claims, never a wrong answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn first_submits_on_a_database_without_settings_all_claim() {
    let Some((_db, _herald, tenant, pool)) = setup().await else { return };
    sqlx::raw_sql("DELETE FROM herald_settings").execute(&pool).await.unwrap();
    let snapshot_isolation: i64 =
        sqlx::query_scalar("SELECT @@innodb_snapshot_isolation").fetch_one(&pool).await.unwrap();
    const PROCESSES: usize = 8;
    const ATTEMPTS: usize = 5;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..PROCESSES {
        let pool = pool.clone();
        let t = tenant.to_string();
        tasks.spawn(async move {
            let mut raised = Vec::new();
            for _ in 0..ATTEMPTS {
                let mut app = pool.acquire().await.unwrap();
                sqlx::raw_sql("BEGIN").execute(&mut *app).await.unwrap();
                sqlx::query("INSERT INTO app_orders VALUES (?)")
                    .bind(format!("first-{i}"))
                    .execute(&mut *app)
                    .await
                    .unwrap();
                let answer = sqlx::query(
                    "CALL submit_v1(?, ?, 'webhook', ?, '{}', NULL, 0, NULL, NULL,
                                    @status, @delivery_id, @field, @code)",
                )
                .bind(&t)
                .bind(format!("first-{i}"))
                .bind(TO)
                .execute(&mut *app)
                .await;
                if let Err(e) = answer {
                    // The application's retry loop: a concurrency error, a new transaction.
                    raised.push(e.to_string());
                    sqlx::raw_sql("ROLLBACK").execute(&mut *app).await.unwrap();
                    continue;
                }
                // The application's own work, with the claim (and the settings row) held.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let status: Option<String> =
                    sqlx::query_scalar("SELECT @status").fetch_one(&mut *app).await.unwrap();
                sqlx::raw_sql("COMMIT").execute(&mut *app).await.unwrap();
                return (status, raised);
            }
            (None, raised)
        });
    }
    let mut answers = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        answers.push(joined.unwrap());
    }
    for (status, raised) in &answers {
        assert_eq!(status.as_deref(), Some("created"), "{answers:?}");
        for error in raised {
            assert!(
                snapshot_isolation == 1 && error.contains("1020"),
                "only snapshot isolation's concurrency error is raised: {answers:?}"
            );
        }
    }
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM deliveries").await, PROCESSES as i64);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM herald_settings").await, 1);
}

/// A deadlock inside the application's transaction is MariaDB's own error (1213), for the
/// application's retry loop, and leaves nothing of the claim: the whole transaction was
/// rolled back, so its retry claims again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_is_raised_for_the_retry_loop_and_leaves_nothing() {
    let Some((_db, _herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    sqlx::raw_sql("INSERT INTO app_orders VALUES ('x'), ('y')").execute(&pool).await.unwrap();
    let mut app = pool.acquire().await.unwrap();
    let mut rival = pool.acquire().await.unwrap();
    // The rival holds the account row (a herald write) and waits for the application's
    // row; the application holds its row and submits, which waits for the account.
    sqlx::raw_sql("BEGIN; SELECT * FROM app_orders WHERE id = 'x' FOR UPDATE")
        .execute(&mut *app)
        .await
        .unwrap();
    sqlx::raw_sql(
        "BEGIN; UPDATE quota_accounts SET updated_at = updated_at + 1;
         INSERT INTO app_orders VALUES ('r1'), ('r2'), ('r3'), ('r4')",
    )
    .execute(&mut *rival)
    .await
    .unwrap();
    let rival_wait = tokio::spawn(async move {
        // Time for the application's submit to reach the account row. Its wait is not one
        // a query can see (tried: INNODB_TRX says RUNNING, INNODB_LOCK_WAITS is empty, the
        // processlist says "Statistics": the locking read runs in the optimizer), so this
        // is a pause; were it too short, the rival would be the victim and the assertion
        // below would say so.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = sqlx::query("SELECT * FROM app_orders WHERE id = 'x' FOR UPDATE")
            .execute(&mut *rival)
            .await;
        let _ = sqlx::raw_sql("COMMIT").execute(&mut *rival).await;
        r.map(|_| ())
    });
    let submitted = sqlx::query(
        "CALL submit_v1(?, 'k', 'webhook', ?, '{}', NULL, NULL, NULL, NULL, @s, @i, @f, @c)",
    )
    .bind(&t)
    .bind(TO)
    .execute(&mut *app)
    .await;
    let rival = rival_wait.await.unwrap();
    // InnoDB picks the smaller transaction as the victim: the application's.
    let err = submitted.expect_err("the application's transaction is the deadlock's victim");
    let code = err.as_database_error().and_then(|e| e.code()).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("40001"), "{err}");
    assert!(rival.is_ok(), "the rival goes on: {rival:?}");
    let in_tx: i64 = sqlx::query_scalar("SELECT CAST(@@in_transaction AS SIGNED)")
        .fetch_one(&mut *app)
        .await
        .unwrap();
    assert_eq!(in_tx, 0, "the whole transaction was rolled back");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM deliveries").await, 0);
    // The retry claims.
    let (status, ..) = submit_sql(&mut app, &t, "k", "{}").await;
    assert_eq!(status.as_deref(), Some("created"));
}

/// Seed 001's fixture through `receipt_v1`: evt-17, evt-17, evt-18 → 15 units, 2 receipts;
/// the library's `once` sees the same receipts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_through_sql_apply_each_event_once() {
    let Some((_db, _herald, _tenant, pool)) = setup().await else { return };
    sqlx::raw_sql(
        "CREATE TABLE app_invoices (id INT PRIMARY KEY, total BIGINT NOT NULL) ENGINE = InnoDB;
         INSERT INTO app_invoices VALUES (17, 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut app = pool.acquire().await.unwrap();
    let mut statuses = Vec::new();
    for (event, units) in [("evt-17", 10), ("evt-17", 10), ("evt-18", 5)] {
        sqlx::raw_sql("BEGIN").execute(&mut *app).await.unwrap();
        sqlx::query("CALL receipt_v1('invoice-adjustments', ?, @status, @field, @code)")
            .bind(event)
            .execute(&mut *app)
            .await
            .unwrap();
        let status: String =
            sqlx::query_scalar("SELECT @status").fetch_one(&mut *app).await.unwrap();
        if status == "applied" {
            sqlx::query("UPDATE app_invoices SET total = total + ? WHERE id = 17")
                .bind(units)
                .execute(&mut *app)
                .await
                .unwrap();
        }
        sqlx::raw_sql("COMMIT").execute(&mut *app).await.unwrap();
        statuses.push(status);
    }
    assert_eq!(statuses, ["applied", "duplicate", "applied"]);
    assert_eq!(count(&pool, "SELECT total FROM app_invoices WHERE id = 17").await, 15);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM receipts").await, 2);
    let mut tx = pool.begin().await.unwrap();
    let again = herald::once(&mut *tx, "invoice-adjustments", "evt-17", |_| {
        Box::pin(async move { Ok(()) })
    })
    .await
    .unwrap();
    assert!(matches!(again, herald::Once::AlreadyApplied), "{again:?}");
    tx.rollback().await.unwrap();
}

/// The tenant wall: a user submits only for the tenants it was granted, with herald's
/// rights — it has none on herald's tables itself, and cannot call before a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_submits_only_for_the_tenants_it_was_granted() {
    use herald::sqlx::Connection;
    use std::str::FromStr;
    let Some((db, herald, tenant, pool)) = setup().await else { return };
    let other = herald.tenant_create("globex").await.unwrap().id;
    herald.quota_grant(other, "webhook", 3, None).await.unwrap();
    // Named like the tests' databases, so `.ci/run` drops it if this test dies midway.
    let user = format!("t_{}", uuid::Uuid::now_v7().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE USER '{user}'@'%'")))
        .execute(&pool)
        .await
        .unwrap();
    // The application's user has no rights on herald's database: it connects without one
    // and calls herald's procedures by their qualified name.
    let (server, herald_db) = db.url.rsplit_once('/').unwrap();
    let options = sqlx::mysql::MySqlConnectOptions::from_str(server).unwrap().username(&user);
    let mut app = MySqlConnection::connect_with(&options).await.unwrap();
    let call = format!(
        "CALL `{}`.submit_v1(?, 'order-0', 'webhook', 'https://x', '{{}}', NULL, NULL, NULL,
                             NULL, @s, @i, @f, @c)",
        herald_db
    );
    let refused =
        sqlx::query(sqlx::AssertSqlSafe(call)).bind(tenant.to_string()).execute(&mut app).await;
    assert!(refused.is_err(), "no EXECUTE before a grant");

    assert!(herald.sql_grant(&user, Some(tenant)).await.unwrap());
    assert!(!herald.sql_grant(&user, Some(tenant)).await.unwrap(), "granted already");
    let (status, ..) =
        submit_sql_in(&mut app, Some(herald_db), &tenant.to_string(), "order-1", "{}").await;
    assert_eq!(status.as_deref(), Some("created"), "its own tenant");
    // A user granted before submit_v2 existed may call it once herald has migrated: a
    // routine that changed gives every granted user each procedure again.
    let revoke = format!("REVOKE EXECUTE ON PROCEDURE `{herald_db}`.submit_v2 FROM '{user}'@'%'");
    sqlx::raw_sql(sqlx::AssertSqlSafe(revoke)).execute(&pool).await.unwrap();
    let v2 = format!(
        "CALL `{herald_db}`.submit_v2(?, 'order-v2', 'webhook', 'https://x', '{{}}', NULL, NULL,
                                      NULL, NULL, NULL, @s, @i, @f, @c)"
    );
    let t = tenant.to_string();
    let call = sqlx::query(sqlx::AssertSqlSafe(v2.clone())).bind(&t).execute(&mut app).await;
    assert!(call.is_err(), "as before submit_v2");
    sqlx::raw_sql("UPDATE herald_routines SET checksum = '' WHERE name = 'submit'")
        .execute(&pool)
        .await
        .unwrap();
    herald.store().migrate().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(v2)).bind(&t).execute(&mut app).await.unwrap();
    let (status, _, field, code) =
        submit_sql_in(&mut app, Some(herald_db), &other.to_string(), "order-1", "{}").await;
    assert_eq!(
        (status.as_deref(), field.as_deref(), code.as_deref()),
        (Some("invalid"), Some("tenant"), Some("not_granted")),
        "another tenant"
    );
    let read = sqlx::query("SELECT * FROM deliveries").execute(&mut app).await;
    assert!(read.is_err(), "the user has no rights on herald's tables");
    let grants = herald.sql_grants().await.unwrap();
    assert_eq!(grants[0], herald::SqlGrant { role: "root".into(), tenant: None });
    assert!(
        grants.contains(&herald::SqlGrant { role: user.clone(), tenant: Some(tenant.as_uuid()) })
    );

    assert!(herald.sql_grant(&user, None).await.unwrap());
    let (status, ..) =
        submit_sql_in(&mut app, Some(herald_db), &other.to_string(), "order-2", "{}").await;
    assert_eq!(status.as_deref(), Some("created"), "every tenant");
    assert!(herald.sql_revoke(&user, None).await.unwrap());
    assert!(herald.sql_revoke(&user, Some(tenant)).await.unwrap());
    assert!(!herald.sql_revoke(&user, Some(tenant)).await.unwrap(), "revoked already");
    let (status, _, _, code) =
        submit_sql_in(&mut app, Some(herald_db), &tenant.to_string(), "order-3", "{}").await;
    assert_eq!((status.as_deref(), code.as_deref()), (Some("invalid"), Some("not_granted")));
    let unknown = herald.sql_grant(&user, Some(TenantId::new_v7())).await;
    assert!(matches!(unknown, Err(Error::UnknownTenant)), "{unknown:?}");
    let nobody = herald.sql_grant("t_nobody_by_this_name", None).await;
    assert!(nobody.is_err(), "no such user: {nobody:?}");
    assert!(!herald.sql_grants().await.unwrap().iter().any(|g| g.role == "t_nobody_by_this_name"));
    app.close().await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP USER '{user}'@'%'")))
        .execute(&pool)
        .await
        .unwrap();
}

/// `send_at` is RFC 3339, as over HTTP; a leap second reads as :59, as herald's parser
/// reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_at_is_rfc_3339_as_on_every_face() {
    let Some((_db, _herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let mut app = pool.acquire().await.unwrap();
    let mut answers = Vec::new();
    for (key, send_at) in SEND_AT_CASES {
        sqlx::query(
            "CALL submit_v1(?, ?, 'webhook', ?, '{}', NULL, NULL, ?, NULL, @s, @i, @f, @c)",
        )
        .bind(&t)
        .bind(key)
        .bind(TO)
        .bind(send_at)
        .execute(&mut *app)
        .await
        .unwrap();
        let (status, _, field, code): Answer =
            sqlx::query_as("SELECT @s, @i, @f, @c").fetch_one(&mut *app).await.unwrap();
        answers.push(format!(
            "{}/{}/{}",
            status.unwrap_or_default(),
            field.unwrap_or_default(),
            code.unwrap_or_default()
        ));
    }
    assert_eq!(answers, SEND_AT_ANSWERS);
    let due: Vec<i64> =
        sqlx::query_scalar("SELECT next_attempt_at FROM deliveries ORDER BY operation_key")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(due, SEND_AT_DUE);
}

/// `submit_v2` with max_attempts 5 and the fingerprint given (or NULL).
async fn submit_v2(
    conn: &mut MySqlConnection,
    tenant: &str,
    key: &str,
    payload: &str,
    print: Option<Vec<u8>>,
) -> Answer {
    sqlx::query(
        "CALL submit_v2(?, ?, 'webhook', ?, ?, NULL, NULL, NULL, 5, ?,
                        @status, @delivery_id, @field, @code)",
    )
    .bind(tenant)
    .bind(key)
    .bind(TO)
    .bind(payload)
    .bind(print)
    .execute(&mut *conn)
    .await
    .unwrap();
    answer(conn).await
}

/// `submit_v2` (issue 35): the caller computes the fingerprint — herald_core here, the
/// PHP package's `Herald\Fingerprint` in an application — and SQL walks no payload. An
/// honest one claims a version-3 row that a repeat through any face finds a duplicate and
/// that the worker sends; a forged one is claimed but failed unsent with
/// `fingerprint_mismatch`; no fingerprint, a short one, or a payload that is not JSON are
/// answered `invalid`, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_v2_takes_the_callers_fingerprint_and_herald_checks_it_before_the_send() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let payload = r#"{"order": 17, "total": 1.50}"#;
    let parsed = herald_core::json::parse(payload).unwrap();
    let print = herald_core::fingerprint::fingerprint(&herald_core::fingerprint::Resolved {
        channel: "webhook",
        to: TO,
        payload: &parsed,
        quota_key: "webhook",
        cost: 1,
        send_at_ms: None,
        max_attempts: 5,
    });
    let mut conn = pool.acquire().await.unwrap();

    for (print, field, code) in
        [(None, "fingerprint", "empty"), (Some(vec![7; 31]), "fingerprint", "not_a_fingerprint")]
    {
        let answer = submit_v2(&mut conn, &t, "v2-bad", payload, print).await;
        assert_eq!(answer, (Some("invalid".into()), None, Some(field.into()), Some(code.into())));
    }
    let answer = submit_v2(&mut conn, &t, "v2-bad", "{", Some(print.to_vec())).await;
    assert_eq!(answer.2.as_deref().zip(answer.3.as_deref()), Some(("payload", "syntax")));
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM deliveries").await, 0);

    let honest = submit_v2(&mut conn, &t, "v2-honest", payload, Some(print.to_vec())).await;
    assert_eq!(honest.0.as_deref(), Some("created"), "{honest:?}");
    let forged = submit_v2(&mut conn, &t, "v2-forged", payload, Some(vec![0; 32])).await;
    assert_eq!(forged.0.as_deref(), Some("created"), "{forged:?}");
    let versions = "SELECT CAST(SUM(fingerprint_version) AS SIGNED) FROM deliveries";
    assert_eq!(count(&pool, versions).await, 6, "both rows are version 3");

    // A repeat through another face compares the client's bytes as version 2.
    let again = SubmitRequest { max_attempts: Some(5), ..request(tenant, "v2-honest", payload) };
    let again = herald.submit_alone(&again).await.unwrap();
    assert!(again.duplicate);
    assert_eq!(Some(again.delivery.id.to_string()), honest.1);
    let again = submit_v2(&mut conn, &t, "v2-honest", payload, Some(print.to_vec())).await;
    assert_eq!((again.0.as_deref(), again.1), (Some("duplicate"), honest.1.clone()));

    let sends = Arc::new(common::Sends::default());
    let channel: Arc<dyn herald::Channel> = sends.clone();
    let options = herald::WorkerOptions { id: "w-v2".into(), ..Default::default() };
    let worker =
        herald::Worker::new(herald.clone(), options, [("webhook".to_string(), channel)]).unwrap();
    let report = worker.run_once().await.unwrap();
    assert_eq!((report.sent, report.failed), (1, 1));
    assert_eq!(*sends.0.lock().unwrap(), ["v2-honest"], "the forged one is never sent");
    let failed =
        "SELECT COUNT(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
                  WHERE d.operation_key = 'v2-forged' AND d.state = 'failed'
                    AND a.error_code = 'fingerprint_mismatch'";
    assert_eq!(count(&pool, failed).await, 1);
}

/// The payload limit is the channel's on this face too: a rendered email of 1 MiB is
/// claimed through `submit_v2` (the caller's fingerprint: SQL walks no payload), past 4 MiB
/// it is `too_long`, and a webhook's payload past 64 KiB is `too_long`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_limits_are_the_channels_in_sql_too() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    herald.quota_grant(tenant, "email", 3, None).await.unwrap();
    let rendered = |n: usize| {
        serde_json::json!({"raw": format!("Subject: s\r\n\r\n{}", "x".repeat(n))}).to_string()
    };
    let mut conn = pool.acquire().await.unwrap();
    let mut call = async |key: &str, channel: &str, to: &str, payload: String| {
        let parsed = herald_core::json::parse(&payload).unwrap();
        let print = herald_core::fingerprint::fingerprint(&herald_core::fingerprint::Resolved {
            channel,
            to,
            payload: &parsed,
            quota_key: channel,
            cost: 1,
            send_at_ms: None,
            max_attempts: 5,
        });
        sqlx::query(
            "CALL submit_v2(?, ?, ?, ?, ?, NULL, NULL, NULL, 5, ?,
                            @status, @delivery_id, @field, @code)",
        )
        .bind(tenant.to_string())
        .bind(key)
        .bind(channel)
        .bind(to)
        .bind(payload)
        .bind(print.to_vec())
        .execute(&mut *conn)
        .await
        .unwrap();
        let a = answer(&mut conn).await;
        (a.0.unwrap_or_default(), a.2, a.3)
    };
    let created = ("created".to_string(), None, None);
    let too_long = ("invalid".to_string(), Some("payload".to_string()), Some("too_long".into()));
    let to = "customer@example.net";
    assert_eq!(call("mail-1", "email", to, rendered(1 << 20)).await, created);
    let over = rendered(herald_core::limits::EMAIL_PAYLOAD_BYTES_MAX);
    assert_eq!(call("mail-2", "email", to, over).await, too_long);
    let hook = serde_json::json!({"blob": "x".repeat(herald_core::limits::PAYLOAD_BYTES_MAX)});
    assert_eq!(call("hook-1", "webhook", TO, hook.to_string()).await, too_long);
}
