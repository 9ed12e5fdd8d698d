//! Tenants: creating one with its first API key, in one transaction, and its webhook
//! signing secret.

use crate::error::Error;
use crate::handle::Herald;
use crate::keys::{NewApiKey, mint, minted_store};
use base64::Engine as _;
use herald_core::TenantId;
use herald_core::limits::TENANT_NAME_LEN_MAX;
use herald_store::tenants::{tenant_insert, tenant_rotate_secret};

/// A tenant as created, with its first API key (both secrets are shown once).
#[derive(Clone, PartialEq, Eq)]
pub struct Tenant {
    pub id: TenantId,
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
        herald_core::ident::check("name", name, TENANT_NAME_LEN_MAX)?;
        let minted = mint()?;
        let tenant = Tenant {
            id: TenantId::new_v7(),
            name: name.to_string(),
            webhook_secret: new_webhook_secret()?,
            api_key: minted.key.clone(),
        };
        let now = self.clock().now();
        let (t, m) = (&tenant, &minted);
        let created = self
            .transaction(|tx| {
                Box::pin(async move {
                    if !tenant_insert(tx.conn(), t.id.as_uuid(), &t.name, &t.webhook_secret).await?
                    {
                        return Ok(false);
                    }
                    minted_store(tx.conn(), t.id.as_uuid(), m, now).await?;
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

    /// Gives the tenant a new webhook signing secret, returned once; the previous one still
    /// verifies, so receivers can switch over (the signature carries both). `NotFound`
    /// when there is no such tenant.
    pub async fn webhook_secret_rotate(&self, tenant: TenantId) -> Result<String, Error> {
        let secret = new_webhook_secret()?;
        let s = secret.as_str();
        let rotated = self
            .transaction(|tx| {
                Box::pin(
                    async move { Ok(tenant_rotate_secret(tx.conn(), tenant.as_uuid(), s).await?) },
                )
            })
            .await?
            .value;
        if rotated { Ok(secret) } else { Err(Error::NotFound) }
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_webhook_secret() {
        let secret = new_webhook_secret().unwrap_or_default();
        assert!(secret.starts_with("whsec_"));
        let key_id = herald_core::KeyId::parse("0123456789abcdef").unwrap_or_else(|| panic!("hex"));
        let key = NewApiKey { key_id, plaintext: "hk_0_k3y".into() };
        let tenant = Tenant {
            id: TenantId::from_uuid(uuid::Uuid::nil()),
            name: "acme".into(),
            webhook_secret: secret,
            api_key: key,
        };
        let shown = format!("{tenant:?}");
        assert!(shown.contains("acme") && !shown.contains("whsec_"), "{shown}");
        assert!(shown.contains("0123456789abcdef") && !shown.contains("k3y"), "{shown}");
    }
}
