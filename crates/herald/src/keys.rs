//! Looking up an API key, on every authenticated request: one read, no transaction.

use crate::error::Error;
use crate::handle::Herald;
use herald_store::keys::{KeyRow, api_key_lookup};

impl Herald {
    /// The stored key with this public key id, if any (revoked ones included: the caller
    /// decides). Retried on a fresh connection when one breaks; [`Error::Busy`] when the
    /// pool has none to give.
    pub async fn api_key(&self, key_id: &str) -> Result<Option<KeyRow>, Error> {
        self.read(|conn, _| Box::pin(async move { api_key_lookup(conn, key_id).await })).await
    }
}
