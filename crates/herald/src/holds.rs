//! Holds: stop sending to a channel, a tenant or a destination (herald_core::hold) while an
//! incident lasts, and resume. A hold's pending deliveries wait without spending an
//! attempt; releasing it makes them due again when they were due.
//!
//! Two places enforce a hold. Placing it holds the scope's pending deliveries at once (one
//! UPDATE; they leave the due index). A delivery that enters the scope later — a submit, a
//! retry, a row whose URL hides its host — is held by the worker that leases it, in the
//! lease's own transaction, before any send: the worker knows the holds from a cache it
//! reads again at most every [`HOLDS_MAX_AGE`] (at once after a hold placed through this
//! handle), so a hold placed by another process reaches its sends within that time.

use crate::error::Error;
use crate::handle::Herald;
use herald_core::TenantId;
use herald_core::hold::{HoldKind, HoldScope, check_destination};
use herald_core::limits::CHANNEL_LEN_MAX;
use herald_store::deliveries::LeasedRow;
use herald_store::holds::{HoldRow, delivery_hold_leased, hold_add, hold_remove, holds_list};
use herald_store::{Conn, StoreError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a worker's copy of the holds (and of the destination limits) serves before it
/// reads them again.
pub const HOLDS_MAX_AGE: Duration = Duration::from_secs(1);

/// A hold as the library shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub scope: HoldScope,
    pub created_ms: i64,
    pub actor: String,
}

/// What placing or releasing a hold did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldReport {
    /// The scope as stored (a destination lowercased, a tenant id as herald writes it).
    pub scope: HoldScope,
    /// `false`: the scope was held already (placing) or was not held (releasing).
    pub changed: bool,
    /// Pending deliveries held (placing) or released (releasing) now.
    pub deliveries: u64,
}

/// What a handle's workers keep of a table they check every lease against (the holds,
/// the destination limits): read again when older than [`HOLDS_MAX_AGE`], at once after a
/// change through this handle.
#[derive(Debug)]
pub(crate) struct Fresh<T> {
    cached: Mutex<Option<(Instant, Arc<T>)>>,
}

impl<T> Default for Fresh<T> {
    fn default() -> Self {
        Fresh { cached: Mutex::new(None) }
    }
}

impl<T> Fresh<T> {
    /// The copy kept, or `None` when it is older than [`HOLDS_MAX_AGE`].
    pub(crate) fn fresh(&self) -> Option<Arc<T>> {
        let cached = self.cached.lock().ok()?;
        cached.as_ref().filter(|(at, _)| at.elapsed() < HOLDS_MAX_AGE).map(|(_, h)| h.clone())
    }

    pub(crate) fn store(&self, value: Arc<T>) {
        if let Ok(mut cached) = self.cached.lock() {
            *cached = Some((Instant::now(), value));
        }
    }

    pub(crate) fn forget(&self) {
        if let Ok(mut cached) = self.cached.lock() {
            *cached = None;
        }
    }
}

/// The leased `rows` not in a held scope; those in one go back, held, in the lease's own
/// transaction (`conn`), so no attempt is spent and nothing is sent. `cached`: the worker's
/// copy of the holds, `None` when stale — then they are read here, and returned to be kept.
pub(crate) async fn hold_leased(
    mut conn: Conn<'_>,
    rows: Vec<LeasedRow>,
    cached: Option<Arc<Vec<HoldScope>>>,
    worker: &str,
) -> Result<(Vec<LeasedRow>, Option<Arc<Vec<HoldScope>>>), StoreError> {
    let (holds, read) = match cached {
        Some(holds) => (holds, None),
        None if rows.is_empty() => return Ok((rows, None)),
        None => {
            let read: Arc<Vec<HoldScope>> =
                Arc::new(holds_list(conn.reborrow()).await?.into_iter().map(|h| h.scope).collect());
            (read.clone(), Some(read))
        }
    };
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows {
        let d = &row.delivery;
        if holds.iter().any(|h| h.covers(d.tenant_id, &d.channel, &d.recipient)) {
            delivery_hold_leased(conn.reborrow(), d.id, worker, d.attempts).await?;
        } else {
            kept.push(row);
        }
    }
    Ok((kept, read))
}

impl Herald {
    /// Holds `scope`: its pending deliveries wait, no attempt spent, until
    /// [`Herald::release_hold`]. `actor` says who placed it (shown with it).
    pub async fn hold(&self, scope: &HoldScope, actor: &str) -> Result<HoldReport, Error> {
        let scope = self.checked(scope).await?;
        let now = self.clock().wall_ms();
        let actor = actor.chars().take(64).collect::<String>();
        let (changed, deliveries) = self
            .transaction(|tx| {
                let (scope, actor) = (scope.clone(), actor.clone());
                Box::pin(async move { Ok(hold_add(tx.conn(), &scope, now, &actor).await?) })
            })
            .await?
            .value;
        self.holds.forget();
        Ok(HoldReport { scope, changed, deliveries })
    }

    /// Releases `scope`: what it held is due again when it was due (a delivery in another
    /// held scope is held again when a worker leases it).
    pub async fn release_hold(&self, scope: &HoldScope) -> Result<HoldReport, Error> {
        let scope = self.checked(scope).await?;
        let (changed, deliveries) = self
            .transaction(|tx| {
                let scope = scope.clone();
                Box::pin(async move { Ok(hold_remove(tx.conn(), &scope).await?) })
            })
            .await?
            .value;
        self.holds.forget();
        if deliveries > 0 {
            self.wake().soon();
        }
        Ok(HoldReport { scope, changed, deliveries })
    }

    /// Every hold, oldest first; `tenant`'s own and those over every tenant when given.
    pub async fn holds(&self, tenant: Option<TenantId>) -> Result<Vec<Hold>, Error> {
        let rows: Vec<HoldRow> =
            self.read(|conn, _| Box::pin(async move { holds_list(conn).await })).await?;
        Ok(rows
            .into_iter()
            .filter(|r| match tenant {
                None => true,
                Some(t) => {
                    r.scope.tenant.is_none_or(|s| s == t.as_uuid())
                        && (r.scope.kind != HoldKind::Tenant || r.scope.value == t.to_string())
                }
            })
            .map(|r| Hold { scope: r.scope, created_ms: r.created_ms, actor: r.actor })
            .collect())
    }

    /// The scope as stored: a channel herald's rules allow, a tenant that exists (its id
    /// written as herald writes it), a destination lowercased.
    async fn checked(&self, scope: &HoldScope) -> Result<HoldScope, Error> {
        let value = match scope.kind {
            HoldKind::Channel => {
                herald_core::ident::check("channel", &scope.value, CHANNEL_LEN_MAX)
                    .map_err(|e| Error::invalid_field("value", e.code(), e.to_string()))?;
                scope.value.clone()
            }
            HoldKind::Tenant => {
                let tenant: TenantId = scope.value.parse().map_err(|_| {
                    Error::invalid_field("value", "not_a_uuid", "a tenant hold names a tenant id")
                })?;
                self.tenant_name(tenant).await?;
                tenant.to_string()
            }
            HoldKind::Destination => check_destination(&scope.value)
                .map_err(|m| Error::invalid_field("value", "not_a_destination", m))?,
        };
        if let Some(tenant) = scope.tenant {
            self.tenant_name(TenantId::from_uuid(tenant)).await?;
        }
        Ok(HoldScope { kind: scope.kind, value, tenant: scope.tenant })
    }
}
