//! Operations on deliveries and quotas that are not the hot path: grants, reading one
//! delivery, replay, cancel. Each runs in its own runner transaction, and each is the
//! library's decision (may it be replayed? cancelled? does the grant apply?) applied by
//! the store — locking the account before the delivery row, the one lock order.

use crate::delivery::{Attempt, Delivery};
use crate::error::Error;
use crate::handle::Herald;
use herald_core::limits::{GRANT_MAX, QUOTA_GRANTED_MAX, QUOTA_KEY_LEN_MAX};
use herald_core::{DeliveryId, TenantId};
use herald_core::{DeliveryState, Grant, decide_grant};
use herald_store::Conn;
use herald_store::deliveries::{
    DeliveryRow, Settlement, StateChange, Transition, delivery_apply, delivery_attempts,
    delivery_get, delivery_replay_apply,
};
use herald_store::quota::{
    QuotaAccount, Settle, quota_accounts, quota_grant_apply, quota_grant_lock,
    quota_lock_reservations, quota_reserve,
};
use herald_store::tenants::tenant_exists;
use herald_store::workers::worker_releases;
use uuid::Uuid;

impl Herald {
    /// Grants `amount` units on (tenant, quota_key). With an idempotency key (scoped to
    /// the account) a retried grant counts once: returns whether this call added the
    /// units. The same key with another amount is `GrantKeyReused`, a grant that would
    /// take the granted total past `QUOTA_GRANTED_MAX` is `GrantOverLimit`; neither
    /// changes anything.
    pub async fn quota_grant(
        &self,
        tenant: TenantId,
        quota_key: &str,
        amount: i64,
        idempotency_key: Option<&str>,
    ) -> Result<bool, Error> {
        if !(1..=GRANT_MAX).contains(&amount) {
            return Err(Error::invalid_field(
                "amount",
                "out_of_range",
                format!("amount must be between 1 and {GRANT_MAX}"),
            ));
        }
        herald_core::ident::check("quota_key", quota_key, QUOTA_KEY_LEN_MAX)?;
        if let Some(key) = idempotency_key {
            herald_core::ident::check(
                "idempotency_key",
                key,
                herald_core::limits::IDEMPOTENCY_KEY_LEN_MAX,
            )?;
        }
        let (now, tenant) = (self.clock().now(), tenant.as_uuid());
        self.transaction(|tx| {
            Box::pin(async move {
                if !tenant_exists(tx.conn(), tenant).await? {
                    return Err(Error::UnknownTenant);
                }
                let found =
                    quota_grant_lock(tx.conn(), tenant, quota_key, idempotency_key, now).await?;
                match decide_grant(found.granted, amount, found.amount_first) {
                    Grant::Applied => {
                        quota_grant_apply(
                            tx.conn(),
                            tenant,
                            quota_key,
                            amount,
                            idempotency_key,
                            now,
                        )
                        .await?;
                        Ok(true)
                    }
                    Grant::Repeated => Ok(false),
                    Grant::KeyReused { amount_first } => Err(Error::GrantKeyReused {
                        quota_key: quota_key.to_string(),
                        amount,
                        amount_first,
                    }),
                    Grant::OverLimit { granted } => Err(Error::GrantOverLimit {
                        quota_key: quota_key.to_string(),
                        amount,
                        granted,
                        limit: QUOTA_GRANTED_MAX,
                    }),
                }
            })
        })
        .await
        .map(|c| c.value)
    }

    /// A tenant's quota accounts.
    pub async fn quotas(&self, tenant: TenantId) -> Result<Vec<QuotaAccount>, Error> {
        let tenant = tenant.as_uuid();
        self.read(|conn, _| Box::pin(async move { quota_accounts(conn, tenant).await })).await
    }

    /// One of a tenant's deliveries; another tenant's is `NotFound`.
    pub async fn delivery(&self, tenant: TenantId, id: DeliveryId) -> Result<Delivery, Error> {
        let (tenant, id) = (tenant.as_uuid(), id.as_uuid());
        self.read(|conn, _| {
            Box::pin(async move { delivery_get(conn, Some(tenant), id, false).await })
        })
        .await?
        .map(Delivery::try_from)
        .ok_or(Error::NotFound)?
    }

    /// A delivery's attempts, oldest first.
    pub async fn attempts(&self, tenant: TenantId, id: DeliveryId) -> Result<Vec<Attempt>, Error> {
        let (tenant, id) = (tenant.as_uuid(), id.as_uuid());
        let attempts = self
            .read(|mut conn, _| {
                Box::pin(async move {
                    if delivery_get(conn.reborrow(), Some(tenant), id, false).await?.is_none() {
                        return Ok(None);
                    }
                    let attempts = delivery_attempts(conn.reborrow(), id).await?;
                    let mut workers: Vec<&str> =
                        attempts.iter().map(|a| a.worker.as_str()).collect();
                    workers.sort_unstable();
                    workers.dedup();
                    let releases = worker_releases(conn, &workers).await?;
                    Ok(Some((attempts, releases)))
                })
            })
            .await?
            .ok_or(Error::NotFound)?;
        let (attempts, releases) = attempts;
        let releases: std::collections::HashMap<String, String> = releases.into_iter().collect();
        attempts
            .into_iter()
            .map(|row| {
                let release = releases.get(&row.worker).cloned();
                Attempt::try_from(row).map(|a| Attempt { release, ..a })
            })
            .collect()
    }

    /// Replays a failed or cancelled delivery: same row, reservation seq + 1, a fresh
    /// attempt budget.
    pub async fn replay(&self, tenant: TenantId, id: DeliveryId) -> Result<Delivery, Error> {
        let (now, tenant, id) = (self.clock().now(), tenant.as_uuid(), id.as_uuid());
        let delivery = self
            .transaction(|tx| {
                Box::pin(async move {
                    // The row only: a failed or cancelled delivery's reservation is
                    // settled, so nothing of its stripe is touched, and the new reservation
                    // may have to wait for the account's stripes (held stripes before
                    // that wait are what deadlocks two such waits). No worker touches a
                    // row in these states, so the row first waits for no one who waits
                    // for a stripe.
                    let row = delivery_get(tx.conn(), Some(tenant), id, true)
                        .await?
                        .ok_or(Error::NotFound)?;
                    if !row.state.can_replay() {
                        return Err(wrong_state(row.state, "replay"));
                    }
                    let seq = row.reservation_seq + 1;
                    if row.cost > 0
                        && !quota_reserve(tx.conn(), tenant, &row.quota_key, row.cost, id, seq, now)
                            .await?
                    {
                        return Err(Error::QuotaExhausted { quota_key: row.quota_key });
                    }
                    delivery_replay_apply(tx.conn(), id, seq, now).await?;
                    reread(tx.conn(), tenant, id).await
                })
            })
            .await?
            .value;
        self.wake().soon();
        Ok(delivery)
    }

    /// Cancels a pending delivery and releases its reservation.
    pub async fn cancel(&self, tenant: TenantId, id: DeliveryId) -> Result<Delivery, Error> {
        let (now, tenant, id) = (self.clock().now(), tenant.as_uuid(), id.as_uuid());
        self.transaction(|tx| {
            Box::pin(async move {
                let row = locked(tx.conn(), tenant, id).await?;
                if !row.state.can_cancel() {
                    return Err(wrong_state(row.state, "cancel"));
                }
                let settle = Settlement {
                    tenant_id: tenant,
                    quota_key: &row.quota_key,
                    cost: row.cost,
                    reservation_seq: row.reservation_seq,
                    settle: Settle::Release,
                };
                let cancel = Transition {
                    id,
                    state: Some(StateChange::Cancelled),
                    settle: Some(settle),
                    attempt: None,
                    now,
                };
                delivery_apply(tx.conn(), &cancel).await?;
                reread(tx.conn(), tenant, id).await
            })
        })
        .await
        .map(|c| c.value)
    }
}

/// The tenant's delivery, locked in the one lock order: its reservation's stripe first,
/// then its row. The stripe is found by an unlocked read.
async fn locked(mut conn: Conn<'_>, tenant: Uuid, id: Uuid) -> Result<DeliveryRow, Error> {
    let Some(row) = delivery_get(conn.reborrow(), Some(tenant), id, false).await? else {
        return Err(Error::NotFound);
    };
    quota_lock_reservations(conn.reborrow(), &[row.id], &[]).await?;
    delivery_get(conn, Some(tenant), id, true).await?.ok_or(Error::NotFound)
}

async fn reread(conn: Conn<'_>, tenant: Uuid, id: Uuid) -> Result<Delivery, Error> {
    let row: Option<DeliveryRow> = delivery_get(conn, Some(tenant), id, false).await?;
    row.map(Delivery::try_from).ok_or(Error::NotFound)?
}

fn wrong_state(state: DeliveryState, operation: &'static str) -> Error {
    Error::WrongState { state, operation }
}
