//! Guarantee 2: budget and claim are atomic; the caller's transaction stays usable.

use super::ledger::journal_of;
use super::*;

#[tokio::test]
async fn short_quota_leaves_no_claim_and_the_callers_own_work_commits() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        create_orders_table(&herald).await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 2, None).await.unwrap();
        let too_dear = SubmitRequest { cost: Some(3), ..request(tenant, "evt-1") };
        let before = totals(&herald, &[tenant]).await;

        // Through herald's runner: the closure catches the error and commits anyway.
        let refused = herald
            .transaction(|tx| {
                let (h, req) = (&herald, &too_dear);
                Box::pin(async move {
                    exec(tx.conn(), &insert_order(1, "runner before")).await?;
                    let refused = h.submit(tx, req).await;
                    exec(tx.conn(), &insert_order(2, "runner after")).await?;
                    Ok(refused)
                })
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: the caller's transaction must commit: {e:?}"))
            .value;
        match &refused {
            Err(Error::QuotaExhausted { quota_key }) => assert_eq!(quota_key, "email", "{name}"),
            other => panic!("{name}: expected QuotaExhausted, got {other:?}"),
        }

        // Through the application's own sqlx transaction.
        let refused = own_tx!(herald, commit, |own| {
            exec(own.as_conn(), &insert_order(3, "own before")).await.unwrap();
            let refused = herald.submit_in(&mut own, &too_dear).await;
            exec(own.as_conn(), &insert_order(4, "own after")).await.unwrap();
            refused
        });
        assert_eq!(kind(&refused), "quota exhausted", "{name}: {refused:?}");

        assert_eq!(
            order_notes(&herald).await,
            ["runner before", "runner after", "own before", "own after"],
            "{name}: the caller's writes are kept"
        );
        assert_eq!(
            totals(&herald, &[tenant]).await,
            before,
            "{name}: no delivery, no payload, no journal row, balances unchanged"
        );

        // What was refused was not held: exactly the balance can still be spent.
        let fits =
            submit(&herald, &SubmitRequest { cost: Some(2), ..request(tenant, "evt-2") }).await;
        assert_eq!(kind(&fits), "created", "{name}: {fits:?}");
        let one_more = submit(&herald, &request(tenant, "evt-3")).await;
        assert_eq!(kind(&one_more), "quota exhausted", "{name}: {one_more:?}");
        assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [2, 0, 2, 0])]);

        // No account for the quota key is nothing available — and creates no account.
        let bare = herald.tenant_create("bare").await.unwrap().id;
        let no_sms = SubmitRequest { quota_key: Some("sms".into()), ..request(tenant, "evt-4") };
        for (what, req) in
            [("tenant without accounts", request(bare, "evt-1")), ("no sms account", no_sms)]
        {
            let before = totals(&herald, &[tenant, bare]).await;
            let result = submit(&herald, &req).await;
            assert_eq!(kind(&result), "quota exhausted", "{name}: {what}: {result:?}");
            assert_eq!(totals(&herald, &[tenant, bare]).await, before, "{name}: {what}");
        }

        // cost 0 needs no account and makes no reservation.
        let free = submit(&herald, &SubmitRequest { cost: Some(0), ..request(bare, "evt-5") })
            .await
            .unwrap_or_else(|e| panic!("{name}: cost 0 must not need quota: {e:?}"));
        assert!(!free.duplicate, "{name}");
        assert_eq!((free.delivery.cost, free.delivery.state), (0, DeliveryState::Pending));
        let journal = count(
            &herald,
            "SELECT count(*) FROM quota_journal WHERE delivery_id = $1",
            &[Id(free.delivery.id.into())],
        )
        .await;
        assert_eq!(journal, 0, "{name}: cost 0 has no journal row");
        assert!(herald.quotas(bare).await.unwrap().is_empty(), "{name}: and no account");
    }
}

#[tokio::test]
async fn a_duplicate_inside_the_callers_transaction_keeps_the_callers_writes() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        create_orders_table(&herald).await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 10, None).await.unwrap();
        let req = request(tenant, "evt-17");
        let first = submit(&herald, &req).await.unwrap();

        let dup = herald
            .transaction(|tx| {
                let (h, req) = (&herald, &req);
                Box::pin(async move {
                    exec(tx.conn(), &insert_order(1, "runner before")).await?;
                    let dup = h.submit(tx, req).await?;
                    exec(tx.conn(), &insert_order(2, "runner after")).await?;
                    Ok(dup)
                })
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"))
            .value;
        assert!(dup.duplicate, "{name}");
        assert_eq!(dup.delivery.id, first.delivery.id, "{name}");

        let dup = own_tx!(herald, commit, |own| {
            exec(own.as_conn(), &insert_order(3, "own before")).await.unwrap();
            let dup = herald.submit_in(&mut own, &req).await;
            exec(own.as_conn(), &insert_order(4, "own after")).await.unwrap();
            dup
        });
        let dup = dup.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(dup.duplicate, "{name}");
        assert_eq!(dup.delivery.id, first.delivery.id, "{name}");

        // A new claim in the caller's transaction rolls back with it, reservation included.
        let rolled_back = own_tx!(herald, rollback, |own| {
            exec(own.as_conn(), &insert_order(5, "rolled back")).await.unwrap();
            herald.submit_in(&mut own, &request(tenant, "evt-18")).await
        });
        assert_eq!(kind(&rolled_back), "created", "{name}: {rolled_back:?}");

        assert_eq!(
            order_notes(&herald).await,
            ["runner before", "runner after", "own before", "own after"],
            "{name}"
        );
        let rows = count(&herald, "SELECT count(*) FROM deliveries", &[]).await;
        assert_eq!(rows, 1, "{name}: still one delivery");
        let reserves =
            count(&herald, "SELECT count(*) FROM quota_journal WHERE kind = 'reserve'", &[]).await;
        assert_eq!(reserves, 1, "{name}: still one reservation");
        assert_eq!(
            herald.quotas(tenant).await.unwrap(),
            [account(tenant, "email", [10, 9, 1, 0])],
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_submit_alone_commits_by_itself_with_the_same_answers_and_writes_nothing_when_refused() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        let bare = herald.tenant_create("bare").await.unwrap().id;
        herald.quota_grant(tenant, "email", 5, None).await.unwrap();

        let req = SubmitRequest { cost: Some(3), ..request(tenant, "evt-1") };
        let first = herald.submit_alone(&req).await.unwrap();
        assert!(!first.duplicate, "{name}");
        // Committed when it returns: another connection reads the row, its payload and the
        // reservation, and the returned delivery is what is stored.
        assert_eq!(herald.delivery(tenant, first.delivery.id).await.unwrap(), first.delivery);
        assert_eq!(stored(&herald, first.delivery.id).await.1, req.payload.as_str(), "{name}");
        assert_eq!(journal_of(&herald, first.delivery.id).await, ["reserve:1:3"], "{name}");
        assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [5, 2, 3, 0])]);

        let again = herald.submit_alone(&req).await.unwrap();
        assert!(again.duplicate, "{name}");
        assert_eq!(again.delivery, first.delivery, "{name}");

        // Refusals write nothing at all — not even for an instant, since there is no
        // transaction to withdraw a claim in: the claim is inserted only when covered.
        let no_sms = SubmitRequest { quota_key: Some("sms".into()), ..request(tenant, "evt-2") };
        let cases = [
            (
                "short quota",
                "quota exhausted",
                SubmitRequest { cost: Some(3), ..request(tenant, "evt-3") },
            ),
            ("no account for the quota key", "quota exhausted", no_sms),
            ("a tenant without accounts", "quota exhausted", request(bare, "evt-4")),
            ("a changed repeat", "reused", SubmitRequest { cost: Some(2), ..req.clone() }),
            ("an unknown tenant", "unknown tenant", request(herald::TenantId::new_v7(), "evt-5")),
            ("bad input", "invalid", SubmitRequest { operation_key: String::new(), ..req.clone() }),
        ];
        for (what, expected, case) in &cases {
            let before = totals(&herald, &[tenant, bare]).await;
            let result = herald.submit_alone(case).await;
            assert_eq!(kind(&result), *expected, "{name}: {what}: {result:?}");
            assert_eq!(totals(&herald, &[tenant, bare]).await, before, "{name}: {what}");
        }
        // What was refused was not held: exactly the balance can still be spent.
        let fits = SubmitRequest { cost: Some(2), ..request(tenant, "evt-3") };
        assert_eq!(kind(&herald.submit_alone(&fits).await), "created", "{name}");
        assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [5, 0, 5, 0])]);

        // cost 0 needs no account and makes no reservation.
        let free = SubmitRequest { cost: Some(0), ..request(bare, "evt-6") };
        let free = herald.submit_alone(&free).await.unwrap();
        assert!(!free.duplicate, "{name}");
        assert!(journal_of(&herald, free.delivery.id).await.is_empty(), "{name}");
        assert!(herald.quotas(bare).await.unwrap().is_empty(), "{name}: and no account");

        // Inside a runner closure it would commit apart from that transaction (and could
        // wait on its locks): refused, like a nested transaction.
        let nested = herald
            .transaction(|_tx| {
                let (h, r) = (&herald, &req);
                Box::pin(async move { Ok(h.submit_alone(r).await) })
            })
            .await
            .unwrap()
            .value;
        assert!(matches!(nested, Err(Error::NestedTransaction)), "{name}: {nested:?}");
    }
}

/// A one-statement submit cannot carry a `statement_timeout`; its deadline is kept by the
/// caller. Past it the statement may still commit, so the answer is "unknown", and the
/// same request submitted again tells which: never a second delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_alone_past_its_deadline_is_unknown_and_resubmitting_settles_it() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let Some(pool) = herald.store().postgres_pool() else { continue };
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 10, None).await.unwrap();
        let req = request(tenant, "evt-blocked");

        // Another transaction holds the tenant's account row past the submit's deadline.
        // (Another application's: herald's own sessions end a transaction idle for 2 s.)
        let mut holder = pool.begin().await.unwrap();
        sqlx::raw_sql("SET LOCAL idle_in_transaction_session_timeout = 0")
            .execute(&mut *holder)
            .await
            .unwrap();
        sqlx::query("SELECT 1 FROM quota_accounts WHERE tenant_id = $1 FOR UPDATE")
            .bind(tenant.as_uuid())
            .execute(&mut *holder)
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let blocked = herald.submit_alone(&req).await;
        let waited = started.elapsed();
        assert!(matches!(blocked, Err(Error::CommitOutcomeUnknown { .. })), "{name}: {blocked:?}");
        let deadline = herald_core::limits::TX_DEADLINE_DEFAULT;
        assert!(
            waited >= deadline && waited < deadline + std::time::Duration::from_secs(3),
            "{name}: returned after {waited:?}"
        );
        holder.commit().await.unwrap();

        // The abandoned statement may commit once the lock is gone; submitting the same
        // request again settles it either way. The resubmit queues for the account row
        // behind the abandoned statement, so when it returns that one has ended too.
        let again = herald.submit_alone(&req).await.unwrap();
        assert_eq!(herald.delivery(tenant, again.delivery.id).await.unwrap(), again.delivery);
        let rows = count(&herald, "SELECT count(*) FROM deliveries", &[]).await;
        assert_eq!(rows, 1, "{name}: one delivery");
        assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [10, 9, 1, 0])]);
    }
}
