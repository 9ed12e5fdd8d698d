//! The transaction runner: a closure that may run more than once, with its side effect
//! registered to run once after the final commit.
//!
//!     cargo run -p herald --example transactions

use herald::{Conn, Herald};

#[tokio::main]
async fn main() -> Result<(), herald::Error> {
    let dir = std::env::temp_dir().join(format!("herald-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(herald::Error::app)?;
    let herald = Herald::open(&dir.join("example.db").display().to_string()).await?;

    let committed = herald
        .transaction(|tx| {
            Box::pin(async move {
                // Database work only: this may run again after a conflict.
                let sql =
                    "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, total INTEGER)";
                match tx.conn() {
                    Conn::Sqlite(c) => herald::sqlx::query(sql).execute(c).await.map(drop)?,
                    Conn::Postgres(c) => herald::sqlx::query(sql).execute(c).await.map(drop)?,
                    Conn::MySql(c) => herald::sqlx::query(sql).execute(c).await.map(drop)?,
                }
                // The effect: after the final commit, once, never for a rolled-back attempt.
                tx.after_commit(|| println!("order confirmation sent (once)"));
                Ok("order-1")
            })
        })
        .await?;
    println!("committed {} after {} attempt(s)", committed.value, committed.attempts);
    herald.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
