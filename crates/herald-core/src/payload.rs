//! A delivery's payload: JSON text, kept exactly as the submitter sent it — stored and
//! delivered with every byte intact (a webhook receiver gets the digits that were sent),
//! and checked against herald's JSON rules ([`crate::json`]) when it is submitted.

use crate::json::{self, JsonError, Value};
use std::fmt;

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Payload(String);

impl Payload {
    /// JSON text as the submitter wrote it. Nothing is checked here: a submit checks it,
    /// and refuses text that is not JSON herald accepts.
    pub fn from_text(text: impl Into<String>) -> Payload {
        Payload(text.into())
    }

    /// The text, byte for byte as it was given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// The text parsed by herald's rules (duplicate keys, NUL, lone surrogates, numbers
    /// beyond the limits and deep nesting are errors).
    pub fn parse(&self) -> Result<Value, JsonError> {
        json::parse(&self.0)
    }

    /// The text as a `serde_json::Value`, for code that reads fields. Numbers are as
    /// precise as this build's serde_json keeps them; send [`Payload::as_str`] to pass the
    /// payload on unchanged.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

/// serde_json's text for the value: whatever its numbers hold in this build (without
/// `arbitrary_precision`, an integer beyond `u64` is already a float in the `Value`). To
/// keep a number's digits exactly, build the payload from text.
impl From<serde_json::Value> for Payload {
    fn from(value: serde_json::Value) -> Payload {
        Payload(value.to_string())
    }
}

impl From<&serde_json::Value> for Payload {
    fn from(value: &serde_json::Value) -> Payload {
        Payload(value.to_string())
    }
}

/// Without the content: a payload is the tenant's data, and may hold secrets.
impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload(<{} bytes>)", self.0.len())
    }
}
