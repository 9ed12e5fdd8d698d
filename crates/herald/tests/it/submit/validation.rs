//! Validation.

use super::*;

#[tokio::test]
async fn bad_input_is_refused_writes_nothing_and_leaves_the_transaction_usable() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        create_orders_table(&herald).await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 2 * COST_MAX, None).await.unwrap();
        let base = request(tenant, "bad-input");
        // The refusal as every face names it: "field/code".
        let refusal = |result: &Result<Submitted, Error>| match result {
            Err(Error::Invalid(herald::Invalid { field: Some(field), code, .. })) => {
                format!("{field}/{code}")
            }
            other => kind(other).to_string(),
        };
        // `{"t":""}` is 8 bytes: this payload serialises to one byte over the limit.
        let oversize = json!({"t": "x".repeat(PAYLOAD_BYTES_MAX - 7)});
        assert_eq!(oversize.to_string().len(), PAYLOAD_BYTES_MAX + 1);
        let cases = [
            (
                "empty operation_key",
                "operation_key/empty",
                SubmitRequest { operation_key: String::new(), ..base.clone() },
            ),
            (
                "operation_key over 255 bytes",
                "operation_key/too_long",
                SubmitRequest { operation_key: "k".repeat(256), ..base.clone() },
            ),
            (
                "operation_key with a tab",
                "operation_key/control_character",
                SubmitRequest { operation_key: "evt\t1".into(), ..base.clone() },
            ),
            (
                "a webhook's payload over 64 KiB (an email's may be 4 MiB)",
                "payload/too_long",
                SubmitRequest {
                    channel: "webhook".into(),
                    to: "https://example.com/hooks".into(),
                    payload: oversize.into(),
                    ..base.clone()
                },
            ),
            // PostgreSQL text cannot hold U+0000: refused up front on every backend, so the
            // caller's transaction is never aborted by it.
            (
                "NUL in the payload",
                "payload/nul",
                SubmitRequest { payload: json!({"text": "a\u{0}b"}).into(), ..base.clone() },
            ),
            (
                "NUL in a payload key",
                "payload/nul",
                SubmitRequest { payload: json!({"a\u{0}": 1}).into(), ..base.clone() },
            ),
            // herald's JSON rules (the fingerprint's), identical on every face.
            (
                "payload that is not JSON",
                "payload/syntax",
                SubmitRequest { payload: text("{"), ..base.clone() },
            ),
            (
                "duplicate key in the payload",
                "payload/duplicate_key",
                SubmitRequest { payload: text(r#"{"a":1,"a":1}"#), ..base.clone() },
            ),
            (
                "lone surrogate in the payload",
                "payload/lone_surrogate",
                SubmitRequest { payload: text(r#"{"a":"\ud800"}"#), ..base.clone() },
            ),
            (
                "number with 36 integer digits",
                "payload/number_too_large",
                SubmitRequest { payload: text(r#"{"n":1e35}"#), ..base.clone() },
            ),
            (
                "number with 31 fraction digits",
                "payload/number_too_precise",
                SubmitRequest { payload: text(r#"{"n":1e-31}"#), ..base.clone() },
            ),
            (
                "payload nested 32 deep",
                "payload/too_deep",
                SubmitRequest {
                    payload: text(&format!("{}{}", "[".repeat(32), "]".repeat(32))),
                    ..base.clone()
                },
            ),
            (
                "send_at before 1970",
                "send_at/out_of_range",
                SubmitRequest { send_at: Some(jiff::Timestamp::MIN), ..base.clone() },
            ),
            (
                "send_at past 9999-12-30",
                "send_at/out_of_range",
                SubmitRequest { send_at: Some(jiff::Timestamp::MAX), ..base.clone() },
            ),
            ("cost -1", "cost/out_of_range", SubmitRequest { cost: Some(-1), ..base.clone() }),
            (
                "cost over COST_MAX",
                "cost/out_of_range",
                SubmitRequest { cost: Some(COST_MAX + 1), ..base.clone() },
            ),
            (
                "max_attempts 0",
                "max_attempts/out_of_range",
                SubmitRequest { max_attempts: Some(0), ..base.clone() },
            ),
            (
                "max_attempts 101",
                "max_attempts/out_of_range",
                SubmitRequest { max_attempts: Some(DELIVERY_ATTEMPTS_MAX + 1), ..base.clone() },
            ),
            (
                "empty channel",
                "channel/empty",
                SubmitRequest { channel: String::new(), ..base.clone() },
            ),
            (
                "channel over 50 bytes",
                "channel/too_long",
                SubmitRequest { channel: "c".repeat(51), ..base.clone() },
            ),
            ("empty to", "to/empty", SubmitRequest { to: String::new(), ..base.clone() }),
            (
                "newline in to",
                "to/control_character",
                SubmitRequest {
                    to: "ada@example.com\nBcc: eve@example.com".into(),
                    ..base.clone()
                },
            ),
            (
                "DEL in to",
                "to/control_character",
                SubmitRequest { to: "ada\u{7f}@example.com".into(), ..base.clone() },
            ),
            // A driver that cuts a string at NUL (libpq, through PHP's PDO) would make
            // "order-7\0-a" and "order-7\0-b" one identity: NUL is refused everywhere.
            (
                "NUL in operation_key",
                "operation_key/control_character",
                SubmitRequest { operation_key: "order-7\u{0}-a".into(), ..base.clone() },
            ),
            // A bidirectional override shows "order-17exe.gpj" as "order-17jpg.exe": refused
            // with the control characters, on every face (issue 37).
            (
                "RLO in operation_key",
                "operation_key/control_character",
                SubmitRequest { operation_key: "order-17\u{202E}gpj.exe".into(), ..base.clone() },
            ),
            (
                "isolate in to",
                "to/control_character",
                SubmitRequest { to: "ada@example.com\u{2066}".into(), ..base.clone() },
            ),
            (
                "NUL in channel",
                "channel/control_character",
                SubmitRequest { channel: "email\u{0}x".into(), ..base.clone() },
            ),
            (
                "NUL in to",
                "to/control_character",
                SubmitRequest { to: "ada@example.com\u{0}x".into(), ..base.clone() },
            ),
            (
                "NUL in quota_key",
                "quota_key/control_character",
                SubmitRequest { quota_key: Some("email\u{0}x".into()), ..base.clone() },
            ),
            (
                "empty quota_key",
                "quota_key/empty",
                SubmitRequest { quota_key: Some(String::new()), ..base.clone() },
            ),
            (
                "unknown tenant",
                "unknown tenant",
                SubmitRequest { tenant: herald::TenantId::new_v7(), ..base.clone() },
            ),
        ];
        let before = totals(&herald, &[tenant]).await;
        let mut id = 0;
        for (what, expected, req) in &cases {
            id += 2;
            let got = herald
                .transaction(|tx| {
                    let (h, req) = (&herald, req);
                    Box::pin(async move {
                        exec(tx.conn(), &insert_order(id, "before")).await?;
                        let got = refusal(&h.submit(tx, req).await);
                        exec(tx.conn(), &insert_order(id + 1, "after")).await?;
                        Ok(got)
                    })
                })
                .await
                .unwrap_or_else(|e| panic!("{name}: {what}: the transaction must commit: {e:?}"))
                .value;
            assert_eq!(got, *expected, "{name}: {what}");
            assert_eq!(totals(&herald, &[tenant]).await, before, "{name}: {what}: nothing written");
        }
        assert_eq!(order_notes(&herald).await.len(), 2 * cases.len(), "{name}: caller's writes");

        // A connection outside a transaction is refused, before anything is written.
        let store = herald.store();
        let outside = match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
            (Some(pool), _, _) => herald.submit_in(&mut pool.acquire().await.unwrap(), &base).await,
            (_, Some(pool), _) => herald.submit_in(&mut pool.acquire().await.unwrap(), &base).await,
            (_, _, Some(pool)) => herald.submit_in(&mut pool.acquire().await.unwrap(), &base).await,
            _ => unreachable!(),
        };
        assert_eq!(kind(&outside), "not in transaction", "{name}: {outside:?}");
        assert_eq!(totals(&herald, &[tenant]).await, before, "{name}: nothing written");

        // The limits themselves are allowed.
        let at_limit = json!({"t": "x".repeat(PAYLOAD_BYTES_MAX - 8)});
        assert_eq!(at_limit.to_string().len(), PAYLOAD_BYTES_MAX);
        let limits = [
            (
                "payload of exactly 64 KiB",
                SubmitRequest {
                    operation_key: "limit-1".into(),
                    payload: at_limit.into(),
                    ..base.clone()
                },
            ),
            (
                "cost COST_MAX",
                SubmitRequest {
                    operation_key: "limit-2".into(),
                    cost: Some(COST_MAX),
                    ..base.clone()
                },
            ),
            (
                "max_attempts 1",
                SubmitRequest {
                    operation_key: "limit-3".into(),
                    max_attempts: Some(1),
                    ..base.clone()
                },
            ),
            (
                "max_attempts 100",
                SubmitRequest {
                    operation_key: "limit-4".into(),
                    max_attempts: Some(DELIVERY_ATTEMPTS_MAX),
                    ..base.clone()
                },
            ),
            (
                "operation_key of 255 bytes",
                SubmitRequest { operation_key: "k".repeat(255), ..base.clone() },
            ),
            (
                "channel of 50 bytes, free",
                SubmitRequest {
                    operation_key: "limit-6".into(),
                    channel: "c".repeat(50),
                    cost: Some(0),
                    ..base.clone()
                },
            ),
        ];
        for (what, req) in &limits {
            let result = submit(&herald, req).await;
            assert_eq!(kind(&result), "created", "{name}: {what}: {result:?}");
            let (_, payload) = stored(&herald, result.unwrap().delivery.id).await;
            assert_eq!(
                payload,
                req.payload.as_str(),
                "{name}: {what}: the payload is stored whole"
            );
        }
    }
}

fn text(json: &str) -> herald::Payload {
    herald::Payload::from_text(json)
}
