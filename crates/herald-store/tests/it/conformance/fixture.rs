//! What the conformance tests share: a fixed clock, setup through the store's own
//! functions (tenants, grants, claims, leases), and the few raw reads no store function
//! offers (the journal, row counts), written once with `$n` placeholders for every backend.

use super::Db;
use herald_store::deliveries::{
    Claim, DeliveryRow, Lease, LeasedRow, NewDelivery, Transition, deliveries_lease,
    delivery_apply, delivery_claim, delivery_get,
};
use herald_store::quota::{QuotaAccount, quota_accounts, quota_grant_apply, quota_grant_lock};
use herald_store::sqlx::types::Uuid;
use herald_store::tenants::tenant_insert;
use herald_store::{AsConn, Backend, Conn, Now, Store, StoreError};
use std::time::{Duration, Instant};

/// The tests' "now" (2027-01-15), in Unix milliseconds: every statement is given its time.
pub const T0: i64 = 1_800_000_000_000;
pub const SECOND_MS: i64 = 1_000;

/// The quota key and the channel of [`new_delivery`].
pub const KEY: &str = "email";
pub const CHANNEL: &str = "email";
/// A payload (stored as text on every backend, byte for byte).
pub const PAYLOAD: &str = r#"{"to": "a@example.com"}"#;
/// Units [`funded`] grants.
pub const GRANTED: i64 = 100;
pub const WORKER: &str = "worker-1";
pub const LEASE_MS: i64 = 60 * SECOND_MS;

/// A boxed future borrowing for `'a`, for steps a helper runs on a connection it owns.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>;

/// `T0 + offset_ms`, as the store takes it.
pub fn at(offset_ms: i64) -> Now {
    Now::At(T0 + offset_ms)
}

/// A tenant, inserted through the store.
pub async fn tenant(db: &Db, name: &str) -> Uuid {
    let id = Uuid::now_v7();
    let mut tx = db.tx().await;
    assert!(tenant_insert(tx.as_conn(), id, name, "whsec_test").await.unwrap(), "tenant {name}");
    tx.commit().await.unwrap();
    id
}

/// Grants `amount` on (`tenant`, `key`) as the library does: lock (creating the account),
/// then apply.
pub async fn grant(db: &Db, tenant: Uuid, key: &str, amount: i64) {
    let mut tx = db.tx().await;
    quota_grant_lock(tx.as_conn(), tenant, key, None, at(0)).await.unwrap();
    quota_grant_apply(tx.as_conn(), tenant, key, amount, None, at(0)).await.unwrap();
    tx.commit().await.unwrap();
}

/// The tenant "acme" with [`GRANTED`] units on [`KEY`].
pub async fn funded(db: &Db) -> Uuid {
    let t = tenant(db, "acme").await;
    grant(db, t, KEY, GRANTED).await;
    t
}

/// A claim of cost 1 on [`KEY`] and [`CHANNEL`], due at once, three attempts.
pub fn new_delivery(tenant: Uuid, operation_key: &str) -> NewDelivery<'_> {
    NewDelivery {
        id: Uuid::now_v7(),
        tenant_id: tenant,
        operation_key,
        channel: CHANNEL,
        recipient: "a@example.com",
        payload: PAYLOAD,
        fingerprint: b"fingerprint",
        fingerprint_version: 2,
        quota_key: KEY,
        cost: 1,
        max_attempts: 3,
        send_at: None,
        traceparent: None,
    }
}

/// Claims in a transaction of its own, committed whatever the answer.
pub async fn claim(db: &Db, new: &NewDelivery<'_>, now: Now) -> Claim {
    let mut tx = db.tx().await;
    let claim = delivery_claim(tx.as_conn(), new, now, false).await.unwrap();
    tx.commit().await.unwrap();
    claim
}

/// Claims [`new_delivery`]`(tenant, key)` at `now` and returns its id.
pub async fn claimed(db: &Db, tenant: Uuid, operation_key: &str, now: Now) -> Uuid {
    let new = new_delivery(tenant, operation_key);
    let got = claim(db, &new, now).await;
    assert!(matches!(got, Claim::Inserted { .. }), "claim {operation_key}: {got:?}");
    new.id
}

/// A delivery of `cost` on (`tenant`, `key`) that holds no reservation yet, at
/// reservation 1: what `quota_reserve` reserves for (a claim reserves its own; a replay
/// reserves the next). Claimed at cost 0, then given its cost.
pub async fn unreserved(db: &Db, tenant: Uuid, key: &str, cost: i64) -> Uuid {
    let operation_key = Uuid::now_v7().to_string();
    let mut new = new_delivery(tenant, &operation_key);
    new.quota_key = key;
    new.cost = 0;
    assert!(matches!(claim(db, &new, at(0)).await, Claim::Inserted { .. }));
    let mut conn = db.conn().await;
    let set = raw_execute!(
        conn.as_conn(),
        "UPDATE deliveries SET cost = $1 WHERE id = $2",
        [cost, new.id]
    );
    assert_eq!(set.unwrap(), 1);
    new.id
}

/// Claims `n` deliveries of [`new_delivery`] due one millisecond apart from `T0`; ids in
/// due order.
pub async fn due(db: &Db, tenant: Uuid, n: usize) -> Vec<Uuid> {
    let mut claimed = Vec::new();
    for i in 0..n {
        let key = format!("order-{i}");
        let mut new = new_delivery(tenant, &key);
        new.send_at = Some(T0 + i as i64);
        assert!(matches!(claim(db, &new, at(0)).await, Claim::Inserted { .. }), "{key}");
        claimed.push(new.id);
    }
    claimed
}

/// Leases up to `limit` of [`CHANNEL`] for `worker` at `now` for [`LEASE_MS`], committed.
pub async fn lease(db: &Db, worker: &str, limit: usize, now: Now) -> Vec<LeasedRow> {
    let mut tx = db.tx().await;
    let leased = lease_on(tx.as_conn(), worker, limit, now).await.unwrap();
    tx.commit().await.unwrap();
    leased
}

/// [`lease`] on a connection the caller holds.
pub async fn lease_on(
    conn: Conn<'_>,
    worker: &str,
    limit: usize,
    now: Now,
) -> Result<Vec<LeasedRow>, StoreError> {
    let channels = [CHANNEL.to_string()];
    let lease = Lease {
        worker,
        channels: &channels,
        limit,
        lease: Duration::from_millis(LEASE_MS as u64),
        now,
    };
    deliveries_lease(conn, &lease).await
}

/// Applies a transition in a transaction of its own, committed when it succeeded.
pub async fn apply(db: &Db, t: &Transition<'_>) -> Result<(), StoreError> {
    let mut tx = db.tx().await;
    delivery_apply(tx.as_conn(), t).await?;
    tx.commit().await
}

/// Ids of leased rows, in the order the lease returned them.
pub fn ids(leased: &[LeasedRow]) -> Vec<Uuid> {
    leased.iter().map(|l| l.delivery.id).collect()
}

/// Every account's balance is whole and nothing is negative (the CHECKs' promise).
pub fn assert_balanced(a: &QuotaAccount) {
    assert_eq!(a.granted, a.available + a.reserved + a.spent, "unbalanced: {a:?}");
    assert!(a.available >= 0 && a.reserved >= 0 && a.spent >= 0, "negative: {a:?}");
}

/// One journal row, without its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journal {
    pub kind: String,
    pub amount: i64,
    pub delivery: Option<Uuid>,
    pub seq: Option<i32>,
}

/// A journal row for `delivery`'s reservation `seq`.
pub fn moved(kind: &str, amount: i64, delivery: Uuid, seq: i32) -> Journal {
    Journal { kind: kind.into(), amount, delivery: Some(delivery), seq: Some(seq) }
}

/// `$1`, `$2`… as SQLite's numbered `?1`, `?2`….
pub fn sqlite_placeholders(sql: &str) -> String {
    sql.replace('$', "?")
}

/// `$1`, `$2`… as MariaDB's positional `?`: each number once, in order.
pub fn mysql_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut expect = 1;
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut n = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            n.push(*d);
            chars.next();
        }
        assert_eq!(n.parse::<usize>().ok(), Some(expect), "placeholders in order, once: {sql}");
        expect += 1;
        out.push('?');
    }
    out
}

/// Runs one of the tests' own queries on any backend; `$n` placeholders.
macro_rules! raw_query_as {
    ($conn:expr, $sql:expr, [$($bind:expr),*], $fetch:ident) => {
        match $conn {
            herald_store::Conn::Sqlite(c) => {
                let sql = $crate::conformance::sqlite_placeholders($sql);
                herald_store::sqlx::query_as(herald_store::sqlx::AssertSqlSafe(sql))
                    $(.bind($bind))*
                    .$fetch(&mut *c)
                    .await
            }
            herald_store::Conn::Postgres(c) => {
                herald_store::sqlx::query_as(herald_store::sqlx::AssertSqlSafe($sql.to_string()))
                    $(.bind($bind))*
                    .$fetch(&mut *c)
                    .await
            }
            herald_store::Conn::MySql(c) => {
                let sql = $crate::conformance::mysql_placeholders($sql);
                herald_store::sqlx::query_as(herald_store::sqlx::AssertSqlSafe(sql))
                    $(.bind($bind))*
                    .$fetch(&mut *c)
                    .await
            }
        }
    };
}
pub(crate) use raw_query_as;

/// Executes one of the tests' own statements on either backend; rows affected.
macro_rules! raw_execute {
    ($conn:expr, $sql:expr, [$($bind:expr),*]) => {
        match $conn {
            herald_store::Conn::Sqlite(c) => {
                let sql = $crate::conformance::sqlite_placeholders($sql);
                herald_store::sqlx::query(herald_store::sqlx::AssertSqlSafe(sql))
                    $(.bind($bind))*
                    .execute(&mut *c)
                    .await
                    .map(|r| r.rows_affected())
            }
            herald_store::Conn::Postgres(c) => {
                herald_store::sqlx::query(herald_store::sqlx::AssertSqlSafe($sql.to_string()))
                    $(.bind($bind))*
                    .execute(&mut *c)
                    .await
                    .map(|r| r.rows_affected())
            }
            herald_store::Conn::MySql(c) => {
                let sql = $crate::conformance::mysql_placeholders($sql);
                herald_store::sqlx::query(herald_store::sqlx::AssertSqlSafe(sql))
                    $(.bind($bind))*
                    .execute(&mut *c)
                    .await
                    .map(|r| r.rows_affected())
            }
        }
    };
}
pub(crate) use raw_execute;

/// The journal of `tenant`, oldest first, read on `conn`.
pub async fn journal_on(conn: Conn<'_>, tenant: Uuid) -> Vec<Journal> {
    let rows: Vec<(String, i64, Option<Uuid>, Option<i32>)> = raw_query_as!(
        conn,
        "SELECT kind, amount, delivery_id, reservation_seq FROM quota_journal
         WHERE tenant_id = $1 ORDER BY id",
        [tenant],
        fetch_all
    )
    .expect("read the journal");
    rows.into_iter()
        .map(|(kind, amount, delivery, seq)| Journal { kind, amount, delivery, seq })
        .collect()
}

/// Rows of `table` whose `column` is `id` (the tests' table and column names only).
pub async fn count_on(conn: Conn<'_>, table: &str, column: &str, id: Uuid) -> i64 {
    let sql = format!("SELECT count(*) FROM {table} WHERE {column} = $1");
    let (n,): (i64,) = raw_query_as!(conn, &sql, [id], fetch_one).expect("count rows");
    n
}

/// The server's id of the session on `conn`: PostgreSQL's backend pid, MariaDB's
/// connection id (SQLite has none: 0).
pub async fn session_id(conn: Conn<'_>) -> i64 {
    let sql = match conn.backend() {
        Backend::Sqlite => return 0,
        Backend::Postgres => "SELECT CAST(pg_backend_pid() AS bigint)",
        Backend::MySql => "SELECT CAST(CONNECTION_ID() AS SIGNED)",
    };
    let (id,): (i64,) = raw_query_as!(conn, sql, [], fetch_one).expect("the session's id");
    id
}

/// Waits (up to a bound) until session `id` ([`session_id`]) waits on a row lock: the
/// signal that a racing transaction is blocked. SQLite's second writer waits at BEGIN,
/// where it cannot be watched: nothing to wait for.
pub async fn wait_for_a_lock_wait(store: &Store, id: i64) {
    const BOUND: Duration = Duration::from_secs(10);
    let sql = match store.backend() {
        Backend::Sqlite => return,
        Backend::Postgres => {
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'"
        }
        Backend::MySql => {
            "SELECT COUNT(*) FROM information_schema.innodb_trx
             WHERE trx_mysql_thread_id = $1 AND trx_state = 'LOCK WAIT'"
        }
    };
    let start = Instant::now();
    loop {
        let mut conn = store.acquire().await.expect("acquire");
        let (waiting,): (i64,) =
            raw_query_as!(conn.as_conn(), sql, [id], fetch_one).expect("read the lock waits");
        if waiting > 0 {
            return;
        }
        assert!(start.elapsed() < BOUND, "session {id} did not wait on a lock within {BOUND:?}");
        tokio::task::yield_now().await;
    }
}

impl Db {
    /// A delivery as it is now (any tenant).
    pub async fn row(&self, id: Uuid) -> DeliveryRow {
        self.find(id).await.unwrap_or_else(|| panic!("delivery {id} is gone"))
    }

    /// A delivery's stored destination (the lanes' column).
    pub async fn destination(&self, id: Uuid) -> String {
        let mut conn = self.conn().await;
        let (d,): (String,) = raw_query_as!(
            conn.as_conn(),
            "SELECT destination FROM deliveries WHERE id = $1",
            [id],
            fetch_one
        )
        .expect("read the destination");
        d
    }

    /// A delivery, if it exists.
    pub async fn find(&self, id: Uuid) -> Option<DeliveryRow> {
        delivery_get(self.conn().await.as_conn(), None, id, false).await.unwrap()
    }

    /// The account (`tenant`, `key`), checked to be balanced.
    pub async fn account(&self, tenant: Uuid, key: &str) -> Option<QuotaAccount> {
        let accounts = quota_accounts(self.conn().await.as_conn(), tenant).await.unwrap();
        let account = accounts.into_iter().find(|a| a.quota_key == key);
        if let Some(a) = &account {
            assert_balanced(a);
        }
        account
    }

    /// (available, reserved, spent) of (`tenant`, [`KEY`]), checked to be balanced.
    pub async fn balance(&self, tenant: Uuid) -> (i64, i64, i64) {
        let a = self.account(tenant, KEY).await.expect("the account exists");
        (a.available, a.reserved, a.spent)
    }

    /// The journal of `tenant`, oldest first, without its grants and the moves between
    /// stripes that spread them.
    pub async fn movements(&self, tenant: Uuid) -> Vec<Journal> {
        let all = journal_on(self.conn().await.as_conn(), tenant).await;
        all.into_iter()
            .filter(|j| !matches!(j.kind.as_str(), "grant" | "move_out" | "move_in"))
            .collect()
    }

    /// Rows of `table` whose `column` is `id`.
    pub async fn count(&self, table: &str, column: &str, id: Uuid) -> i64 {
        count_on(self.conn().await.as_conn(), table, column, id).await
    }
}
