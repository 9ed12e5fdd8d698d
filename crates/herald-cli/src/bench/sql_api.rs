//! The SQL API's submit phases, as an application calls it: one autocommitted call per
//! submit, from the bench's Rust clients (v1, and v2 with the fingerprint computed in
//! Rust) and from PHP processes through the PHP package (issue 35's acceptance), each
//! with a small and a 4 KiB nested payload. `herald bench --sql-only` runs them alone
//! beside the one-statement floor.

use super::Args;
use super::harness::{Bench, bar, rate, spinner};
use anyhow::Result;
use herald::Herald;

/// Each SQL-API submit phase: (name, rate, submits), for the caller to set beside the
/// one-statement floor.
pub(super) async fn sql_api_rates(
    args: &Args,
    bench: &Bench,
    herald: &Herald,
    url: &str,
    n: usize,
) -> Result<Vec<(String, f64, usize)>> {
    // The bench's own role, granted every tenant.
    let role = herald::bench::session_role(herald).await?;
    herald.sql_grant(&role, None).await?;
    let mut rates = Vec::new();
    let (v1, v2) = match herald.backend() {
        herald::Backend::Postgres => ("herald_submit_v1", "herald_submit_v2"),
        _ => ("submit_v1", "submit_v2"),
    };
    use herald::bench::SqlSubmit::{V1, V2ClientFingerprint as V2};
    // v2: the fingerprint computed by the client (here in Rust, timed with the call).
    let cases = [
        (format!("submit, SQL API ({v1})"), "sql", SQL_PAYLOAD_SMALL.to_string(), V1),
        ("submit, SQL API, 4 KiB nested payload".into(), "sql-4k", nested_payload(4096), V1),
        (
            format!("submit, SQL API ({v2}, the client's fingerprint)"),
            "sql-v2",
            SQL_PAYLOAD_SMALL.to_string(),
            V2,
        ),
        ("submit, SQL API v2, 4 KiB nested payload".into(), "sql-v2-4k", nested_payload(4096), V2),
    ];
    for (name, prefix, payload, version) in cases {
        let name = name.as_str();
        bench.reset().await?;
        let b = bar(n, name);
        let value = rate(n, bench.submit_sql(n, prefix, &payload, version, &b).await?);
        b.finish();
        rates.push((name.to_string(), value, n));
    }
    for (name, value, n) in php_rates(args, bench, url, n).await? {
        rates.push((name.to_string(), value, n));
    }
    Ok(rates)
}

/// The PHP package's submit from `--clients` PHP processes (issue 35's acceptance): v2,
/// the fingerprint computed in PHP, with a small and a 4 KiB payload; and v1 (max_attempts
/// left to the shared setting, so the database computes it) with 4 KiB, on a quarter of
/// the submits (on MariaDB it walks the payload in stored-procedure statements). Each:
/// (name, rate, submits).
async fn php_rates(
    args: &Args,
    bench: &Bench,
    url: &str,
    n: usize,
) -> Result<Vec<(&'static str, f64, usize)>> {
    let php = super::php::PhpTarget::of(url)?;
    if let Some(why) = php.missing().await {
        eprintln!("note: the PHP package's phases were skipped: {why}");
        return Ok(Vec::new());
    }
    let small = SQL_PAYLOAD_SMALL.to_string();
    let cases = [
        ("submit, PHP package (v2: the fingerprint in PHP)", "php", small, true, n),
        ("submit, PHP package, 4 KiB nested payload", "php-4k", nested_payload(4096), true, n),
        (
            "submit, PHP package, 4 KiB nested payload, v1 (the fingerprint in SQL)",
            "php-v1-4k",
            nested_payload(4096),
            false,
            (n / 4).max(args.clients),
        ),
    ];
    let mut rates = Vec::new();
    for (name, prefix, payload, v2, n) in cases {
        bench.reset().await?;
        let s = spinner(name);
        let elapsed = php.submit(args.clients, n, prefix, &payload, v2, &bench.tenants).await?;
        s.finish();
        rates.push((name, rate(n, elapsed), n));
    }
    Ok(rates)
}

/// The SQL API's small payload, the size of the library's `{"event": "bench"}`.
pub(super) const SQL_PAYLOAD_SMALL: &str = r#"{"event": "bench"}"#;

/// A JSON object of about `bytes` bytes, nested four levels deep, with strings, numbers
/// and arrays: what a real notification's payload looks like to the fingerprint.
fn nested_payload(bytes: usize) -> String {
    let mut items = Vec::new();
    let mut i = 0;
    loop {
        let item = format!(
            r#"{{"id": {i}, "sku": "SKU-{i:05}", "price": {}.{:02}, "tags": ["a", "b"], "meta": {{"gift": false, "note": "item {i} of the order"}}}}"#,
            10 + i % 90,
            i % 100
        );
        let total: usize = items.iter().map(|s: &String| s.len() + 2).sum::<usize>() + item.len();
        if total + 80 > bytes {
            break;
        }
        items.push(item);
        i += 1;
    }
    format!(
        r#"{{"event": "order.shipped", "order": {{"id": 17, "items": [{}]}}}}"#,
        items.join(", ")
    )
}
