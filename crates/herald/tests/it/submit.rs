//! Submit (SPEC guarantees 1, 2 and 4) on every backend: one claim and one reservation per
//! identity under real concurrency, reuse refused without changes, quota checked after the
//! duplicate check, bad input refused with the caller's transaction left usable, and a
//! ledger whose balances and journal agree after every operation.

use crate::common::backends;
use herald::sqlx::{self, AssertSqlSafe, Postgres, Sqlite};
use herald::{
    AsConn, Channel, Conn, DeliveryState, EngineOptions, Error, Herald, Leased, Outcome,
    QuotaAccount, SubmitRequest, Submitted, Worker, WorkerOptions,
};
use herald_core::limits::{COST_MAX, DELIVERY_ATTEMPTS_MAX, PAYLOAD_BYTES_MAX};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::Barrier;
use uuid::Uuid;

// ---- helpers -------------------------------------------------------------------------

fn request(tenant: herald::TenantId, operation_key: &str) -> SubmitRequest {
    SubmitRequest::new(
        tenant,
        operation_key,
        "email",
        "ada@example.com",
        json!({"subject": "receipt", "text": "thanks for your order"}),
    )
}

/// Submits in a transaction of its own through herald's runner.
async fn submit(herald: &Herald, req: &SubmitRequest) -> Result<Submitted, Error> {
    herald
        .transaction(move |tx| Box::pin(async move { herald.submit(tx, req).await }))
        .await
        .map(|c| c.value)
}

/// The two ways a submit commits on its own: a runner transaction around `submit`, or
/// `submit_alone` (on PostgreSQL one autocommitted statement).
#[derive(Debug, Clone, Copy)]
enum Via {
    Runner,
    Alone,
}
const VIAS: [Via; 2] = [Via::Runner, Via::Alone];

async fn submit_via(herald: &Herald, req: &SubmitRequest, via: Via) -> Result<Submitted, Error> {
    match via {
        Via::Runner => submit(herald, req).await,
        Via::Alone => herald.submit_alone(req).await,
    }
}

/// A short name for a submit's result, so tables of cases read as tables.
fn kind(result: &Result<Submitted, Error>) -> &'static str {
    match result {
        Ok(s) if s.duplicate => "duplicate",
        Ok(_) => "created",
        Err(Error::IdempotencyKeyReused) => "reused",
        Err(Error::QuotaExhausted { .. }) => "quota exhausted",
        Err(Error::Invalid(_)) => "invalid",
        Err(Error::UnknownTenant) => "unknown tenant",
        Err(Error::NotInTransaction) => "not in transaction",
        Err(_) => "other error",
    }
}

async fn exec(conn: Conn<'_>, sql: &str) -> Result<(), Error> {
    let sql = AssertSqlSafe(sql.to_string());
    match conn {
        Conn::Sqlite(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
        Conn::Postgres(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
    }
    Ok(())
}

/// A bind parameter of [`one`].
#[derive(Debug, Clone, Copy)]
enum Arg<'a> {
    Id(Uuid),
    Text(&'a str),
}
use Arg::{Id, Text};

/// A column type both backends decode.
trait Col:
    Send
    + Unpin
    + for<'r> sqlx::Decode<'r, Sqlite>
    + sqlx::Type<Sqlite>
    + for<'r> sqlx::Decode<'r, Postgres>
    + sqlx::Type<Postgres>
{
}
impl<T> Col for T where
    T: Send
        + Unpin
        + for<'r> sqlx::Decode<'r, Sqlite>
        + sqlx::Type<Sqlite>
        + for<'r> sqlx::Decode<'r, Postgres>
        + sqlx::Type<Postgres>
{
}

/// The first column of the first row of `sql` (written with `$1`, `$2`, …), if any.
async fn one<T: Col>(conn: Conn<'_>, sql: &str, args: &[Arg<'_>]) -> Result<Option<T>, Error> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            let mut q = sqlx::query_scalar::<Sqlite, T>(AssertSqlSafe(sql.replace('$', "?")));
            for arg in args {
                q = match *arg {
                    Id(id) => q.bind(id),
                    Text(text) => q.bind(text),
                };
            }
            q.fetch_optional(c).await?
        }
        Conn::Postgres(c) => {
            let mut q = sqlx::query_scalar::<Postgres, T>(AssertSqlSafe(sql.to_string()));
            for arg in args {
                q = match *arg {
                    Id(id) => q.bind(id),
                    Text(text) => q.bind(text),
                };
            }
            q.fetch_optional(c).await?
        }
    })
}

/// [`one`] on a pooled connection, outside any transaction.
async fn read<T: Col>(herald: &Herald, sql: &str, args: &[Arg<'_>]) -> Option<T> {
    let store = herald.store();
    let result = match (store.sqlite_pool(), store.postgres_pool()) {
        (Some(pool), _) => one(pool.acquire().await.unwrap().as_conn(), sql, args).await,
        (_, Some(pool)) => one(pool.acquire().await.unwrap().as_conn(), sql, args).await,
        _ => unreachable!(),
    };
    result.unwrap_or_else(|e| panic!("{sql}: {e:?}"))
}

async fn count(herald: &Herald, sql: &str, args: &[Arg<'_>]) -> i64 {
    read::<i64>(herald, sql, args).await.unwrap_or_else(|| panic!("{sql}: no row"))
}

/// Everything a refused submit must leave alone.
#[derive(Debug, PartialEq, Eq)]
struct Totals {
    deliveries: i64,
    payloads: i64,
    journal_rows: i64,
    journal_units: i64,
    accounts: Vec<QuotaAccount>,
}

async fn totals(herald: &Herald, tenants: &[herald::TenantId]) -> Totals {
    let mut accounts = Vec::new();
    for &tenant in tenants {
        accounts.extend(herald.quotas(tenant).await.unwrap());
    }
    Totals {
        deliveries: count(herald, "SELECT count(*) FROM deliveries", &[]).await,
        payloads: count(herald, "SELECT count(*) FROM delivery_payloads", &[]).await,
        journal_rows: count(herald, "SELECT count(*) FROM quota_journal", &[]).await,
        journal_units: count(
            herald,
            "SELECT CAST(coalesce(sum(amount), 0) AS BIGINT) FROM quota_journal",
            &[],
        )
        .await,
        accounts,
    }
}

/// A delivery's stored fingerprint and payload.
async fn stored(herald: &Herald, id: herald::DeliveryId) -> (Vec<u8>, Value) {
    let fingerprint: Vec<u8> =
        read(herald, "SELECT fingerprint FROM deliveries WHERE id = $1", &[Id(id.into())])
            .await
            .unwrap();
    let payload: String = read(
        herald,
        "SELECT CAST(payload AS TEXT) FROM delivery_payloads WHERE delivery_id = $1",
        &[Id(id.into())],
    )
    .await
    .unwrap();
    (fingerprint, serde_json::from_str(&payload).unwrap())
}

fn account(tenant: herald::TenantId, quota_key: &str, balances: [i64; 4]) -> QuotaAccount {
    let [granted, available, reserved, spent] = balances;
    QuotaAccount {
        tenant_id: tenant.as_uuid(),
        quota_key: quota_key.into(),
        granted,
        available,
        reserved,
        spent,
    }
}

async fn create_orders_table(herald: &Herald) {
    herald
        .transaction(|tx| {
            Box::pin(async move {
                exec(tx.conn(), "CREATE TABLE t_orders (id BIGINT PRIMARY KEY, note TEXT NOT NULL)")
                    .await
            })
        })
        .await
        .unwrap();
}

fn insert_order(id: i64, note: &str) -> String {
    format!("INSERT INTO t_orders (id, note) VALUES ({id}, '{note}')")
}

async fn order_notes(herald: &Herald) -> Vec<String> {
    let sql = "SELECT note FROM t_orders ORDER BY id";
    let store = herald.store();
    match (store.sqlite_pool(), store.postgres_pool()) {
        (Some(pool), _) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
        (_, Some(pool)) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
        _ => unreachable!(),
    }
}

/// Runs `$body` in the application's own sqlx transaction on `$herald`'s pool (no herald
/// runner), bound to `$tx`, and ends it with `$end` (`commit` or `rollback`).
macro_rules! own_tx {
    ($herald:expr, $end:ident, |$tx:ident| $body:block) => {{
        let store = $herald.store();
        match (store.sqlite_pool(), store.postgres_pool()) {
            (Some(pool), _) => {
                let mut $tx = pool.begin().await.unwrap();
                let out = $body;
                $tx.$end().await.unwrap();
                out
            }
            (_, Some(pool)) => {
                let mut $tx = pool.begin().await.unwrap();
                let out = $body;
                $tx.$end().await.unwrap();
                out
            }
            _ => unreachable!(),
        }
    }};
}

// ---- guarantee 1: one claim per identity ---------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_submits_from_four_pools_claim_and_reserve_once() {
    const CALLS: usize = 64;
    for db in backends().await {
        let name = db.name();
        let mut heralds = Vec::new();
        for _ in 0..4 {
            heralds.push(db.herald().await);
        }
        let herald = heralds[0].clone();
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 100, None).await.unwrap();
        let req = SubmitRequest { cost: Some(3), ..request(tenant, "order-17-shipped") };

        let start = Arc::new(Barrier::new(CALLS));
        let tasks: Vec<_> = (0..CALLS)
            .map(|i| {
                let (herald, req, start) = (heralds[i % 4].clone(), req.clone(), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    // Both paths race for the same identity: they lock the quota row and
                    // the identity in opposite orders, so a deadlock can be provoked and
                    // must be retried away.
                    submit_via(&herald, &req, VIAS[i % 2]).await
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            let result = task.await.unwrap();
            results.push(result.unwrap_or_else(|e| panic!("{name}: a submit failed: {e:?}")));
        }

        let created = results.iter().filter(|s| !s.duplicate).count();
        assert_eq!(created, 1, "{name}: exactly one submit creates");
        assert_eq!(results.len() - created, CALLS - 1, "{name}: all others are duplicates");
        let id = results[0].delivery.id;
        assert!(results.iter().all(|s| s.delivery.id == id), "{name}: one delivery id for all");

        let rows = count(
            &herald,
            "SELECT count(*) FROM deliveries WHERE tenant_id = $1",
            &[Id(tenant.into())],
        )
        .await;
        assert_eq!(rows, 1, "{name}: one delivery row");
        let payloads = count(&herald, "SELECT count(*) FROM delivery_payloads", &[]).await;
        assert_eq!(payloads, 1, "{name}: one payload row");
        let reserves = count(
            &herald,
            "SELECT count(*) FROM quota_journal WHERE tenant_id = $1 AND kind = 'reserve'",
            &[Id(tenant.into())],
        )
        .await;
        assert_eq!(reserves, 1, "{name}: one reserve journal row");
        let of_the_delivery = count(
            &herald,
            "SELECT count(*) FROM quota_journal WHERE delivery_id = $1 AND reservation_seq = 1",
            &[Id(id.into())],
        )
        .await;
        assert_eq!(of_the_delivery, 1, "{name}: the reserve belongs to the delivery");
        assert_eq!(
            herald.quotas(tenant).await.unwrap(),
            [account(tenant, "email", [100, 97, 3, 0])],
            "{name}: reserved == cost, once"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submits_of_distinct_identities_never_overspend_a_hot_account() {
    const CALLS: usize = 32;
    const GRANTED: i64 = 20;
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let other = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", GRANTED, None).await.unwrap();

        let start = Arc::new(Barrier::new(CALLS));
        let tasks: Vec<_> = (0..CALLS)
            .map(|i| {
                let herald = if i % 2 == 0 { herald.clone() } else { other.clone() };
                let (req, start) = (request(tenant, &format!("evt-{i}")), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    kind(&submit_via(&herald, &req, VIAS[(i / 2) % 2]).await)
                })
            })
            .collect();
        let mut kinds = Vec::new();
        for task in tasks {
            kinds.push(task.await.unwrap());
        }
        let created = kinds.iter().filter(|k| **k == "created").count();
        let exhausted = kinds.iter().filter(|k| **k == "quota exhausted").count();
        assert_eq!(
            (created, exhausted),
            (GRANTED as usize, CALLS - GRANTED as usize),
            "{name}: {kinds:?}"
        );
        assert_eq!(
            herald.quotas(tenant).await.unwrap(),
            [account(tenant, "email", [GRANTED, 0, GRANTED, 0])],
            "{name}"
        );
        let rows = count(&herald, "SELECT count(*) FROM deliveries", &[]).await;
        assert_eq!(rows, GRANTED, "{name}: a delivery per reservation, none unbudgeted");
        let reserves =
            count(&herald, "SELECT count(*) FROM quota_journal WHERE kind = 'reserve'", &[]).await;
        assert_eq!(reserves, GRANTED, "{name}");
    }
}

#[tokio::test]
async fn a_repeat_with_another_request_is_refused_and_changes_nothing() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        let other_tenant = herald.tenant_create("globex").await.unwrap().id;
        for t in [tenant, other_tenant] {
            herald.quota_grant(t, "email", 100, None).await.unwrap();
            herald.quota_grant(t, "sms", 100, None).await.unwrap();
        }
        let base =
            SubmitRequest { cost: Some(2), max_attempts: Some(5), ..request(tenant, "inv-9") };
        let first = submit(&herald, &base).await.unwrap();
        assert!(!first.duplicate, "{name}");

        let before = totals(&herald, &[tenant, other_tenant]).await;
        let stored_before = stored(&herald, first.delivery.id).await;
        let later = Timestamp::now() + SignedDuration::from_hours(1);
        let cases = [
            (
                "another payload",
                SubmitRequest {
                    payload: json!({"subject": "receipt", "text": "thanks for your order!"}),
                    ..base.clone()
                },
            ),
            (
                "a payload with one more field",
                SubmitRequest {
                    payload: json!({"subject": "receipt", "text": "thanks for your order", "html": ""}),
                    ..base.clone()
                },
            ),
            ("another cost", SubmitRequest { cost: Some(3), ..base.clone() }),
            ("the default cost instead of 2", SubmitRequest { cost: None, ..base.clone() }),
            ("another max_attempts", SubmitRequest { max_attempts: Some(6), ..base.clone() }),
            (
                "the default max_attempts instead of 5",
                SubmitRequest { max_attempts: None, ..base.clone() },
            ),
            ("another recipient", SubmitRequest { to: "bob@example.com".into(), ..base.clone() }),
            ("another quota key", SubmitRequest { quota_key: Some("sms".into()), ..base.clone() }),
            ("a send_at", SubmitRequest { send_at: Some(later), ..base.clone() }),
        ];
        for ((what, req), via) in cases.iter().flat_map(|c| VIAS.map(|v| (c, v))) {
            let result = submit_via(&herald, req, via).await;
            assert_eq!(kind(&result), "reused", "{name}: {what} ({via:?}): {result:?}");
            assert_eq!(totals(&herald, &[tenant, other_tenant]).await, before, "{name}: {what}");
            assert_eq!(stored(&herald, first.delivery.id).await, stored_before, "{name}: {what}");
            let now = herald.delivery(tenant, first.delivery.id).await.unwrap();
            assert_eq!(now, first.delivery, "{name}: {what}: the row is untouched");
        }

        // Refused inside the application's own transaction too, which stays usable.
        create_orders_table(&herald).await;
        let reused = own_tx!(herald, commit, |own| {
            exec(own.as_conn(), &insert_order(1, "before")).await.unwrap();
            let result = herald.submit_in(&mut own, &cases[0].1).await;
            exec(own.as_conn(), &insert_order(2, "after")).await.unwrap();
            result
        });
        assert_eq!(kind(&reused), "reused", "{name}: {reused:?}");
        assert_eq!(order_notes(&herald).await, ["before", "after"], "{name}");
        assert_eq!(totals(&herald, &[tenant, other_tenant]).await, before, "{name}");

        // The same meaning written differently is a duplicate, not a reuse.
        let reordered: Value =
            serde_json::from_str(r#"{ "text": "thanks for your order", "subject": "receipt" }"#)
                .unwrap();
        let again = submit(&herald, &SubmitRequest { payload: reordered, ..base.clone() }).await;
        assert_eq!(kind(&again), "duplicate", "{name}: {again:?}");
        assert_eq!(again.unwrap().delivery, first.delivery, "{name}");

        // The identity is (tenant, operation_key, channel): change any part and it is new.
        let sms = SubmitRequest { channel: "sms".into(), ..base.clone() };
        let elsewhere = SubmitRequest { tenant: other_tenant, ..base.clone() };
        for (what, req) in [("another channel", sms), ("another tenant", elsewhere)] {
            let result = submit(&herald, &req).await;
            assert_eq!(kind(&result), "created", "{name}: {what}: {result:?}");
            assert_ne!(result.unwrap().delivery.id, first.delivery.id, "{name}: {what}");
        }
    }
}

// ---- guarantee 2: budget and claim are atomic; the caller's transaction stays usable --

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
        assert_eq!(stored(&herald, first.delivery.id).await.1, req.payload, "{name}");
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
        let mut holder = pool.begin().await.unwrap();
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

// ---- guarantee 1: order of checks, and defaults before the fingerprint ----------------

#[tokio::test]
async fn a_retry_of_a_successful_submit_is_a_duplicate_even_when_quota_has_run_out() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 1, None).await.unwrap();
        let a = request(tenant, "evt-a");
        let created = submit(&herald, &a).await;
        assert_eq!(kind(&created), "created", "{name}: {created:?}");
        let id = created.unwrap().delivery.id;
        for via in VIAS {
            let b = submit_via(&herald, &request(tenant, "evt-b"), via).await;
            assert_eq!(kind(&b), "quota exhausted", "{name} ({via:?}): {b:?}");

            let retry = submit_via(&herald, &a, via).await;
            assert_eq!(kind(&retry), "duplicate", "{name} ({via:?}): {retry:?}");
            assert_eq!(retry.unwrap().delivery.id, id, "{name} ({via:?})");
            // And a changed retry is a reuse, not a quota problem: reuse is checked first.
            let changed = SubmitRequest { payload: json!({"text": "changed"}), ..a.clone() };
            let changed = submit_via(&herald, &changed, via).await;
            assert_eq!(kind(&changed), "reused", "{name} ({via:?}): {changed:?}");
        }
        assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [1, 0, 1, 0])]);
    }
}

#[tokio::test]
async fn defaults_are_applied_before_the_fingerprint() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 10, None).await.unwrap();
        let engine_default = herald.options().max_attempts;
        let spelled_out = |req: &SubmitRequest, max_attempts: u32| SubmitRequest {
            quota_key: Some(req.channel.clone()),
            cost: Some(1),
            max_attempts: Some(max_attempts),
            ..req.clone()
        };

        // Implicit first, then explicit; and the other way round.
        for (key, implicit_first) in [("welcome-1", true), ("welcome-2", false)] {
            let implicit = request(tenant, key);
            let explicit = spelled_out(&implicit, engine_default);
            let (first, second) =
                if implicit_first { (&implicit, &explicit) } else { (&explicit, &implicit) };
            let created = submit(&herald, first).await.unwrap();
            assert!(!created.duplicate, "{name}: {key}");
            let d = &created.delivery;
            assert_eq!(
                (d.quota_key.as_str(), d.cost, d.max_attempts),
                ("email", 1, engine_default),
                "{name}: {key}: the defaults"
            );
            let again = submit(&herald, second).await;
            assert_eq!(kind(&again), "duplicate", "{name}: {key}: {again:?}");
            assert_eq!(again.unwrap().delivery.id, created.delivery.id, "{name}: {key}");
        }

        // The default is the engine's setting, resolved by the engine that submitted.
        let three = db.herald().await.with_options(EngineOptions { max_attempts: 3 }).unwrap();
        let implicit = request(tenant, "welcome-3");
        let created = submit(&three, &implicit).await.unwrap();
        assert_eq!(created.delivery.max_attempts, 3, "{name}");
        let same = submit(&herald, &spelled_out(&implicit, 3)).await;
        assert_eq!(kind(&same), "duplicate", "{name}: {same:?}");
        let different = submit(&herald, &spelled_out(&implicit, engine_default)).await;
        assert_eq!(kind(&different), "reused", "{name}: {different:?}");

        let reserves =
            count(&herald, "SELECT count(*) FROM quota_journal WHERE kind = 'reserve'", &[]).await;
        assert_eq!(reserves, 3, "{name}: one reservation per delivery");
        assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [10, 7, 3, 0])]);
    }
}

// ---- validation ------------------------------------------------------------------------

#[tokio::test]
async fn bad_input_is_refused_writes_nothing_and_leaves_the_transaction_usable() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        create_orders_table(&herald).await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 2 * COST_MAX, None).await.unwrap();
        let base = request(tenant, "bad-input");
        // `{"t":""}` is 8 bytes: this payload serialises to one byte over the limit.
        let oversize = json!({"t": "x".repeat(PAYLOAD_BYTES_MAX - 7)});
        assert_eq!(oversize.to_string().len(), PAYLOAD_BYTES_MAX + 1);
        let cases = [
            (
                "empty operation_key",
                "invalid",
                SubmitRequest { operation_key: String::new(), ..base.clone() },
            ),
            (
                "operation_key over 255 bytes",
                "invalid",
                SubmitRequest { operation_key: "k".repeat(256), ..base.clone() },
            ),
            (
                "operation_key with a tab",
                "invalid",
                SubmitRequest { operation_key: "evt\t1".into(), ..base.clone() },
            ),
            ("payload over 64 KiB", "invalid", SubmitRequest { payload: oversize, ..base.clone() }),
            // PostgreSQL's jsonb cannot hold U+0000: refused up front on every backend, so the
            // caller's transaction is never aborted by it.
            (
                "NUL in the payload",
                "invalid",
                SubmitRequest { payload: json!({"text": "a\u{0}b"}), ..base.clone() },
            ),
            (
                "NUL in a payload key",
                "invalid",
                SubmitRequest { payload: json!({"a\u{0}": 1}), ..base.clone() },
            ),
            (
                "send_at before 1970",
                "invalid",
                SubmitRequest { send_at: Some(jiff::Timestamp::MIN), ..base.clone() },
            ),
            (
                "send_at past 9999-12-30",
                "invalid",
                SubmitRequest { send_at: Some(jiff::Timestamp::MAX), ..base.clone() },
            ),
            ("cost -1", "invalid", SubmitRequest { cost: Some(-1), ..base.clone() }),
            (
                "cost over COST_MAX",
                "invalid",
                SubmitRequest { cost: Some(COST_MAX + 1), ..base.clone() },
            ),
            ("max_attempts 0", "invalid", SubmitRequest { max_attempts: Some(0), ..base.clone() }),
            (
                "max_attempts 101",
                "invalid",
                SubmitRequest { max_attempts: Some(DELIVERY_ATTEMPTS_MAX + 1), ..base.clone() },
            ),
            ("empty channel", "invalid", SubmitRequest { channel: String::new(), ..base.clone() }),
            (
                "channel over 50 bytes",
                "invalid",
                SubmitRequest { channel: "c".repeat(51), ..base.clone() },
            ),
            ("empty to", "invalid", SubmitRequest { to: String::new(), ..base.clone() }),
            (
                "newline in to",
                "invalid",
                SubmitRequest {
                    to: "ada@example.com\nBcc: eve@example.com".into(),
                    ..base.clone()
                },
            ),
            (
                "DEL in to",
                "invalid",
                SubmitRequest { to: "ada\u{7f}@example.com".into(), ..base.clone() },
            ),
            (
                "empty quota_key",
                "invalid",
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
                        let got = kind(&h.submit(tx, req).await);
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
        let outside = match (store.sqlite_pool(), store.postgres_pool()) {
            (Some(pool), _) => herald.submit_in(&mut pool.acquire().await.unwrap(), &base).await,
            (_, Some(pool)) => herald.submit_in(&mut pool.acquire().await.unwrap(), &base).await,
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
                    payload: at_limit,
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
            assert_eq!(payload, req.payload, "{name}: {what}: the payload is stored whole");
        }
    }
}

// ---- guarantee 4: the ledger never drifts --------------------------------------------

/// A channel that always answers the same.
struct Fixed(Outcome);

impl Channel for Fixed {
    fn send<'a>(&'a self, _delivery: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move { self.0.clone() })
    }
}

/// Every account's balance identity, and the journal adding up to every balance.
async fn check_ledger(herald: &Herald, tenants: &[herald::TenantId], at: &str) {
    for &tenant in tenants {
        for a in herald.quotas(tenant).await.unwrap() {
            let at = format!("{at}: {}/{}", a.tenant_id, a.quota_key);
            assert!(a.available >= 0 && a.reserved >= 0 && a.spent >= 0, "{at}: {a:?}");
            assert_eq!(a.granted, a.available + a.reserved + a.spent, "{at}: {a:?}");
            let mut sums = Vec::new();
            for kind in ["grant", "reserve", "commit", "release"] {
                let sql = "SELECT CAST(coalesce(sum(amount), 0) AS BIGINT) FROM quota_journal
                           WHERE tenant_id = $1 AND quota_key = $2 AND kind = $3";
                sums.push(
                    count(herald, sql, &[Id(tenant.into()), Text(&a.quota_key), Text(kind)]).await,
                );
            }
            let [grants, reserves, commits, releases] = sums[..] else { unreachable!() };
            assert_eq!(grants, a.granted, "{at}: grants = granted");
            assert_eq!(reserves - commits - releases, a.reserved, "{at}: open reservations");
            assert_eq!(commits, a.spent, "{at}: commits = spent");
            assert_eq!(grants - reserves + releases, a.available, "{at}: available");
        }
    }
    let unmatched = count(
        herald,
        "SELECT count(*) FROM quota_journal f WHERE f.kind IN ('commit', 'release')
         AND NOT EXISTS (SELECT 1 FROM quota_journal r WHERE r.kind = 'reserve'
             AND r.delivery_id = f.delivery_id AND r.reservation_seq = f.reservation_seq)",
        &[],
    )
    .await;
    assert_eq!(unmatched, 0, "{at}: every final movement ends a reservation");
}

async fn journal_of(herald: &Herald, id: herald::DeliveryId) -> Vec<String> {
    let sql = "SELECT kind || ':' || CAST(reservation_seq AS TEXT) || ':' || CAST(amount AS TEXT)
               FROM quota_journal WHERE delivery_id = $1 ORDER BY id";
    let store = herald.store();
    match (store.sqlite_pool(), store.postgres_pool()) {
        (Some(pool), _) => sqlx::query_scalar(AssertSqlSafe(sql.replace('$', "?")))
            .bind(id.as_uuid())
            .fetch_all(pool)
            .await
            .unwrap(),
        (_, Some(pool)) => {
            sqlx::query_scalar(sql).bind(id.as_uuid()).fetch_all(pool).await.unwrap()
        }
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn the_ledger_balances_after_every_operation_on_two_tenants() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let (a, b) = (
            herald.tenant_create("north").await.unwrap().id,
            herald.tenant_create("south").await.unwrap().id,
        );
        let tenants = [a, b];
        let later = Timestamp::now() + SignedDuration::from_hours(1);
        let step = |s: &str| format!("{name}: after {s}");

        assert!(herald.quota_grant(a, "email", 10, Some("g-1")).await.unwrap(), "{name}");
        assert!(!herald.quota_grant(a, "email", 10, Some("g-1")).await.unwrap(), "{name}");
        herald.quota_grant(a, "sms", 4, None).await.unwrap();
        herald.quota_grant(b, "email", 5, None).await.unwrap();
        check_ledger(&herald, &tenants, &step("grants")).await;

        let mut ids = std::collections::HashMap::new();
        let submits = [
            ("a-e1", a, "email", 2, None, "created"),
            ("a-e2", a, "email", 3, Some(later), "created"),
            ("a-s1", a, "sms", 1, None, "created"),
            ("a-f0", a, "email", 0, Some(later), "created"),
            ("a-e3", a, "email", 6, None, "quota exhausted"),
            ("b-e1", b, "email", 1, Some(later), "created"),
            ("b-e2", b, "email", 2, None, "created"),
        ];
        for (key, tenant, channel, cost, send_at, expected) in submits {
            let req = SubmitRequest {
                channel: channel.into(),
                cost: Some(cost),
                send_at,
                ..request(tenant, key)
            };
            let result = submit(&herald, &req).await;
            assert_eq!(kind(&result), expected, "{name}: {key}: {result:?}");
            if let Ok(s) = result {
                ids.insert(key, s.delivery.id);
            }
            check_ledger(&herald, &tenants, &step(key)).await;
        }

        // Send what is due: email is sent (commit), sms fails terminally (release).
        let email: Arc<dyn Channel> = Arc::new(Fixed(Outcome::Sent));
        let sms: Arc<dyn Channel> = Arc::new(Fixed(Outcome::terminal("unknown_number", "no")));
        let worker = Worker::new(
            herald.clone(),
            WorkerOptions::default(),
            [("email".to_string(), email), ("sms".to_string(), sms)],
        )
        .unwrap();
        let report = worker.run_once().await.unwrap();
        assert_eq!((report.leased, report.sent, report.failed), (3, 2, 1), "{name}: {report:?}");
        check_ledger(&herald, &tenants, &step("the first worker run")).await;

        // Cancel a pending delivery: its reservation is released.
        let e2 = ids["a-e2"];
        let cancelled = herald.cancel(a, e2).await.unwrap();
        assert_eq!(cancelled.state, DeliveryState::Cancelled, "{name}");
        check_ledger(&herald, &tenants, &step("cancel")).await;

        // What is not allowed, and another tenant's delivery.
        let wrong = [
            ("cancel twice", herald.cancel(a, e2).await, "cancelled", "cancel"),
            ("cancel a sent one", herald.cancel(a, ids["a-e1"]).await, "sent", "cancel"),
            ("replay a pending one", herald.replay(b, ids["b-e1"]).await, "pending", "replay"),
            ("replay a sent one", herald.replay(a, ids["a-e1"]).await, "sent", "replay"),
        ];
        for (what, result, state, operation) in wrong {
            match result {
                Err(Error::WrongState { state: s, operation: o }) => {
                    assert_eq!((s.to_string().as_str(), o), (state, operation), "{name}: {what}")
                }
                other => panic!("{name}: {what}: expected WrongState, got {other:?}"),
            }
        }
        let b1 = ids["b-e1"];
        assert!(matches!(herald.cancel(a, b1).await, Err(Error::NotFound)), "{name}");
        assert!(matches!(herald.replay(a, b1).await, Err(Error::NotFound)), "{name}");
        assert!(matches!(herald.delivery(a, b1).await, Err(Error::NotFound)), "{name}");
        assert_eq!(herald.delivery(b, b1).await.unwrap().state, DeliveryState::Pending, "{name}");
        check_ledger(&herald, &tenants, &step("refused operations")).await;

        // Replay the cancelled one: same row, reservation 2.
        let replayed = herald.replay(a, e2).await.unwrap();
        assert_eq!(
            (replayed.id, replayed.state, replayed.reservation_seq),
            (e2, DeliveryState::Pending, 2),
            "{name}"
        );
        assert_eq!(journal_of(&herald, e2).await, ["reserve:1:3", "release:1:3", "reserve:2:3"]);
        check_ledger(&herald, &tenants, &step("replaying the cancelled one")).await;

        // Replay the failed one, and cancel the free one (no journal rows at all).
        let s1 = herald.replay(a, ids["a-s1"]).await.unwrap();
        assert_eq!((s1.id, s1.reservation_seq), (ids["a-s1"], 2), "{name}");
        check_ledger(&herald, &tenants, &step("replaying the failed one")).await;
        herald.cancel(a, ids["a-f0"]).await.unwrap();
        assert!(journal_of(&herald, ids["a-f0"]).await.is_empty(), "{name}: cost 0");
        check_ledger(&herald, &tenants, &step("cancelling the free one")).await;

        // The replays are due now: e2 is sent, s1 fails again.
        let report = worker.run_once().await.unwrap();
        assert_eq!((report.leased, report.sent, report.failed), (2, 1, 1), "{name}: {report:?}");
        check_ledger(&herald, &tenants, &step("the second worker run")).await;
        assert_eq!(
            journal_of(&herald, e2).await,
            ["reserve:1:3", "release:1:3", "reserve:2:3", "commit:2:3"],
            "{name}"
        );
        assert_eq!(
            journal_of(&herald, ids["a-s1"]).await,
            ["reserve:1:1", "release:1:1", "reserve:2:1", "release:2:1"],
            "{name}"
        );

        assert_eq!(
            herald.quotas(a).await.unwrap(),
            [account(a, "email", [10, 5, 0, 5]), account(a, "sms", [4, 4, 0, 0])],
            "{name}"
        );
        assert_eq!(herald.quotas(b).await.unwrap(), [account(b, "email", [5, 2, 1, 2])], "{name}");
    }
}
