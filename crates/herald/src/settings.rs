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
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The longest a submit waits for another's read of expired settings before reading them
/// itself: a read takes milliseconds; one that cannot get a connection must not hold every
/// other submit behind it.
const READ_TURN_WAIT: Duration = Duration::from_secs(1);

/// What a process last read, and when. Under load the settings must never expire for
/// every submit at once: past half of [`SETTINGS_REFRESH`] the first submit to notice
/// reads them again in the background while every submit uses what is held, and when they
/// have expired (an idle process) submits read them one at a time, the first read serving
/// the rest. Before, their expiry under thousands of HTTP submits in flight sent each of
/// them to the database for a pooled connection, starving the group commit's lanes: an
/// answer 10 s late (the lane's deadline) in the bench's open loop at twice capacity.
#[derive(Debug, Default)]
pub(crate) struct Cached {
    last: Mutex<Option<(Settings, Instant)>>,
    refreshing: AtomicBool,
    turn: tokio::sync::Mutex<()>,
}

impl Cached {
    fn fresh(&self) -> Option<Settings> {
        let cached = self.last.lock().unwrap_or_else(|p| p.into_inner());
        cached.filter(|(_, at)| at.elapsed() < SETTINGS_REFRESH).map(|(s, _)| s)
    }

    /// Whether the settings held are past half their refresh and no read of them is
    /// running: then the caller is the one to read them (and must call `refreshed`).
    fn take_refresh(&self) -> bool {
        let half = self
            .last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|(_, at)| at.elapsed() >= SETTINGS_REFRESH / 2);
        half && !self.refreshing.swap(true, Ordering::AcqRel)
    }

    fn refreshed(&self) {
        self.refreshing.store(false, Ordering::Release);
    }

    fn put(&self, settings: Settings) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((settings, Instant::now()));
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

    /// The settings read within [`SETTINGS_REFRESH`] (read again behind the caller past
    /// half of it), or [`Herald::settings`] now, one caller at a time.
    pub(crate) async fn settings_recent(&self) -> Result<Settings, Error> {
        if let Some(settings) = self.settings_held() {
            return Ok(settings);
        }
        let cache = self.settings_cache();
        let _turn = tokio::time::timeout(READ_TURN_WAIT, cache.turn.lock()).await.ok();
        match cache.fresh() {
            Some(settings) => Ok(settings), // read by the caller whose turn came first
            None => self.settings().await,
        }
    }

    /// The settings read within [`SETTINGS_REFRESH`], if any; past half of it, the first
    /// caller to notice sets off a read of them in the background.
    fn settings_held(&self) -> Option<Settings> {
        let cache = self.settings_cache();
        let settings = cache.fresh()?;
        if cache.take_refresh() {
            let herald = self.clone();
            tokio::spawn(async move {
                if let Err(e) = herald.settings().await {
                    tracing::debug!(error = %e, "reading the shared settings again failed");
                }
                herald.settings_cache().refreshed();
            });
        }
        Some(settings)
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
        if let Some(settings) = self.settings_held() {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    impl Cached {
        /// As if `by` had gone by since the last read.
        fn age(&self, by: Duration) {
            let mut last = self.last.lock().unwrap();
            if let Some((_, at)) = last.as_mut() {
                *at = at.checked_sub(by).unwrap();
            }
        }
    }

    #[test]
    fn past_half_the_refresh_one_caller_reads_again_and_all_use_what_is_held() {
        let cache = Cached::default();
        assert!(cache.fresh().is_none() && !cache.take_refresh(), "nothing held yet");
        let held = Settings { max_attempts: 8 };
        cache.put(held);
        assert!(!cache.take_refresh(), "fresh");
        cache.age(SETTINGS_REFRESH / 2);
        assert_eq!(cache.fresh(), Some(held), "still used");
        assert!(cache.take_refresh(), "the first past half reads again");
        assert!(!cache.take_refresh(), "one read at a time");
        cache.refreshed();
        assert!(cache.take_refresh(), "a read that ended without news: the next one tries");
        cache.refreshed();
        cache.put(Settings { max_attempts: 3 });
        assert!(!cache.take_refresh(), "read anew");
        cache.age(SETTINGS_REFRESH);
        assert_eq!(cache.fresh(), None, "the bound holds regardless");
    }
}
