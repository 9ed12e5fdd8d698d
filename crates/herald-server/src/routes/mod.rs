//! The routes, one file per resource.

pub mod admin;
pub mod deliveries;
pub mod system;

use crate::error::ApiError;
use uuid::Uuid;

/// A delivery or tenant id from the path; malformed is "not found" (no hint either way).
pub(crate) fn path_id<T: From<Uuid>>(raw: &str, what: &str) -> Result<T, ApiError> {
    Uuid::try_parse(raw).map(T::from).map_err(|_| ApiError::not_found(what))
}
