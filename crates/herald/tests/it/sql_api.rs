//! The SQL API on PostgreSQL (`herald_submit_v1` and `herald_submit_v2`): an application's own
//! connection and transaction claim a delivery, with the same fingerprint and answers as
//! every other face, and nothing it answers poisons the application's transaction.

use crate::common;
use herald::sqlx::{self, PgPool};
use herald::{Error, Herald, Payload, SubmitRequest, TenantId};
use herald_store::deliveries::{Lease, deliveries_lease};
use std::time::Duration;

/// (status, delivery id, field, code) of one `herald_submit_v1` call.
type Answer = (String, Option<uuid::Uuid>, Option<String>, Option<String>);

const TO: &str = "https://example.com/hooks";

async fn submit_sql<'c, E>(conn: E, tenant: &str, key: &str, payload: &str) -> Answer
where
    E: sqlx::Executor<'c, Database = sqlx::Postgres>,
{
    sqlx::query_as(
        "SELECT status, delivery_id, field, code FROM herald_submit_v1(
             tenant => $1, operation_key => $2, channel => 'webhook', recipient => $3,
             payload => $4)",
    )
    .bind(tenant)
    .bind(key)
    .bind(TO)
    .bind(payload)
    .fetch_one(conn)
    .await
    .unwrap()
}

fn request(tenant: TenantId, key: &str, payload: &str) -> SubmitRequest {
    SubmitRequest::new(tenant, key, "webhook", TO, Payload::from_text(payload))
}

async fn setup() -> Option<(common::TestDb, Herald, TenantId, PgPool)> {
    let base = common::postgres_url()?;
    let db = common::postgres(&base).await;
    let herald = db.herald().await;
    let tenant = herald.tenant_create("acme").await.unwrap().id;
    herald.quota_grant(tenant, "webhook", 3, None).await.unwrap();
    herald.settings().await.unwrap();
    // The tests' own role may submit for every tenant (the wall has its own test).
    assert!(herald.sql_grant("postgres", None).await.unwrap());
    let pool = herald.store().postgres_pool().unwrap().clone();
    sqlx::raw_sql("CREATE TABLE app_orders (id text PRIMARY KEY)").execute(&pool).await.unwrap();
    Some((db, herald, tenant, pool))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_through_sql_commits_with_the_application_and_is_one_request_everywhere() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let payload = r#"{"order": 17, "total": 1.50}"#;

    // Rolled back with the application's change: nothing was ever claimed.
    let mut app = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO app_orders VALUES ('o-17')").execute(&mut *app).await.unwrap();
    let (status, ..) = submit_sql(&mut *app, &t, "order-17", payload).await;
    assert_eq!(status, "created");
    app.rollback().await.unwrap();

    // Committed with it.
    let mut app = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO app_orders VALUES ('o-17')").execute(&mut *app).await.unwrap();
    let (status, id, ..) = submit_sql(&mut *app, &t, "order-17", payload).await;
    assert_eq!(status, "created");
    let id = id.unwrap();
    app.commit().await.unwrap();
    assert_eq!(herald.quotas(tenant).await.unwrap()[0].reserved, 1, "one reservation");

    // The same request through the library (the HTTP API's path) is a duplicate of it;
    // the same meaning in another spelling too; a changed one reuses the key.
    let again = herald.submit_alone(&request(tenant, "order-17", payload)).await.unwrap();
    assert!(again.duplicate);
    assert_eq!(again.delivery.id.as_uuid(), id);
    let respelled = r#"{"total":15e-1,"order":17}"#;
    assert!(herald.submit_alone(&request(tenant, "order-17", respelled)).await.unwrap().duplicate);
    let changed = herald.submit_alone(&request(tenant, "order-17", r#"{"order": 18}"#)).await;
    assert!(matches!(changed, Err(Error::IdempotencyKeyReused)), "{changed:?}");
    let (status, ..) = submit_sql(&pool, &t, "order-17", r#"{"order": 18}"#).await;
    assert_eq!(status, "reused");
    // And the other way round: submitted by the library, repeated through SQL.
    let lib = herald.submit_alone(&request(tenant, "order-18", "[1, 2]")).await.unwrap();
    let (status, id18, ..) = submit_sql(&pool, &t, "order-18", "[1,2]").await;
    assert_eq!((status.as_str(), id18), ("duplicate", Some(lib.delivery.id.as_uuid())));

    // A worker leases it with its payload as the application wrote it.
    let channels = ["webhook".to_string()];
    let lease = Lease {
        worker: "w",
        channels: &channels,
        limit: 10,
        lease: Duration::from_secs(60),
        now: herald_store::Now::Database,
    };
    let lease = &lease;
    let leased = herald
        .transaction(|tx| Box::pin(async move { Ok(deliveries_lease(tx.conn(), lease).await?) }))
        .await
        .unwrap()
        .value;
    let mine = leased.iter().find(|l| l.delivery.id == id).expect("the SQL-submitted delivery");
    assert_eq!(mine.payload, payload);
}

/// The caller's W3C traceparent, from its transaction's `herald.traceparent` setting, is
/// kept beside the payload for the attempts' spans; a value that does not read as one is
/// not, and never fails the submit. The setting ends with the transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_traceparent_is_kept_for_the_attempts() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    herald.quota_grant(tenant, "webhook", 10, None).await.unwrap();
    let t = tenant.to_string();
    let cases = common::traceparent_cases(("after-the-transaction", None, None));
    let mut app = pool.acquire().await.unwrap();
    for (key, setting, kept) in &cases {
        let mut tx = sqlx::Connection::begin(&mut *app).await.unwrap();
        if let Some(value) = setting {
            sqlx::query("SELECT set_config('herald.traceparent', $1, true)")
                .bind(value.as_str())
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        let (status, id, ..) = submit_sql(&mut *tx, &t, key, "{}").await;
        tx.commit().await.unwrap();
        assert_eq!(status, "created", "{key}");
        let stored: Option<String> =
            sqlx::query_scalar("SELECT traceparent FROM delivery_payloads WHERE delivery_id = $1")
                .bind(id.unwrap())
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(stored, *kept, "{key}");
    }
}

/// Every answer that is not `created` leaves the application's transaction usable: its
/// own writes around them commit (on PostgreSQL a raised error would have aborted it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_poisons_the_applications_transaction() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let mut app = pool.begin().await.unwrap();
    let mut answers = Vec::new();
    // Nested deeper than PostgreSQL's own parser recurses (its stack), within 64 KiB.
    let deep = format!("{}{}", "[".repeat(32_000), "]".repeat(32_000));
    for (i, (tenant, key, payload)) in [
        (t.as_str(), "a", "{}"),                             // created
        (t.as_str(), "a", "{}"),                             // duplicate
        (t.as_str(), "a", "[]"),                             // reused
        (t.as_str(), "b", r#"{"x":1,"x":2}"#),               // invalid payload
        (t.as_str(), "b", deep.as_str()),                    // invalid payload
        (t.as_str(), "", "{}"),                              // invalid operation key
        (t.as_str(), "x\u{202E}y", "{}"),                    // a bidirectional override
        ("not-a-uuid", "c", "{}"),                           // invalid tenant
        ("01900000-0000-7000-8000-000000000009", "c", "{}"), // unknown tenant
        (t.as_str(), "c", "{}"),                             // created
        (t.as_str(), "d", "{}"),                             // created (the third unit)
        (t.as_str(), "e", "{}"),                             // quota exhausted
    ]
    .into_iter()
    .enumerate()
    {
        let (status, _, field, code) = submit_sql(&mut *app, tenant, key, payload).await;
        answers.push(format!(
            "{status}/{}/{}",
            field.unwrap_or_default(),
            code.unwrap_or_default()
        ));
        sqlx::query("INSERT INTO app_orders VALUES ($1)")
            .bind(format!("after-{i}"))
            .execute(&mut *app)
            .await
            .unwrap();
    }
    app.commit().await.unwrap();
    assert_eq!(
        answers,
        [
            "created//",
            "duplicate//",
            "reused//",
            "invalid/payload/duplicate_key",
            "invalid/payload/too_deep",
            "invalid/operation_key/empty",
            "invalid/operation_key/control_character",
            "invalid/tenant/not_a_uuid",
            "invalid/tenant/unknown_tenant",
            "created//",
            "created//",
            "quota_exhausted//",
        ]
    );
    let orders: i64 =
        sqlx::query_scalar("SELECT count(*) FROM app_orders").fetch_one(&pool).await.unwrap();
    assert_eq!(orders, 12, "every write of the application committed");
    let deliveries: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deliveries").fetch_one(&pool).await.unwrap();
    assert_eq!(deliveries, 3, "a, c and d; nothing for the refused ones");
    let account = &herald.quotas(tenant).await.unwrap()[0];
    assert_eq!((account.available, account.reserved), (0, 3));
}

/// A delivery the SQL API created keeps its fingerprint uncomputed until a repeat needs it
/// (migration 8): a repeat through SQL or the library is compared with the whole request —
/// payload by meaning, not spelling; `send_at` as given, not as the row's due time;
/// `max_attempts` as resolved at the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_of_an_sql_submit_compares_the_whole_request() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    herald.quota_grant(tenant, "webhook", 10, None).await.unwrap();
    let t = tenant.to_string();
    let call = async |key: &str, payload: &str, send_at: Option<&str>, attempts: Option<i32>| {
        let (status, ..): Answer = sqlx::query_as(
            "SELECT status, delivery_id, field, code FROM herald_submit_v1(
                 tenant => $1, operation_key => $2, channel => 'webhook', recipient => $3,
                 payload => $4, send_at => $5, max_attempts => $6)",
        )
        .bind(&t)
        .bind(key)
        .bind(TO)
        .bind(payload)
        .bind(send_at)
        .bind(attempts)
        .fetch_one(&pool)
        .await
        .unwrap();
        status
    };
    let later = "2031-05-01T10:00:00Z";
    let mut answers = Vec::new();
    for (key, payload, send_at, attempts) in [
        ("p", r#"{"b": [1.50, "\u00e9"], "a": {}}"#, None, None), // created
        ("p", r#"{"a":{},"b":[15e-1,"é"]}"#, None, None),         // the same JSON
        ("p", r#"{"a":{},"b":[1.5,"é"]}"#, None, Some(8)),        // 8 is the default
        ("p", r#"{"a":{},"b":[1.5,"e"]}"#, None, None),           // another payload
        ("p", r#"{"a":{},"b":[1.5,"é"]}"#, Some(later), None),    // a send_at
        ("p", r#"{"a":{},"b":[1.5,"é"]}"#, None, Some(3)),        // other attempts
        ("s", "[]", Some(later), Some(3)),                        // created
        ("s", "[]", Some("2031-05-01T12:00:00+02:00"), Some(3)),  // the same instant
        ("s", "[ ]", Some(later), Some(3)),                       // the same JSON
        ("s", "[]", None, Some(3)),                               // no send_at
        ("s", "[]", Some("2031-05-01T10:00:01Z"), Some(3)),       // another one
    ] {
        answers.push(call(key, payload, send_at, attempts).await);
    }
    let want = [
        "created",
        "duplicate",
        "duplicate",
        "reused",
        "reused",
        "reused",
        "created",
        "duplicate",
        "duplicate",
        "reused",
        "reused",
    ];
    assert_eq!(answers, want);
    let versions: Vec<i16> =
        sqlx::query_scalar("SELECT fingerprint_version FROM deliveries ORDER BY operation_key")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(versions, [0, 0], "repeats compare, they never write the fingerprint");

    // The library (the HTTP API's path) computes the same fingerprint from the row.
    let mut same = request(tenant, "s", "[]");
    same.send_at = Some(jiff::Timestamp::from_second(1_935_396_000).unwrap());
    same.max_attempts = Some(3);
    assert!(herald.submit_alone(&same).await.unwrap().duplicate);
    same.max_attempts = Some(4);
    let other = herald.submit_alone(&same).await;
    assert!(matches!(other, Err(Error::IdempotencyKeyReused)), "{other:?}");
    let respelled = request(tenant, "p", r#"{"b":[1.5,"é"],"a":{}}"#);
    assert!(herald.submit_alone(&respelled).await.unwrap().duplicate);
}

/// Seed 001's fixture through `herald_receipt_v1`, each event applied in the application's
/// transaction only when its receipt is new: evt-17, evt-17, evt-18 → 15 units, 2 receipts.
/// The library's `once` sees the same receipts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_through_sql_apply_each_event_once() {
    let Some((_db, _herald, _tenant, pool)) = setup().await else { return };
    sqlx::raw_sql(
        "CREATE TABLE app_invoices (id int PRIMARY KEY, total bigint NOT NULL);
                   INSERT INTO app_invoices VALUES (17, 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut statuses = Vec::new();
    for (event, units) in [("evt-17", 10), ("evt-17", 10), ("evt-18", 5)] {
        let mut app = pool.begin().await.unwrap();
        let (status, ..): (String, Option<String>, Option<String>) =
            sqlx::query_as("SELECT * FROM herald_receipt_v1('invoice-adjustments', $1)")
                .bind(event)
                .fetch_one(&mut *app)
                .await
                .unwrap();
        if status == "applied" {
            sqlx::query("UPDATE app_invoices SET total = total + $1 WHERE id = 17")
                .bind(units)
                .execute(&mut *app)
                .await
                .unwrap();
        }
        app.commit().await.unwrap();
        statuses.push(status);
    }
    assert_eq!(statuses, ["applied", "duplicate", "applied"]);
    let total: i64 = sqlx::query_scalar("SELECT total FROM app_invoices WHERE id = 17")
        .fetch_one(&pool)
        .await
        .unwrap();
    let receipts: i64 =
        sqlx::query_scalar("SELECT count(*) FROM receipts").fetch_one(&pool).await.unwrap();
    assert_eq!((total, receipts), (15, 2));
    // The library's `once` in another transaction: evt-17 was applied already.
    let mut app = pool.begin().await.unwrap();
    let again = herald::once(&mut *app, "invoice-adjustments", "evt-17", |_| {
        Box::pin(async move { Ok(()) })
    })
    .await
    .unwrap();
    assert!(matches!(again, herald::Once::AlreadyApplied), "{again:?}");
    app.rollback().await.unwrap();
}

/// A committed SQL submit wakes listening workers (`NOTIFY herald_due`, coalesced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_sql_submit_wakes_the_workers() {
    let Some((_db, _herald, tenant, pool)) = setup().await else { return };
    let mut listener = sqlx::postgres::PgListener::connect_with(&pool).await.unwrap();
    listener.listen("herald_due").await.unwrap();
    let mut app = pool.begin().await.unwrap();
    let (status, ..) = submit_sql(&mut *app, &tenant.to_string(), "order-1", "{}").await;
    assert_eq!(status, "created");
    app.commit().await.unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(5), listener.recv()).await;
    assert!(matches!(woken, Ok(Ok(_))), "no wake-up after the commit: {woken:?}");
}

/// The tenant wall: a role submits only for the tenants it was granted, with herald's
/// rights — it has none on herald's tables itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_submits_only_for_the_tenants_it_was_granted() {
    use herald::sqlx::Connection;
    use std::str::FromStr;
    let Some((db, herald, tenant, pool)) = setup().await else { return };
    let other = herald.tenant_create("globex").await.unwrap().id;
    herald.quota_grant(other, "webhook", 3, None).await.unwrap();
    // Named like the tests' schemas, so `.ci/run` drops it if this test dies midway.
    let role = format!("t_{}", uuid::Uuid::now_v7().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE ROLE {role} LOGIN")))
        .execute(&pool)
        .await
        .unwrap();
    let options = sqlx::postgres::PgConnectOptions::from_str(&db.url).unwrap().username(&role);
    let mut app = sqlx::PgConnection::connect_with(&options).await.unwrap();

    assert!(herald.sql_grant(&role, Some(tenant)).await.unwrap());
    assert!(!herald.sql_grant(&role, Some(tenant)).await.unwrap(), "granted already");
    let (status, ..) = submit_sql(&mut app, &tenant.to_string(), "order-1", "{}").await;
    assert_eq!(status, "created", "its own tenant");
    let (status, _, field, code) = submit_sql(&mut app, &other.to_string(), "order-1", "{}").await;
    assert_eq!(
        (status.as_str(), field.as_deref(), code.as_deref()),
        ("invalid", Some("tenant"), Some("not_granted")),
        "another tenant"
    );
    let read = sqlx::query("SELECT * FROM deliveries").execute(&mut app).await;
    assert!(read.is_err(), "the role has no rights on herald's tables");
    let body = sqlx::query(
        "SELECT * FROM herald_submit($1, 'order-9', 'webhook', 'https://x', '{}', NULL, 1, NULL,
                                     NULL, false, NULL)",
    )
    .bind(tenant.to_string())
    .execute(&mut app)
    .await;
    assert!(body.is_err(), "only v1 and v2 call their body");
    let grants = herald.sql_grants().await.unwrap();
    assert!(
        grants.contains(&herald::SqlGrant { role: role.clone(), tenant: Some(tenant.as_uuid()) })
    );

    assert!(herald.sql_grant(&role, None).await.unwrap());
    let (status, ..) = submit_sql(&mut app, &other.to_string(), "order-2", "{}").await;
    assert_eq!(status, "created", "every tenant");
    assert!(herald.sql_revoke(&role, None).await.unwrap());
    assert!(herald.sql_revoke(&role, Some(tenant)).await.unwrap());
    assert!(!herald.sql_revoke(&role, Some(tenant)).await.unwrap(), "revoked already");
    let (status, _, _, code) = submit_sql(&mut app, &tenant.to_string(), "order-3", "{}").await;
    assert_eq!((status.as_str(), code.as_deref()), ("invalid", Some("not_granted")));
    let unknown = herald.sql_grant(&role, Some(TenantId::new_v7())).await;
    assert!(matches!(unknown, Err(Error::UnknownTenant)), "{unknown:?}");
    app.close().await.unwrap();

    let schema: String =
        sqlx::query_scalar("SELECT current_schema()").fetch_one(&pool).await.unwrap();
    let drop = format!("REVOKE ALL ON SCHEMA {schema} FROM {role}; DROP ROLE {role}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(drop)).execute(&pool).await.unwrap();
}

/// `send_at` values (operation key, text) for both servers' SQL API: three that are not
/// RFC 3339 times, a leap second, an offset with milliseconds, digits past the millisecond.
pub(crate) const SEND_AT_CASES: [(&str, &str); 6] = [
    ("a", "tomorrow"),
    ("b", "2030-01-02"),
    ("c", "2030-02-30T00:00:00Z"),
    ("d", "2030-01-02T03:04:60Z"),
    ("e", "2030-01-02T03:04:05.123+02:00"),
    ("f", "2030-01-02T01:04:05.1239Z"),
];
/// Their answers (status/field/code).
pub(crate) const SEND_AT_ANSWERS: [&str; 6] = [
    "invalid/send_at/not_a_time",
    "invalid/send_at/not_a_time",
    "invalid/send_at/not_a_time",
    "created//",
    "created//",
    "created//",
];
/// The created ones' due times: 2030-01-02T03:04:59Z, 2030-01-02T01:04:05.123Z, and the
/// last cut to its millisecond as herald_core reads it (not rounded: the fingerprint of a
/// request names that instant on every face).
pub(crate) const SEND_AT_DUE: [i64; 3] = [1_893_553_499_000, 1_893_546_245_123, 1_893_546_245_123];

/// `send_at` is RFC 3339, as over HTTP (PostgreSQL's own parser would take `tomorrow`); a
/// leap second reads as :59, as herald's parser reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_at_is_rfc_3339_as_on_every_face() {
    let Some((_db, _herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let mut answers = Vec::new();
    for (key, send_at) in SEND_AT_CASES {
        let (status, _, field, code): Answer = sqlx::query_as(
            "SELECT status, delivery_id, field, code FROM herald_submit_v1(
                 tenant => $1, operation_key => $2, channel => 'webhook', recipient => $3,
                 payload => '{}', send_at => $4)",
        )
        .bind(&t)
        .bind(key)
        .bind(TO)
        .bind(send_at)
        .fetch_one(&pool)
        .await
        .unwrap();
        answers.push(format!(
            "{status}/{}/{}",
            field.unwrap_or_default(),
            code.unwrap_or_default()
        ));
    }
    assert_eq!(answers, SEND_AT_ANSWERS);
    let due: Vec<i64> = sqlx::query_scalar(
        "SELECT herald_ms(next_attempt_at) FROM deliveries ORDER BY operation_key",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(due, SEND_AT_DUE);
}

/// The fingerprint a client computes for a webhook to TO (quota key and cost by default).
fn client_print(payload: &str, max_attempts: u32) -> Vec<u8> {
    let payload = herald_core::json::parse(payload).unwrap();
    herald_core::fingerprint::fingerprint(&herald_core::fingerprint::Resolved {
        channel: "webhook",
        to: TO,
        payload: &payload,
        quota_key: "webhook",
        cost: 1,
        send_at_ms: None,
        max_attempts,
    })
    .to_vec()
}

/// `herald_submit_v2` with the fingerprint given (or NULL) and max_attempts (NULL: the shared
/// setting).
async fn submit_v2(
    pool: &PgPool,
    tenant: &str,
    key: &str,
    payload: &str,
    print: Option<Vec<u8>>,
    max_attempts: Option<i32>,
) -> Answer {
    sqlx::query_as(
        "SELECT status, delivery_id, field, code FROM herald_submit_v2(
             tenant => $1, operation_key => $2, channel => 'webhook', recipient => $3,
             payload => $4, max_attempts => $6, fingerprint => $5)",
    )
    .bind(tenant)
    .bind(key)
    .bind(TO)
    .bind(payload)
    .bind(print)
    .bind(max_attempts)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// `herald_submit_v2` (issue 35), as MariaDB's `submit_v2`: the caller computes the
/// fingerprint and SQL walks no payload. An honest one claims a version-3 row that a repeat
/// through any face finds a duplicate and that the worker sends; a forged one is claimed
/// but failed unsent with `fingerprint_mismatch`; no fingerprint, a short one, or a payload
/// that is not JSON are answered `invalid`, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_v2_takes_the_callers_fingerprint_and_herald_checks_it_before_the_send() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    let t = tenant.to_string();
    let payload = r#"{"order": 17, "total": 1.50}"#;
    let print = client_print(payload, 5);

    for (print, field, code) in
        [(None, "fingerprint", "empty"), (Some(vec![7; 31]), "fingerprint", "not_a_fingerprint")]
    {
        let (status, _, f, c) = submit_v2(&pool, &t, "v2-bad", payload, print, Some(5)).await;
        assert_eq!(
            (status.as_str(), f.as_deref(), c.as_deref()),
            ("invalid", Some(field), Some(code))
        );
    }
    // `json` reads the syntax; an escape it lets through goes to `jsonb` (and the walk).
    for (bad, code) in [
        ("{", "syntax"),
        ("[\"\\ud800\"]", "lone_surrogate"),
        ("[\"\\uDC00x\"]", "lone_surrogate"),
        ("{\"a\": \"\\u0000\"}", "nul"),
    ] {
        let (status, _, f, c) =
            submit_v2(&pool, &t, "v2-bad", bad, Some(print.clone()), Some(5)).await;
        assert_eq!(
            (status.as_str(), f.as_deref(), c.as_deref()),
            ("invalid", Some("payload"), Some(code))
        );
    }
    let rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deliveries").fetch_one(&pool).await.unwrap();
    assert_eq!(rows, 0);

    let honest = submit_v2(&pool, &t, "v2-honest", payload, Some(print.clone()), Some(5)).await;
    assert_eq!(honest.0, "created", "{honest:?}");
    let forged = submit_v2(&pool, &t, "v2-forged", payload, Some(vec![0; 32]), Some(5)).await;
    assert_eq!(forged.0, "created", "{forged:?}");
    let versions: Vec<i16> = sqlx::query_scalar("SELECT fingerprint_version FROM deliveries")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(versions, [3, 3]);

    // A repeat through another face compares the client's bytes as version 2, and a
    // repeat through v1 computes them.
    let again = SubmitRequest { max_attempts: Some(5), ..request(tenant, "v2-honest", payload) };
    let again = herald.submit_alone(&again).await.unwrap();
    assert!(again.duplicate);
    assert_eq!(Some(again.delivery.id.as_uuid()), honest.1);
    let again = submit_v2(
        &pool,
        &t,
        "v2-honest",
        r#"{"total":1.5,"order":17}"#,
        Some(print.clone()),
        Some(5),
    )
    .await;
    assert_eq!((again.0.as_str(), again.1), ("duplicate", honest.1));
    let other = submit_v2(&pool, &t, "v2-honest", payload, Some(vec![1; 32]), Some(5)).await;
    assert_eq!((other.0.as_str(), other.1), ("reused", None));
    // A v1 row (fingerprint left to the first repeat) repeated through v2.
    let first = submit_sql(&pool, &t, "v1-row", payload).await;
    assert_eq!(
        submit_v2(&pool, &t, "v1-row", payload, Some(client_print(payload, 8)), None).await.1,
        first.1,
        "the same request"
    );
    let other = r#"{"order": 18}"#;
    assert_eq!(
        submit_v2(&pool, &t, "v1-row", other, Some(client_print(other, 8)), None).await.0,
        "reused",
        "another payload"
    );

    // Text that only looks like those escapes, and a surrogate pair, are JSON, and sent.
    herald.quota_grant(tenant, "webhook", 2, None).await.unwrap();
    for (i, good) in [r#"["\\u0000"]"#, r#"["\ud83d\ude00"]"#].into_iter().enumerate() {
        let key = format!("v2-escapes-{i}");
        let (status, ..) =
            submit_v2(&pool, &t, &key, good, Some(client_print(good, 5)), Some(5)).await;
        assert_eq!(status, "created", "{good}");
    }

    let sends = std::sync::Arc::new(common::Sends::default());
    let channel: std::sync::Arc<dyn herald::Channel> = sends.clone();
    let options = herald::WorkerOptions { id: "w-v2".into(), ..Default::default() };
    let worker =
        herald::Worker::new(herald.clone(), options, [("webhook".to_string(), channel)]).unwrap();
    let report = worker.run_once().await.unwrap();
    assert_eq!((report.sent, report.failed), (4, 1));
    let mut sent = sends.0.lock().unwrap().clone();
    sent.sort();
    let want = ["v1-row", "v2-escapes-0", "v2-escapes-1", "v2-honest"];
    assert_eq!(sent, want, "the forged one is never sent");
    let failed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
          WHERE d.operation_key = 'v2-forged' AND d.state = 'failed'
            AND a.error_code = 'fingerprint_mismatch'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(failed, 1);
}

/// The payload limit is the channel's on this face too: a rendered email of 1 MiB is
/// claimed through `herald_submit_v2` (the caller's fingerprint: SQL walks no payload), past
/// 4 MiB it is `too_long`, and a webhook's payload past 64 KiB is `too_long`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_limits_are_the_channels_in_sql_too() {
    let Some((_db, herald, tenant, pool)) = setup().await else { return };
    herald.quota_grant(tenant, "email", 3, None).await.unwrap();
    let to = "customer@example.net";
    let rendered = |n: usize| {
        serde_json::json!({"raw": format!("Subject: s\r\n\r\n{}", "x".repeat(n))}).to_string()
    };
    let call = |key: &'static str, channel: &'static str, to: &'static str, payload: String| {
        let pool = pool.clone();
        let t = tenant.to_string();
        async move {
            let parsed = herald_core::json::parse(&payload).unwrap();
            let print =
                herald_core::fingerprint::fingerprint(&herald_core::fingerprint::Resolved {
                    channel,
                    to,
                    payload: &parsed,
                    quota_key: channel,
                    cost: 1,
                    send_at_ms: None,
                    max_attempts: 5,
                });
            let answer: Answer = sqlx::query_as(
                "SELECT status, delivery_id, field, code FROM herald_submit_v2(
                     tenant => $1, operation_key => $2, channel => $3, recipient => $4,
                     payload => $5, max_attempts => 5, fingerprint => $6)",
            )
            .bind(t)
            .bind(key)
            .bind(channel)
            .bind(to)
            .bind(payload)
            .bind(print.to_vec())
            .fetch_one(&pool)
            .await
            .unwrap();
            (answer.0, answer.2, answer.3)
        }
    };
    let created = ("created".to_string(), None, None);
    let too_long = ("invalid".to_string(), Some("payload".to_string()), Some("too_long".into()));
    assert_eq!(call("mail-1", "email", to, rendered(1 << 20)).await, created);
    let over = rendered(herald_core::limits::EMAIL_PAYLOAD_BYTES_MAX);
    assert_eq!(call("mail-2", "email", to, over).await, too_long);
    let hook = serde_json::json!({"blob": "x".repeat(herald_core::limits::PAYLOAD_BYTES_MAX)});
    assert_eq!(call("hook-1", "webhook", TO, hook.to_string()).await, too_long);
}
