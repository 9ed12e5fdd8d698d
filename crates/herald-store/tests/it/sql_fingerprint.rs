//! The fingerprint in SQL (PostgreSQL migrations 6 and 8, MariaDB migration 2: the SQL API's):
//! the golden vectors of `testdata/fingerprint-vectors.json`, which herald_core reproduces
//! too, give the same canonical text, SHA-256 or problem code through the database's functions.

use crate::conformance::Db;
use herald_store::{AsConn, Backend, Conn};
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/fingerprint-vectors.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["cases"].as_array().unwrap().clone()
}

/// (canonical payload, problem, SHA-256 hex of the envelope) as a backend's SQL computes them.
type Computed = (Option<String>, Option<String>, Option<String>);

/// Every vector through `compute`; the ones that differ from the file.
async fn check_every_vector<F>(mut compute: F)
where
    F: AsyncFnMut(&str, &Value) -> Computed,
{
    let cases = vectors();
    assert_eq!(cases.len(), 235, "the vectors file changed: update this count with it");
    let mut wrong = Vec::new();
    for case in &cases {
        let (canonical, problem, sha256) =
            compute(case["payload"].as_str().unwrap(), &case["request"]).await;
        let name = case["name"].as_str().unwrap();
        match case["invalid"].as_str() {
            Some(code) => {
                if problem.as_deref() != Some(code) || canonical.is_some() {
                    wrong.push(format!("{name}: want {code}, got {problem:?} / {canonical:?}"));
                }
            }
            None => {
                let envelope = case["canonical"].as_str().unwrap();
                let payload = canonical.as_deref().unwrap_or("");
                let sha256 = sha256.map(|h| h.to_ascii_lowercase());
                if sha256.as_deref() != case["sha256"].as_str() || !envelope.contains(payload) {
                    wrong.push(format!("{name}: got {problem:?} / {canonical:?} / {sha256:?}"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} vectors differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_computes_every_golden_vector() {
    let Some(db) = Db::open(Backend::Postgres).await else { return };
    let mut tx = db.tx().await;
    let Conn::Postgres(c) = tx.as_conn() else { unreachable!("a PostgreSQL store") };
    check_every_vector(async |payload: &str, r: &Value| {
        herald_store::sqlx::query_as(
            "SELECT p.canonical, p.problem,
                    encode(herald_fingerprint_v2($2, $3, p.canonical, $4, $5, $6, $7), 'hex')
             FROM herald_payload_canonical($1) p",
        )
        .bind(payload)
        .bind(r["channel"].as_str().unwrap())
        .bind(r["to"].as_str().unwrap())
        .bind(r["quota_key"].as_str().unwrap())
        .bind(r["cost"].as_i64().unwrap())
        .bind(r["send_at"].as_i64())
        .bind(r["max_attempts"].as_i64().unwrap() as i32)
        .fetch_one(&mut *c)
        .await
        .unwrap()
    })
    .await;
    tx.rollback().await.unwrap();
}

/// `herald_payload_plain` (PostgreSQL migration 8, MariaDB schema 15), the SQL submit's
/// cheap proof that a payload is valid, clears no invalid vector and no payload built to
/// fool its key count, its duplicate-key pattern or its nesting bound, and clears the plain
/// valid ones (which then skip the walk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_clears_only_valid_payloads_without_the_walk() {
    let Some(db) = Db::open(Backend::Postgres).await else { return };
    let mut tx = db.tx().await;
    let Conn::Postgres(c) = tx.as_conn() else { unreachable!("a PostgreSQL store") };
    check_plain(async |payload: &str| {
        let plain: bool = herald_store::sqlx::query_scalar("SELECT herald_payload_plain($1)")
            .bind(payload)
            .fetch_one(&mut *c)
            .await
            .unwrap();
        let (problem,): (Option<String>,) =
            herald_store::sqlx::query_as("SELECT problem FROM herald_payload_canonical($1)")
                .bind(payload)
                .fetch_one(&mut *c)
                .await
                .unwrap();
        (plain, problem)
    })
    .await;
    tx.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_clears_only_valid_payloads_without_the_walk() {
    let Some(db) = Db::open(Backend::MySql).await else { return };
    let mut tx = db.tx().await;
    let Conn::MySql(c) = tx.as_conn() else { unreachable!("a MariaDB store") };
    check_plain(async |payload: &str| {
        let plain: bool = herald_store::sqlx::query_scalar("SELECT herald_payload_plain(?)")
            .bind(payload)
            .fetch_one(&mut *c)
            .await
            .unwrap();
        herald_store::sqlx::query("CALL herald_payload_canonical(?, @canonical, @problem)")
            .bind(payload)
            .execute(&mut *c)
            .await
            .unwrap();
        let problem: Option<String> =
            herald_store::sqlx::query_scalar("SELECT @problem").fetch_one(&mut *c).await.unwrap();
        (plain, problem)
    })
    .await;
    tx.rollback().await.unwrap();
}

/// Every vector and the built cases through `check` ((cleared, the walk's problem)).
async fn check_plain<F>(mut check: F)
where
    F: AsyncFnMut(&str) -> (bool, Option<String>),
{
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let objects = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    let mut cases: Vec<(String, bool)> = vectors()
        .iter()
        .map(|v| (v["payload"].as_str().unwrap().to_string(), v["invalid"].is_null()))
        .collect();
    for (payload, valid) in [
        (r#"{"a":": x","a":1}"#, false), // a string opening with a colon, and a repeat
        (r#"{"a\":":1,"a\":":2}"#, false), // escaped quotes before colons
        ("{\"a\" :1,\"a\"\t:2}", false), // whitespace before the colon
        (r#"[{"a":1},{"a":2,"b":{"a":3}}]"#, true),
        (r#"{"k":"x\":","k2":1}"#, true), // valid; not proven, so walked
        (r#"{"n":123456789012345678901234567890.5}"#, true),
        (r#"{"n":1234567890123456789012345678901234567}"#, false),
        (r#"{"n":1e400}"#, false),
        (r#""\u0000""#, false),
        (r#""\ud83d\ude00""#, true),
        // A key twice in an object inside an array, apart, after a nested value, after a
        // string holding brackets and commas, and spelled two ways.
        (r#"[{"a":1,"b":2,"a":3}]"#, false),
        (r#"{"x":[{"k":{"y":[1,{"z":2}]},"j":"],{","k":0}]}"#, false),
        (r#"{"k":"v,}]","m":{"k":1},"k":2}"#, false),
        (r#"{"a/b":1,"a\/b":2}"#, false),
        (r#"{"k":"v,}]","m":{"k":1},"j":2}"#, true),
        (r#"{"items":[{"sku":"A","qty":1},{"sku":"B","qty":2}],"total":10.50}"#, true),
        (r#"{"text":"line one\nline \"two\"","tags":[]}"#, true),
        ("[1.]", false),
        (r#"{"n":1.0000000000000000000000000000001}"#, false),
    ] {
        cases.push((payload.to_string(), valid));
    }
    cases.push((nested(31), true));
    cases.push((nested(32), false));
    cases.push((objects(31), true));
    cases.push((objects(32), false));
    cases.push((format!("[{}]", vec!["{}"; 40].join(",")), true));
    cases.push((nested(32_000), false));
    let (mut cleared, mut wrong) = (0, Vec::new());
    for (payload, valid) in &cases {
        let (plain, problem) = check(payload).await;
        if problem.is_none() != *valid {
            wrong.push(format!("the walk: {payload:.80} gives {problem:?}"));
        }
        if plain && !valid {
            wrong.push(format!("cleared though invalid: {payload:.80}"));
        }
        cleared += usize::from(plain);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let valid = cases.iter().filter(|(_, v)| *v).count();
    assert!(cleared * 2 > valid, "only {cleared} of {valid} valid payloads cleared");
}

/// MariaDB's procedures (migration 2) walk the value without recursion: a 31-deep vector
/// is what ran out of the server's thread stack when they recursed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_computes_every_golden_vector() {
    let Some(db) = Db::open(Backend::MySql).await else { return };
    let mut tx = db.tx().await;
    let Conn::MySql(c) = tx.as_conn() else { unreachable!("a MariaDB store") };
    check_every_vector(async |payload: &str, r: &Value| {
        herald_store::sqlx::query("CALL herald_payload_canonical(?, @canonical, @problem)")
            .bind(payload)
            .execute(&mut *c)
            .await
            .unwrap();
        herald_store::sqlx::query_as(
            "SELECT @canonical, @problem,
                    HEX(herald_fingerprint_v2(?, ?, @canonical, ?, ?, ?, ?))",
        )
        .bind(r["channel"].as_str().unwrap())
        .bind(r["to"].as_str().unwrap())
        .bind(r["quota_key"].as_str().unwrap())
        .bind(r["cost"].as_i64().unwrap())
        .bind(r["send_at"].as_i64())
        .bind(r["max_attempts"].as_i64().unwrap() as i32)
        .fetch_one(&mut *c)
        .await
        .unwrap()
    })
    .await;
    tx.rollback().await.unwrap();
}

/// What MariaDB's JSON_VALID lets through or its functions trip over, found by a review:
/// each is an answer (herald_core's problem code), never an error raised in the caller's
/// transaction, whatever the session's group_concat_max_len.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_answers_what_its_json_functions_let_through() {
    let Some(db) = Db::open(Backend::MySql).await else { return };
    let mut tx = db.tx().await;
    let Conn::MySql(c) = tx.as_conn() else { unreachable!("a MariaDB store") };
    herald_store::sqlx::query("SET SESSION group_concat_max_len = 4")
        .execute(&mut *c)
        .await
        .unwrap();
    let cases: &[(&[u8], Option<&str>, Option<&str>)] = &[
        (b"[1e]", None, Some("syntax")),
        (b"[1.]", None, Some("syntax")),
        (b"{\"a\":2E,\"b\":1}", None, Some("syntax")),
        (b"[1.5e-3, 1E+2]", Some("[0.0015,100]"), None),
        (b"{\"\ta\":1}", None, Some("control_character")),
        (b"[\"\\x\"]", None, Some("syntax")),
        // A surrogate in its 3-byte form, which MariaDB's utf8mb4 accepts.
        (b"[\"\xed\xa0\x80\"]", None, Some("lone_surrogate")),
        (b"{\"c\":1,\"b\":2,\"a\":3,\"d\":4}", Some("{\"a\":3,\"b\":2,\"c\":1,\"d\":4}"), None),
    ];
    for (payload, canonical, problem) in cases {
        herald_store::sqlx::query(
            "CALL herald_payload_canonical(CONVERT(? USING utf8mb4), @canonical, @problem)",
        )
        .bind(&payload[..])
        .execute(&mut *c)
        .await
        .unwrap_or_else(|e| panic!("{:?} raised {e}", String::from_utf8_lossy(payload)));
        let got: (Option<String>, Option<String>) =
            herald_store::sqlx::query_as("SELECT @canonical, @problem")
                .fetch_one(&mut *c)
                .await
                .unwrap();
        let want = (canonical.map(str::to_string), problem.map(str::to_string));
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(payload));
    }
    let kept: i64 =
        herald_store::sqlx::query_scalar("SELECT CAST(@@group_concat_max_len AS SIGNED)")
            .fetch_one(&mut *c)
            .await
            .unwrap();
    assert_eq!(kept, 4, "the session's own setting is given back");
    tx.rollback().await.unwrap();
}

/// Payloads whose containers have more than 64 members, which MariaDB's walk reads
/// through JSON_TABLE instead of member by member (no golden vector is that wide): both
/// servers' canonical text equals herald_core's.
fn wide_payloads() -> Vec<String> {
    let strings = ["plain", "é\u{1F600}\u{ffff}", "q\"\\", "\u{1}\n\t", ""];
    let numbers =
        ["0", "-0", "17", "-1.50e1", "1E+2", "0.000123", "123456789012345678901234567890"];
    let scalar = |i: usize| match i % 4 {
        0 => serde_json::to_string(strings[i % strings.len()]).unwrap(),
        1 => numbers[i % numbers.len()].to_string(),
        2 => ["true", "false", "null"][i % 3].to_string(),
        _ => format!("[{}, {{\"k\": {i}}}]", numbers[(i + 1) % numbers.len()]),
    };
    let array = format!("[{}]", (0..200).map(scalar).collect::<Vec<_>>().join(", "));
    let key =
        |i: usize| serde_json::to_string(&format!("{}{:03}", strings[i % 5], 199 - i)).unwrap();
    let object = format!(
        "{{{}}}",
        (0..150).map(|i| format!("{}: {}", key(i), scalar(i))).collect::<Vec<_>>().join(", ")
    );
    let nested = format!("{{\"a\": [{array}, {object}], \"b\": {object}}}");
    let numbers_only = format!("[{}]", vec!["-1.0"; 3000].join(","));
    vec![array, object, nested, numbers_only]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_containers_are_canonical_on_both_servers() {
    for backend in [Backend::Postgres, Backend::MySql] {
        let Some(db) = Db::open(backend).await else { continue };
        let mut tx = db.tx().await;
        for payload in wide_payloads() {
            let parsed = herald_core::json::parse(&payload).expect("herald accepts it");
            let mut want = String::new();
            herald_core::json::write_canonical(&parsed, &mut want);
            let got: (Option<String>, Option<String>) = match tx.as_conn() {
                Conn::Postgres(c) => herald_store::sqlx::query_as(
                    "SELECT canonical, problem FROM herald_payload_canonical($1)",
                )
                .bind(&payload)
                .fetch_one(&mut *c)
                .await
                .unwrap(),
                Conn::MySql(c) => {
                    herald_store::sqlx::query("CALL herald_payload_canonical(?, @c, @p)")
                        .bind(&payload)
                        .execute(&mut *c)
                        .await
                        .unwrap();
                    herald_store::sqlx::query_as("SELECT @c, @p").fetch_one(&mut *c).await.unwrap()
                }
                Conn::Sqlite(_) => unreachable!("no SQL API on SQLite"),
            };
            assert_eq!(got, (Some(want), None), "{backend:?}: {}", &payload[..80]);
        }
        tx.rollback().await.unwrap();
    }
}
