//! JSON for the answers hyper writes by itself. A request head hyper cannot parse — a
//! malformed one (400), a URI over its fixed 65,534-byte limit (414), too many or too
//! large header fields (431) — never reaches the router: hyper writes a bodiless answer
//! and closes the connection, and hyper 1.x has no hook to choose that body (hyperium/hyper
//! #3844, PR #3911, open). This connection wrapper replaces that one answer with
//! `{"error": {"code", "message"}}` on its way out.
//!
//! Why it can recognise it without parsing HTTP: hyper writes it only when no response is
//! in progress, as the last bytes of the connection, then flushes. So at a flush the
//! unwritten output *ends* with it, and it has exactly the shape `HTTP/1.1 <400|414|431>
//! <reason>\r\n` + `connection: close`, `content-length: 0`, `date` + `\r\n`. Nothing the router answers has
//! that shape: every router answer carries a `content-type` and a body (JSON or the
//! Prometheus text), and neither body can contain a raw CR LF.

use crate::error::ApiError;
use axum::http::StatusCode;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Output held before it is passed on; above this, a write first drains (backpressure).
pub const WRITE_HELD_BYTES_MAX: usize = 64 * 1024;

/// A connection whose output is held until a flush, so that hyper's own bodiless error
/// answer can be replaced by a JSON one.
#[derive(Debug)]
pub struct JsonHeadErrors<T> {
    inner: T,
    held: Vec<u8>,
    /// How much of `held` has been written to `inner`.
    written: usize,
    /// The error answer was replaced (it is the connection's last).
    replaced: bool,
}

impl<T> JsonHeadErrors<T> {
    pub fn new(inner: T) -> JsonHeadErrors<T> {
        JsonHeadErrors { inner, held: Vec::new(), written: 0, replaced: false }
    }
}

/// The JSON error for an automatic answer of hyper, by its status.
fn replacement(status: StatusCode) -> Option<ApiError> {
    let e = match status {
        StatusCode::BAD_REQUEST => ApiError::invalid("the request is not valid HTTP/1.1"),
        StatusCode::URI_TOO_LONG => ApiError::new(
            status,
            "uri_too_long",
            format!("the request URI is longer than {} bytes", crate::listen::URI_BYTES_MAX),
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => ApiError::new(
            status,
            "headers_too_large",
            format!(
                "a request head has at most {} header fields and {} bytes",
                crate::listen::HEADERS_MAX,
                crate::listen::HEAD_BYTES_MAX
            ),
        ),
        _ => return None,
    };
    Some(e)
}

/// If `out` ends with one of hyper's automatic error answers, where it starts and what to
/// write instead.
fn rewrite(out: &[u8]) -> Option<(usize, Vec<u8>)> {
    if !out.ends_with(b"\r\n\r\n") {
        return None;
    }
    const START: &[u8] = b"HTTP/1.1 ";
    let start = out.windows(START.len()).rposition(|w| w == START)?;
    let head = std::str::from_utf8(&out[start..out.len() - 4]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status =
        StatusCode::from_bytes(status_line.get(START.len()..START.len() + 3)?.as_bytes()).ok()?;
    let expected = format!("HTTP/1.1 {} {}", status.as_str(), status.canonical_reason()?);
    if status_line != expected {
        return None;
    }
    let mut date = None;
    let mut content_length_zero = false;
    for line in lines {
        if line.eq_ignore_ascii_case("content-length: 0") {
            content_length_zero = true;
        } else if line.eq_ignore_ascii_case("connection: close") {
            // Ours says so too.
        } else if line.len() > 6 && line[..6].eq_ignore_ascii_case("date: ") {
            date = Some(line);
        } else {
            return None;
        }
    }
    if !content_length_zero {
        return None;
    }
    let error = replacement(status)?;
    let body =
        serde_json::json!({"error": {"code": error.code, "message": error.message}}).to_string();
    let mut answer = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n",
        body.len()
    );
    if let Some(date) = date {
        answer.push_str(date);
        answer.push_str("\r\n");
    }
    answer.push_str("\r\n");
    answer.push_str(&body);
    Some((start, answer.into_bytes()))
}

impl<T: AsyncWrite + Unpin> JsonHeadErrors<T> {
    /// Writes what is held to `inner`.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.held.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.held.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Replaces hyper's error answer if the held output ends with it.
    fn replace_error_answer(&mut self) {
        if self.replaced {
            return;
        }
        if let Some((start, answer)) = rewrite(&self.held[self.written..]) {
            let start = self.written + start;
            self.held.truncate(start);
            self.held.extend_from_slice(&answer);
            self.replaced = true;
        }
    }

    fn hold(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        if self.held.len() - self.written >= WRITE_HELD_BYTES_MAX {
            ready!(self.poll_drain(cx))?;
        }
        let mut n = 0;
        for buf in bufs {
            self.held.extend_from_slice(buf);
            n += buf.len();
        }
        Poll::Ready(Ok(n))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonHeadErrors<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonHeadErrors<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.hold(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.hold(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.replace_error_answer();
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.replace_error_answer();
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "date: Thu, 01 Jan 2026 00:00:00 GMT";

    fn check(out: &str, expect: Option<(usize, u16, &str)>) {
        let got = rewrite(out.as_bytes()).map(|(start, answer)| {
            let answer = String::from_utf8(answer).unwrap_or_default();
            let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_default();
            let status = head[9..12].parse::<u16>().unwrap_or_default();
            assert!(head.contains("content-type: application/json"), "{answer}");
            assert!(head.contains(&format!("content-length: {}", body.len())), "{answer}");
            assert!(head.contains(DATE), "{answer}");
            let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
            (start, status, v["error"]["code"].as_str().unwrap_or_default().to_string())
        });
        assert_eq!(got, expect.map(|(s, st, c)| (s, st, c.to_string())), "{out:?}");
    }

    #[test]
    fn only_hypers_bodiless_error_answer_at_the_end_is_replaced() {
        let auto = |status: &str| {
            format!("HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: 0\r\n{DATE}\r\n\r\n")
        };
        check(&auto("431 Request Header Fields Too Large"), Some((0, 431, "headers_too_large")));
        check(&auto("414 URI Too Long"), Some((0, 414, "uri_too_long")));
        check(&auto("400 Bad Request"), Some((0, 400, "invalid_request")));
        // After a complete answer of the router, on a kept-alive connection.
        let ok = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        check(
            &format!("{ok}{}", auto("400 Bad Request")),
            Some((ok.len(), 400, "invalid_request")),
        );
        // Not hyper's: other statuses, other headers, a body, a JSON string quoting one.
        check(&auto("404 Not Found"), None);
        check(&auto("431 Too Large"), None);
        check(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n",
            None,
        );
        check(&format!("{}{{}}", auto("400 Bad Request")), None);
        check(ok, None);
        check(r#"{"last_error": "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"}"#, None);
        check("", None);
    }
}
