//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`,
//! keyed with the base64-decoded part of a `whsec_` secret. Several signatures, space
//! separated, during a secret rotation. `verify` is what a receiver runs.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Why a secret or a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the secret is not whsec_ followed by base64")]
    BadSecret,
    #[error("the timestamp is not a number of seconds")]
    BadTimestamp,
    #[error("the timestamp is {0} s away from now, more than the tolerance")]
    Stale(i64),
    #[error("no signature matches")]
    NoMatch,
}

fn key(secret: &str) -> Result<Vec<u8>, SignatureError> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    B64.decode(encoded).map_err(|_| SignatureError::BadSecret)
}

fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Result<Vec<u8>, SignatureError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|_| SignatureError::BadSecret)?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(mac.finalize().into_bytes().to_vec())
}

/// `v1,<sig>` for each secret, space separated (the newest first).
pub fn sign(
    secrets: &[&str],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SignatureError> {
    let mut parts = Vec::with_capacity(secrets.len());
    for secret in secrets {
        parts.push(format!("v1,{}", B64.encode(mac(&key(secret)?, id, timestamp, body)?)));
    }
    Ok(parts.join(" "))
}

/// Checks a received webhook: the timestamp within `tolerance_s` of `now_s`, and one of
/// the `v1` signatures made with `secret`. Comparison is constant-time.
pub fn verify(
    secret: &str,
    id: &str,
    timestamp: &str,
    signatures: &str,
    body: &[u8],
    now_s: i64,
    tolerance_s: i64,
) -> Result<(), SignatureError> {
    let ts: i64 = timestamp.trim().parse().map_err(|_| SignatureError::BadTimestamp)?;
    if (now_s - ts).abs() > tolerance_s {
        return Err(SignatureError::Stale(now_s - ts));
    }
    let expected = mac(&key(secret)?, id, ts, body)?;
    let matched = signatures.split_whitespace().filter_map(|s| s.strip_prefix("v1,")).any(|sig| {
        B64.decode(sig).is_ok_and(|given| {
            given.len() == expected.len()
                && given.iter().zip(&expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
        })
    });
    if matched { Ok(()) } else { Err(SignatureError::NoMatch) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example published with the Standard Webhooks specification (its reference
    /// libraries' test vector).
    #[test]
    fn the_specification_example_verifies() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let timestamp = 1614265330;
        let body = br#"{"test": 2432232314}"#;
        let signature = sign(&[secret], id, timestamp, body).unwrap_or_default();
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert_eq!(verify(secret, id, "1614265330", &signature, body, timestamp, 300), Ok(()));
        assert_eq!(
            verify(secret, id, "1614265330", &signature, b"{}", timestamp, 300),
            Err(SignatureError::NoMatch)
        );
        assert_eq!(
            verify(secret, id, "1614265330", &signature, body, timestamp + 301, 300),
            Err(SignatureError::Stale(301))
        );
    }

    #[test]
    fn during_rotation_either_secret_verifies() {
        let (old, new) =
            ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kIHNlY3JldCBrZXkgMTIzNA==");
        let header = sign(&[new, old], "id", 10, b"x").unwrap_or_default();
        assert_eq!(header.split(' ').count(), 2);
        assert_eq!(verify(old, "id", "10", &header, b"x", 10, 5), Ok(()));
        assert_eq!(verify(new, "id", "10", &header, b"x", 10, 5), Ok(()));
        assert_eq!(sign(&["whsec_!!"], "id", 10, b"x"), Err(SignatureError::BadSecret));
    }
}
