//! The settings every herald process on one database shares: the defaults a submit
//! resolves before its fingerprint (`herald_settings`, one row). Two processes started
//! with different `HERALD_MAX_ATTEMPTS` therefore give one request one meaning, and a
//! repeat through either is a duplicate.
//!
//! The row is written once, by the first herald that needs it, from that process's
//! [`EngineOptions::max_attempts`] (the seed); from then on the database's value applies
//! and a process configured otherwise is told so ([`Herald::settings`]). An operator
//! changes it with [`Herald::settings_set`] (`herald settings set`); a running process
//! reads it again at most [`SETTINGS_REFRESH`] after its last read, so a change reaches
//! every process within that.
//!
//! [`EngineOptions::max_attempts`]: crate::EngineOptions::max_attempts

use crate::error::Error;
use crate::handle::Herald;
use herald_core::limits::DELIVERY_ATTEMPTS_MAX;
use herald_store::Conn;
use herald_store::settings::{SettingsRow, settings_get, settings_init, settings_set};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a process uses the settings it read before it reads them again.
pub const SETTINGS_REFRESH: Duration = Duration::from_secs(10);

/// The shared settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Attempts a delivery gets when its submit does not say.
    pub max_attempts: u32,
}

impl Settings {
    fn row(self) -> SettingsRow {
        SettingsRow { max_attempts: self.max_attempts as i32 }
    }

    fn from_row(row: SettingsRow) -> Result<Settings, Error> {
        match u32::try_from(row.max_attempts) {
            Ok(max_attempts) if (1..=DELIVERY_ATTEMPTS_MAX).contains(&max_attempts) => {
                Ok(Settings { max_attempts })
            }
            _ => Err(Error::app(format!(
                "herald_settings.max_attempts is {}, not between 1 and {DELIVERY_ATTEMPTS_MAX}",
                row.max_attempts
            ))),
        }
    }
}

/// What a process last read, and when.
#[derive(Debug, Default)]
pub(crate) struct Cached(Mutex<Option<(Settings, Instant)>>);

impl Cached {
    fn fresh(&self) -> Option<Settings> {
        let cached = self.0.lock().unwrap_or_else(|p| p.into_inner());
        cached.filter(|(_, at)| at.elapsed() < SETTINGS_REFRESH).map(|(s, _)| s)
    }

    fn put(&self, settings: Settings) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((settings, Instant::now()));
    }
}

impl Herald {
    /// The settings as the database holds them now, written from this process's options
    /// first if the database has none yet.
    pub async fn settings(&self) -> Result<Settings, Error> {
        let seed = self.seed().row();
        let row = self
            .autocommit(|mut conn, _| {
                Box::pin(async move {
                    match settings_get(conn.reborrow()).await? {
                        Some(row) => Ok(row),
                        None => settings_init(conn, seed).await,
                    }
                })
            })
            .await?;
        let settings = Settings::from_row(row)?;
        self.settings_cache().put(settings);
        Ok(settings)
    }

    /// The settings row as it is, without writing one (`None` before any process has).
    pub async fn settings_stored(&self) -> Result<Option<Settings>, Error> {
        let row = self.read(|conn, _| Box::pin(async move { settings_get(conn).await })).await?;
        row.map(Settings::from_row).transpose()
    }

    /// The settings read within [`SETTINGS_REFRESH`], or [`Herald::settings`] now.
    pub(crate) async fn settings_recent(&self) -> Result<Settings, Error> {
        match self.settings_cache().fresh() {
            Some(settings) => Ok(settings),
            None => self.settings().await,
        }
    }

    /// Replaces the shared settings. Other processes use the new ones within
    /// [`SETTINGS_REFRESH`]; a request that leaves a default out means what the settings
    /// say when it is submitted, so a repeat of one submitted before the change, without
    /// that field, is a different request.
    pub async fn settings_set(&self, settings: Settings) -> Result<Settings, Error> {
        Settings::from_row(settings.row()).map_err(|_| {
            Error::invalid(format!("max_attempts must be between 1 and {DELIVERY_ATTEMPTS_MAX}"))
        })?;
        let row = settings.row();
        self.autocommit(|conn, _| Box::pin(async move { settings_set(conn, row).await })).await?;
        self.settings_cache().put(settings);
        Ok(settings)
    }

    /// The settings a submit resolves its defaults from: the ones read within
    /// [`SETTINGS_REFRESH`], or read now on `conn` (the submit's own connection, inside its
    /// transaction when it has one), written from the seed if the database has none.
    pub(crate) async fn submit_settings(&self, conn: Conn<'_>) -> Result<Settings, Error> {
        if let Some(settings) = self.settings_cache().fresh() {
            return Ok(settings);
        }
        let mut conn = conn;
        let row = match settings_get(conn.reborrow()).await? {
            Some(row) => row,
            None => settings_init(conn, self.seed().row()).await?,
        };
        let settings = Settings::from_row(row)?;
        self.settings_cache().put(settings);
        Ok(settings)
    }

    fn seed(&self) -> Settings {
        Settings { max_attempts: self.options().max_attempts }
    }

    fn settings_cache(&self) -> &Cached {
        &self.settings
    }
}
