//! The delivery engine end to end on every backend (SPEC guarantees 3, 5, 6, 7, 10, 12,
//! 13): workers, outcomes, fencing, the reconciler, replay and cancel, shutdown and
//! wake-ups — with real connections and tasks, time moved by a manual clock.

use crate::common;
use herald::{
    AttemptReport, Channel, DeliveryState, Error, Leased, Now, Outcome, Reconciler,
    ReconcilerOptions, SubmitRequest, Worker, WorkerOptions,
};
use herald_core::{Decision, Report, RetryPolicy};
use herald_store::deliveries::{
    Lease, deliveries_lease, deliveries_sent_fenced, delivery_hand_back,
};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

use crate::common::START_S;

// ---- a scripted channel ---------------------------------------------------------------

/// Returns scripted outcomes (then `Sent`), records every call, and can hold sends until
/// released.
#[derive(Default)]
struct Script {
    outcomes: Mutex<VecDeque<Outcome>>,
    calls: Mutex<Vec<(herald::DeliveryId, u32)>>,
    hold: Mutex<Option<Arc<Notify>>>,
    entered: Mutex<Option<mpsc::UnboundedSender<herald::DeliveryId>>>,
    panic_next: Mutex<bool>,
}

impl Script {
    fn new(outcomes: impl IntoIterator<Item = Outcome>) -> Arc<Script> {
        Arc::new(Script {
            outcomes: Mutex::new(outcomes.into_iter().collect()),
            ..Script::default()
        })
    }
    fn calls(&self) -> Vec<(herald::DeliveryId, u32)> {
        self.calls.lock().unwrap().clone()
    }
    /// From now on, sends wait until the returned Notify releases them (one per permit).
    fn hold(&self) -> Arc<Notify> {
        let release = Arc::new(Notify::new());
        *self.hold.lock().unwrap() = Some(release.clone());
        release
    }
    /// From now on, every send that starts is reported on the receiver.
    fn watch(&self) -> mpsc::UnboundedReceiver<herald::DeliveryId> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.entered.lock().unwrap() = Some(tx);
        rx
    }
}

impl Channel for Script {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            self.calls.lock().unwrap().push((d.id, d.attempt));
            if let Some(entered) = self.entered.lock().unwrap().as_ref() {
                let _ = entered.send(d.id);
            }
            if std::mem::take(&mut *self.panic_next.lock().unwrap()) {
                panic!("the channel blew up");
            }
            let hold = self.hold.lock().unwrap().clone();
            if let Some(release) = hold {
                release.notified().await;
            }
            self.outcomes.lock().unwrap().pop_front().unwrap_or(Outcome::Sent)
        })
    }
}

// ---- an environment per backend --------------------------------------------------------

/// A `common::Env` with this file's helpers: a type of its own, because the other test
/// modules of this binary add helpers of the same names to theirs.
#[derive(Debug)]
struct Env(common::Env);

impl std::ops::Deref for Env {
    type Target = common::Env;

    fn deref(&self) -> &common::Env {
        &self.0
    }
}

async fn envs() -> Vec<Env> {
    common::envs("email").await.into_iter().map(Env).collect()
}

fn request(tenant: herald::TenantId, key: &str) -> SubmitRequest {
    let payload = serde_json::json!({"subject": "ready", "text": "your repair is ready"});
    SubmitRequest {
        cost: Some(2),
        ..SubmitRequest::new(tenant, key, "email", "a@example.com", payload)
    }
}

impl Env {
    async fn submit(&self, req: SubmitRequest) -> herald::Delivery {
        self.herald
            .submit_alone(&req)
            .await
            .unwrap_or_else(|e| panic!("{}: submit failed: {e:?}", self.name))
            .delivery
    }

    fn worker(&self, channel: Arc<Script>, options: WorkerOptions) -> Worker {
        let channel: Arc<dyn Channel> = channel;
        Worker::new(self.herald.clone(), options, [("email".to_string(), channel)]).unwrap()
    }

    async fn get(&self, id: herald::DeliveryId) -> herald::Delivery {
        self.herald.delivery(self.tenant, id).await.unwrap()
    }

    async fn quota(&self) -> (i64, i64, i64, i64) {
        let q = self.herald.quotas(self.tenant).await.unwrap();
        let a = q.iter().find(|a| a.quota_key == "email").unwrap();
        (a.granted, a.available, a.reserved, a.spent)
    }

    async fn outcomes(&self, id: herald::DeliveryId) -> Vec<String> {
        let attempts = self.herald.attempts(self.tenant, id).await.unwrap();
        attempts.into_iter().map(|a| a.outcome.unwrap_or_else(|| "running".into())).collect()
    }

    fn reconciler(&self) -> Reconciler {
        Reconciler::new(self.herald.clone(), ReconcilerOptions::default())
    }
}

fn options(id: &str) -> WorkerOptions {
    WorkerOptions { id: id.to_string(), ..WorkerOptions::default() }
}

mod after_commit;
mod holds;
mod many_workers;
mod outcomes;
mod reconciler;
mod replay_cancel;
mod shutdown;
