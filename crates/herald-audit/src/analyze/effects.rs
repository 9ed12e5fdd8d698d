//! What counts as an effect a rollback cannot undo: the facade and method tables (mail,
//! HTTP, cache, Redis, storage, logs, queue pushes, broadcasts, notifications), the
//! `Effect` a call chain makes, and the events a chain fires.

use super::services::{Service, facade_type};
use super::{Analysis, Frame};
use crate::ir::{Call, Callee, Expr};

pub(super) fn facade(class: &str, name: &str) -> bool {
    class.eq_ignore_ascii_case(name)
        || class
            .strip_prefix("Illuminate\\Support\\Facades\\")
            .is_some_and(|c| c.eq_ignore_ascii_case(name))
}

pub(super) fn lower_in(name: &str, set: &[&str]) -> bool {
    set.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// Cache writes a rollback cannot take back. Not here: `remember`/`rememberForever`
/// (read-through: they store what a read computed) and `forget`/`flush` (dropping an
/// entry is harmless to repeat or to strand) — both false positives in the precision
/// triage (docs/audit.md).
const CACHE_WRITES: [&str; 9] =
    ["put", "set", "add", "forever", "increment", "decrement", "putMany", "pull", "setMultiple"];
const REDIS_WRITES: [&str; 30] = [
    "set",
    "setex",
    "psetex",
    "setnx",
    "incr",
    "incrby",
    "incrbyfloat",
    "decr",
    "decrby",
    "del",
    "unlink",
    "expire",
    "pexpire",
    "hset",
    "hmset",
    "hsetnx",
    "hincrby",
    "hdel",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "sadd",
    "srem",
    "zadd",
    "zrem",
    "zincrby",
    "publish",
    "append",
    "mset",
];
/// Disk writes a rollback strands. Not here: `copy` and `makeDirectory`, which only add
/// a file nothing refers to once the rows roll back — garbage, not a state the
/// surviving rows contradict (Kanka's gallery copies, UnoPim's export copies in the
/// corpus, docs/audit.md); a `delete`, a `move` or an overwriting `put` is.
const STORAGE_WRITES: [&str; 11] = [
    "put",
    "putFile",
    "putFileAs",
    "write",
    "writeStream",
    "delete",
    "deleteDirectory",
    "move",
    "append",
    "prepend",
    "setVisibility",
];
const LOG_LEVELS: [&str; 10] = [
    "emergency",
    "alert",
    "critical",
    "error",
    "warning",
    "notice",
    "info",
    "debug",
    "log",
    "write",
];
const HTTP_VERBS: [&str; 8] = ["get", "post", "put", "patch", "delete", "head", "send", "request"];
const HTTP_ASYNC: [&str; 4] = ["requestAsync", "sendAsync", "postAsync", "sendRequest"];
const MAIL_SENDS: [&str; 5] = ["send", "sendNow", "raw", "html", "plain"];
const QUEUE_PUSHES: [&str; 8] =
    ["dispatch", "dispatchToQueue", "push", "later", "pushOn", "laterOn", "bulk", "pushRaw"];

/// Whether some service has an effect under this method name.
pub(super) fn effect_name(name: &str) -> bool {
    [
        &CACHE_WRITES[..],
        &REDIS_WRITES,
        &STORAGE_WRITES,
        &LOG_LEVELS,
        &HTTP_VERBS,
        &HTTP_ASYNC,
        &MAIL_SENDS,
        &QUEUE_PUSHES,
        &["queue", "notify", "notifyNow", "send", "sendNow"],
    ]
    .iter()
    .any(|set| lower_in(name, set))
}

/// What a call does that a rollback cannot undo.
#[derive(Debug)]
pub(super) struct Effect {
    pub(super) what: String,
    /// A log line (an effect only where the closure is retried).
    pub(super) log: bool,
    /// A queue push: harmless once it waits for the commit.
    pub(super) dispatch: bool,
    pub(super) after_commit: bool,
}

impl<'a> Analysis<'a> {
    /// `event(new E)`, `Event::dispatch(new E)`, `E::dispatch()` for an event class.
    pub(super) fn event_class(&self, chain: &[&'a Call], frame: &Frame<'a>) -> Option<String> {
        let outer = chain[0];
        let first_new = || outer.args.first().and_then(|a| self.job_class(&a.value, frame));
        match &outer.callee {
            Callee::Method { object, name }
                if lower_in(name, &["dispatch", "fire"])
                    && self.service_of(&self.types_of(object, frame)) == Some(Service::Events) =>
            {
                first_new()
            }
            Callee::Function(f) if f.eq_ignore_ascii_case("event") => first_new(),
            Callee::Static { class, name }
                if facade(class, "Event") && lower_in(name, &["dispatch", "fire"]) =>
            {
                first_new()
            }
            Callee::Static { class, name }
                if name.eq_ignore_ascii_case("dispatch") && self.index.is_event(class) =>
            {
                Some(class.clone())
            }
            _ => None,
        }
    }

    pub(super) fn effect(&self, chain: &[&'a Call], frame: &Frame<'a>) -> Option<Effect> {
        let outer = chain[0];
        let root = chain[chain.len() - 1];
        let name = outer.method_name().unwrap_or("");
        let root_class = match &root.callee {
            Callee::Static { class, .. } => Some(class.as_str()),
            _ => None,
        };
        let root_function = match &root.callee {
            Callee::Function(f) => Some(f.as_str()),
            _ => None,
        };
        let send = sent;
        let config = self.config(frame.file);
        // A dispatch's own modifiers: ->afterCommit(), ->beforeCommit(), ->onConnection().
        let modifiers = |job: Option<&str>| {
            let mut after = job.is_some_and(|j| self.index.is_after_commit(j));
            let mut connection = None;
            for c in chain.iter().rev() {
                match c.method_name() {
                    Some(n) if n.eq_ignore_ascii_case("afterCommit") => after = true,
                    Some(n) if n.eq_ignore_ascii_case("beforeCommit") => after = false,
                    Some(n) if n.eq_ignore_ascii_case("onConnection") => {
                        if let Some(Expr::Str(s)) = c.args.first().map(|a| &a.value) {
                            connection = Some(s.clone());
                        }
                    }
                    _ => {}
                }
            }
            let explicit = chain.iter().any(|c| {
                c.method_name().is_some_and(|n| lower_in(n, &["afterCommit", "beforeCommit"]))
            });
            after || (!explicit && config.queue_after_commit(connection.as_deref()))
        };
        let dispatch = |what: String, job: Option<&str>| {
            Some(Effect { what, log: false, dispatch: true, after_commit: modifiers(job) })
        };

        if let Some(class) = root_class {
            if facade(class, "Mail") {
                if lower_in(name, &["send", "sendNow", "raw", "html", "plain"]) {
                    return send(format!("mail sent (Mail::…->{name}())"));
                }
                if lower_in(name, &["queue", "later"]) {
                    let what = format!("mail queued (Mail::…->{name}())");
                    let made =
                        outer.args.iter().rev().find_map(|a| self.made_waiting(&a.value, frame));
                    return match made {
                        Some((_, Some(waits))) => {
                            Some(Effect { what, log: false, dispatch: true, after_commit: waits })
                        }
                        made => dispatch(what, made.map(|(m, _)| m).as_deref()),
                    };
                }
                return None;
            }
            if facade(class, "Notification")
                && lower_in(name, &["send", "sendNow", "notify", "notifyNow"])
            {
                return self.notification(outer, name, &modifiers, frame);
            }
            if facade(class, "Http")
                && lower_in(name, &HTTP_VERBS)
                && !root.method_name().is_some_and(|n| n.eq_ignore_ascii_case("fake"))
            {
                if self.computes_only(outer.args.first().map(|a| &a.value), frame) {
                    return None;
                }
                return send(format!("HTTP call (Http::…->{name}())"));
            }
            if facade(class, "Cache") && lower_in(name, &CACHE_WRITES) {
                return send(format!("cache write (Cache::…{name}())"));
            }
            if facade(class, "Redis") && lower_in(name, &REDIS_WRITES) {
                return send(format!("Redis write (Redis::…{name}())"));
            }
            if facade(class, "Storage") && lower_in(name, &STORAGE_WRITES) {
                if self.writes_garbage(outer, name, frame) {
                    return None;
                }
                return send(format!("storage write (Storage::…{name}())"));
            }
            if facade(class, "Log") && lower_in(name, &LOG_LEVELS) {
                return send(format!("log line (Log::…{name}())"));
            }
            // The other facades of a service (`File::delete()`): by the type they stand for.
            if facade(class, "File")
                && let Some(service) = facade_type(class).and_then(|t| self.service_of(&[t.into()]))
            {
                return self.service_effect(service, outer, name, frame, &modifiers, Some("File"));
            }
            if (facade(class, "Bus") || facade(class, "Queue"))
                && lower_in(
                    name,
                    &["dispatch", "dispatchToQueue", "push", "later", "pushOn", "laterOn", "bulk"],
                )
            {
                let job = outer.args.first().and_then(|a| self.job_class(&a.value, frame));
                return dispatch(
                    format!("job pushed ({}::…{name}())", short(class)),
                    job.as_deref(),
                );
            }
            if chain.len() == 1
                && lower_in(name, &["dispatch", "dispatchIf", "dispatchUnless"])
                && !self.index.is_event(class)
                && !facade(class, "Event")
                && !class.eq_ignore_ascii_case("?")
            {
                let class = self.class_name(class, frame).unwrap_or_default();
                return dispatch(
                    format!("{}::{name}() without ->afterCommit()", short(&class)),
                    Some(&class),
                );
            }
            if chain.len() > 1
                && root
                    .method_name()
                    .is_some_and(|n| lower_in(n, &["dispatch", "dispatchIf", "dispatchUnless"]))
                && !self.index.is_event(class)
                && !facade(class, "Event")
                && !class.eq_ignore_ascii_case("?")
            {
                // `Job::dispatch()->onQueue()…`: the pending dispatch is pushed when it
                // goes out of scope; the chain's modifiers decide.
                let class = self.class_name(class, frame).unwrap_or_default();
                if chain.iter().take(chain.len() - 1).all(|c| {
                    c.method_name().is_some_and(|n| {
                        lower_in(
                            n,
                            &[
                                "onQueue",
                                "onConnection",
                                "delay",
                                "afterCommit",
                                "beforeCommit",
                                "chain",
                                "allOnQueue",
                                "allOnConnection",
                                "through",
                            ],
                        )
                    })
                }) {
                    return dispatch(
                        format!("{}::dispatch() without ->afterCommit()", short(&class)),
                        Some(&class),
                    );
                }
            }
        }
        if let Some(function) = root_function {
            let function = function.trim_start_matches('\\');
            if chain.len() == 1 {
                if function.eq_ignore_ascii_case("dispatch") {
                    let job = outer.args.first().and_then(|a| self.job_class(&a.value, frame));
                    return dispatch("dispatch() without ->afterCommit()".into(), job.as_deref());
                }
                if function.eq_ignore_ascii_case("curl_exec")
                    || function.eq_ignore_ascii_case("curl_multi_exec")
                {
                    if function.eq_ignore_ascii_case("curl_exec")
                        && self.computes_only(self.curl_url(outer, frame), frame)
                    {
                        return None;
                    }
                    return send(format!("HTTP call ({function}())"));
                }
                if function.eq_ignore_ascii_case("file_get_contents") {
                    if outer.args.first().is_some_and(|a| starts_with_url(&a.value)) {
                        return send("HTTP call (file_get_contents of a URL)".into());
                    }
                    return None;
                }
                if (function.eq_ignore_ascii_case("logger")
                    || function.eq_ignore_ascii_case("info"))
                    && !outer.args.is_empty()
                {
                    return send(format!("log line ({function}())"));
                }
                if function.eq_ignore_ascii_case("cache")
                    && matches!(outer.args.first().map(|a| &a.value), Some(Expr::Array(_)))
                {
                    return send("cache write (cache([...]))".into());
                }
                if function.eq_ignore_ascii_case("broadcast") {
                    return dispatch("broadcast() without ->afterCommit()".into(), None);
                }
            } else {
                if function.eq_ignore_ascii_case("dispatch")
                    && name.eq_ignore_ascii_case("afterCommit")
                {
                    return dispatch("dispatch()".into(), None);
                }
                if function.eq_ignore_ascii_case("dispatch")
                    && chain.iter().take(chain.len() - 1).all(|c| {
                        c.method_name().is_some_and(|n| {
                            lower_in(
                                n,
                                &[
                                    "onQueue",
                                    "onConnection",
                                    "delay",
                                    "afterCommit",
                                    "beforeCommit",
                                    "chain",
                                ],
                            )
                        })
                    })
                {
                    let job = root.args.first().and_then(|a| self.job_class(&a.value, frame));
                    return dispatch("dispatch() without ->afterCommit()".into(), job.as_deref());
                }
                if function.eq_ignore_ascii_case("cache") && lower_in(name, &CACHE_WRITES) {
                    return send(format!("cache write (cache()->{name}())"));
                }
                if function.eq_ignore_ascii_case("logger") && lower_in(name, &LOG_LEVELS) {
                    return send(format!("log line (logger()->{name}())"));
                }
                if function.eq_ignore_ascii_case("broadcast")
                    && chain
                        .iter()
                        .take(chain.len() - 1)
                        .all(|c| c.method_name().is_some_and(|n| lower_in(n, &["toOthers", "via"])))
                {
                    return dispatch("broadcast() without ->afterCommit()".into(), None);
                }
            }
        }
        // Method calls on an object.
        if let Callee::Method { object, .. } = &outer.callee {
            // `$user->notify(new X)` — not `$this->notify('Saved')` (a Livewire toast) nor
            // a `notify()` the class defines itself (issue 39: Paymenter).
            if lower_in(name, &["notify", "notifyNow"])
                && outer.args.len() == 1
                && !matches!(outer.args[0].value, Expr::Str(_) | Expr::Other(_))
                && !self
                    .types_of(object, frame)
                    .iter()
                    .any(|t| self.index.method(t, name).is_some())
            {
                return self.notification(outer, name, &modifiers, frame);
            }
            if lower_in(name, &["send", "sendNow"])
                && chain.len() > 1
                && chain
                    .iter()
                    .any(|c| c.method_name().is_some_and(|n| lower_in(n, &["to", "cc", "bcc"])))
                && root_class.is_some_and(|c| facade(c, "Mail"))
            {
                return send(format!("mail sent (->{name}())"));
            }
            if let Some(effect) = self.typed_effect(chain, frame, &modifiers) {
                return Some(effect);
            }
            if name.eq_ignore_ascii_case("dispatch")
                && matches!(object, Expr::Var(v) if v == "this")
                && frame.class.is_none_or(|c| self.index.method(&c.name, "dispatch").is_none())
                && let Some(job) = outer.args.first().and_then(|a| self.job_class(&a.value, frame))
            {
                return dispatch(
                    format!("$this->dispatch(new {}) without ->afterCommit()", short(&job)),
                    Some(&job),
                );
            }
        }
        None
    }

    /// The class a job, mailable or notification argument makes: `new X(…)`, or a
    /// variable assigned `new X(…)` in the same function (issue 39: `$job = new X;
    /// dispatch($job);` where X waits for the commit).
    pub(super) fn job_class(&self, e: &Expr, frame: &Frame<'a>) -> Option<String> {
        match e {
            Expr::Var(v) if v != "this" => {
                self.env(frame).and_then(|env| env.types.get(v)).and_then(|t| t.first()).cloned()
            }
            other => new_class(other),
        }
    }

    /// `new_waiting`, also through a variable.
    fn made_waiting(&self, e: &Expr, frame: &Frame<'a>) -> Option<(String, Option<bool>)> {
        new_waiting(e).or_else(|| match e {
            Expr::Var(_) => self.job_class(e, frame).map(|c| (c, None)),
            _ => None,
        })
    }

    /// The effect of method `name` on a value of `service`'s type.
    pub(super) fn service_effect(
        &self,
        service: Service,
        outer: &'a Call,
        name: &str,
        frame: &Frame<'a>,
        modifiers: &dyn Fn(Option<&str>) -> bool,
        facade_label: Option<&str>,
    ) -> Option<Effect> {
        // How the receiver is named in the message: `File::delete()` for a facade,
        // `injected filesystem ->delete()` for a value of the service's type.
        let via = |what: &str| match facade_label {
            Some(f) => format!("{f}::{name}()"),
            None => format!("injected {what} ->{name}()"),
        };
        let send = sent;
        match service {
            Service::Mail if lower_in(name, &MAIL_SENDS) => {
                send(format!("mail sent ({})", via("mailer")))
            }
            Service::Mail if lower_in(name, &["queue", "later"]) => {
                let what = format!("mail queued ({})", via("mailer"));
                match outer.args.iter().rev().find_map(|a| self.made_waiting(&a.value, frame)) {
                    Some((_, Some(waits))) => {
                        Some(Effect { what, log: false, dispatch: true, after_commit: waits })
                    }
                    made => Some(Effect {
                        what,
                        log: false,
                        dispatch: true,
                        after_commit: modifiers(made.map(|(m, _)| m).as_deref()),
                    }),
                }
            }
            Service::Http if lower_in(name, &HTTP_VERBS) || lower_in(name, &HTTP_ASYNC) => {
                if self.computes_only(outer.args.first().map(|a| &a.value), frame) {
                    return None;
                }
                send(format!("HTTP call ({})", via("client")))
            }
            Service::Cache if lower_in(name, &CACHE_WRITES) => {
                send(format!("cache write ({})", via("cache")))
            }
            Service::Storage if lower_in(name, &STORAGE_WRITES) => {
                if self.writes_garbage(outer, name, frame) {
                    return None;
                }
                send(format!("storage write ({})", via("filesystem")))
            }
            Service::Redis if lower_in(name, &REDIS_WRITES) => {
                send(format!("Redis write ({})", via("Redis")))
            }
            Service::Log if lower_in(name, &LOG_LEVELS) => {
                send(format!("log line ({})", via("logger")))
            }
            Service::Queue | Service::Bus
                if lower_in(name, &QUEUE_PUSHES)
                    && !lower_in(name, &["dispatchSync", "dispatchNow"]) =>
            {
                let job = outer.args.first().and_then(|a| self.job_class(&a.value, frame));
                Some(Effect {
                    what: format!("job pushed ({})", via("dispatcher")),
                    log: false,
                    dispatch: true,
                    after_commit: modifiers(job.as_deref()),
                })
            }
            Service::Notifications if lower_in(name, &["send", "sendNow"]) => {
                self.notification(outer, name, modifiers, frame)
            }
            _ => None,
        }
    }

    fn notification(
        &self,
        call: &'a Call,
        name: &str,
        modifiers: &dyn Fn(Option<&str>) -> bool,
        frame: &Frame<'a>,
    ) -> Option<Effect> {
        let made = call.args.iter().rev().find_map(|a| self.made_waiting(&a.value, frame));
        let (notification, waits) = match made {
            Some((n, waits)) => (Some(n), waits),
            None => (None, None),
        };
        let queued = !name.to_ascii_lowercase().ends_with("now")
            && notification.as_deref().is_some_and(|n| self.index.is_queued(n));
        if queued {
            let n = notification.unwrap_or_default();
            return Some(Effect {
                log: false,
                what: format!("queued notification {} pushed without after-commit", short(&n)),
                dispatch: true,
                after_commit: waits.unwrap_or_else(|| modifiers(Some(&n))),
            });
        }
        let what = match &notification {
            Some(n) => format!("notification {} sent now ({name}())", short(n)),
            None => format!("notification sent ({name}())"),
        };
        Some(Effect { what, log: false, dispatch: false, after_commit: false })
    }
}

/// `Foo` in `new Foo(...)`.
fn new_class(e: &Expr) -> Option<String> {
    match e {
        Expr::New { class, .. } if class != "?" => Some(class.clone()),
        _ => None,
    }
}

/// The class a `new Foo(...)` argument makes, and what its own chain says of the commit:
/// `(new Foo)->afterCommit()` waits for it (`Some(true)`), `->beforeCommit()` does not
/// (`Some(false)`), a bare `new Foo` leaves it to the class and the connection (`None`).
/// Found in the precision triage (docs/audit.md): a notification made to wait on the
/// instance itself.
fn new_waiting(e: &Expr) -> Option<(String, Option<bool>)> {
    match e {
        Expr::Call(c) => match &c.callee {
            Callee::Method { object, name } => {
                let (class, waits) = new_waiting(object)?;
                let waits = if name.eq_ignore_ascii_case("afterCommit") {
                    Some(true)
                } else if name.eq_ignore_ascii_case("beforeCommit") {
                    Some(false)
                } else {
                    waits
                };
                Some((class, waits))
            }
            _ => None,
        },
        other => new_class(other).map(|class| (class, None)),
    }
}

fn starts_with_url(e: &Expr) -> bool {
    match e {
        Expr::Str(s) => s.starts_with("http://") || s.starts_with("https://"),
        Expr::Other(parts) => parts.first().is_some_and(starts_with_url),
        _ => false,
    }
}

pub(super) fn short(class: &str) -> &str {
    class.rsplit('\\').next().unwrap_or(class)
}

/// An effect that happens now (not a dispatch, not after the commit): `what` it is.
fn sent(what: String) -> Option<Effect> {
    Some(Effect { log: what.starts_with("log line"), what, dispatch: false, after_commit: false })
}
