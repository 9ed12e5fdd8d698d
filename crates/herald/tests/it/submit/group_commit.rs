//! Group commit (SPEC, "Group commit and batches"): submits with no caller transaction
//! share one transaction and answer exactly what each would have answered alone; one bad
//! submit never fails its neighbours; a commit whose outcome is unknown is every member's,
//! and submitting again settles each exactly once.

use super::*;
use herald::Backend;
use herald_core::limits::SUBMIT_BATCH_MAX;

/// A changed request under the same identity.
fn changed(req: &SubmitRequest) -> SubmitRequest {
    SubmitRequest { to: "grace@example.com".into(), ..req.clone() }
}

/// One account of 3 units, two of its identities used before (one of them to be reused),
/// then a batch with every answer in it, in an order where quota runs out mid-batch.
fn mixed_batch(tenant: herald::TenantId) -> Vec<SubmitRequest> {
    vec![
        request(tenant, "new-1"),
        request(tenant, "before"),
        changed(&request(tenant, "before-reused")),
        request(tenant, "new-2"),
        request(tenant, "new-3"),
        request(tenant, ""),
        request(tenant, "new-1"),
        changed(&request(tenant, "new-1")),
        SubmitRequest { cost: Some(0), ..request(tenant, "free") },
    ]
}

const MIXED_KINDS: [&str; 9] = [
    "created",
    "duplicate",
    "reused",
    "created",
    "quota exhausted",
    "invalid",
    "duplicate",
    "reused",
    "created",
];

async fn tenant_with_history(herald: &Herald, name: &str) -> herald::TenantId {
    let tenant = herald.tenant_create(name).await.unwrap().id;
    herald.quota_grant(tenant, "email", 4, None).await.unwrap();
    for key in ["before", "before-reused"] {
        herald.submit_alone(&request(tenant, key)).await.unwrap();
    }
    tenant
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_mixing_every_answer_on_one_account_answers_each_as_it_would_alone() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;

        // One by one, each in a transaction of its own: what "alone" answers.
        let alone_tenant = tenant_with_history(&herald, "alone").await;
        let mut alone = Vec::new();
        for req in mixed_batch(alone_tenant) {
            alone.push(kind(&submit(&herald, &req).await));
        }
        assert_eq!(alone, MIXED_KINDS, "{name}: one by one");

        // The same requests in one call: one shared transaction.
        let tenant = tenant_with_history(&herald, "together").await;
        let before = herald.group_commit_stats();
        let answers = herald.submit_many(&mixed_batch(tenant)).await.unwrap();
        let kinds: Vec<_> = answers.iter().map(kind).collect();
        assert_eq!(kinds, MIXED_KINDS, "{name}: together");
        let after = herald.group_commit_stats();
        assert_eq!(
            (after.transactions - before.transactions, after.submits - before.submits),
            (1, 8),
            "{name}: the eight that passed their checks shared one commit"
        );
        assert_eq!(after.submits_per_commit_since(&before), 8.0, "{name}");
        assert_eq!(after.submits_per_commit_since(&after), 0.0, "{name}: no commit between");
        // The in-batch duplicate is the delivery the batch created, the free one is free.
        let first = answers[0].as_ref().unwrap().delivery.id;
        assert_eq!(answers[6].as_ref().unwrap().delivery.id, first, "{name}");
        assert_eq!(answers[8].as_ref().unwrap().delivery.cost, 0, "{name}");

        // The same ledger either way: 4 granted, 4 reserved, none spent.
        for t in [alone_tenant, tenant] {
            assert_eq!(
                herald.quotas(t).await.unwrap(),
                [account(t, "email", [4, 0, 4, 0])],
                "{name}: the account"
            );
        }
        let rows = |t: herald::TenantId| {
            let herald = herald.clone();
            async move {
                count(
                    &herald,
                    "SELECT count(*) FROM deliveries WHERE tenant_id = $1",
                    &[Id(t.into())],
                )
                .await
            }
        };
        assert_eq!(rows(tenant).await, rows(alone_tenant).await, "{name}: rows");
        assert_eq!(rows(tenant).await, 5, "{name}: before ×2, new-1, new-2, free, and no more");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submits_share_commits_and_each_gets_its_own_answer() {
    const CALLS: usize = 96;
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let mut tenants = Vec::new();
        for t in 0..4 {
            let tenant = herald.tenant_create(&format!("t{t}")).await.unwrap().id;
            herald.quota_grant(tenant, "email", 20, None).await.unwrap();
            tenants.push(tenant);
        }
        let before = herald.group_commit_stats();
        let start = Arc::new(Barrier::new(CALLS));
        // 24 calls per tenant over 12 keys: each key submitted twice, 20 units for 12 keys.
        let tasks: Vec<_> = (0..CALLS)
            .map(|i| {
                let (herald, start) = (herald.clone(), start.clone());
                let req = request(tenants[i % 4], &format!("k{}", (i / 4) % 12));
                tokio::spawn(async move {
                    start.wait().await;
                    herald.submit_alone(&req).await
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        let created = results.iter().filter(|r| kind(r) == "created").count();
        let duplicates = results.iter().filter(|r| kind(r) == "duplicate").count();
        assert_eq!((created, duplicates), (48, 48), "{name}: {results:?}");
        for tenant in &tenants {
            assert_eq!(
                herald.quotas(*tenant).await.unwrap(),
                [account(*tenant, "email", [20, 8, 12, 0])],
                "{name}"
            );
        }
        let after = herald.group_commit_stats();
        let (transactions, submits) =
            (after.transactions - before.transactions, after.submits - before.submits);
        assert_eq!(submits, CALLS as u64, "{name}");
        assert!(transactions < submits, "{name}: {submits} submits took {transactions} commits");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_error_of_one_member_never_fails_its_neighbours() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 10, None).await.unwrap();
        // A real error from the database for one identity only, after every check herald
        // makes before SQL has passed.
        let trigger: &[&str] = match db.backend {
            Backend::Sqlite => &["CREATE TRIGGER t_poison BEFORE INSERT ON deliveries
                 WHEN NEW.operation_key = 'poison'
                 BEGIN SELECT RAISE(ABORT, 'poisoned row'); END"],
            Backend::Postgres => &[
                "CREATE FUNCTION t_poison() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN RAISE EXCEPTION 'poisoned row'; END $$",
                "CREATE TRIGGER t_poison BEFORE INSERT ON deliveries FOR EACH ROW
                 WHEN (NEW.operation_key = 'poison') EXECUTE FUNCTION t_poison()",
            ],
            Backend::MySql => &["CREATE TRIGGER t_poison BEFORE INSERT ON deliveries
                 FOR EACH ROW BEGIN
                   IF NEW.operation_key = 'poison' THEN
                     SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poisoned row';
                   END IF;
                 END"],
        };
        for sql in trigger {
            herald
                .transaction(|tx| Box::pin(async move { exec(tx.conn(), sql).await }))
                .await
                .unwrap();
        }
        let reqs: Vec<_> = ["a", "poison", "b", "c"].iter().map(|k| request(tenant, k)).collect();
        let answers = herald.submit_many(&reqs).await.unwrap();
        let kinds: Vec<_> = answers.iter().map(kind).collect();
        assert_eq!(kinds, ["created", "other error", "created", "created"], "{name}: {answers:?}");
        let error = answers[1].as_ref().unwrap_err().to_string();
        assert!(matches!(answers[1], Err(Error::Store(_))), "{name}: {error}");
        assert_eq!(
            herald.quotas(tenant).await.unwrap(),
            [account(tenant, "email", [10, 7, 3, 0])],
            "{name}: three reserved, none for the poisoned one"
        );
        let rows = count(&herald, "SELECT count(*) FROM deliveries", &[]).await;
        assert_eq!(rows, 3, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identity_raced_through_batches_of_two_handles_is_claimed_once() {
    const ROUNDS: usize = 4;
    for db in backends().await {
        let name = db.name();
        let (one, two) = (db.herald().await, db.herald().await);
        let tenant = one.tenant_create("acme").await.unwrap().id;
        one.quota_grant(tenant, "email", 100, None).await.unwrap();
        one.quota_grant(tenant, "sms", 100, None).await.unwrap();
        for round in 0..ROUNDS {
            // The same identities in opposite orders, over two accounts, so the two
            // batches lock in orders that can cross; a deadlock must be retried away.
            let batch = |reverse: bool| {
                let mut reqs: Vec<_> = (0..6)
                    .map(|k| SubmitRequest {
                        quota_key: Some(if k % 2 == 0 { "email" } else { "sms" }.into()),
                        ..request(tenant, &format!("r{round}-k{k}"))
                    })
                    .collect();
                if reverse {
                    reqs.reverse();
                }
                reqs
            };
            let (a, b) = (batch(false), batch(true));
            let (a, b) = tokio::join!(one.submit_many(&a), two.submit_many(&b));
            let (a, b) = (a.unwrap(), b.unwrap());
            for k in 0..6 {
                let pair = [kind(&a[k]), kind(&b[5 - k])];
                assert!(
                    pair == ["created", "duplicate"] || pair == ["duplicate", "created"],
                    "{name}: round {round}, key {k}: {pair:?} ({:?}, {:?})",
                    a[k],
                    b[5 - k]
                );
                let (x, y) = (a[k].as_ref().unwrap(), b[5 - k].as_ref().unwrap());
                assert_eq!(x.delivery.id, y.delivery.id, "{name}");
            }
        }
        let reserves =
            count(&one, "SELECT count(*) FROM quota_journal WHERE kind = 'reserve'", &[]).await;
        assert_eq!(reserves, (ROUNDS * 6) as i64, "{name}: one reservation per identity");
        let rows = count(&one, "SELECT count(*) FROM deliveries", &[]).await;
        assert_eq!(rows, (ROUNDS * 6) as i64, "{name}: one row per identity");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_mid_commit_is_every_members_unknown_and_a_resubmit_settles_each_once()
{
    let Some(base) = crate::common::postgres_url() else { return };
    // PostgreSQL: a deferred trigger makes COMMIT itself wait on an advisory lock this test
    // holds, so the connection can be killed while COMMIT runs.
    let db = crate::common::postgres(&base).await;
    let herald = db.herald().await;
    let tenant = herald.tenant_create("acme").await.unwrap().id;
    herald.quota_grant(tenant, "email", 10, None).await.unwrap();
    let lock_key: i64 = 1_000_000 + i64::from(fastrand::u32(..1_000_000));
    for sql in [
        format!(
            "CREATE FUNCTION t_hold() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN PERFORM pg_advisory_xact_lock({lock_key}); RETURN NULL; END $$"
        ),
        "CREATE CONSTRAINT TRIGGER t_hold AFTER INSERT ON deliveries
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION t_hold()"
            .to_string(),
    ] {
        herald
            .transaction(|tx| {
                let sql = sql.clone();
                Box::pin(async move { exec(tx.conn(), &sql).await })
            })
            .await
            .unwrap();
    }
    let pool = herald.store().postgres_pool().unwrap().clone();
    let mut holder = pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)").bind(lock_key).execute(&mut *holder).await.unwrap();

    let reqs: Vec<_> = (0..5).map(|k| request(tenant, &format!("k{k}"))).collect();
    let batch = tokio::spawn({
        let (herald, reqs) = (herald.clone(), reqs.clone());
        async move { herald.submit_many(&reqs).await }
    });
    // The COMMIT waiting on the lock: kill its connection.
    let waiting = loop {
        let pid: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
             AND objid::text::bigint = $1",
        )
        .bind(lock_key)
        .fetch_optional(&mut *holder)
        .await
        .unwrap();
        if let Some(pid) = pid {
            break pid;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(waiting)
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    assert!(killed);
    let answers = batch.await.unwrap().unwrap();
    for answer in &answers {
        assert!(matches!(answer, Err(Error::CommitOutcomeUnknown { .. })), "{answer:?}");
    }
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(lock_key)
        .execute(&mut *holder)
        .await
        .unwrap();
    drop(holder);

    // Submitting the same requests again settles each, exactly once.
    let again = herald.submit_many(&reqs).await.unwrap();
    let kinds: Vec<_> = again.iter().map(kind).collect();
    assert_eq!(kinds, ["created"; 5], "{again:?}");
    let third = herald.submit_many(&reqs).await.unwrap();
    let kinds: Vec<_> = third.iter().map(kind).collect();
    assert_eq!(kinds, ["duplicate"; 5]);
    assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [10, 5, 5, 0])]);
}

#[tokio::test]
async fn a_batch_over_the_limit_is_refused_whole_and_changes_nothing() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 1000, None).await.unwrap();
        let reqs: Vec<_> =
            (0..=SUBMIT_BATCH_MAX).map(|k| request(tenant, &format!("k{k}"))).collect();
        let refused = herald.submit_many(&reqs).await;
        assert!(matches!(refused, Err(Error::Invalid(_))), "{name}: {refused:?}");
        assert_eq!(count(&herald, "SELECT count(*) FROM deliveries", &[]).await, 0, "{name}");
        // At the limit it goes through, over as many commits as the group's limit needs.
        let answers = herald.submit_many(&reqs[..SUBMIT_BATCH_MAX]).await.unwrap();
        assert!(answers.iter().all(|a| kind(a) == "created"), "{name}");
        let empty = herald.submit_many(&[]).await.unwrap();
        assert!(empty.is_empty(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_committed_while_the_batch_plans_never_costs_a_later_submit_its_quota() {
    // PostgreSQL and MariaDB claim a batch in a few statements, planned from what they
    // read: an identity another transaction commits meanwhile is skipped by PostgreSQL's
    // insert and fails MariaDB's whole. The quota the plan gave it must then go to the
    // later submit the plan had refused.
    for db in backends().await.into_iter().filter(|db| db.backend != Backend::Sqlite) {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 1, None).await.unwrap();
        herald.quota_grant(tenant, "other", 1, None).await.unwrap();

        // Another transaction claims "k" (on another account, so it holds no lock the
        // batch waits for before its insert), uncommitted.
        let first = SubmitRequest { quota_key: Some("other".into()), ..request(tenant, "k") };
        let holder = Holder::claim(&herald, &first).await;

        // The batch: "k" (planned new, it cannot see the other's row) and "m", both on the
        // one-unit account: the plan refuses "m".
        let reqs = vec![request(tenant, "k"), request(tenant, "m")];
        let batch = tokio::spawn({
            let (herald, reqs) = (herald.clone(), reqs.clone());
            async move { herald.submit_many(&reqs).await }
        });
        // Once the batch's insert runs (PostgreSQL: waits on the other transaction), that
        // one commits.
        holder.commit_once_inserting(&herald).await;

        let answers = batch.await.unwrap().unwrap();
        let kinds: Vec<_> = answers.iter().map(kind).collect();
        // "k" exists with another quota key: reused. "m" gets the unit "k" never took.
        assert_eq!(kinds, ["reused", "created"], "{name}: {answers:?}");
        assert_eq!(
            herald.quotas(tenant).await.unwrap(),
            [account(tenant, "email", [1, 0, 1, 0]), account(tenant, "other", [1, 0, 1, 0])],
            "{name}"
        );
    }
}

/// A submit in a transaction of the test's own, not yet committed.
enum Holder {
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
    MySql(sqlx::Transaction<'static, sqlx::MySql>),
}

impl Holder {
    async fn claim(herald: &Herald, req: &SubmitRequest) -> Holder {
        if let Some(pool) = herald.store().postgres_pool() {
            let mut tx = pool.begin().await.unwrap();
            herald.submit_in(&mut *tx, req).await.unwrap();
            Holder::Postgres(tx)
        } else {
            let pool = herald.store().mysql_pool().expect("PostgreSQL or MariaDB");
            let mut tx = pool.begin().await.unwrap();
            herald.submit_in(&mut *tx, req).await.unwrap();
            Holder::MySql(tx)
        }
    }

    /// Commits once another session's insert into `deliveries` runs: on PostgreSQL once
    /// it waits on this transaction; on MariaDB once the process list shows it (its wait
    /// on a duplicate key's lock was seen missing from INNODB_TRX).
    async fn commit_once_inserting(self, herald: &Herald) {
        let start = std::time::Instant::now();
        match self {
            Holder::Postgres(mut tx) => {
                let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                    .fetch_one(&mut *tx)
                    .await
                    .unwrap();
                let pool = herald.store().postgres_pool().unwrap();
                while sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))",
                )
                .bind(pid)
                .fetch_one(pool)
                .await
                .unwrap()
                    == 0
                {
                    assert!(start.elapsed().as_secs() < 10, "the batch never waited");
                    tokio::task::yield_now().await;
                }
                tx.commit().await.unwrap();
            }
            Holder::MySql(mut tx) => {
                let id: i64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS SIGNED)")
                    .fetch_one(&mut *tx)
                    .await
                    .unwrap();
                while sqlx::query_scalar::<_, i64>(
                    "SELECT COUNT(*) FROM information_schema.processlist
                     WHERE id <> ? AND db = DATABASE() AND info LIKE 'INSERT INTO deliveries%'",
                )
                .bind(id)
                .fetch_one(&mut *tx)
                .await
                .unwrap()
                    == 0
                {
                    assert!(start.elapsed().as_secs() < 10, "the batch never inserted");
                    tokio::task::yield_now().await;
                }
                tx.commit().await.unwrap();
            }
        }
    }
}

/// Another session that keeps every write to `deliveries` waiting until released: SQLite's
/// write lock, a PostgreSQL table lock, a MariaDB `LOCK TABLES`.
enum WritesHeld {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
    MySql(sqlx::MySqlConnection),
}

impl WritesHeld {
    async fn take(db: &crate::common::TestDb) -> WritesHeld {
        use sqlx::Connection;
        match db.backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
                sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut c).await.unwrap();
                WritesHeld::Sqlite(c)
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
                sqlx::raw_sql("BEGIN; LOCK TABLE deliveries IN SHARE MODE")
                    .execute(&mut c)
                    .await
                    .unwrap();
                WritesHeld::Postgres(c)
            }
            Backend::MySql => {
                let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
                sqlx::raw_sql("LOCK TABLES deliveries WRITE").execute(&mut c).await.unwrap();
                WritesHeld::MySql(c)
            }
        }
    }

    async fn release(self) {
        match self {
            WritesHeld::Sqlite(mut c) => sqlx::raw_sql("ROLLBACK").execute(&mut c).await.map(drop),
            WritesHeld::Postgres(mut c) => {
                sqlx::raw_sql("ROLLBACK").execute(&mut c).await.map(drop)
            }
            WritesHeld::MySql(mut c) => {
                sqlx::raw_sql("UNLOCK TABLES").execute(&mut c).await.map(drop)
            }
        }
        .unwrap();
    }
}

/// Polls the group commit until `running` submits are in its lanes' transactions and
/// `waiting` wait for a lane.
async fn until_group(herald: &Herald, running: usize, waiting: usize) {
    let started = std::time::Instant::now();
    loop {
        let stats = herald.group_commit_stats();
        if (stats.running, stats.waiting) == (running, waiting) {
            return;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "never so: {stats:?}");
        tokio::task::yield_now().await;
    }
}

/// Admission control (issue 34, point 4): when the database takes submits slower than they
/// come, the excess is answered `Busy` early with nothing written — a submit arriving while
/// the oldest queued one has waited half the queue wait at once, a queued one when its own
/// wait runs out — instead of every caller waiting longer and longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_past_the_queue_wait_are_answered_busy_with_nothing_written() {
    const WAIT: std::time::Duration = std::time::Duration::from_millis(400);
    for db in backends().await {
        let name = db.name();
        let options = EngineOptions { queue_wait: WAIT, ..EngineOptions::default() };
        let herald = db.herald().await.with_options(options).unwrap();
        let tenant = herald.tenant_create("admission").await.unwrap().id;
        herald.quota_grant(tenant, "email", 10, None).await.unwrap();
        // The shared settings are written by the first submit: not under the held writes.
        herald.submit_alone(&request(tenant, "first")).await.unwrap();
        let before = herald.group_commit_stats();

        // Every lane busy with a submit whose write waits on another session.
        let held = WritesHeld::take(&db).await;
        let mut running = Vec::new();
        for i in 0..herald.group_commit_lanes() {
            let (h, req) = (herald.clone(), request(tenant, &format!("running-{i}")));
            running.push(tokio::spawn(async move { h.submit_alone(&req).await }));
            until_group(&herald, i + 1, 0).await;
        }
        // One more queues behind them.
        let queued_at = std::time::Instant::now();
        let (h, req) = (herald.clone(), request(tenant, "queued"));
        let queued = tokio::spawn(async move { h.submit_alone(&req).await });
        until_group(&herald, running.len(), 1).await;

        // Half the wait later, a new submit is refused on arrival. (The time passing is
        // what is under test: no signal stands for it.)
        tokio::time::sleep(WAIT / 2).await;
        let arrived = std::time::Instant::now();
        let refused = herald.submit_alone(&request(tenant, "refused")).await;
        assert!(matches!(refused, Err(Error::Busy { .. })), "{name}: {refused:?}");
        assert!(arrived.elapsed() < WAIT / 2, "{name}: refused after {:?}", arrived.elapsed());
        assert!(!queued.is_finished(), "{name}: the queued submit was answered first");

        // The queued one is answered Busy when its wait runs out, writes still held.
        let answer = queued.await.unwrap();
        assert!(matches!(answer, Err(Error::Busy { .. })), "{name}: {answer:?}");
        let waited = queued_at.elapsed();
        assert!(waited >= WAIT, "{name}: answered after {waited:?}");
        assert_eq!(herald.group_commit_stats().waiting, 0, "{name}: taken off the queue");

        // The running ones commit once the writes are let go; the refused left nothing.
        held.release().await;
        for r in running {
            assert_eq!(kind(&r.await.unwrap()), "created", "{name}");
        }
        for key in ["queued", "refused"] {
            let again = herald.submit_alone(&request(tenant, key)).await;
            assert_eq!(kind(&again), "created", "{name}: {key} again");
        }
        let after = herald.group_commit_stats();
        assert_eq!(after.refused - before.refused, 2, "{name}");
        let quota = herald.quotas(tenant).await.unwrap();
        let reserved: i64 = quota.iter().map(|q| q.reserved).sum();
        assert_eq!(reserved, herald.group_commit_lanes() as i64 + 3, "{name}: {quota:?}");
    }
}
