//! The delivery channels this process is configured for. (Built-in adapters: none yet —
//! webhook and email arrive with the channels issue; library users register their own
//! `herald::Channel`s in code.)

use crate::settings::Resolved;
use anyhow::Result;
use herald::Channel;
use std::sync::Arc;

pub fn configured(_settings: &Resolved) -> Result<Vec<(String, Arc<dyn Channel>)>> {
    Ok(Vec::new())
}
