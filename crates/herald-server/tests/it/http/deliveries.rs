//! Listing, replay and cancel, attempts as JSON.

use super::*;

/// Listing: newest first, keyset pages that cover everything once, filters, cursors bound
/// to their filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn listing_is_newest_first_paginated_and_filtered() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 100).await;
        env.api.grant(&t, "sms", 100).await;
        let mut submitted = Vec::new(); // oldest first
        let sms = |k: &str| json!({"operation_key": k, "channel": "sms", "to": "+15550100", "payload": {"text": "x"}});
        for k in ["e0", "e1", "e2"] {
            submitted.push(id_of(&env.api.submit(&t.key, &email(k)).await.expect(CREATED)));
        }
        for k in ["s0", "s1"] {
            submitted.push(id_of(&env.api.submit(&t.key, &sms(k)).await.expect(CREATED)));
        }
        let report = env.worker().run_once().await.unwrap();
        assert_eq!((report.sent, report.failed), (3, 2), "{b}: worker {report:?}");
        for k in ["e3", "e4", "e5", "e6"] {
            submitted.push(id_of(&env.api.submit(&t.key, &email(k)).await.expect(CREATED)));
        }
        let cancelled = submitted[5].clone();
        env.api
            .send(post(format!("/v1/deliveries/{cancelled}/cancel")).bearer(&t.key))
            .await
            .expect(OK);
        let newest_first: Vec<String> = submitted.iter().rev().cloned().collect();

        // Three pages of 4, 4, 1.
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let uri = match &cursor {
                Some(c) => format!("/v1/deliveries?limit=4&cursor={c}"),
                None => "/v1/deliveries?limit=4".into(),
            };
            let v = env.api.send(get(uri).bearer(&t.key)).await.expect(OK);
            let mut fields: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
            fields.sort();
            assert_eq!(fields, ["deliveries", "next_cursor"], "{b}: list fields");
            let page = v["deliveries"].as_array().unwrap().clone();
            for d in &page {
                assert_delivery(b, d, false);
            }
            pages.push(ids(&page));
            cursor = v["next_cursor"].as_str().map(String::from);
            if cursor.is_none() || pages.len() > 5 {
                break;
            }
        }
        assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [4, 4, 1], "{b}: page sizes");
        assert_eq!(pages.concat(), newest_first, "{b}: every delivery once, newest first");
        let all = env.api.list(&t.key, "").await;
        assert_eq!(ids(&all), newest_first, "{b}: one big page");
        for w in all.windows(2) {
            let (a, c): (jiff::Timestamp, jiff::Timestamp) = (
                w[0]["created_at"].as_str().unwrap().parse().unwrap(),
                w[1]["created_at"].as_str().unwrap().parse().unwrap(),
            );
            assert!(a >= c, "{b}: created_at not newest first: {a} then {c}");
        }
        // An exact fit has no further page.
        let v = env.api.send(get("/v1/deliveries?limit=9").bearer(&t.key)).await.expect(OK);
        assert_eq!(v["deliveries"].as_array().unwrap().len(), 9, "{b}");
        assert!(v["next_cursor"].is_null(), "{b}: exact fit, no cursor: {}", v["next_cursor"]);

        let pick =
            |idx: &[usize]| idx.iter().rev().map(|&i| submitted[i].clone()).collect::<Vec<_>>();
        let filters: Vec<(&str, Vec<String>)> = vec![
            ("state=sent", pick(&[0, 1, 2])),
            ("state=failed", pick(&[3, 4])),
            ("state=pending", pick(&[6, 7, 8])),
            ("state=cancelled", pick(&[5])),
            ("state=sending", vec![]),
            ("channel=sms", pick(&[3, 4])),
            ("channel=email", pick(&[0, 1, 2, 5, 6, 7, 8])),
            ("channel=pigeon", vec![]),
            ("state=pending&channel=email", pick(&[6, 7, 8])),
            ("state=sent&channel=sms", vec![]),
        ];
        for (query, expected) in filters {
            assert_eq!(ids(&env.api.list(&t.key, query).await), expected, "{b}: list {query}");
        }
        for d in env.api.list(&t.key, "state=sent").await {
            assert!(
                d["sent_at"].as_str().is_some_and(is_rfc3339),
                "{b}: sent_at of a sent delivery: {d}"
            );
        }
        for d in env.api.list(&t.key, "state=failed").await {
            assert!(d["last_error"].is_string(), "{b}: last_error of a failed delivery: {d}");
        }

        // Filtered pages: 3, 3, 1 emails; the cursor only works with its own filters.
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut filtered_cursor = String::new();
        for n in 0..5 {
            let uri = match &cursor {
                Some(c) => format!("/v1/deliveries?channel=email&limit=3&cursor={c}"),
                None => "/v1/deliveries?channel=email&limit=3".into(),
            };
            let v = env.api.send(get(uri).bearer(&t.key)).await.expect(OK);
            seen.extend(ids(v["deliveries"].as_array().unwrap()));
            cursor = v["next_cursor"].as_str().map(String::from);
            if n == 0 {
                filtered_cursor = cursor.clone().unwrap();
            }
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(seen, pick(&[0, 1, 2, 5, 6, 7, 8]), "{b}: filtered pages");
        for other in ["", "&channel=sms", "&state=pending&channel=email", "&state=sent"] {
            env.api
                .send(get(format!("/v1/deliveries?cursor={filtered_cursor}{other}")).bearer(&t.key))
                .await
                .expect_error(BAD, "invalid_request");
        }
        // Another tenant sees none of it, whatever the cursor.
        let other = env.api.tenant("other").await;
        let v = env
            .api
            .send(
                get(format!("/v1/deliveries?channel=email&cursor={filtered_cursor}"))
                    .bearer(&other.key),
            )
            .await
            .expect(OK);
        assert_eq!(v["deliveries"], json!([]), "{b}: another tenant's listing");
    }
}

/// Guarantee 10 over HTTP: cancel and replay, their 409s and 402, identity kept, the
/// ledger moved as SPEC says; attempts as JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replay_and_cancel() {
    for env in envs().await {
        let b = env.backend;
        let api = &env.api;
        let t = api.tenant("acme").await;
        api.grant(&t, "email", 2).await;
        let d =
            |id: &str, action: &str| post(format!("/v1/deliveries/{id}/{action}")).bearer(&t.key);

        let a = id_of(&api.submit(&t.key, &email("a")).await.expect(CREATED));
        assert_eq!(api.quota(&t.key, "email").await, Some((2, 1, 1, 0)), "{b}: reserved");
        let v = api.send(d(&a, "cancel")).await.expect(OK);
        assert_delivery(b, &v, false);
        assert_eq!((id_of(&v), v["state"].as_str()), (a.clone(), Some("cancelled")), "{b}: cancel");
        assert_eq!(api.quota(&t.key, "email").await, Some((2, 2, 0, 0)), "{b}: cancel released");
        api.send(d(&a, "cancel")).await.expect_error(StatusCode::CONFLICT, "conflict");
        let v = api.send(d(&a, "replay")).await.expect(OK);
        assert_delivery(b, &v, false);
        assert_eq!((id_of(&v), v["state"].as_str()), (a.clone(), Some("pending")), "{b}: replay");
        assert_eq!(v["operation_key"], "a", "{b}: replay keeps the operation key");
        assert_eq!(
            api.quota(&t.key, "email").await,
            Some((2, 1, 1, 0)),
            "{b}: replay reserved again"
        );
        api.send(d(&a, "replay")).await.expect_error(StatusCode::CONFLICT, "conflict");

        // Replay with no quota left: 402, nothing changes.
        let bb = id_of(&api.submit(&t.key, &email("b")).await.expect(CREATED));
        api.send(d(&a, "cancel")).await.expect(OK);
        let c = id_of(&api.submit(&t.key, &email("c")).await.expect(CREATED));
        let before = api.quotas(&t.key).await;
        api.send(d(&a, "replay"))
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        assert_eq!(api.quotas(&t.key).await, before, "{b}: a refused replay moved no quota");
        let v = api.send(get(format!("/v1/deliveries/{a}")).bearer(&t.key)).await.expect(OK);
        assert_eq!(v["state"], "cancelled", "{b}: a refused replay left it cancelled");

        // Sent deliveries can be neither replayed nor cancelled.
        let report = env.worker().run_once().await.unwrap();
        assert_eq!(report.sent, 2, "{b}: worker {report:?}");
        for id in [&bb, &c] {
            let v = api.send(get(format!("/v1/deliveries/{id}")).bearer(&t.key)).await.expect(OK);
            assert_eq!(v["state"], "sent", "{b}: {v}");
            assert_eq!(v["attempts"], 1, "{b}: {v}");
            api.send(d(id, "replay")).await.expect_error(StatusCode::CONFLICT, "conflict");
            api.send(d(id, "cancel")).await.expect_error(StatusCode::CONFLICT, "conflict");
        }
        assert_eq!(api.quota(&t.key, "email").await, Some((2, 0, 0, 2)), "{b}: both charged");
        let v =
            api.send(get(format!("/v1/deliveries/{bb}/attempts")).bearer(&t.key)).await.expect(OK);
        let attempts = v["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "{b}: {v}");
        assert_attempt(b, &attempts[0], 1, "sent");

        // Failed (terminal) → replay → pending again with the same id, attempts keep counting.
        api.grant(&t, "sms", 1).await;
        let s = id_of(
            &api.submit(
                &t.key,
                &json!({"operation_key": "s", "channel": "sms", "to": "+1555", "payload": {}}),
            )
            .await
            .expect(CREATED),
        );
        env.worker().run_once().await.unwrap();
        let v = api.send(get(format!("/v1/deliveries/{s}")).bearer(&t.key)).await.expect(OK);
        assert_eq!(v["state"], "failed", "{b}: terminal → failed: {v}");
        assert_eq!(api.quota(&t.key, "sms").await, Some((1, 1, 0, 0)), "{b}: failed released");
        api.send(d(&s, "cancel")).await.expect_error(StatusCode::CONFLICT, "conflict");
        let v = api.send(d(&s, "replay")).await.expect(OK);
        assert_eq!(
            (id_of(&v), v["state"].as_str()),
            (s.clone(), Some("pending")),
            "{b}: replay failed"
        );
        assert_eq!(v["attempts"], 1, "{b}: attempts are cumulative over a replay: {v}");
        assert_eq!(api.quota(&t.key, "sms").await, Some((1, 0, 1, 0)), "{b}: replay reserved");
        env.worker().run_once().await.unwrap();
        let v =
            api.send(get(format!("/v1/deliveries/{s}/attempts")).bearer(&t.key)).await.expect(OK);
        let attempts = v["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{b}: {v}");
        assert_attempt(b, &attempts[0], 1, "terminal");
        assert_attempt(b, &attempts[1], 2, "terminal");
        assert_eq!(attempts[0]["error_code"], "refused", "{b}: {v}");
    }
}

fn assert_attempt(b: &str, v: &Value, n: u64, outcome: &str) {
    let obj = v.as_object().unwrap_or_else(|| panic!("{b}: attempt {v}"));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "error_code",
            "error_message",
            "finished_at",
            "n",
            "outcome",
            "release",
            "started_at",
            "worker"
        ],
        "{b}: attempt fields {v}"
    );
    assert_eq!(obj["n"], n, "{b}: attempt number {v}");
    assert_eq!(obj["outcome"], outcome, "{b}: attempt outcome {v}");
    assert!(obj["worker"].as_str().is_some_and(|w| !w.is_empty()), "{b}: worker {v}");
    for f in ["started_at", "finished_at"] {
        assert!(obj[f].as_str().is_some_and(is_rfc3339), "{b}: {f} {v}");
    }
}
