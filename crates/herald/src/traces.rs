//! Traces: one trace from a submit through each attempt of its delivery.
//!
//! herald's spans are `tracing` spans — `submit` around a library submit, `attempt`
//! around each send, and the server's `request` — which a `tracing-opentelemetry` layer
//! turns into OpenTelemetry spans (`herald serve` installs one with `HERALD_TRACES=otlp`;
//! an application embedding the library installs its own and calls [`enable`]). A submit
//! stores the W3C `traceparent` of its span beside the delivery's payload (the SQL API
//! stores the caller's, from `herald.traceparent`); each attempt's span is a child of it,
//! however many processes and hours later, and a webhook carries the attempt's own
//! `traceparent` header so that the receiver's work joins the same trace.
//!
//! Off unless enabled: nothing is stored, no header is added, and the spans stay what
//! they always were (disabled below the log level), so tracing costs nothing when off.

use herald_core::TraceParent;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ON: AtomicBool = AtomicBool::new(false);

/// Turns traces on for this process: call it once a `tracing-opentelemetry` layer is
/// installed. Submits then store their span's traceparent and attempts follow it.
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether traces are on in this process.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The traceparent of `span` as OpenTelemetry sees it, when traces are on and the span
/// is part of a valid trace.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    if !on() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            flags: sc.trace_flags().to_u8(),
        }
        .to_string()
    })
}

/// Makes `span` (not yet entered) a child of the remote span `traceparent` names; a
/// value that does not read as a traceparent is ignored, as W3C asks: the span starts a
/// trace of its own.
pub fn follow(span: &tracing::Span, traceparent: Option<&str>) {
    if !on() {
        return;
    }
    let Some(parent) = traceparent.and_then(TraceParent::parse) else {
        return;
    };
    let remote = SpanContext::new(
        TraceId::from_bytes(parent.trace_id),
        SpanId::from_bytes(parent.span_id),
        TraceFlags::new(parent.flags),
        true,
        TraceState::default(),
    );
    // Fails only for a span already entered or not recorded by the layer: it then
    // stays where it is, which is all a trace can lose.
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
}

/// Records a send's outcome on its attempt's span: `herald.outcome` (`sent`,
/// `transient`, `terminal`), and for a failure its code as `error.type` and its message
/// as the span's error status. Nothing when traces are off.
pub(crate) fn outcome(span: &tracing::Span, outcome: &crate::Outcome) {
    if !on() {
        return;
    }
    let (name, failure) = match outcome {
        crate::Outcome::Sent => ("sent", None),
        crate::Outcome::Transient { code, message, .. } => ("transient", Some((code, message))),
        crate::Outcome::Terminal { code, message } => ("terminal", Some((code, message))),
    };
    span.set_attribute("herald.outcome", name);
    if let Some((code, message)) = failure {
        span.set_attribute("error.type", code.clone());
        span.set_status(opentelemetry::trace::Status::error(message.clone()));
    }
}

/// The span around a submit of `items` requests, or a disabled one when traces are off.
pub(crate) fn submit_span(items: usize) -> tracing::Span {
    if !on() {
        return tracing::Span::none();
    }
    tracing::info_span!("submit", otel.kind = "producer", herald.items = items)
}
