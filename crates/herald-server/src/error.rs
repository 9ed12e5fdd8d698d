//! HTTP errors: always JSON `{"error": {"code", "message"}}`, a status from SPEC.md, and
//! never an internal detail (a database error is logged, the client sees "internal"). A
//! 400 that refuses one field of a request also says which (`field`) and why (`reason`),
//! in the vocabulary the SQL API and the PHP package use (README.md, "Refusal codes").

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Seconds a client is asked to wait (`Retry-After`) after a 503: long enough for a pool
/// to free a connection or a broken one to be replaced, short enough not to idle.
pub const RETRY_AFTER_BUSY_SECS: u32 = 1;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// The request's field at fault, for a 400 that refuses one.
    pub field: Option<&'static str>,
    /// Why that field was refused (`empty`, `too_long`, `control_character`, ...).
    pub reason: Option<&'static str>,
    /// `Retry-After` in seconds, where the answer says when to come back (a 503 without it
    /// says the busy default).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            reason: None,
            retry_after: None,
        }
    }
    /// The same answer with `Retry-After: secs`.
    pub fn retry_after(self, secs: u64) -> ApiError {
        ApiError { retry_after: Some(secs), ..self }
    }
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
    /// 400 `invalid_request` naming the field and the reason.
    pub fn invalid_field(
        field: &'static str,
        reason: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError { field: Some(field), reason: Some(reason), ..ApiError::invalid(message) }
    }
    pub fn unauthorized() -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "a valid API key is required")
    }
    pub fn forbidden() -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", "this call needs the admin key")
    }
    pub fn not_found(what: &str) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("{what} not found"))
    }
    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }
    pub fn internal() -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    }
    /// 503 `busy`: nothing was changed, retry after `Retry-After`.
    pub fn busy() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "the database was too busy to answer in time; nothing was changed, retry",
        )
    }
    /// 503 `storage_full`: the database's disk is full. Unlike `busy`, a retry succeeds
    /// only once the operator has made room, so the message names the cause.
    pub fn storage_full() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_full",
            "the database has no room to write (its disk is full); nothing was changed, \
             retry once room is made",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(field) = self.field {
            error["field"] = field.into();
        }
        if let Some(reason) = self.reason {
            error["reason"] = reason.into();
        }
        let body = json!({ "error": error });
        let mut response = (self.status, Json(body)).into_response();
        let retry_after = match self.retry_after {
            Some(secs) => Some(secs),
            None => (self.status == StatusCode::SERVICE_UNAVAILABLE)
                .then_some(u64::from(RETRY_AFTER_BUSY_SECS)),
        };
        if let Some(secs) = retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        response
    }
}

impl From<herald::Error> for ApiError {
    fn from(e: herald::Error) -> ApiError {
        use herald::Error as E;
        match e {
            E::Invalid(herald::Invalid { field: Some(field), code, message }) => {
                ApiError::invalid_field(field, code, message)
            }
            E::Invalid(invalid) => ApiError::invalid(invalid.message),
            E::IdempotencyKeyReused => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "this operation key was already used with a different request",
            ),
            // Grants: a reused key like a delivery's; an account past its limit is the
            // account's state refusing a well-formed request, like a wrong state.
            E::GrantKeyReused { .. } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                e.to_string(),
            ),
            E::GrantOverLimit { .. } | E::TenantExists { .. } => {
                ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            E::QuotaExhausted { quota_key } => ApiError::new(
                StatusCode::PAYMENT_REQUIRED,
                "quota_exhausted",
                if quota_key.is_empty() {
                    "not enough quota".to_string()
                } else {
                    format!("not enough quota on {quota_key:?}")
                },
            ),
            E::NotFound | E::UnknownTenant => ApiError::not_found("delivery"),
            E::WrongState { state, operation } => ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("the delivery is {state}: {operation} is not allowed"),
            ),
            E::CommitOutcomeUnknown { .. } => {
                tracing::warn!(error = %e, "the outcome of a write is unknown");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "outcome_unknown",
                    "the database did not confirm the write in time; it may have happened: \
                     send the same request again (same operation key) to learn its outcome",
                )
            }
            // The database refused the write for want of room and rolled it back (SQLite
            // undoes the statement, or at COMMIT the transaction): the server's state, not
            // the request, so never a 500, and the same request succeeds once room is made.
            E::Store(ref store) if store.class() == herald::ErrorClass::StorageFull => {
                tracing::warn!(error = %e, "the database has no room to write: its disk is full");
                ApiError::storage_full()
            }
            E::Busy { .. } => {
                busy_refused(&e);
                ApiError::busy()
            }
            E::DeadlineExceeded { .. } | E::AttemptsExhausted { .. } => {
                tracing::warn!(error = %e, "the database was too busy to answer in time");
                ApiError::busy()
            }
            other => {
                tracing::error!(error = %other, "request failed");
                ApiError::internal()
            }
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// Admission control's refusals (each counted in `herald_submits_total{result="busy"}`)
/// are logged at most once per [`BUSY_LOG_EVERY`], with how many there were: under
/// overload a line per refusal was thousands a second (4,112 in one bench phase of 3 s),
/// written when the machine had the least to spare.
fn busy_refused(e: &herald::Error) {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static REFUSED: AtomicU64 = AtomicU64::new(0);
    static LOGGED_AT_MS: AtomicU64 = AtomicU64::new(0);
    REFUSED.fetch_add(1, Relaxed);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let last = LOGGED_AT_MS.load(Relaxed);
    let every = u64::try_from(BUSY_LOG_EVERY.as_millis()).unwrap_or(u64::MAX);
    if now_ms.saturating_sub(last) >= every
        && LOGGED_AT_MS.compare_exchange(last, now_ms, Relaxed, Relaxed).is_ok()
    {
        let refused = REFUSED.swap(0, Relaxed);
        tracing::warn!(refused, error = %e, "submits refused busy by admission control since the last such line");
    }
}

/// The most often admission control's refusals are logged.
const BUSY_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;
    use herald::Error as E;
    use herald::StoreError;
    use std::time::Duration;

    fn timed_out() -> StoreError {
        StoreError::Database(herald::sqlx::Error::Io(std::io::ErrorKind::TimedOut.into()))
    }

    #[test]
    fn a_write_that_may_have_happened_says_so_and_one_that_did_not_says_retry() {
        let unknown = ApiError::from(E::CommitOutcomeUnknown { attempts: 1, source: timed_out() });
        assert_eq!(
            (unknown.status, unknown.code),
            (StatusCode::SERVICE_UNAVAILABLE, "outcome_unknown")
        );
        assert!(unknown.message.contains("same request again"), "{}", unknown.message);
        let busy = [
            E::DeadlineExceeded { deadline: Duration::from_secs(10), attempts: 2, last: None },
            E::AttemptsExhausted { attempts: 5, last: timed_out() },
            E::Busy { source: StoreError::Database(herald::sqlx::Error::PoolTimedOut) },
        ];
        for e in busy {
            let api = ApiError::from(e);
            assert_eq!((api.status, api.code), (StatusCode::SERVICE_UNAVAILABLE, "busy"));
            assert!(api.message.contains("nothing was changed"), "{}", api.message);
            let response = api.into_response();
            assert_eq!(response.headers()[axum::http::header::RETRY_AFTER], "1");
        }
        // Nothing of the cause reaches the client.
        assert!(!unknown.message.contains("timed out"), "{}", unknown.message);
    }

    /// A real SQLITE_FULL (an in-memory database capped by `max_page_count`) is a 503
    /// naming the full disk, with Retry-After, not a 500.
    #[tokio::test]
    #[allow(clippy::expect_used)] // a test whose setup fails fails
    async fn a_full_disk_is_503_storage_full() {
        use herald::sqlx::{self, Connection};
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:").await.expect("open");
        sqlx::raw_sql("CREATE TABLE t (x BLOB); PRAGMA max_page_count = 8")
            .execute(&mut conn)
            .await
            .expect("create a capped table");
        let full = sqlx::query("INSERT INTO t VALUES (zeroblob(65536))")
            .execute(&mut conn)
            .await
            .expect_err("an insert past max_page_count");
        let full = E::Store(StoreError::Database(full));
        assert!(full.is_unavailable(), "{full}");
        let api = ApiError::from(full);
        assert_eq!((api.status, api.code), (StatusCode::SERVICE_UNAVAILABLE, "storage_full"));
        assert!(api.message.contains("disk is full"), "{}", api.message);
        assert!(api.message.contains("nothing was changed"), "{}", api.message);
        let response = api.into_response();
        assert_eq!(response.headers()[axum::http::header::RETRY_AFTER], "1");
    }
}
