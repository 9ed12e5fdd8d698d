//! Operations on deliveries and quotas that are not the hot path: tenants, grants,
//! reading, replay, cancel. Each write runs in its own runner transaction; reads run
//! outside one (`Herald::read`), so on SQLite they never take the write lock.

use crate::delivery::{Attempt, Delivery};
use crate::error::Error;
use crate::keys::{NewApiKey, mint, minted_store};
use crate::runner::Herald;
use base64::Engine as _;
use herald_core::limits::{GRANT_MAX, QUOTA_GRANTED_MAX, QUOTA_KEY_LEN_MAX};
use herald_store::deliveries::{
    Change, delivery_attempts, delivery_cancel, delivery_get, delivery_replay,
};
use herald_store::quota::{Grant, QuotaAccount, quota_accounts, quota_grant};
use herald_store::tenants::tenant_insert;
use uuid::Uuid;

/// A tenant as created, with its first API key (both secrets are shown once).
#[derive(Clone, PartialEq, Eq)]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    /// The Standard Webhooks signing secret, `whsec_` + base64 of 32 random bytes.
    pub webhook_secret: String,
    /// The tenant's first API key, stored in the transaction that created the tenant.
    pub api_key: NewApiKey,
}

/// The secrets print as `***`.
impl std::fmt::Debug for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenant")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("webhook_secret", &herald_core::Redacted)
            .field("api_key", &self.api_key)
            .finish()
    }
}

/// 32 bytes from the operating system's CSPRNG, base64.
pub(crate) fn random_secret() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::app(format!("no randomness: {e}")))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A new Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes.
pub fn new_webhook_secret() -> Result<String, Error> {
    Ok(format!("whsec_{}", random_secret()?))
}

impl Herald {
    /// Creates a tenant and its first API key, in one transaction: a tenant never exists
    /// without a key, and a failed call leaves nothing behind, so it can simply be
    /// repeated. The name must be unique ([`Error::TenantExists`], nothing written).
    pub async fn tenant_create(&self, name: &str) -> Result<Tenant, Error> {
        let name = name.trim();
        if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
            return Err(Error::Invalid("tenant name must be 1 to 200 printable bytes".into()));
        }
        let minted = mint()?;
        let tenant = Tenant {
            id: Uuid::now_v7(),
            name: name.to_string(),
            webhook_secret: new_webhook_secret()?,
            api_key: minted.key.clone(),
        };
        let now = self.clock().now_ms();
        let (t, m) = (&tenant, &minted);
        let created = self
            .transaction(|tx| {
                Box::pin(async move {
                    if !tenant_insert(tx.conn(), t.id, &t.name, &t.webhook_secret).await? {
                        return Ok(false);
                    }
                    minted_store(tx.conn(), t.id, m, now).await?;
                    Ok(true)
                })
            })
            .await?
            .value;
        if !created {
            return Err(Error::TenantExists { name: name.to_string() });
        }
        Ok(tenant)
    }

    /// Grants `amount` units on (tenant, quota_key). With an idempotency key (scoped to
    /// the account) a retried grant counts once: returns whether this call added the
    /// units. The same key with another amount is `GrantKeyReused`, a grant that would
    /// take the granted total past `QUOTA_GRANTED_MAX` is `GrantOverLimit`; neither
    /// changes anything.
    pub async fn quota_grant(
        &self,
        tenant: Uuid,
        quota_key: &str,
        amount: i64,
        idempotency_key: Option<&str>,
    ) -> Result<bool, Error> {
        if !(1..=GRANT_MAX).contains(&amount) {
            return Err(Error::Invalid(format!("amount must be between 1 and {GRANT_MAX}")));
        }
        if quota_key.is_empty()
            || quota_key.len() > QUOTA_KEY_LEN_MAX
            || quota_key.chars().any(char::is_control)
        {
            return Err(Error::Invalid(format!(
                "quota_key must be 1 to {QUOTA_KEY_LEN_MAX} bytes without control characters"
            )));
        }
        let now = self.clock().now_ms();
        let (key, idem) = (quota_key.to_string(), idempotency_key.map(str::to_string));
        self.transaction(|tx| {
            let (key, idem) = (key.clone(), idem.clone());
            Box::pin(async move {
                let conn = tx.conn();
                if !herald_store::tenants::tenant_exists(conn, tenant).await? {
                    return Err(Error::UnknownTenant);
                }
                match quota_grant(tx.conn(), tenant, &key, amount, idem.as_deref(), now).await? {
                    Grant::Applied => Ok(true),
                    Grant::Repeated => Ok(false),
                    Grant::KeyReused { amount_first } => {
                        Err(Error::GrantKeyReused { quota_key: key, amount, amount_first })
                    }
                    Grant::OverLimit { granted } => Err(Error::GrantOverLimit {
                        quota_key: key,
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
    pub async fn quotas(&self, tenant: Uuid) -> Result<Vec<QuotaAccount>, Error> {
        self.read(|conn, _| Box::pin(async move { quota_accounts(conn, tenant).await })).await
    }

    /// One of a tenant's deliveries; another tenant's is `NotFound`.
    pub async fn delivery(&self, tenant: Uuid, id: Uuid) -> Result<Delivery, Error> {
        self.read(|conn, _| {
            Box::pin(async move { delivery_get(conn, Some(tenant), id, false).await })
        })
        .await?
        .map(Delivery::from)
        .ok_or(Error::NotFound)
    }

    /// A delivery's attempts, oldest first.
    pub async fn attempts(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Attempt>, Error> {
        let attempts = self
            .read(|mut conn, _| {
                Box::pin(async move {
                    if delivery_get(conn.reborrow(), Some(tenant), id, false).await?.is_none() {
                        return Ok(None);
                    }
                    Ok(Some(delivery_attempts(conn, id).await?))
                })
            })
            .await?
            .ok_or(Error::NotFound)?;
        Ok(attempts.into_iter().map(Attempt::from).collect())
    }

    /// Replays a failed or cancelled delivery: same row, reservation seq + 1, a fresh
    /// attempt budget.
    pub async fn replay(&self, tenant: Uuid, id: Uuid) -> Result<Delivery, Error> {
        let now = self.clock().now_ms();
        let change = self
            .transaction(|tx| {
                Box::pin(async move { Ok(delivery_replay(tx.conn(), tenant, id, now).await?) })
            })
            .await?
            .value;
        let delivery = changed(change, "replay")?;
        self.wake().soon();
        Ok(delivery)
    }

    /// Cancels a pending delivery and releases its reservation.
    pub async fn cancel(&self, tenant: Uuid, id: Uuid) -> Result<Delivery, Error> {
        let now = self.clock().now_ms();
        let change = self
            .transaction(|tx| {
                Box::pin(async move { Ok(delivery_cancel(tx.conn(), tenant, id, now).await?) })
            })
            .await?
            .value;
        changed(change, "cancel")
    }
}

fn changed(change: Change, operation: &'static str) -> Result<Delivery, Error> {
    match change {
        Change::Done(row) => Ok((*row).into()),
        Change::NotFound => Err(Error::NotFound),
        Change::WrongState(state) => Err(Error::WrongState { state, operation }),
        Change::QuotaExhausted(quota_key) => Err(Error::QuotaExhausted { quota_key }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_webhook_secret() {
        let secret = new_webhook_secret().unwrap_or_default();
        assert!(secret.starts_with("whsec_"));
        let key = NewApiKey { key_id: "0123456789abcdef".into(), plaintext: "hk_0_k3y".into() };
        let tenant =
            Tenant { id: Uuid::nil(), name: "acme".into(), webhook_secret: secret, api_key: key };
        let shown = format!("{tenant:?}");
        assert!(shown.contains("acme") && !shown.contains("whsec_"), "{shown}");
        assert!(shown.contains("0123456789abcdef") && !shown.contains("k3y"), "{shown}");
    }
}
