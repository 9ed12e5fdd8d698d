//! Opaque keyset cursors, bound to the filters they were issued for: a cursor is the
//! last id of a page plus a digest of its filters (state, channel, and the dashboard's
//! error code and prefixes); presented with other filters it is refused rather than
//! silently giving a wrong page.

use base64::Engine as _;
use sha2::{Digest, Sha256};
use uuid::Uuid;

const ENGINE: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The filters of a page, in a fixed order; `None` for one not given.
pub type Filters<'a> = [Option<&'a str>];

fn filters_digest(filters: &Filters<'_>) -> [u8; 8] {
    let text = filters.iter().map(|f| f.unwrap_or("")).collect::<Vec<_>>().join("\u{0}");
    let digest = Sha256::digest(text.as_bytes());
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

pub fn encode(last: Uuid, filters: &Filters<'_>) -> String {
    let mut bytes = Vec::with_capacity(24);
    bytes.extend_from_slice(last.as_bytes());
    bytes.extend_from_slice(&filters_digest(filters));
    ENGINE.encode(bytes)
}

/// Why a cursor was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorError {
    Malformed,
    OtherFilters,
}

pub fn decode(cursor: &str, filters: &Filters<'_>) -> Result<Uuid, CursorError> {
    if cursor.len() > 64 {
        return Err(CursorError::Malformed);
    }
    let bytes = ENGINE.decode(cursor).map_err(|_| CursorError::Malformed)?;
    if bytes.len() != 24 {
        return Err(CursorError::Malformed);
    }
    if bytes[16..] != filters_digest(filters) {
        return Err(CursorError::OtherFilters);
    }
    Uuid::from_slice(&bytes[..16]).map_err(|_| CursorError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bind_to_filters() {
        let id = Uuid::now_v7();
        let c = encode(id, &[Some("sent"), None]);
        assert_eq!(decode(&c, &[Some("sent"), None]), Ok(id));
        assert_eq!(decode(&c, &[Some("failed"), None]), Err(CursorError::OtherFilters));
        assert_eq!(decode(&c, &[Some("sent"), Some("email")]), Err(CursorError::OtherFilters));
        for bad in ["", "!!", "AAAA", &"A".repeat(100)] {
            assert_eq!(decode(bad, &[None, None]), Err(CursorError::Malformed), "{bad:?}");
        }
    }
}
