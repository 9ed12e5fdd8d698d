//! The email channel's second payload form: a message the application's mailer rendered
//! whole (RFC 5322: headers, parts, attachments), with its envelope.
//!
//! ```json
//! {"raw": "From: shop@example.com\r\nTo: …\r\n\r\nbody…",
//!  "envelope": {"from": "bounces@example.com", "to": ["a@example.com", "b@example.com"]}}
//! ```
//!
//! `raw` is the message as text (UTF-8; a message whose bytes are not, e.g. an 8-bit
//! Latin-1 body, goes as `raw_base64` instead). `envelope.to` lists every recipient the
//! relay is to deliver to (To, Cc and Bcc alike; default: the delivery's `to`), and
//! `envelope.from` the return path (default: `HERALD_SMTP_FROM`). The message is sent as
//! given, byte for byte, but for four things: its `Message-ID` becomes herald's (derived
//! from the delivery id, stable across attempts), a message without a `Date` gets the
//! attempt's (a client may leave both out, so that two renderings of one mail are the same
//! request), a `Bcc` field is removed (its addresses belong in `envelope.to`, never in what
//! every recipient reads), and a bare LF ends a line as CRLF, as SMTP requires.

use base64::Engine as _;
use lettre::Address;
use std::borrow::Cow;

/// Most envelope recipients of one message.
pub const RECIPIENTS_MAX: usize = 100;

/// A rendered message and its envelope, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEmail<'a> {
    pub message: Cow<'a, [u8]>,
    /// The return path (`MAIL FROM`); `None`: the channel's sender.
    pub sender: Option<Address>,
    /// `RCPT TO`; empty: the delivery's `to`.
    pub recipients: Vec<Address>,
}

impl<'a> RawEmail<'a> {
    /// Reads `{"raw" | "raw_base64", "envelope"?}`; the message says what is wrong.
    pub fn from_json(
        object: &'a serde_json::Map<String, serde_json::Value>,
    ) -> Result<RawEmail<'a>, String> {
        if let Some(unknown) =
            object.keys().find(|k| !matches!(k.as_str(), "raw" | "raw_base64" | "envelope"))
        {
            return Err(format!(
                "a rendered email payload has no field {unknown:?} (raw or raw_base64, envelope)"
            ));
        }
        let message: Cow<'a, [u8]> = match (object.get("raw"), object.get("raw_base64")) {
            (Some(serde_json::Value::String(raw)), None) => Cow::Borrowed(raw.as_bytes()),
            (None, Some(serde_json::Value::String(encoded))) => Cow::Owned(
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|e| format!("raw_base64 is not base64: {e}"))?,
            ),
            (Some(_), Some(_)) => return Err("give raw or raw_base64, not both".into()),
            _ => return Err("raw (or raw_base64) must be a string".into()),
        };
        check_head(&message)?;
        let (sender, recipients) = match object.get("envelope") {
            None | Some(serde_json::Value::Null) => (None, Vec::new()),
            Some(serde_json::Value::Object(envelope)) => envelope_of(envelope)?,
            Some(_) => return Err("envelope must be an object {from?, to?}".into()),
        };
        Ok(RawEmail { message, sender, recipients })
    }

    /// The bytes to send: herald's `Message-ID` in place of the message's own (or first,
    /// when it has none), `date` (RFC 5322) first when the message has no `Date`, no `Bcc`
    /// field, every line ended by CRLF; without the last line's CRLF, which the SMTP client
    /// writes before the closing dot.
    pub fn to_send(&self, message_id: &str, date: &str) -> Vec<u8> {
        let crlf = crlf_lines(&self.message);
        let (head_end, body_start) = head_bounds(&crlf);
        let mut out = Vec::with_capacity(crlf.len() + message_id.len() + 64);
        let ours = format!("Message-ID: {message_id}\r\n");
        let mut placed = false;
        let mut dated = false;
        for field in fields(&crlf[..head_end]) {
            match field_name(field) {
                Some(name) if name.eq_ignore_ascii_case(b"message-id") => {
                    if !placed {
                        out.extend_from_slice(ours.as_bytes());
                        placed = true;
                    }
                }
                Some(name) if name.eq_ignore_ascii_case(b"bcc") => {}
                Some(name) => {
                    dated |= name.eq_ignore_ascii_case(b"date");
                    out.extend_from_slice(field);
                }
                None => out.extend_from_slice(field),
            }
        }
        let mut first = String::new();
        if !placed {
            first.push_str(&ours);
        }
        if !dated {
            first.push_str(&format!("Date: {date}\r\n"));
        }
        out.splice(0..0, first.bytes());
        out.extend_from_slice(&crlf[head_end..body_start]);
        out.extend_from_slice(&crlf[body_start..]);
        if out.ends_with(b"\r\n") {
            out.truncate(out.len() - 2);
        }
        out
    }
}

fn envelope_of(
    envelope: &serde_json::Map<String, serde_json::Value>,
) -> Result<(Option<Address>, Vec<Address>), String> {
    if let Some(unknown) = envelope.keys().find(|k| !matches!(k.as_str(), "from" | "to")) {
        return Err(format!("an envelope has no field {unknown:?} (from, to)"));
    }
    let address = |what: &str, v: &serde_json::Value| -> Result<Address, String> {
        let text = v.as_str().ok_or(format!("{what} must be a string"))?;
        text.parse::<Address>().map_err(|e| format!("{what} {text:?} is not an address: {e}"))
    };
    let sender = match envelope.get("from") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(address("envelope.from", v)?),
    };
    let recipients = match envelope.get("to") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(list)) => {
            if list.is_empty() || list.len() > RECIPIENTS_MAX {
                return Err(format!(
                    "envelope.to lists 1 to {RECIPIENTS_MAX} addresses, got {}",
                    list.len()
                ));
            }
            list.iter().map(|v| address("envelope.to[]", v)).collect::<Result<_, _>>()?
        }
        Some(_) => return Err("envelope.to must be an array of addresses".into()),
    };
    Ok((sender, recipients))
}

/// The message begins with a header section: fields `name: value` (a name is printable
/// ASCII but `:`), each perhaps folded onto lines that begin with a space or tab, up to
/// an empty line or the end. The same grammar as the OpenAPI document's pattern.
fn check_head(message: &[u8]) -> Result<(), String> {
    let crlf = crlf_lines(message);
    let (head_end, _) = head_bounds(&crlf);
    if head_end == 0 {
        return Err("raw must begin with the message's header fields (From: …)".into());
    }
    for (n, field) in fields(&crlf[..head_end]).enumerate() {
        if field_name(field).is_none() {
            let line = String::from_utf8_lossy(field.split(|&b| b == b'\r').next().unwrap_or(&[]))
                .chars()
                .take(40)
                .collect::<String>();
            return Err(format!("raw's header field {} is not `name: value`: {line:?}", n + 1));
        }
    }
    Ok(())
}

/// Every bare LF (and bare CR) as CRLF; borrowed when there is none.
fn crlf_lines(message: &[u8]) -> Cow<'_, [u8]> {
    let bare = message.iter().enumerate().any(|(i, &b)| {
        (b == b'\n' && (i == 0 || message[i - 1] != b'\r'))
            || (b == b'\r' && message.get(i + 1) != Some(&b'\n'))
    });
    if !bare {
        return Cow::Borrowed(message);
    }
    let mut out = Vec::with_capacity(message.len() + message.len() / 32);
    let mut i = 0;
    while i < message.len() {
        match message[i] {
            b'\r' if message.get(i + 1) == Some(&b'\n') => {
                out.extend_from_slice(b"\r\n");
                i += 2;
                continue;
            }
            b'\r' | b'\n' => out.extend_from_slice(b"\r\n"),
            b => out.push(b),
        }
        i += 1;
    }
    Cow::Owned(out)
}

/// Where the header section ends (after its last field's CRLF) and the body begins (after
/// the empty line), in CRLF text. A message of header fields only has both at its end.
fn head_bounds(crlf: &[u8]) -> (usize, usize) {
    if crlf.starts_with(b"\r\n") {
        return (0, 2);
    }
    match crlf.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => (at + 2, at + 4),
        None => (crlf.len(), crlf.len()),
    }
}

/// The header section's fields, each with its folded lines and its final CRLF.
fn fields(head: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = head;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = 0;
        loop {
            match rest[end..].windows(2).position(|w| w == b"\r\n") {
                Some(at) => {
                    end += at + 2;
                    if !matches!(rest.get(end), Some(b' ' | b'\t')) {
                        break;
                    }
                }
                None => {
                    end = rest.len();
                    break;
                }
            }
        }
        let (field, tail) = rest.split_at(end);
        rest = tail;
        Some(field)
    })
}

/// A field's name: printable ASCII but `:` before the first `:`; `None` if it has none.
fn field_name(field: &[u8]) -> Option<&[u8]> {
    let colon = field.iter().position(|&b| b == b':')?;
    let name = &field[..colon];
    (!name.is_empty() && name.iter().all(|&b| (b'!'..=b'~').contains(&b))).then_some(name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::json;

    const DATE: &str = "Sat, 05 Dec 2026 01:00:00 +0000";

    fn raw(payload: serde_json::Value) -> Result<Vec<u8>, String> {
        let object = payload.as_object().unwrap();
        RawEmail::from_json(object).map(|r| r.to_send("<d-1@example.com>", DATE))
    }

    #[test]
    fn message_id_is_replaced_in_place_and_bcc_removed() {
        let message = "From: a@example.com\r\nMessage-ID: <app@x>\r\nBcc: hidden@example.com,\r\n other@example.com\r\nDate: Fri, 04 Dec 2026 10:00:00 +0100\r\nSubject: Hi\r\n\r\nBody line\r\n.leading dot\r\n";
        let sent = raw(json!({"raw": message})).unwrap();
        assert_eq!(
            String::from_utf8(sent).unwrap(),
            "From: a@example.com\r\nMessage-ID: <d-1@example.com>\r\nDate: Fri, 04 Dec 2026 10:00:00 +0100\r\nSubject: Hi\r\n\r\nBody line\r\n.leading dot"
        );
    }

    #[test]
    fn a_message_without_message_id_or_date_gets_them_first_and_bare_lf_becomes_crlf() {
        let sent = raw(json!({"raw": "From: a@example.com\nSubject: Hi\n\nx\ny"})).unwrap();
        assert_eq!(
            String::from_utf8(sent).unwrap(),
            format!(
                "Message-ID: <d-1@example.com>\r\nDate: {DATE}\r\nFrom: a@example.com\r\nSubject: Hi\r\n\r\nx\r\ny"
            )
        );
    }

    #[test]
    fn the_body_is_never_read_as_header() {
        let sent = raw(json!({"raw": "Subject: s\r\n\r\nMessage-ID: in the body\r\nBcc: too\r\n"}))
            .unwrap();
        assert!(
            String::from_utf8(sent)
                .unwrap()
                .ends_with("\r\n\r\nMessage-ID: in the body\r\nBcc: too")
        );
    }

    #[test]
    fn base64_carries_bytes_that_are_not_utf8() {
        let bytes = b"Subject: s\r\nContent-Transfer-Encoding: 8bit\r\n\r\ncaf\xe9\r\n";
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        let sent = raw(json!({"raw_base64": encoded})).unwrap();
        assert!(sent.ends_with(b"\r\n\r\ncaf\xe9"));
    }

    #[test]
    fn envelopes() {
        let ok = json!({"raw": "Subject: s\r\n\r\nx", "envelope": {"from": "b@example.com", "to": ["c@example.com", "d@example.com"]}});
        let parsed = RawEmail::from_json(ok.as_object().unwrap()).unwrap();
        assert_eq!(parsed.sender.unwrap().to_string(), "b@example.com");
        assert_eq!(parsed.recipients.len(), 2);
        let many: Vec<String> = (0..=RECIPIENTS_MAX).map(|i| format!("r{i}@example.com")).collect();
        for bad in [
            json!({"raw": "Subject: s\r\n\r\nx", "envelope": {"to": []}}),
            json!({"raw": "Subject: s\r\n\r\nx", "envelope": {"to": many}}),
            json!({"raw": "Subject: s\r\n\r\nx", "envelope": {"to": ["not an address"]}}),
            json!({"raw": "Subject: s\r\n\r\nx", "envelope": {"from": 5}}),
            json!({"raw": "Subject: s\r\n\r\nx", "envelope": {"cc": ["a@example.com"]}}),
            json!({"raw": "Subject: s\r\n\r\nx", "envelope": []}),
        ] {
            assert!(RawEmail::from_json(bad.as_object().unwrap()).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals() {
        for bad in [
            json!({"raw": ""}),
            json!({"raw": "\r\nbody only"}),
            json!({"raw": "no header here\r\n\r\nbody"}),
            json!({"raw": " folded first: x\r\n\r\nbody"}),
            json!({"raw": 5}),
            json!({"raw": "Subject: s\r\n\r\nx", "raw_base64": "eA=="}),
            json!({"raw_base64": "not base64!"}),
            json!({"raw": "Subject: s\r\n\r\nx", "subject": "mixed"}),
        ] {
            assert!(raw(bad.clone()).is_err(), "{bad}");
        }
    }
}
