//! Submits over HTTP: one claim per Idempotency-Key, reused and conflicting keys, short quota.

use super::*;

/// Guarantee 1 over HTTP: 64 concurrent submits under one Idempotency-Key create one
/// delivery and one reservation; every answer names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_submits_of_one_idempotency_key_claim_once() {
    const N: usize = 64;
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 10).await;
        let body = json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "t"}});
        let mut tasks = Vec::new();
        for _ in 0..N {
            let (api, key, body) = (env.api.clone(), t.key.clone(), body.clone());
            tasks.push(tokio::spawn(async move {
                api.send(
                    post("/v1/deliveries")
                        .bearer(&key)
                        .header("idempotency-key", "order-42")
                        .json(&body),
                )
                .await
            }));
        }
        let mut created = 0;
        let mut duplicates = 0;
        let mut seen = BTreeSet::new();
        for task in tasks {
            let r = task.await.unwrap();
            let v = r.json();
            match r.status {
                CREATED => {
                    created += 1;
                    assert_eq!(v["duplicate"], false, "{b}: the 201 says duplicate: {v}");
                }
                OK => {
                    duplicates += 1;
                    assert_eq!(v["duplicate"], true, "{b}: a 200 says not duplicate: {v}");
                }
                other => panic!("{b}: concurrent submit answered {other}: {v}"),
            }
            assert_delivery(b, &v, true);
            assert_eq!(v["operation_key"], "order-42", "{b}: the header stands for operation_key");
            seen.insert(id_of(&v));
        }
        assert_eq!((created, duplicates), (1, N - 1), "{b}: one 201 and the rest 200");
        assert_eq!(seen.len(), 1, "{b}: every answer names the same delivery: {seen:?}");
        let listed = env.api.list(&t.key, "").await;
        assert_eq!(ids(&listed), seen.into_iter().collect::<Vec<_>>(), "{b}: one row");
        assert_eq!(
            env.api.quota(&t.key, "email").await,
            Some((10, 9, 1, 0)),
            "{b}: one reservation"
        );
    }
}

/// Guarantee 1: a repeat with another fingerprint is 422 and changes nothing; the header
/// and the body key must agree; the fingerprint is taken after defaults; a retry of a
/// submit that succeeded returns it even when quota has run out since.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reused_keys_and_conflicting_keys() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 1).await;
        let first = env
            .api
            .send(post("/v1/deliveries").bearer(&t.key).header("idempotency-key", "k1").json(
                &json!({
                    "channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}
                }),
            ))
            .await
            .expect(CREATED);
        let id = id_of(&first);

        let cases: &[KeyCase] = &[
            (
                "another payload under the header key",
                Some("k1"),
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "two"}}),
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("idempotency_key_reused"),
            ),
            (
                "another recipient under the body key",
                None,
                json!({"operation_key": "k1", "channel": "email", "to": "bob@example.com", "payload": {"subject": "s", "text": "one"}}),
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("idempotency_key_reused"),
            ),
            (
                "another cost under the key",
                Some("k1"),
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}, "cost": 0}),
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("idempotency_key_reused"),
            ),
            (
                "body key and a different header key",
                Some("k2"),
                json!({"operation_key": "k1", "channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}}),
                BAD,
                Some("invalid_request"),
            ),
            (
                "no key at all",
                None,
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}}),
                BAD,
                Some("invalid_request"),
            ),
            (
                "an empty header key",
                Some(""),
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}}),
                BAD,
                Some("invalid_request"),
            ),
            (
                "the same key in header and body: a duplicate",
                Some("k1"),
                json!({"operation_key": "k1", "channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}}),
                OK,
                None,
            ),
            (
                "explicit defaults have the same fingerprint (quota exhausted since: still 200)",
                Some("k1"),
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}, "quota_key": "email", "cost": 1, "max_attempts": 8}),
                OK,
                None,
            ),
        ];
        for (name, header, body, status, code) in cases {
            let mut r = post("/v1/deliveries").bearer(&t.key);
            if let Some(h) = header {
                r = r.header("idempotency-key", h);
            }
            let resp = env.api.send(r.json(body)).await;
            let what = format!("{b}: {name}");
            match code {
                Some(code) => {
                    assert_eq!(resp.status, *status, "{what}: {}", resp.text());
                    assert_eq!(error_code(&what, &resp.json()), *code, "{what}");
                }
                None => {
                    let v = resp.expect(*status);
                    assert_delivery(&what, &v, true);
                    assert_eq!(id_of(&v), id, "{what}: the same delivery");
                    assert_eq!(v["duplicate"], true, "{what}");
                }
            }
        }
        let now = env.api.send(get(format!("/v1/deliveries/{id}")).bearer(&t.key)).await.expect(OK);
        assert_delivery(b, &now, false);
        assert_eq!(now["to"], "ada@example.com", "{b}: a rejected reuse changed nothing");
        assert_eq!(now["cost"], 1, "{b}: a rejected reuse changed nothing");
        assert_eq!(env.api.list(&t.key, "").await.len(), 1, "{b}: nothing else was created");
        assert_eq!(
            env.api.quota(&t.key, "email").await,
            Some((1, 0, 1, 0)),
            "{b}: one reservation"
        );
    }
}

/// Guarantee 2 over HTTP: no quota, no row, no movement.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exhausted_quota_is_402_and_leaves_nothing() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        // No account at all: 402, and still no account.
        env.api
            .submit(&t.key, &email("no-account"))
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        assert!(env.api.quotas(&t.key).await.is_empty(), "{b}: a refused submit opened no account");
        // cost 0 needs no account.
        let mut free = email("free");
        free["cost"] = json!(0);
        let v = env.api.submit(&t.key, &free).await.expect(CREATED);
        assert_eq!(v["cost"], 0, "{b}: free delivery");
        assert!(env.api.quotas(&t.key).await.is_empty(), "{b}: cost 0 reserves nothing");

        env.api.grant(&t, "email", 2).await;
        let mut big = email("too-big");
        big["cost"] = json!(3);
        env.api
            .submit(&t.key, &big)
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        env.api.submit(&t.key, &email("a")).await.expect(CREATED);
        env.api.submit(&t.key, &email("b")).await.expect(CREATED);
        let before = env.api.quotas(&t.key).await;
        env.api
            .submit(&t.key, &email("c"))
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        let mut other_key = email("d");
        other_key["quota_key"] = json!("premium");
        env.api
            .submit(&t.key, &other_key)
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        assert_eq!(env.api.quotas(&t.key).await, before, "{b}: refused submits moved no quota");
        assert_eq!(env.api.quota(&t.key, "email").await, Some((2, 0, 2, 0)), "{b}: ledger");
        let keys: BTreeSet<String> = env
            .api
            .list(&t.key, "")
            .await
            .iter()
            .map(|d| d["operation_key"].as_str().unwrap().to_string())
            .collect();
        let expected: BTreeSet<String> = ["free", "a", "b"].map(String::from).into();
        assert_eq!(keys, expected, "{b}: no row for refused submits");
        // The refused key is still free: after a grant it is a 201, not a duplicate.
        env.api.grant(&t, "email", 1).await;
        env.api.submit(&t.key, &email("c")).await.expect(CREATED);
    }
}
