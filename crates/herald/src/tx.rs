//! [`Tx`]: one attempt's transaction as the closure sees it — the connection, the effects
//! registered for after the commit, and savepoints (nested scopes with no attempts of
//! their own).

use crate::BoxFuture;
use crate::error::Error;
use herald_store::conn::{savepoint_begin, savepoint_release, savepoint_rollback};
use herald_store::sqlx::postgres::PgConnection;
use herald_store::sqlx::sqlite::SqliteConnection;
use herald_store::{AsConn, Backend, Conn, StoreTx};
use std::fmt;
use std::marker::PhantomData;

type Effect = Box<dyn FnOnce() + Send + 'static>;

/// The transaction of one attempt. Handed to the closure by [`crate::Herald::transaction`].
///
/// The lifetime `'a` is the scope the closure may borrow from: because `&'t mut Tx<'a>`
/// implies `'a: 't`, a closure's future can hold references to the caller's locals.
pub struct Tx<'a> {
    inner: StoreTx,
    effects: Vec<Effect>,
    attempt: u32,
    savepoint_depth: u32,
    _scope: PhantomData<&'a ()>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(inner: StoreTx, attempt: u32) -> Tx<'a> {
        Tx { inner, effects: Vec::new(), attempt, savepoint_depth: 0, _scope: PhantomData }
    }

    pub(crate) fn into_parts(self) -> (StoreTx, Vec<Effect>) {
        (self.inner, self.effects)
    }

    /// Which attempt this is (1 for the first run of the closure).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    pub fn backend(&self) -> Backend {
        self.inner.backend()
    }

    /// Registers `effect` to run after the final COMMIT, at most once, in registration
    /// order. Effects of an attempt that rolls back (or of a savepoint that rolls back)
    /// are discarded unrun.
    ///
    /// An effect runs in this process after the commit; if the process dies in between,
    /// it never runs. An effect that must survive a crash is a delivery (a row written in
    /// this transaction), not an `after_commit`.
    pub fn after_commit(&mut self, effect: impl FnOnce() + Send + 'static) {
        self.effects.push(Box::new(effect));
    }

    /// The connection, for the application's own statements in this transaction.
    pub fn conn(&mut self) -> Conn<'_> {
        self.inner.as_conn()
    }

    /// The SQLite connection, when the store is SQLite.
    pub fn sqlite(&mut self) -> Option<&mut SqliteConnection> {
        match self.inner.as_conn() {
            Conn::Sqlite(c) => Some(c),
            _ => None,
        }
    }

    /// The PostgreSQL connection, when the store is PostgreSQL.
    pub fn postgres(&mut self) -> Option<&mut PgConnection> {
        match self.inner.as_conn() {
            Conn::Postgres(c) => Some(c),
            _ => None,
        }
    }

    /// The MariaDB connection, when the store is MariaDB.
    pub fn mysql(&mut self) -> Option<&mut herald_store::sqlx::MySqlConnection> {
        match self.inner.as_conn() {
            Conn::MySql(c) => Some(c),
            _ => None,
        }
    }

    /// Runs `f` inside a savepoint: on `Ok` its work stays part of this transaction, on
    /// `Err` its work and the effects it registered are undone and the error is returned,
    /// with the transaction still usable.
    ///
    /// A savepoint has no attempts of its own: a concurrency error inside it is returned
    /// like any other, and the runner (which owns the whole transaction) retries the whole
    /// closure if the error reaches it.
    pub async fn savepoint<T, F>(&mut self, f: F) -> Result<T, Error>
    where
        F: for<'t> FnOnce(&'t mut Tx<'a>) -> BoxFuture<'t, Result<T, Error>>,
    {
        let depth = self.savepoint_depth + 1;
        savepoint_begin(self.conn(), depth).await?;
        self.savepoint_depth = depth;
        let effects_before = self.effects.len();
        let result = f(self).await;
        self.savepoint_depth = depth - 1;
        match result {
            Ok(value) => {
                savepoint_release(self.conn(), depth).await?;
                Ok(value)
            }
            Err(error) => {
                self.effects.truncate(effects_before);
                if let Err(rollback) = savepoint_rollback(self.conn(), depth).await {
                    // The original error is the one that matters (often the same broken
                    // connection); the runner rolls back the whole transaction anyway.
                    tracing::debug!(error = %rollback, "rollback to savepoint failed");
                }
                Err(error)
            }
        }
    }
}

impl AsConn for Tx<'_> {
    fn as_conn(&mut self) -> Conn<'_> {
        self.inner.as_conn()
    }
}

impl fmt::Debug for Tx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tx")
            .field("backend", &self.backend())
            .field("attempt", &self.attempt)
            .field("effects", &self.effects.len())
            .field("savepoint_depth", &self.savepoint_depth)
            .finish()
    }
}
