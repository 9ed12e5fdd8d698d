//! Validated identifiers for receipts: a scope (what kind of operation) and an operation
//! id (which one). Both are checked once at the boundary, so the store never sees an empty
//! or oversized key.

use crate::limits::{OPERATION_ID_LEN_MAX, OPERATION_KEY_LEN_MAX, SCOPE_LEN_MAX};
use std::fmt;

/// Why an identifier was refused. `what` is the field's name as every face spells it
/// (`scope`, `operation_id`, `operation_key`), and [`IdentError::code`] the reason's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentError {
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("{what} is {len} bytes long, the limit is {max}")]
    TooLong { what: &'static str, len: usize, max: usize },
    #[error("{what} must not contain control characters")]
    ControlCharacter { what: &'static str },
}

impl IdentError {
    /// The field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            IdentError::Empty { what }
            | IdentError::TooLong { what, .. }
            | IdentError::ControlCharacter { what } => what,
        }
    }

    /// The reason, in the vocabulary every face shares (the SQL API's `code`).
    pub fn code(&self) -> &'static str {
        match self {
            IdentError::Empty { .. } => "empty",
            IdentError::TooLong { .. } => "too_long",
            IdentError::ControlCharacter { .. } => "control_character",
        }
    }
}

/// The bidirectional formatting characters (Unicode Bidi_Control): shown, they reorder the
/// text around them, so `order-17\u{202E}gpj.exe` reads as another key in a log line or on
/// the dashboard than the one stored. Text that names something refuses them with the
/// control characters.
pub const BIDI_CONTROLS: &[char] = &[
    '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}',
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
];

/// Whether text that names something may not hold `c`: a control character (Unicode Cc)
/// or a bidirectional formatting character ([`BIDI_CONTROLS`]).
pub fn is_refused_in_names(c: char) -> bool {
    c.is_control() || BIDI_CONTROLS.contains(&c)
}

/// Text a client gave (a `User-Agent`, an address), as herald keeps it to show: what
/// names may not hold dropped, at most `max` characters.
pub fn shown(text: &str, max: usize) -> String {
    text.chars().filter(|c| !is_refused_in_names(*c)).take(max).collect()
}

/// herald's rule for text that names something (a key, a recipient, a quota key): not
/// empty, at most `max` bytes, and no control character (Unicode Cc, NUL included: some
/// drivers cut a string at NUL, which would make two keys one identity) nor bidirectional
/// formatting character (display and log spoofing), both answered `control_character`.
pub fn check(what: &'static str, value: &str, max: usize) -> Result<(), IdentError> {
    if value.is_empty() {
        return Err(IdentError::Empty { what });
    }
    if value.len() > max {
        return Err(IdentError::TooLong { what, len: value.len(), max });
    }
    if value.chars().any(is_refused_in_names) {
        return Err(IdentError::ControlCharacter { what });
    }
    Ok(())
}

macro_rules! ident {
    ($(#[$doc:meta])* $name:ident, $what:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Result<Self, IdentError> {
                let value = value.into();
                check($what, &value, $max)?;
                Ok(Self(value))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdentError;
            fn try_from(value: &str) -> Result<Self, IdentError> {
                Self::new(value)
            }
        }
    };
}

ident!(
    /// The kind of operation a receipt guards, e.g. `invoice-adjustments`.
    Scope, "scope", SCOPE_LEN_MAX
);
ident!(
    /// The identity of one operation within a scope, stable across retries (an event id,
    /// never a key generated per attempt).
    OperationId, "operation_id", OPERATION_ID_LEN_MAX
);

ident!(
    /// A delivery's operation key: the caller's stable identity for one effect, unique per
    /// (tenant, channel) — an event id, never a key generated per attempt.
    OperationKey, "operation_key", OPERATION_KEY_LEN_MAX
);

/// A UUID that names one kind of thing, so that a tenant id and a delivery id never
/// compile in each other's place.
macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(uuid::Uuid);

        impl $name {
            /// A new id: a UUIDv7, so ids sort by creation time.
            pub fn new_v7() -> Self {
                Self(uuid::Uuid::now_v7())
            }

            pub const fn from_uuid(uuid: uuid::Uuid) -> Self {
                Self(uuid)
            }

            pub const fn as_uuid(self) -> uuid::Uuid {
                self.0
            }
        }

        impl From<uuid::Uuid> for $name {
            fn from(uuid: uuid::Uuid) -> Self {
                Self(uuid)
            }
        }

        impl From<$name> for uuid::Uuid {
            fn from(id: $name) -> uuid::Uuid {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, uuid::Error> {
                uuid::Uuid::try_parse(s).map(Self)
            }
        }
    };
}

uuid_id!(
    /// A tenant's id.
    TenantId
);

/// An API key's public id: 16 hexadecimal characters (the `<key id>` of
/// `hk_<key id>_<secret>`). Anything else names no key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(String);

impl KeyId {
    /// The key id, if `value` is shaped like one.
    pub fn parse(value: &str) -> Option<KeyId> {
        (value.len() == 16 && value.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| KeyId(value.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
uuid_id!(
    /// A delivery's id (UUIDv7: id order is creation order).
    DeliveryId
);

/// Bytes as lowercase hex: ids made of random bytes, a traceparent's fields, and SQL text
/// that must not be escaped (MariaDB's `UNHEX` reads it back).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_checked() {
        let cases: &[(&str, Result<(), IdentError>)] = &[
            ("evt-17", Ok(())),
            ("", Err(IdentError::Empty { what: "operation_id" })),
            ("a\nb", Err(IdentError::ControlCharacter { what: "operation_id" })),
            // A driver that cuts strings at NUL would make "evt\0-1" and "evt\0-2" one id.
            ("evt\u{0}-1", Err(IdentError::ControlCharacter { what: "operation_id" })),
            // Shown, a bidirectional override makes "evt-17\u{202E}gpj.exe" read "evt-17exe.jpg".
            ("evt-17\u{202E}gpj.exe", Err(IdentError::ControlCharacter { what: "operation_id" })),
            ("evt\u{2067}-1", Err(IdentError::ControlCharacter { what: "operation_id" })),
            ("evt\u{061C}-1", Err(IdentError::ControlCharacter { what: "operation_id" })),
            // Other format characters and any other script are text like the rest.
            ("évt-😀-\u{200D}-עברית", Ok(())),
        ];
        for (input, expect) in cases {
            assert_eq!(&OperationId::new(*input).map(|_| ()), expect, "input {input:?}");
        }
        let long = "x".repeat(OPERATION_ID_LEN_MAX + 1);
        assert_eq!(
            OperationId::new(long).map(|_| ()),
            Err(IdentError::TooLong { what: "operation_id", len: 256, max: 255 })
        );
        let refused = OperationId::new("").map(|_| ()).err();
        let named = refused.as_ref().map(|e| (e.field(), e.code()));
        assert_eq!(named, Some(("operation_id", "empty")));
        assert!(Scope::new("x".repeat(SCOPE_LEN_MAX)).is_ok());
    }
}
