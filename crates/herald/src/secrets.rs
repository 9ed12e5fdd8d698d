//! Secrets of the server's own (`herald_secrets`): random, made by the first process that
//! needs one, shared by every process on the database, replaced on an operator's word.
//! Never derived from a credential: the dashboard's sessions were once signed under
//! HMAC(admin key, a constant), so a tenant holding its own cookie could guess the admin
//! key offline and forge an admin session (issue 37).

use crate::error::Error;
use crate::handle::Herald;
use herald_store::settings::{secret, secret_replace};

/// The secret the dashboard signs its sessions and CSRF tokens with.
const UI_SESSION: &str = "ui_session";

fn random() -> Result<[u8; 32], Error> {
    let mut fresh = [0u8; 32];
    getrandom::fill(&mut fresh)
        .map_err(|e| Error::app(format!("no randomness for a new secret: {e}")))?;
    Ok(fresh)
}

impl Herald {
    /// The dashboard's session secret: the one on the database, or a new random one kept
    /// there if none is yet.
    pub async fn ui_session_secret(&self) -> Result<[u8; 32], Error> {
        let fresh = random()?;
        let kept = self
            .autocommit(|conn, _| Box::pin(async move { secret(conn, UI_SESSION, fresh).await }))
            .await?;
        <[u8; 32]>::try_from(kept.as_slice())
            .map_err(|_| Error::app("herald_secrets.ui_session is not 32 bytes"))
    }

    /// Replaces the dashboard's session secret with a new random one: every session ends
    /// (in a running server within [`crate::SETTINGS_REFRESH`], when it reads it again).
    pub async fn ui_session_secret_rotate(&self) -> Result<(), Error> {
        let fresh = random()?;
        self.autocommit(|conn, _| {
            Box::pin(async move { secret_replace(conn, UI_SESSION, fresh).await })
        })
        .await
    }
}
