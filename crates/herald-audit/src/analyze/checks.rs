//! The rules' checks on one call chain inside the walk: transactions opened (and the
//! retries they drop), `DB::afterCommit` callbacks, manual transactions, locks in a
//! retried transaction, budget moves, effects, events and their listeners; and the
//! checks made over a whole body (a caught database error on PostgreSQL, a budget moved
//! outside the claim).

use super::effects::{lower_in, short};
use super::resolve::DB_FACADES;
use super::{Analysis, Frame, Tx};
use crate::config::{Driver, LOCK_WAIT_DEFAULT_S};
use crate::ir::{Call, Callee, Expr, Try};
use crate::rules::Rule;
use std::collections::HashSet;

const BUDGET_WORDS: [&str; 6] = ["credit", "quota", "balance", "allowance", "budget", "token"];

impl<'a> Analysis<'a> {
    /// A `catch` of a database error inside a PostgreSQL transaction that goes on:
    /// the transaction is already aborted (unless the try body is its own savepoint).
    pub(super) fn check_catches(&mut self, t: &'a Try, frame: &Frame<'a>) {
        if let Some(tx) = self.tx(frame)
            && tx.driver == Some(Driver::Pgsql)
            && !contains_transaction(&t.body)
        {
            for c in &t.catches {
                let catches_query = c.types.iter().any(|t| {
                    lower_in(
                        t,
                        &[
                            "Illuminate\\Database\\QueryException",
                            "PDOException",
                            "Illuminate\\Database\\UniqueConstraintViolationException",
                            "Illuminate\\Database\\DeadlockException",
                        ],
                    )
                });
                // A catch that rethrows on every path is fine; one that can return (a
                // look-up of the row that collided, Laravel's createOrFirst shape) goes on.
                if catches_query && (!c.ends_in_throw || returns(&c.body)) {
                    let (file, pos, path) = self.site(frame, c.pos);
                    self.report(
                            Rule::PoisonedTransaction,
                            file,
                            pos,
                            format!(
                                "a database error is caught and the transaction at line {} (pgsql) goes on{path}",
                                tx.pos.line
                            ),
                        );
                }
            }
        }
    }

    /// At the end of a root: a credit moved where a send of the same root happens
    /// outside that one transaction.
    pub(super) fn check_budget(&mut self, file: usize) {
        if !self.sends.is_empty() {
            for (pos, tx) in std::mem::take(&mut self.budget) {
                // Fine: the send in the credit's own transaction, or outside any after
                // that transaction committed (the claim and the credit are atomic and the
                // send follows them, as the rule's own fix does with ->afterCommit()).
                let after = |t: u32, seq: u64| self.tx_ends.get(&t).is_some_and(|end| seq > *end);
                let outside = |(s, seq): &(Option<u32>, u64)| match tx {
                    None => true,
                    Some(t) => *s != Some(t) && !(s.is_none() && after(t, *seq)),
                };
                if self.sends.iter().any(outside) {
                    self.report(
                        Rule::BudgetOutsideClaim,
                        file,
                        pos,
                        "the credit is moved here and a send or dispatch of the same flow happens outside this one transaction".into(),
                    );
                }
            }
        }
    }

    /// Every rule's check on one call chain (`a()->b()->c()`, outermost first); the
    /// arguments it walks itself (a transaction's closure, an after-commit callback, a
    /// queued closure) go into `handled` so the walk does not walk them again.
    pub(super) fn classify(
        &mut self,
        chain: &[&'a Call],
        frame: &Frame<'a>,
        handled: &mut HashSet<*const Expr>,
    ) {
        let outer = chain[0];
        let root = chain[chain.len() - 1];
        let name = outer.method_name().unwrap_or("");
        let root_static = match &root.callee {
            Callee::Static { class, name } => Some((class.as_str(), name.as_str())),
            _ => None,
        };
        let on_db =
            root_static.is_some_and(|(c, _)| DB_FACADES.iter().any(|d| c.eq_ignore_ascii_case(d)));
        if chain.iter().any(|c| c.method_name().is_some_and(super::readonly::is_statement)) {
            self.statements += 1;
        }
        self.seq += 1;

        // Transactions.
        if name.eq_ignore_ascii_case("transaction") && self.db_receiver(chain, frame, on_db) {
            let connection = self.connection_name(chain);
            self.transaction(outer, connection, frame, handled);
            return;
        }
        if name.eq_ignore_ascii_case("afterCommit")
            && (on_db || self.db_receiver(chain, frame, false))
        {
            // DB::afterCommit(fn): the callback runs after the commit, outside it.
            if let Some(arg) = outer.args.first()
                && let Expr::Closure(c) = &arg.value
            {
                handled.insert(&arg.value as *const Expr);
                let after = Frame { tx: None, via: None, ..frame.clone() };
                for s in &c.body {
                    self.walk(s, &after);
                }
            }
            return;
        }
        // `beginTransaction()` … `commit()` on the facade, a connection the chain names,
        // or an injected connection or `DatabaseManager` (by its type).
        if frame.via.is_none()
            && lower_in(name, &["beginTransaction", "commit", "rollBack"])
            && (on_db || self.db_receiver(chain, frame, false))
        {
            if name.eq_ignore_ascii_case("beginTransaction") {
                let connection = self.connection_name(chain);
                let driver = self.config(frame.file).driver(connection.as_deref());
                self.next_tx += 1;
                self.manual.push(Tx {
                    id: self.next_tx,
                    root: self.next_tx,
                    retried: false,
                    attempts: 1,
                    pos: outer.pos,
                    driver,
                    connection,
                    read_only: false,
                });
                return;
            }
            if name.eq_ignore_ascii_case("commit") || name.eq_ignore_ascii_case("rollBack") {
                if let Some(ended) = self.manual.pop() {
                    self.tx_ends.insert(ended.id, self.seq);
                }
                return;
            }
        }

        let tx = self.tx(frame);

        // Locks in a retried transaction.
        if let Some(tx) = &tx
            && tx.retried
            && tx.driver != Some(Driver::Sqlite)
            && chain.iter().any(|c| {
                c.method_name().is_some_and(|n| lower_in(n, &["lockForUpdate", "sharedLock"]))
            })
            && self.lock_reported.insert(tx.id)
        {
            let (file, pos, path) = self.site(frame, outer.pos);
            let message = match tx.driver {
                Some(Driver::Pgsql) => format!(
                    "locks taken in a transaction with attempts: {}; PostgreSQL's lock_timeout is 0 (no limit) unless set, and every deadlock retry runs the closure again{path}",
                    tx.attempts
                ),
                _ => {
                    let wait = self.config(frame.file).lock_wait_s.unwrap_or(LOCK_WAIT_DEFAULT_S);
                    format!(
                        "locks taken in a transaction with attempts: {}: worst case {} × {wait} s = {} s of lock waits{path}",
                        tx.attempts,
                        tx.attempts,
                        u64::from(tx.attempts) * wait
                    )
                }
            };
            self.report(Rule::LockWaitRetry, file, pos, message);
        }

        // Budget moves.
        if lower_in(name, &["decrement", "increment", "decrementEach", "incrementEach"])
            && let Some(Expr::Str(column)) = outer.args.first().map(|a| &a.value)
        {
            let column = column.to_ascii_lowercase();
            if BUDGET_WORDS.iter().any(|w| column.contains(w)) && frame.via.is_none() {
                self.budget.push((outer.pos, tx.as_ref().map(|t| t.id)));
            }
        }

        // Effects: the call that makes one may be followed by calls on its result
        // (`Http::withToken($t)->post(…)->json()`), so every tail of the chain is asked.
        let found =
            (0..chain.len()).find_map(|i| self.effect(&chain[i..], frame).map(|e| (e, chain[i])));
        if let Some((effect, at)) = found {
            if effect.dispatch {
                // A queued closure runs in a worker, not here.
                for c in chain {
                    for a in &c.args {
                        if matches!(a.value, Expr::Closure(_)) {
                            handled.insert(&a.value as *const Expr);
                        }
                    }
                }
            }
            if frame.via.is_none() && !effect.log {
                self.sends.push((tx.as_ref().map(|t| t.id), self.seq));
            }
            let queue = chain.iter().find_map(|c| match (c.method_name(), c.args.first()) {
                (Some(n), Some(a)) if n.eq_ignore_ascii_case("onConnection") => match &a.value {
                    Expr::Str(s) => Some(s.clone()),
                    _ => None,
                },
                _ => None,
            });
            // A push the code itself sends to the `sync` connection runs the job now, here:
            // what its `handle()` does is the effect, not the push (Bagisto's indexers,
            // which do nothing outside the database on its default configuration).
            if effect.dispatch
                && tx.is_some()
                && queue.as_deref().is_some_and(|q| self.config(frame.file).queue_is_sync(q))
            {
                for job in self.jobs_made(chain, frame) {
                    if let Some(handle) = self.index.method(&job, "handle") {
                        self.follow(handle, at, &|| format!("{}::handle()", short(&job)), frame);
                    }
                }
                return;
            }
            if let Some(tx) = &tx {
                // A log line a rollback strands still tells the truth about an attempt;
                // one per retried attempt repeats it (seed 004). Logs count when retried.
                let stranded_log = effect.log && !tx.retried;
                // A push on the `database` queue of the transaction's own connection is a
                // row of the transaction: it rolls back with it, and no worker sees it first.
                let waits_for_commit = effect.dispatch
                    && (effect.after_commit
                        || self
                            .config(frame.file)
                            .queue_in_transaction(queue.as_deref(), tx.connection.as_deref()));
                // A transaction that only reads has nothing a rollback undoes.
                let strands_nothing = tx.read_only && !tx.retried;
                let rule = if tx.retried { Rule::RetriedEffect } else { Rule::StrandedEffect };
                if !waits_for_commit
                    && !stranded_log
                    && !strands_nothing
                    && !self.reported(rule, frame, at.pos)
                {
                    let (file, pos, path) = self.site(frame, at.pos);
                    if tx.retried {
                        let message = format!(
                            "{} inside the transaction at line {} (attempts: {}){path}",
                            effect.what, tx.pos.line, tx.attempts
                        );
                        self.report_retried(tx, (file, pos), message, effect.log);
                    } else {
                        let message = format!(
                            "{} inside the transaction at line {}{path}",
                            effect.what, tx.pos.line
                        );
                        self.report(Rule::StrandedEffect, file, pos, message);
                    }
                }
            }
            return;
        }

        // Events: a synchronous listener runs now, inside; a queued one is a dispatch.
        if let Some(event) = self.event_class(chain, frame) {
            if tx.is_some() {
                for (listener, method) in self.index.listeners(&event).to_vec() {
                    if self.index.is_queued(&listener) {
                        let in_tx = tx.as_ref().is_some_and(|t| {
                            self.config(frame.file)
                                .queue_in_transaction(None, t.connection.as_deref())
                        });
                        if !self.index.is_after_commit(&listener)
                            && !self.config(frame.file).queue_after_commit(None)
                            && !in_tx
                        {
                            let tx = tx.clone();
                            if let Some(tx) = tx {
                                let (file, pos, path) = self.site(frame, outer.pos);
                                let message = format!(
                                    "event {} is handled by queued listener {listener}, pushed without after-commit inside the transaction at line {}{path}",
                                    short(&event),
                                    tx.pos.line
                                );
                                if tx.retried {
                                    self.report_retried(&tx, (file, pos), message, false);
                                } else {
                                    self.report(Rule::StrandedEffect, file, pos, message);
                                }
                            }
                        }
                    } else if let Some(handle) = self.index.method(&listener, &method) {
                        self.follow(
                            handle,
                            outer,
                            &|| format!("{}::{method}()", short(&listener)),
                            frame,
                        );
                    }
                }
            }
            return;
        }

        // A closure handed to a function of the tree that runs it inside a transaction
        // it opens (`$this->atomically(fn () => …)`): walked inside that transaction.
        let targets = self.targets(outer, frame);
        for (target, _) in &targets {
            let Some((index, attempts)) = self.tx_param(target.function) else { continue };
            let Some(arg) = outer.args.get(index).filter(|a| a.name.is_none()) else { continue };
            let closure = match &arg.value {
                Expr::Closure(c) => Some(&**c),
                Expr::Var(v) => self.env(frame).and_then(|env| env.closures.get(v).copied()),
                _ => None,
            };
            if let Some(c) = closure {
                handled.insert(&arg.value as *const Expr);
                let tx = self.open(outer, Some(attempts), None, &c.body, frame);
                let settle = (self.tx(frame).is_none() && tx.retried).then_some(tx.root);
                let tx_id = tx.id;
                let inner = Frame { tx: Some(tx), ..frame.clone() };
                self.walk_transaction_body(&c.body, &inner);
                self.tx_ends.insert(tx_id, self.seq);
                if let Some(root) = settle {
                    self.settle_retried(root);
                }
            }
        }

        // A job run now (`dispatch_sync(new X)`, `X::dispatchSync()`, `Bus::dispatchNow(new
        // X)`): its `handle()` runs here, inside.
        if tx.is_some()
            && let Some(job) = self.job_run_now(outer, frame)
            && let Some(handle) = self.index.method(&job, "handle")
        {
            self.follow(handle, outer, &|| format!("{}::handle()", short(&job)), frame);
        }

        // Calls into the tree, followed while a transaction is in force.
        if tx.is_some() || frame.tx.is_some() {
            for (target, (class, name)) in targets {
                let label = || match class {
                    Some(c) => format!("{}::{name}()", short(c)),
                    None => format!("{name}()"),
                };
                self.follow(target, outer, &label, frame);
            }
        }
    }

    /// A `transaction()` call: its attempts, the retry it drops when nested, and its
    /// closure walked with the transaction in force.
    fn transaction(
        &mut self,
        call: &'a Call,
        connection: Option<String>,
        frame: &Frame<'a>,
        handled: &mut HashSet<*const Expr>,
    ) {
        let attempts = match call.arg(1, "attempts") {
            None => Some(1),
            Some(e) => self.int(e, frame, 0),
        };
        let outer = self.tx(frame);
        if let (Some(outer_tx), Some(n)) = (&outer, attempts)
            && n > 1
            && !self.reported(Rule::DroppedRetry, frame, call.pos)
        {
            let (file, pos, path) = self.site(frame, call.pos);
            self.report(
                    Rule::DroppedRetry,
                    file,
                    pos,
                    format!(
                        "a transaction with attempts: {n} runs inside the transaction at line {}, so it is never retried{path}",
                        outer_tx.pos.line
                    ),
                );
        }
        let Some(arg) = call.args.first() else { return };
        let closure = match &arg.value {
            Expr::Closure(c) => Some(&**c),
            Expr::Var(v) => self.env(frame).and_then(|env| env.closures.get(v).copied()),
            _ => None,
        };
        let body: &'a [Expr] = closure.map_or(&[], |c| &c.body);
        let tx = self.open(call, attempts, connection, body, frame);
        let tx_id = tx.id;
        let tx_root = Some((tx.root, tx.retried));
        let inner = Frame { tx: Some(tx), ..frame.clone() };
        if closure.is_some() {
            handled.insert(&arg.value as *const Expr);
            self.walk_transaction_body(body, &inner);
        }
        self.tx_ends.insert(tx_id, self.seq);
        if outer.is_none() && tx_root.is_some_and(|(_, retried)| retried) {
            self.settle_retried(tx_root.map_or(0, |(r, _)| r));
        }
    }

    /// Walks a transaction's closure, unless that closure is already being walked as
    /// one further up (a closure that reaches itself through a variable).
    pub(super) fn walk_transaction_body(&mut self, body: &'a [Expr], inner: &Frame<'a>) {
        let key = body.as_ptr();
        if self.in_transaction_bodies.contains(&key) {
            return;
        }
        self.in_transaction_bodies.push(key);
        for s in body {
            self.walk(s, inner);
        }
        self.in_transaction_bodies.pop();
    }

    /// A transaction opened at `call` with `body` as its closure: nested, a savepoint of
    /// the one in force (retried when it is); else its own.
    fn open(
        &mut self,
        call: &'a Call,
        attempts: Option<u32>,
        connection: Option<String>,
        body: &'a [Expr],
        frame: &Frame<'a>,
    ) -> Tx {
        let attempts_n = attempts.unwrap_or(1);
        let driver = self.config(frame.file).driver(connection.as_deref());
        self.next_tx += 1;
        match self.tx(frame) {
            Some(o) => Tx { id: self.next_tx, pos: call.pos, ..o },
            None => Tx {
                id: self.next_tx,
                root: self.next_tx,
                retried: attempts_n > 1,
                attempts: attempts_n,
                pos: call.pos,
                driver,
                connection,
                read_only: !self.writes(body, frame, 0),
            },
        }
    }
}

impl<'a> Analysis<'a> {
    /// The job a call runs synchronously, if it is one of the framework's ways to.
    fn job_run_now(&self, call: &'a Call, frame: &Frame<'a>) -> Option<String> {
        const NOW: [&str; 2] = ["dispatchSync", "dispatchNow"];
        let first = || call.args.first().and_then(|a| self.job_class(&a.value, frame));
        match &call.callee {
            Callee::Function(f) => {
                lower_in(f.trim_start_matches('\\'), &["dispatch_sync", "dispatch_now"])
                    .then(first)?
            }
            Callee::Static { class, name } if lower_in(name, &NOW) => {
                if super::effects::facade(class, "Bus") {
                    first()
                } else {
                    self.class_name(class, frame)
                }
            }
            Callee::Method { object, name } if lower_in(name, &NOW) => {
                let types = self.types_of(object, frame);
                (self.service_of(&types) == Some(super::services::Service::Bus)).then(first)?
            }
            _ => None,
        }
    }

    /// The job classes a dispatch chain makes: `X::dispatch()`, `new X` in any call's
    /// arguments or in an array of them (`Bus::chain([new A, new B])`), a variable holding
    /// one.
    fn jobs_made(&self, chain: &[&'a Call], frame: &Frame<'a>) -> Vec<String> {
        let mut out = Vec::new();
        for c in chain {
            if let Callee::Static { class, name } = &c.callee
                && name.eq_ignore_ascii_case("dispatch")
                && let Some(class) = self.class_name(class, frame)
            {
                out.push(class);
            }
            for a in &c.args {
                match &a.value {
                    Expr::Array(items) => {
                        out.extend(items.iter().filter_map(|(_, v)| self.job_class(v, frame)));
                    }
                    other => out.extend(self.job_class(other, frame)),
                }
            }
        }
        out
    }
}

/// Whether a body can `return` (closures in it aside).
fn returns(body: &[Expr]) -> bool {
    fn walk(e: &Expr) -> bool {
        match e {
            Expr::Return(..) => true,
            Expr::Closure(_) => false,
            _ => {
                let mut found = false;
                e.for_each_child(&mut |c| found = found || walk(c));
                found
            }
        }
    }
    body.iter().any(walk)
}

/// Whether a body opens a (nested) transaction: a savepoint that a catch after it can
/// recover from.
fn contains_transaction(body: &[Expr]) -> bool {
    fn walk(e: &Expr) -> bool {
        if let Expr::Call(c) = e
            && c.method_name().is_some_and(|n| n.eq_ignore_ascii_case("transaction"))
        {
            return true;
        }
        if let Expr::Closure(c) = e {
            return c.body.iter().any(walk);
        }
        let mut found = false;
        e.for_each_child(&mut |c| found = found || walk(c));
        found
    }
    body.iter().any(walk)
}
