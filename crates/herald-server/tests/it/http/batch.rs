//! `POST /v1/deliveries/batch`: each item answered on its own, with the status and body
//! `POST /v1/deliveries` would have given it, in the order sent; what is wrong with the
//! batch as a whole is refused whole, with nothing written.

use super::*;
use herald_core::limits::SUBMIT_BATCH_MAX;

fn item(key: &str, text: &str) -> Value {
    json!({"operation_key": key, "channel": "email", "to": "ada@example.com",
           "payload": {"subject": "s", "text": text}})
}

fn batch(items: Vec<Value>) -> Value {
    json!({"deliveries": items})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_item_gets_the_answer_a_single_submit_would_have_had() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 3).await;
        let first = env.api.submit(&t.key, &item("before", "one")).await.expect(CREATED);

        let items = vec![
            item("new-1", "x"),
            item("before", "one"),
            item("before", "changed"),
            item("new-2", "x"),
            item("new-3", "x"),
            json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "t"}}),
            json!({"operation_key": "k", "channel": "carrier-pigeon", "to": "x", "payload": {}}),
            json!({"operation_key": "free", "channel": "email", "to": "ada@example.com",
                   "payload": {"subject": "s", "text": "t"}, "cost": 0}),
            item("new-1", "x"),
        ];
        let v = env
            .api
            .send(post("/v1/deliveries/batch").bearer(&t.key).json(&batch(items)))
            .await
            .expect(OK);
        let results = v["results"].as_array().unwrap_or_else(|| panic!("{b}: {v}"));
        let statuses: Vec<_> = results.iter().map(|r| r["status"].as_u64().unwrap()).collect();
        assert_eq!(statuses, [201, 200, 422, 201, 402, 400, 400, 201, 200], "{b}: {v}");
        let codes: Vec<_> = results.iter().map(|r| r["error"]["code"].as_str()).collect();
        assert_eq!(
            codes,
            [
                None,
                None,
                Some("idempotency_key_reused"),
                None,
                Some("quota_exhausted"),
                Some("invalid_request"),
                Some("invalid_request"),
                None,
                None
            ],
            "{b}: {v}"
        );
        for (i, r) in results.iter().enumerate() {
            let obj = r.as_object().unwrap();
            assert_eq!(obj.contains_key("delivery"), r["status"].as_u64() < Some(300), "{b}: {i}");
            assert_eq!(obj.contains_key("error"), r["status"].as_u64() >= Some(300), "{b}: {i}");
            if let Some(d) = obj.get("delivery") {
                assert_delivery(b, d, true);
            }
        }
        assert_eq!(results[1]["delivery"]["id"], first["id"], "{b}: the duplicate is the first");
        assert_eq!(results[1]["delivery"]["duplicate"], true, "{b}");
        assert_eq!(results[8]["delivery"]["id"], results[0]["delivery"]["id"], "{b}");
        assert_eq!(env.api.quota(&t.key, "email").await, Some((3, 0, 3, 0)), "{b}");
        assert_eq!(env.api.list(&t.key, "").await.len(), 4, "{b}: before, new-1, new-2, free");

        // The batch's answers are the single submit's: a repeat one by one agrees.
        let single = env.api.submit(&t.key, &item("new-2", "x")).await.expect(OK);
        assert_eq!(single["id"], results[3]["delivery"]["id"], "{b}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wrong_batch_is_refused_whole_and_writes_nothing() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 1000).await;
        let path = "/v1/deliveries/batch";
        let over: Vec<_> = (0..=SUBMIT_BATCH_MAX).map(|k| item(&format!("k{k}"), "x")).collect();
        let cases: Vec<(&str, Req, StatusCode, &str)> = vec![
            ("empty", post(path).bearer(&t.key).json(&batch(vec![])), BAD, "invalid_request"),
            (
                "over the limit",
                post(path).bearer(&t.key).json(&batch(over)),
                BAD,
                "invalid_request",
            ),
            (
                "an unknown field",
                post(path).bearer(&t.key).json(&json!({"deliveries": [item("a", "x")], "x": 1})),
                BAD,
                "invalid_request",
            ),
            (
                "an item's unknown field",
                post(path)
                    .bearer(&t.key)
                    .json(&batch(vec![json!({"operation_key": "a", "channel": "email",
                    "to": "ada@example.com", "payload": {}, "colour": "red"})])),
                BAD,
                "invalid_request",
            ),
            (
                "not a list",
                post(path).bearer(&t.key).json(&json!({"deliveries": {}})),
                BAD,
                "invalid_request",
            ),
            (
                "larger than the body limit",
                post(path)
                    .bearer(&t.key)
                    .raw("application/json", vec![b' '; herald_server::BATCH_BODY_BYTES_MAX + 1]),
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
            ),
            (
                "no key",
                post(path).json(&batch(vec![item("a", "x")])),
                StatusCode::UNAUTHORIZED,
                "unauthorized",
            ),
        ];
        for (what, request, status, code) in cases {
            let resp = env.api.send(request).await;
            assert_eq!(resp.status, status, "{b}: {what}: {}", resp.text());
            assert_eq!(error_code(what, &resp.json()), code, "{b}: {what}");
        }
        assert!(env.api.list(&t.key, "").await.is_empty(), "{b}: nothing written");
        assert_eq!(env.api.quota(&t.key, "email").await, Some((1000, 1000, 0, 0)), "{b}");

        // Bigger than one request's body, within the batch's: accepted.
        let big = "y".repeat(32 * 1024);
        let items: Vec<_> = (0..8).map(|k| item(&format!("big-{k}"), &big)).collect();
        let v = env.api.send(post(path).bearer(&t.key).json(&batch(items))).await.expect(OK);
        assert!(v["results"].as_array().unwrap().iter().all(|r| r["status"] == 201), "{b}: {v}");
    }
}
