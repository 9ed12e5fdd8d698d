//! Issue 15's acceptance through real `herald serve` processes, on SQLite, PostgreSQL and
//! MariaDB:
//! payloads reach a real webhook receiver byte for byte; two servers started with
//! different `HERALD_MAX_ATTEMPTS` on one database answer a repeat as a duplicate; and a
//! database written by herald before fingerprint version 2 (`testdata/upgrade`, dumped
//! from commit dcd44e0's `herald serve`) keeps answering its requests' repeats as
//! duplicates after the upgrade.

use crate::support::*;

/// One database per backend: a fresh SQLite file in `dir`, a fresh PostgreSQL schema and
/// a fresh MariaDB database when those are configured (required when `CI` is set).
async fn databases(dir: &Path) -> Vec<(String, String, Option<SharedDb>)> {
    let mut dbs = vec![("sqlite".to_string(), dir.join("herald.db").display().to_string(), None)];
    if let Some(base) = postgres_url() {
        let db = SharedDb::Postgres(PgSchema::create(&base).await);
        dbs.push(("postgres".to_string(), db.url().to_string(), Some(db)));
    }
    if let Some(base) = mysql_url() {
        let db = SharedDb::MySql(MyDatabase::create(&base).await);
        dbs.push(("mariadb".to_string(), db.url().to_string(), Some(db)));
    }
    dbs
}

fn delivery_body(key: &str, to: &str, payload: &str) -> String {
    format!(r#"{{"operation_key":"{key}","channel":"webhook","to":"{to}","payload":{payload}}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_reach_the_receiver_byte_for_byte_and_a_rounded_repeat_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, db, _schema) in databases(dir.path()).await {
        let mut receiver = Receiver::start(false).await;
        let server = Proc::serve(&name, dir.path(), &["--db", &db], &FAST).await;
        let (_, key, _) = tenant_with_quota(&server, "acme", 100).await;
        let to = receiver.url("exact");
        let payloads = [
            r#"{"n": 18446744073709551616}"#,
            r#"{"amount": 0.30000000000000001}"#,
            "{\n  \"z\": [1.50, -0, 1e2, 1E-7],\n  \"a\": \"\\u00e9\\/\\ud83d\\ude00\",\n  \"big\": 12345678901234567890123456789012345\n}",
        ];
        for (i, payload) in payloads.iter().enumerate() {
            let body = delivery_body(&format!("exact-{i}"), &to, payload);
            let reply = call_text(&server, "POST", "/v1/deliveries", &key, &body).await;
            expect_status(&reply, 201, &format!("{name}: submit {payload}"));
            let hit = receiver.next(DELIVERY_BOUND, &server).await;
            assert_eq!(hit.body, *payload, "{name}: the receiver gets the payload as sent");
        }
        // The same value written otherwise is a duplicate; a value rounded is another request.
        let same = delivery_body("exact-1", &to, r#"{ "amount" : 0.300000000000000010 }"#);
        let reply = call_text(&server, "POST", "/v1/deliveries", &key, &same).await;
        expect_status(&reply, 200, &format!("{name}: the same amount, written otherwise"));
        let rounded = delivery_body("exact-1", &to, r#"{"amount": 0.3}"#);
        let reply = call_text(&server, "POST", "/v1/deliveries", &key, &rounded).await;
        let error = expect_status(&reply, 422, &format!("{name}: 0.3 against 0.30000000000000001"));
        assert_eq!(error["error"]["code"], "idempotency_key_reused", "{name}: {error}");
        // Beyond the number limit: refused, and nothing is written.
        let huge = delivery_body("exact-huge", &to, r#"{"n": 1e35}"#);
        let reply = call_text(&server, "POST", "/v1/deliveries", &key, &huge).await;
        let error = expect_status(&reply, 400, &format!("{name}: 1e35"));
        assert!(
            error["error"]["message"].as_str().unwrap_or_default().contains("35 integer digits"),
            "{name}: {error}"
        );
        let reply = call(&server, "GET", "/v1/deliveries", Some(&key), None).await;
        let list = expect_status(&reply, 200, &format!("{name}: list"));
        assert_eq!(list["deliveries"].as_array().map(Vec::len), Some(payloads.len()), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_with_different_max_attempts_answer_a_repeat_as_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    for (name, db, _schema) in databases(dir.path()).await {
        let three = [FAST.as_slice(), &[("HERALD_MAX_ATTEMPTS", "3")]].concat();
        let nine = [FAST.as_slice(), &[("HERALD_MAX_ATTEMPTS", "9")]].concat();
        let a = Proc::serve(&format!("{name} a"), dir.path(), &["--db", &db], &three).await;
        let b = Proc::serve(&format!("{name} b"), dir.path(), &["--db", &db], &nine).await;
        assert!(
            b.stderr().contains("HERALD_MAX_ATTEMPTS differs from this database's shared setting"),
            "{name}: the second server says its flag is not used:\n{}",
            b.stderr()
        );
        let (_, key, _) = tenant_with_quota(&a, "acme", 100).await;
        let body = delivery_body("evt-1", "https://example.com/hook", r#"{"event":"signup"}"#);
        let created = expect_status(
            &call_text(&a, "POST", "/v1/deliveries", &key, &body).await,
            201,
            &format!("{name}: through a"),
        );
        assert_eq!(created["max_attempts"], 3, "{name}: {created}");
        let repeat = expect_status(
            &call_text(&b, "POST", "/v1/deliveries", &key, &body).await,
            200,
            &format!("{name}: the repeat through b"),
        );
        assert_eq!(
            (repeat["id"].clone(), repeat["duplicate"].clone()),
            (created["id"].clone(), json!(true))
        );
        let other = delivery_body("evt-2", "https://example.com/hook", r#"{"event":"signup"}"#);
        let through_b = expect_status(
            &call_text(&b, "POST", "/v1/deliveries", &key, &other).await,
            201,
            &format!("{name}: a new one through b"),
        );
        assert_eq!(through_b["max_attempts"], 3, "{name}: b uses the shared setting: {through_b}");
        let show = ["settings", "show", "--json", "--db", &db];
        assert_eq!(json_out(&herald(dir.path(), &show, &[]).await), json!({"max_attempts": 3}));
        // An operator changes it; a bad value is refused and changes nothing.
        let bad =
            herald(dir.path(), &["settings", "set", "--max-attempts", "0", "--db", &db], &[]).await;
        assert_eq!(bad.code, Some(1), "{name}: {}", bad.stderr);
        assert!(
            bad.stderr.contains("max_attempts must be between 1 and 100"),
            "{name}: {}",
            bad.stderr
        );
        assert_eq!(json_out(&herald(dir.path(), &show, &[]).await), json!({"max_attempts": 3}));
        let set = ["settings", "set", "--max-attempts", "5", "--json", "--db", &db];
        assert_eq!(json_out(&herald(dir.path(), &set, &[]).await), json!({"max_attempts": 5}));
        // A server started after the change, with no flag of its own, uses it.
        let c = Proc::serve(&format!("{name} c"), dir.path(), &["--db", &db], &FAST).await;
        let third = delivery_body("evt-3", "https://example.com/hook", r#"{"event":"signup"}"#);
        let through_c = expect_status(
            &call_text(&c, "POST", "/v1/deliveries", &key, &third).await,
            201,
            &format!("{name}: a new one through c"),
        );
        assert_eq!(through_c["max_attempts"], 5, "{name}: {through_c}");
    }
}

/// The requests `make-fixture` sent to the old server, and the tenant it created.
fn fixture(name: &str) -> (Vec<(String, String)>, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/upgrade");
    let requests: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("requests.json")).unwrap()).unwrap();
    let tenants: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tenant.json")).unwrap()).unwrap();
    let requests = requests
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let key = r["operation_key"].as_str().unwrap();
            let body = r["body"].as_str().unwrap();
            // As make-fixture sent it: the operation key first.
            let body =
                body.replacen(r#""channel""#, &format!(r#""operation_key":"{key}","channel""#), 1);
            (key.to_string(), body)
        })
        .collect();
    (requests, tenants[name]["api_key"].as_str().unwrap().to_string())
}

fn dump(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/upgrade").join(file);
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_version_2_keeps_answering_repeats_as_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let mut dbs = Vec::new();
    let file = dir.path().join("old.db");
    {
        let url = format!("sqlite://{}?mode=rwc", file.display());
        let mut conn = <sqlx::SqliteConnection as Connection>::connect(&url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(dump("sqlite.sql"))).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }
    dbs.push(("sqlite", file.display().to_string(), None));
    if let Some(base) = postgres_url() {
        let schema = PgSchema::create(&base).await;
        // pg_dump's text, in this test's schema; psql's own commands (\restrict) dropped.
        let sql: String = dump("postgres.sql")
            .lines()
            .filter(|l| !l.starts_with('\\') && !l.starts_with("CREATE SCHEMA"))
            .map(|l| l.replace("herald_upgrade_fixture", &schema.schema) + "\n")
            .collect();
        let mut conn = schema.connect().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
        dbs.push(("postgres", schema.url.clone(), Some(schema)));
    }
    for (name, db, _schema) in dbs {
        let (requests, key) = fixture(name);
        // No HERALD_MAX_ATTEMPTS: the old server ran with 12, and its rows remember it.
        let server = Proc::serve(name, dir.path(), &["--db", &db], &FAST).await;
        for (op, body) in &requests {
            let reply = call_text(&server, "POST", "/v1/deliveries", &key, body).await;
            let repeat = expect_status(&reply, 200, &format!("{name}: the repeat of {op}"));
            assert_eq!(repeat["duplicate"], true, "{name}: {op}: {repeat}");
        }
        // A changed request under an old key is still another request.
        let (op, body) = &requests[0];
        let changed = body.replace("1042", "1043");
        assert_ne!(&changed, body);
        let reply = call_text(&server, "POST", "/v1/deliveries", &key, &changed).await;
        let error = expect_status(&reply, 422, &format!("{name}: {op} changed"));
        assert_eq!(error["error"]["code"], "idempotency_key_reused", "{name}: {error}");
        // New requests are version 2, with the shared default this server wrote.
        let new = delivery_body("after-upgrade", "http://127.0.0.1:9/hooks/a", r#"{"n": 1.10}"#);
        let created = expect_status(
            &call_text(&server, "POST", "/v1/deliveries", &key, &new).await,
            201,
            &format!("{name}: after the upgrade"),
        );
        assert_eq!(created["max_attempts"], 8, "{name}: {created}");
        let again = call_text(&server, "POST", "/v1/deliveries", &key, &new).await;
        expect_status(&again, 200, &format!("{name}: its repeat"));
        if let Some(schema) = &_schema {
            journal_still_adds_up(schema).await;
        }
    }
}

/// PostgreSQL's schema 13 folded the `reserve` rows onto the deliveries and the final
/// rows, and schema 20 the current reservations' ends onto the deliveries: none is left in
/// the table, and the journal (now a view) still sums to each stripe's balance.
async fn journal_still_adds_up(schema: &PgSchema) {
    let mut conn = schema.connect().await;
    let left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM quota_movements WHERE kind = 'reserve'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(left, 0, "reserve rows left in the table");
    // Schema 20 moved each current reservation's end onto its delivery's row.
    let current_ends: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM quota_movements f JOIN deliveries d
           ON d.id = f.delivery_id AND d.reservation_seq = f.reservation_seq
         WHERE f.kind IN ('commit', 'release')",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(current_ends, 0, "current reservations' ends left in the table");
    let reserves: i64 =
        sqlx::query_scalar("SELECT count(*) FROM quota_journal WHERE kind = 'reserve'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(reserves > 0, "the fixture's reservations are in the journal");
    let off: Vec<(String, i16)> = sqlx::query_as(
        "WITH j AS (
             SELECT tenant_id, quota_key, stripe,
                 sum(amount) FILTER (WHERE kind IN ('grant', 'move_in'))
                   - coalesce(sum(amount) FILTER (WHERE kind = 'move_out'), 0) AS granted,
                 coalesce(sum(amount) FILTER (WHERE kind = 'reserve'), 0)
                   - coalesce(sum(amount) FILTER (WHERE kind IN ('commit', 'release')), 0)
                   AS reserved,
                 coalesce(sum(amount) FILTER (WHERE kind = 'commit'), 0) AS spent
             FROM quota_journal GROUP BY 1, 2, 3)
         SELECT a.quota_key, a.stripe FROM quota_accounts a
         LEFT JOIN j USING (tenant_id, quota_key, stripe)
         WHERE (coalesce(j.granted, 0), coalesce(j.reserved, 0), coalesce(j.spent, 0))
               IS DISTINCT FROM (a.granted, a.reserved, a.spent)",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(off.is_empty(), "stripes whose journal does not add up: {off:?}");
}
