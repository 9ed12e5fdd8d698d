//! The demo's own tables (`demo_*`): two accounts to contend on, a job table standing in
//! for a queue, and an invoice total for the receipts fixture. Kept apart from herald's
//! schema and created on demand by `herald demo`.

use crate::conn::Conn;
use crate::error::StoreError;

/// Creates the demo tables if missing and makes sure accounts 1 and 2 exist.
pub async fn demo_setup(conn: Conn<'_>) -> Result<(), StoreError> {
    const SQLITE: &str = "
        CREATE TABLE IF NOT EXISTS demo_accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS demo_jobs (run_id TEXT NOT NULL, label TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS demo_invoices (id INTEGER PRIMARY KEY, total INTEGER NOT NULL);
        INSERT INTO demo_accounts (id, balance) VALUES (1, 0), (2, 0) ON CONFLICT DO NOTHING;";
    const POSTGRES: &str = "
        CREATE TABLE IF NOT EXISTS demo_accounts (id integer PRIMARY KEY, balance bigint NOT NULL);
        CREATE TABLE IF NOT EXISTS demo_jobs (run_id text NOT NULL, label text NOT NULL);
        CREATE TABLE IF NOT EXISTS demo_invoices (id integer PRIMARY KEY, total bigint NOT NULL);
        INSERT INTO demo_accounts (id, balance) VALUES (1, 0), (2, 0) ON CONFLICT DO NOTHING;";
    const MYSQL: &str = "
        CREATE TABLE IF NOT EXISTS demo_accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB;
        CREATE TABLE IF NOT EXISTS demo_jobs (run_id VARCHAR(64) NOT NULL, label VARCHAR(64) NOT NULL) ENGINE = InnoDB;
        CREATE TABLE IF NOT EXISTS demo_invoices (id INT PRIMARY KEY, total BIGINT NOT NULL) ENGINE = InnoDB;
        INSERT INTO demo_accounts (id, balance) VALUES (1, 0), (2, 0)
            ON DUPLICATE KEY UPDATE id = id;";
    match conn {
        Conn::Sqlite(c) => sqlx::raw_sql(SQLITE).execute(c).await?.rows_affected(),
        Conn::Postgres(c) => sqlx::raw_sql(POSTGRES).execute(c).await?.rows_affected(),
        Conn::MySql(c) => sqlx::raw_sql(MYSQL).execute(c).await?.rows_affected(),
    };
    Ok(())
}

/// Reads an account's balance (on SQLite this starts the transaction's read snapshot).
pub async fn demo_account_read(conn: Conn<'_>, id: i32) -> Result<i64, StoreError> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            sqlx::query_scalar("SELECT balance FROM demo_accounts WHERE id = ?1")
                .bind(id)
                .fetch_one(c)
                .await?
        }
        Conn::Postgres(c) => {
            sqlx::query_scalar("SELECT balance FROM demo_accounts WHERE id = $1")
                .bind(id)
                .fetch_one(c)
                .await?
        }
        Conn::MySql(c) => {
            sqlx::query_scalar("SELECT balance FROM demo_accounts WHERE id = ?")
                .bind(id)
                .fetch_one(c)
                .await?
        }
    })
}

/// Writes an account row (on PostgreSQL this takes its row lock until the end of the
/// transaction).
pub async fn demo_account_touch(conn: Conn<'_>, id: i32) -> Result<(), StoreError> {
    match conn {
        Conn::Sqlite(c) => {
            sqlx::query("UPDATE demo_accounts SET balance = balance + 1 WHERE id = ?1")
                .bind(id)
                .execute(c)
                .await?
                .rows_affected()
        }
        Conn::Postgres(c) => {
            sqlx::query("UPDATE demo_accounts SET balance = balance + 1 WHERE id = $1")
                .bind(id)
                .execute(c)
                .await?
                .rows_affected()
        }
        Conn::MySql(c) => {
            sqlx::query("UPDATE demo_accounts SET balance = balance + 1 WHERE id = ?")
                .bind(id)
                .execute(c)
                .await?
                .rows_affected()
        }
    };
    Ok(())
}

/// Enqueues a demo job row.
pub async fn demo_job_insert(conn: Conn<'_>, run_id: &str, label: &str) -> Result<(), StoreError> {
    match conn {
        Conn::Sqlite(c) => sqlx::query("INSERT INTO demo_jobs (run_id, label) VALUES (?1, ?2)")
            .bind(run_id)
            .bind(label)
            .execute(c)
            .await?
            .rows_affected(),
        Conn::Postgres(c) => sqlx::query("INSERT INTO demo_jobs (run_id, label) VALUES ($1, $2)")
            .bind(run_id)
            .bind(label)
            .execute(c)
            .await?
            .rows_affected(),
        Conn::MySql(c) => sqlx::query("INSERT INTO demo_jobs (run_id, label) VALUES (?, ?)")
            .bind(run_id)
            .bind(label)
            .execute(c)
            .await?
            .rows_affected(),
    };
    Ok(())
}

/// Counts the demo job rows of one run and label.
pub async fn demo_jobs_count(conn: Conn<'_>, run_id: &str, label: &str) -> Result<i64, StoreError> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            sqlx::query_scalar("SELECT count(*) FROM demo_jobs WHERE run_id = ?1 AND label = ?2")
                .bind(run_id)
                .bind(label)
                .fetch_one(c)
                .await?
        }
        Conn::Postgres(c) => {
            sqlx::query_scalar("SELECT count(*) FROM demo_jobs WHERE run_id = $1 AND label = $2")
                .bind(run_id)
                .bind(label)
                .fetch_one(c)
                .await?
        }
        Conn::MySql(c) => {
            sqlx::query_scalar("SELECT count(*) FROM demo_jobs WHERE run_id = ? AND label = ?")
                .bind(run_id)
                .bind(label)
                .fetch_one(c)
                .await?
        }
    })
}

/// Adds `units` to an invoice total (creating the invoice at 0 first).
pub async fn demo_invoice_add(conn: Conn<'_>, id: i32, units: i64) -> Result<(), StoreError> {
    match conn {
        Conn::Sqlite(c) => sqlx::query(
            "INSERT INTO demo_invoices (id, total) VALUES (?1, ?2)
                 ON CONFLICT (id) DO UPDATE SET total = total + excluded.total",
        )
        .bind(id)
        .bind(units)
        .execute(c)
        .await?
        .rows_affected(),
        Conn::Postgres(c) => sqlx::query(
            "INSERT INTO demo_invoices (id, total) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET total = demo_invoices.total + excluded.total",
        )
        .bind(id)
        .bind(units)
        .execute(c)
        .await?
        .rows_affected(),
        Conn::MySql(c) => sqlx::query(
            "INSERT INTO demo_invoices (id, total) VALUES (?, ?)
                 ON DUPLICATE KEY UPDATE total = total + VALUES(total)",
        )
        .bind(id)
        .bind(units)
        .execute(c)
        .await?
        .rows_affected(),
    };
    Ok(())
}

/// An invoice's total (0 when it does not exist yet).
pub async fn demo_invoice_total(conn: Conn<'_>, id: i32) -> Result<i64, StoreError> {
    let total: Option<i64> = match conn {
        Conn::Sqlite(c) => {
            sqlx::query_scalar("SELECT total FROM demo_invoices WHERE id = ?1")
                .bind(id)
                .fetch_optional(c)
                .await?
        }
        Conn::Postgres(c) => {
            sqlx::query_scalar("SELECT total FROM demo_invoices WHERE id = $1")
                .bind(id)
                .fetch_optional(c)
                .await?
        }
        Conn::MySql(c) => {
            sqlx::query_scalar("SELECT total FROM demo_invoices WHERE id = ?")
                .bind(id)
                .fetch_optional(c)
                .await?
        }
    };
    Ok(total.unwrap_or(0))
}

/// The server's own bound on one lock wait, as a connection gets it by default: what each
/// attempt of a framework's retry loop waits behind a held lock. MariaDB's
/// `innodb_lock_wait_timeout` (50 s unless configured); PostgreSQL's `lock_timeout` (0:
/// no bound, `None`); SQLite has no server (`None`: the wait is the connection's busy
/// timeout, which herald sets).
pub async fn demo_server_lock_wait(
    conn: Conn<'_>,
) -> Result<Option<std::time::Duration>, StoreError> {
    let ms: i64 = match conn {
        Conn::Sqlite(_) => 0,
        Conn::Postgres(c) => sqlx::query_scalar(
            "SELECT EXTRACT(EPOCH FROM current_setting('lock_timeout')::interval)::bigint * 1000",
        )
        .fetch_one(c)
        .await?,
        Conn::MySql(c) => {
            sqlx::query_scalar("SELECT CAST(@@GLOBAL.innodb_lock_wait_timeout * 1000 AS SIGNED)")
                .fetch_one(c)
                .await?
        }
    };
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)))
}
