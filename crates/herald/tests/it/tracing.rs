//! The worker's per-delivery span (delivery, tenant, operation key, attempt) tags the
//! events of that delivery's send and recording, and nothing else: a span *entered* across
//! an `.await` stays current on the thread while the task is suspended, so another task's
//! events would carry this delivery's tenant and key (defect 8 of issue 13).

use crate::common;
use herald::{BoxFuture, Channel, Leased, Outcome, SubmitRequest, Worker, WorkerOptions};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// An event's message and the names of the spans it is inside.
type Seen = (String, Vec<String>);

/// Records every event.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Seen>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        let spans = ctx
            .event_scope(event)
            .map(|scope| scope.map(|span| span.name().to_string()).collect())
            .unwrap_or_default();
        self.0.lock().unwrap().push((message.0, spans));
    }
}

/// Signals that its send started, then waits to be released.
struct Held {
    started: Arc<Notify>,
    release: Arc<Notify>,
}

impl Channel for Held {
    fn send<'a>(&'a self, _: &'a Leased) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            self.started.notify_one();
            self.release.notified().await;
            Outcome::Sent
        })
    }
}

#[tokio::test]
async fn the_attempt_span_tags_only_its_own_events() {
    let capture = Capture::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let db = common::sqlite();
    let herald = db.herald().await;
    let tenant = herald.tenant_create("acme").await.unwrap().id;
    herald.quota_grant(tenant, "held", 1, None).await.unwrap();
    let request = SubmitRequest::new(tenant, "op-1", "held", "someone", serde_json::json!({}));
    herald.submit_alone(&request).await.unwrap();

    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let channel: Arc<dyn Channel> =
        Arc::new(Held { started: started.clone(), release: release.clone() });
    let worker =
        Worker::new(herald.clone(), WorkerOptions::default(), [("held".to_string(), channel)])
            .unwrap();
    // This test's runtime has one thread: while the send is suspended, this task's event
    // runs on the same thread as the worker's tasks.
    let other_task = async {
        started.notified().await;
        tracing::info!("an event of another task");
        release.notify_one();
    };
    let (report, ()) = tokio::join!(worker.run_once(), other_task);
    assert_eq!(report.unwrap().sent, 1);

    let events = capture.0.lock().unwrap().clone();
    let spans_of = |message: &str| {
        events
            .iter()
            .find(|(m, _)| m == message)
            .map(|(_, spans)| spans.clone())
            .unwrap_or_else(|| panic!("no event {message:?} in {events:?}"))
    };
    assert!(
        !spans_of("an event of another task").contains(&"attempt".to_string()),
        "another task's event was tagged with the delivery's span: {events:?}"
    );
    assert!(
        spans_of("outcome recorded").contains(&"attempt".to_string()),
        "the delivery's own events carry its span: {events:?}"
    );
}
