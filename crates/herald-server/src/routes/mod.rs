//! The routes, one file per resource.

pub mod admin;
pub mod deliveries;
pub mod destinations;
pub mod holds;
pub mod system;

use crate::error::ApiError;
use uuid::Uuid;

/// The tenant a read or action is about. `own`: the caller's tenant (`None`: the admin,
/// who may name any tenant or none); `named`: the tenant the request names. A tenant
/// naming another gets a 404, as on `/v1`.
pub(crate) fn scoped(
    own: Option<herald::TenantId>,
    named: Option<&str>,
) -> Result<Option<herald::TenantId>, ApiError> {
    let named = named.map(|raw| path_id::<herald::TenantId>(raw, "tenant")).transpose()?;
    match (own, named) {
        (None, named) => Ok(named),
        (Some(own), None) => Ok(Some(own)),
        (Some(own), Some(named)) if named == own => Ok(Some(own)),
        (Some(_), Some(_)) => Err(ApiError::not_found("tenant")),
    }
}

/// A delivery or tenant id from the path; malformed is "not found" (no hint either way).
pub(crate) fn path_id<T: From<Uuid>>(raw: &str, what: &str) -> Result<T, ApiError> {
    Uuid::try_parse(raw).map(T::from).map_err(|_| ApiError::not_found(what))
}
