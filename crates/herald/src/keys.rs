//! API keys, `hk_<key id>_<secret>`: minting one (the only place a key is made, for the
//! HTTP API and the CLI alike), reading a presented one, and looking it up on every
//! authenticated request (one read, no transaction). The key id (public, 16 hex
//! characters) finds the row; the secret (32 random bytes, unpadded base64url) is stored
//! only as its SHA-256 — long and random, so a fast hash is enough and keeps the lookup
//! indexable. Neither the key nor its hash is ever logged.

use crate::error::Error;
use crate::handle::Herald;
use base64::Engine as _;
use herald_core::limits::API_KEY_LEN_MAX;
use herald_core::{KeyId, TenantId};
use herald_store::Conn;
use herald_store::keys::{KeyRow, api_key_insert, api_key_lookup, api_key_revoke};
use herald_store::tenants::tenant_exists;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// A key just minted and stored: its public id, and the whole key, which is shown to the
/// caller once and never stored.
#[derive(Clone, PartialEq, Eq)]
pub struct NewApiKey {
    pub key_id: KeyId,
    /// `hk_<key id>_<secret>`, what a client sends as `Authorization: Bearer …`.
    pub plaintext: String,
}

/// Only the public key id is shown: the key prints as `***`.
impl std::fmt::Debug for NewApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewApiKey")
            .field("key_id", &self.key_id)
            .field("plaintext", &herald_core::Redacted)
            .finish()
    }
}

/// A minted key and the digest of its secret, which is what is stored.
pub(crate) struct Minted {
    pub(crate) key: NewApiKey,
    secret_sha256: [u8; 32],
}

fn random<const N: usize>() -> Result<[u8; N], Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| Error::app(format!("no randomness: {e}")))?;
    Ok(bytes)
}

/// A new key from the operating system's CSPRNG: 8 bytes of key id, 32 of secret.
pub(crate) fn mint() -> Result<Minted, Error> {
    let id = herald_core::hex(&random::<8>()?);
    let key_id = KeyId::parse(&id).ok_or_else(|| Error::app("a minted key id is not hex"))?;
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random::<32>()?);
    Ok(Minted {
        key: NewApiKey { plaintext: format!("hk_{id}_{secret}"), key_id },
        secret_sha256: Sha256::digest(secret.as_bytes()).into(),
    })
}

/// Stores a minted key for `tenant` (which the caller has checked exists, in this
/// transaction).
pub(crate) async fn minted_store(
    conn: Conn<'_>,
    tenant: Uuid,
    minted: &Minted,
    now: herald_store::Now,
) -> Result<(), herald_store::StoreError> {
    api_key_insert(conn, minted.key.key_id.as_str(), tenant, &minted.secret_sha256, now).await
}

/// Splits a presented key into (key id, SHA-256 of its secret), for [`Herald::api_key`]
/// and a constant-time comparison; `None` if it is not shaped like a key herald mints.
pub fn api_key_parse(presented: &str) -> Option<(KeyId, [u8; 32])> {
    if presented.len() > API_KEY_LEN_MAX {
        return None;
    }
    let rest = presented.strip_prefix("hk_")?;
    let (id, secret) = rest.split_once('_')?;
    let id = KeyId::parse(id)?;
    if secret.is_empty() {
        return None;
    }
    Some((id, Sha256::digest(secret.as_bytes()).into()))
}

impl Herald {
    /// The stored key with this public key id, if any (revoked ones included: the caller
    /// decides). Retried on a fresh connection when one breaks; [`Error::Busy`] when the
    /// pool has none to give.
    pub async fn api_key(&self, key_id: &KeyId) -> Result<Option<KeyRow>, Error> {
        let key_id = key_id.as_str();
        self.read(|conn, _| Box::pin(async move { api_key_lookup(conn, key_id).await })).await
    }

    /// Mints another API key for `tenant` and stores it; the key is in the answer only.
    /// [`Error::UnknownTenant`] when there is no such tenant (nothing is stored).
    pub async fn api_key_create(&self, tenant: TenantId) -> Result<NewApiKey, Error> {
        let tenant = tenant.as_uuid();
        let minted = mint()?;
        let now = self.clock().now();
        let m = &minted;
        let created = self
            .transaction(|tx| {
                Box::pin(async move {
                    if !tenant_exists(tx.conn(), tenant).await? {
                        return Ok(false);
                    }
                    minted_store(tx.conn(), tenant, m, now).await?;
                    Ok(true)
                })
            })
            .await?
            .value;
        if !created {
            return Err(Error::UnknownTenant);
        }
        Ok(minted.key)
    }

    /// Revokes one of a tenant's keys (again: no change); `false` when the tenant has no
    /// key with this id.
    pub async fn api_key_revoke(&self, tenant: TenantId, key_id: &KeyId) -> Result<bool, Error> {
        let (now, tenant, key_id) = (self.clock().now(), tenant.as_uuid(), key_id.as_str());
        self.transaction(|tx| {
            Box::pin(async move { Ok(api_key_revoke(tx.conn(), tenant, key_id, now).await?) })
        })
        .await
        .map(|c| c.value)
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_parse_and_others_do_not() {
        let minted = mint().unwrap_or_else(|e| panic!("{e}"));
        let key = &minted.key;
        assert_eq!(api_key_parse(&key.plaintext), Some((key.key_id.clone(), minted.secret_sha256)));
        assert_eq!(key.plaintext.len(), 3 + 16 + 1 + 43, "{}", key.key_id);
        let too_long = format!("hk_0123456789abcdef_{}", "x".repeat(API_KEY_LEN_MAX));
        for bad in [
            "",
            "hk_",
            "hk_zz_x",
            "hk_0123456789abcdef_",
            "Bearer x",
            "hk_0123456789abcde_x",
            &too_long,
        ] {
            assert_eq!(api_key_parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn debug_hides_the_key() {
        let minted = mint().unwrap_or_else(|e| panic!("{e}"));
        let shown = format!("{:?}", minted.key);
        let secret = minted.key.plaintext.get(20..).unwrap_or_default();
        assert_eq!(secret.len(), 43);
        assert!(shown.contains(minted.key.key_id.as_str()) && !shown.contains(secret), "{shown}");
    }
}
