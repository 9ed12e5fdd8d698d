//! The walk that applies the rules: every function, method and top-level script is
//! walked once from outside any transaction; a transaction's closure is walked with the
//! transaction in force, and inside it calls into the tree are followed (a bounded
//! depth) so that an effect or a retried transaction one call away is still seen. A
//! finding made through a followed call points at the call inside the transaction.

use crate::config::{AppConfig, Driver, LOCK_WAIT_DEFAULT_S};
use crate::index::{FunctionRef, Index};
use crate::ir::{Call, Callee, Class, Closure, Expr, File, Function, Pos};
use crate::rules::Rule;
use std::collections::{HashMap, HashSet};

/// How many calls deep a transaction's closure is followed into the tree.
const FOLLOW_DEPTH_MAX: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFinding {
    pub rule: Rule,
    pub file: usize,
    pub pos: Pos,
    pub message: String,
}

/// A transaction in force.
#[derive(Debug, Clone)]
struct Tx {
    id: u32,
    /// This transaction or one around it has attempts > 1: its closure can re-run.
    retried: bool,
    attempts: u32,
    pos: Pos,
    driver: Option<Driver>,
}

/// The first call made inside a transaction that led to where the walk is now.
#[derive(Debug, Clone)]
struct Via {
    file: usize,
    pos: Pos,
    path: String,
}

#[derive(Clone)]
struct Frame<'a> {
    file: usize,
    class: Option<&'a Class>,
    function: Option<&'a Function>,
    tx: Option<Tx>,
    via: Option<Via>,
    depth: usize,
}

/// One function's variables: the classes they hold and the closures assigned to them.
#[derive(Default)]
struct Env<'a> {
    types: HashMap<String, Vec<String>>,
    closures: HashMap<String, &'a Closure>,
}

pub struct Analysis<'a> {
    index: &'a Index<'a>,
    files: &'a [(usize, &'a File)],
    configs: &'a [AppConfig],
    /// file → which entry of `configs` applies.
    file_config: &'a [usize],
    pub findings: Vec<RawFinding>,
    seen: HashSet<(Rule, usize, Pos)>,
    next_tx: u32,
    /// Manually opened transactions (`DB::beginTransaction()`) in the current root.
    manual: Vec<Tx>,
    /// Budget moves and sends of the current root, with the transaction they are in.
    budget: Vec<(Pos, Option<u32>)>,
    sends: Vec<Option<u32>>,
    lock_reported: HashSet<u32>,
    following: Vec<*const Function>,
    envs: HashMap<*const Function, Env<'a>>,
}

const DB_FACADES: [&str; 2] = ["Illuminate\\Support\\Facades\\DB", "DB"];

fn facade(class: &str, name: &str) -> bool {
    class.eq_ignore_ascii_case(name)
        || class
            .strip_prefix("Illuminate\\Support\\Facades\\")
            .is_some_and(|c| c.eq_ignore_ascii_case(name))
}

fn is_db_type(t: &str) -> bool {
    let t = t.to_ascii_lowercase();
    t.starts_with("illuminate\\database\\")
        && (t.contains("connection") || t.ends_with("databasemanager"))
}

fn lower_in(name: &str, set: &[&str]) -> bool {
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
const STORAGE_WRITES: [&str; 13] = [
    "put",
    "putFile",
    "putFileAs",
    "write",
    "writeStream",
    "delete",
    "deleteDirectory",
    "copy",
    "move",
    "append",
    "prepend",
    "makeDirectory",
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
const GUZZLE_TYPES: [&str; 2] = ["GuzzleHttp\\Client", "GuzzleHttp\\ClientInterface"];
const BUDGET_WORDS: [&str; 6] = ["credit", "quota", "balance", "allowance", "budget", "token"];

/// What a call does that a rollback cannot undo.
#[derive(Debug)]
struct Effect {
    what: String,
    /// A log line (an effect only where the closure is retried).
    log: bool,
    /// A queue push: harmless once it waits for the commit.
    dispatch: bool,
    after_commit: bool,
}

impl<'a> Analysis<'a> {
    pub fn new(
        index: &'a Index<'a>,
        files: &'a [(usize, &'a File)],
        configs: &'a [AppConfig],
        file_config: &'a [usize],
    ) -> Analysis<'a> {
        Analysis {
            index,
            files,
            configs,
            file_config,
            findings: Vec::new(),
            seen: HashSet::new(),
            next_tx: 0,
            manual: Vec::new(),
            budget: Vec::new(),
            sends: Vec::new(),
            lock_reported: HashSet::new(),
            following: Vec::new(),
            envs: HashMap::new(),
        }
    }

    fn config(&self, file: usize) -> &'a AppConfig {
        let i = self.file_config.get(file).copied().unwrap_or(0);
        &self.configs[i.min(self.configs.len().saturating_sub(1))]
    }

    pub fn run(&mut self) {
        let files = self.files;
        for (file, parsed) in files {
            for class in &parsed.classes {
                for method in &class.methods {
                    self.root(*file, Some(class), Some(method), &method.body);
                }
            }
            for function in &parsed.functions {
                self.root(*file, None, Some(function), &function.body);
            }
            self.root(*file, None, None, &parsed.top);
        }
        self.findings.sort_by_key(|a| (a.file, a.pos, a.rule));
    }

    fn root(
        &mut self,
        file: usize,
        class: Option<&'a Class>,
        function: Option<&'a Function>,
        body: &'a [Expr],
    ) {
        self.manual.clear();
        self.budget.clear();
        self.sends.clear();
        let frame = Frame { file, class, function, tx: None, via: None, depth: 0 };
        self.env_for(function, body);
        for e in body {
            self.walk(e, &frame);
        }
        if !self.sends.is_empty() {
            for (pos, tx) in std::mem::take(&mut self.budget) {
                if self.sends.iter().any(|s| tx.is_none() || *s != tx) {
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

    fn env_for(&mut self, function: Option<&'a Function>, body: &'a [Expr]) {
        let key = function.map_or(std::ptr::null(), |f| f as *const Function);
        if function.is_some() && self.envs.contains_key(&key) {
            return;
        }
        let mut env = Env::default();
        if let Some(f) = function {
            for p in &f.params {
                env.types.insert(p.name.clone(), p.types.clone());
            }
        }
        for e in body {
            collect_env(e, &mut env);
        }
        self.envs.insert(key, env);
    }

    fn report(&mut self, rule: Rule, file: usize, pos: Pos, message: String) {
        if self.seen.insert((rule, file, pos)) {
            self.findings.push(RawFinding { rule, file, pos, message });
        }
    }

    /// The transaction in force: the closure's, or a manually begun one.
    fn tx(&self, frame: &Frame<'a>) -> Option<Tx> {
        frame
            .tx
            .clone()
            .or_else(|| if frame.via.is_none() { self.manual.last().cloned() } else { None })
    }

    fn walk(&mut self, e: &'a Expr, frame: &Frame<'a>) {
        match e {
            Expr::Call(call) => self.call(call, frame),
            Expr::Closure(c) => {
                // A closure is most often called where it is written (each(), map(),
                // tap()); its body is walked in place.
                for s in &c.body {
                    self.walk(s, frame);
                }
            }
            Expr::Try(t) => {
                for s in &t.body {
                    self.walk(s, frame);
                }
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
                        if catches_query && !c.ends_in_throw {
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
                for c in &t.catches {
                    for s in &c.body {
                        self.walk(s, frame);
                    }
                }
                for s in &t.finally {
                    self.walk(s, frame);
                }
            }
            other => other.for_each_child(&mut |c| self.walk(c, frame)),
        }
    }

    /// Where a finding made now points: the call inside the transaction that led here,
    /// or the place itself.
    fn site(&self, frame: &Frame<'a>, pos: Pos) -> (usize, Pos, String) {
        match &frame.via {
            Some(via) => (via.file, via.pos, format!(" (via {} at line {})", via.path, pos.line)),
            None => (frame.file, pos, String::new()),
        }
    }

    fn call(&mut self, call: &'a Call, frame: &Frame<'a>) {
        // The chain `a()->b()->c()`, outermost first.
        let mut chain: Vec<&'a Call> = vec![call];
        while let Some(Callee::Method { object: Expr::Call(inner), .. }) =
            chain.last().map(|c| &c.callee)
        {
            chain.push(inner);
        }
        let mut handled: HashSet<*const Expr> = HashSet::new();
        self.classify(&chain, frame, &mut handled);
        // The arguments of every call in the chain, and what the chain starts from.
        for c in chain.iter().rev() {
            if let Callee::Method { object, .. } = &c.callee
                && !matches!(object, Expr::Call(_))
            {
                self.walk(object, frame);
            }
            if let Callee::Dynamic(d) = &c.callee {
                self.walk(d, frame);
            }
            for a in &c.args {
                if !handled.contains(&(&a.value as *const Expr)) {
                    self.walk(&a.value, frame);
                }
            }
        }
    }

    fn classify(
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
        if frame.via.is_none()
            && (on_db || chain.len() > 1 && self.db_receiver(chain, frame, false))
        {
            if name.eq_ignore_ascii_case("beginTransaction") {
                let driver = self.config(frame.file).driver(self.connection_name(chain).as_deref());
                self.next_tx += 1;
                self.manual.push(Tx {
                    id: self.next_tx,
                    retried: false,
                    attempts: 1,
                    pos: outer.pos,
                    driver,
                });
                return;
            }
            if name.eq_ignore_ascii_case("commit") || name.eq_ignore_ascii_case("rollBack") {
                self.manual.pop();
                return;
            }
        }

        let tx = self.tx(frame);

        // Locks in a retried transaction.
        if let Some(tx) = &tx
            && tx.retried
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

        // Effects.
        if let Some(effect) = self.effect(chain, frame) {
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
                self.sends.push(tx.as_ref().map(|t| t.id));
            }
            if let Some(tx) = &tx {
                // A log line a rollback strands still tells the truth about an attempt;
                // one per retried attempt repeats it (seed 004). Logs count when retried.
                let stranded_log = effect.log && !tx.retried;
                let waits_for_commit = effect.dispatch && effect.after_commit;
                if !waits_for_commit && !stranded_log {
                    let (file, pos, path) = self.site(frame, outer.pos);
                    let (rule, how) = if tx.retried {
                        (
                            Rule::RetriedEffect,
                            format!(
                                "the transaction at line {} (attempts: {})",
                                tx.pos.line, tx.attempts
                            ),
                        )
                    } else {
                        (Rule::StrandedEffect, format!("the transaction at line {}", tx.pos.line))
                    };
                    let message = format!("{} inside {how}{path}", effect.what);
                    self.report(rule, file, pos, message);
                }
            }
            return;
        }

        // Events: a synchronous listener runs now, inside; a queued one is a dispatch.
        if let Some(event) = self.event_class(chain) {
            if tx.is_some() {
                for (listener, method) in self.index.listeners(&event).to_vec() {
                    if self.index.is_queued(&listener) {
                        if !self.index.is_after_commit(&listener)
                            && !self.config(frame.file).queue_after_commit(None)
                        {
                            let tx = tx.clone();
                            if let Some(tx) = tx {
                                let (file, pos, path) = self.site(frame, outer.pos);
                                let rule = if tx.retried {
                                    Rule::RetriedEffect
                                } else {
                                    Rule::StrandedEffect
                                };
                                self.report(
                                    rule,
                                    file,
                                    pos,
                                    format!(
                                        "event {} is handled by queued listener {listener}, pushed without after-commit inside the transaction at line {}{path}",
                                        short(&event),
                                        tx.pos.line
                                    ),
                                );
                            }
                        }
                    } else if let Some(handle) = self.index.method(&listener, &method) {
                        self.follow(
                            handle,
                            outer,
                            &format!("{}::{method}()", short(&listener)),
                            frame,
                        );
                    }
                }
            }
            return;
        }

        // Calls into the tree, followed while a transaction is in force.
        if tx.is_some() || frame.tx.is_some() {
            for (target, label) in self.targets(outer, frame) {
                self.follow(target, outer, &label, frame);
            }
        }
    }

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
        let attempts_n = attempts.unwrap_or(1);
        let driver = self.config(frame.file).driver(connection.as_deref());
        self.next_tx += 1;
        let tx = match &outer {
            // Nested: a savepoint inside the outer transaction, retried when it is.
            Some(o) => Tx { id: self.next_tx, pos: call.pos, ..o.clone() },
            None => Tx {
                id: self.next_tx,
                retried: attempts_n > 1,
                attempts: attempts_n,
                pos: call.pos,
                driver,
            },
        };
        let inner = Frame { tx: Some(tx), ..frame.clone() };
        let Some(arg) = call.args.first() else { return };
        let closure = match &arg.value {
            Expr::Closure(c) => Some(&**c),
            Expr::Var(v) => self.env(frame).and_then(|env| env.closures.get(v).copied()),
            _ => None,
        };
        if let Some(c) = closure {
            handled.insert(&arg.value as *const Expr);
            for s in &c.body {
                self.walk(s, &inner);
            }
        }
    }

    fn env(&self, frame: &Frame<'a>) -> Option<&Env<'a>> {
        let key = frame.function.map_or(std::ptr::null(), |f| f as *const Function);
        self.envs.get(&key)
    }

    /// An integer literal or a class constant holding one.
    fn int(&self, e: &Expr, frame: &Frame<'a>, depth: usize) -> Option<u32> {
        match e {
            Expr::Int(n) => u32::try_from(*n).ok(),
            Expr::ClassConst { class, name } if depth < 4 => {
                let class = self.class_name(class, frame)?;
                let value = self.index.constant(&class, name)?;
                self.int(value, frame, depth + 1)
            }
            _ => None,
        }
    }

    fn class_name(&self, class: &str, frame: &Frame<'a>) -> Option<String> {
        match class {
            "self" | "static" => frame.class.map(|c| c.name.clone()),
            "parent" => frame.class.and_then(|c| c.extends.first().cloned()),
            other => Some(other.to_string()),
        }
    }

    /// Whether the chain's `transaction()` is called on a database connection.
    fn db_receiver(&self, chain: &[&'a Call], frame: &Frame<'a>, on_db: bool) -> bool {
        if on_db {
            return true;
        }
        if chain
            .iter()
            .skip(1)
            .any(|c| c.method_name().is_some_and(|n| lower_in(n, &["getConnection", "connection"])))
        {
            return true;
        }
        let outer = chain[0];
        let Callee::Method { object, .. } = &outer.callee else { return false };
        let types = self.types_of(object, frame);
        if !types.is_empty() {
            return types.iter().any(|t| is_db_type(t));
        }
        // An unknown receiver: a closure first argument says "transaction".
        matches!(outer.args.first().map(|a| &a.value), Some(Expr::Closure(_)))
    }

    /// `DB::connection('name')` in the chain.
    fn connection_name(&self, chain: &[&'a Call]) -> Option<String> {
        chain.iter().find_map(|c| match (c.method_name(), c.args.first()) {
            (Some(n), Some(a)) if n.eq_ignore_ascii_case("connection") => match &a.value {
                Expr::Str(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        })
    }

    fn types_of(&self, e: &Expr, frame: &Frame<'a>) -> Vec<String> {
        match e {
            Expr::Var(v) if v == "this" => {
                frame.class.map(|c| vec![c.name.clone()]).unwrap_or_default()
            }
            Expr::Var(v) => {
                self.env(frame).and_then(|env| env.types.get(v).cloned()).unwrap_or_default()
            }
            Expr::Prop { object, name } if matches!(&**object, Expr::Var(t) if t == "this") => {
                match frame.class {
                    Some(c) => self.index.property_types(&c.name, name),
                    None => Vec::new(),
                }
            }
            Expr::New { class, .. } => self.class_name(class, frame).into_iter().collect(),
            Expr::Call(c) => made_class(c).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// The functions a call can land on in the tree.
    fn targets(&self, call: &'a Call, frame: &Frame<'a>) -> Vec<(FunctionRef<'a>, String)> {
        let mut out = Vec::new();
        match &call.callee {
            Callee::Function(name) => {
                if let Some(f) = self.index.function(name) {
                    out.push((f, format!("{name}()")));
                }
            }
            Callee::Static { class, name } => {
                if let Some(class) = self.class_name(class, frame)
                    && let Some(f) = self.index.method(&class, name)
                {
                    out.push((f, format!("{}::{name}()", short(&class))));
                }
            }
            Callee::Method { object, name } => {
                for t in self.types_of(object, frame) {
                    for c in self.index.concrete(&t) {
                        if let Some(f) = self.index.method(&c.name, name)
                            && !out.iter().any(|(o, _): &(FunctionRef<'a>, String)| {
                                std::ptr::eq(o.function, f.function)
                            })
                        {
                            out.push((f, format!("{}::{name}()", short(&c.name))));
                        }
                    }
                }
            }
            Callee::Dynamic(_) => {}
        }
        out
    }

    fn follow(&mut self, target: FunctionRef<'a>, call: &'a Call, label: &str, frame: &Frame<'a>) {
        let key = target.function as *const Function;
        if frame.depth >= FOLLOW_DEPTH_MAX || self.following.contains(&key) {
            return;
        }
        let via = match &frame.via {
            Some(v) => Via { path: format!("{} → {label}", v.path), ..v.clone() },
            None => Via { file: frame.file, pos: call.pos, path: label.to_string() },
        };
        let inner = Frame {
            file: target.file,
            class: target.class.or(frame.class),
            function: Some(target.function),
            tx: self.tx(frame),
            via: Some(via),
            depth: frame.depth + 1,
        };
        self.env_for(Some(target.function), &target.function.body);
        self.following.push(key);
        for s in &target.function.body {
            self.walk(s, &inner);
        }
        self.following.pop();
    }

    /// `event(new E)`, `Event::dispatch(new E)`, `E::dispatch()` for an event class.
    fn event_class(&self, chain: &[&'a Call]) -> Option<String> {
        let outer = chain[0];
        let first_new = || match outer.args.first().map(|a| &a.value) {
            Some(Expr::New { class, .. }) => Some(class.clone()),
            _ => None,
        };
        match &outer.callee {
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

    fn effect(&self, chain: &[&'a Call], frame: &Frame<'a>) -> Option<Effect> {
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
        let send = |what: String| {
            Some(Effect {
                log: what.starts_with("log line"),
                what,
                dispatch: false,
                after_commit: false,
            })
        };
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
                    let job = outer.args.first().and_then(|a| new_class(&a.value));
                    return dispatch(format!("mail queued (Mail::…->{name}())"), job.as_deref());
                }
                return None;
            }
            if facade(class, "Notification")
                && lower_in(name, &["send", "sendNow", "notify", "notifyNow"])
            {
                return self.notification(outer, name, &modifiers);
            }
            if facade(class, "Http")
                && lower_in(name, &HTTP_VERBS)
                && !root.method_name().is_some_and(|n| n.eq_ignore_ascii_case("fake"))
            {
                return send(format!("HTTP call (Http::…->{name}())"));
            }
            if facade(class, "Cache") && lower_in(name, &CACHE_WRITES) {
                return send(format!("cache write (Cache::…{name}())"));
            }
            if facade(class, "Redis") && lower_in(name, &REDIS_WRITES) {
                return send(format!("Redis write (Redis::…{name}())"));
            }
            if facade(class, "Storage") && lower_in(name, &STORAGE_WRITES) {
                return send(format!("storage write (Storage::…{name}())"));
            }
            if facade(class, "Log") && lower_in(name, &LOG_LEVELS) {
                return send(format!("log line (Log::…{name}())"));
            }
            if (facade(class, "Bus") || facade(class, "Queue"))
                && lower_in(
                    name,
                    &["dispatch", "dispatchToQueue", "push", "later", "pushOn", "laterOn", "bulk"],
                )
            {
                let job = outer.args.first().and_then(|a| new_class(&a.value));
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
                    let job = outer.args.first().and_then(|a| new_class(&a.value));
                    return dispatch("dispatch() without ->afterCommit()".into(), job.as_deref());
                }
                if function.eq_ignore_ascii_case("curl_exec")
                    || function.eq_ignore_ascii_case("curl_multi_exec")
                {
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
                    let job = root.args.first().and_then(|a| new_class(&a.value));
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
            if lower_in(name, &["notify", "notifyNow"]) && outer.args.len() == 1 {
                return self.notification(outer, name, &modifiers);
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
            if lower_in(name, &HTTP_VERBS) || lower_in(name, &["requestAsync", "sendAsync"]) {
                let types = self.types_of(object, frame);
                if types.iter().any(|t| lower_in(t, &GUZZLE_TYPES)) {
                    return send(format!("HTTP call (Guzzle ->{name}())"));
                }
            }
            if name.eq_ignore_ascii_case("dispatch")
                && matches!(object, Expr::Var(v) if v == "this")
                && let Some(job) = outer.args.first().and_then(|a| new_class(&a.value))
            {
                return dispatch(
                    format!("$this->dispatch(new {}) without ->afterCommit()", short(&job)),
                    Some(&job),
                );
            }
        }
        None
    }

    fn notification(
        &self,
        call: &'a Call,
        name: &str,
        modifiers: &dyn Fn(Option<&str>) -> bool,
    ) -> Option<Effect> {
        let notification = call.args.iter().rev().find_map(|a| new_class(&a.value));
        let queued = !name.to_ascii_lowercase().ends_with("now")
            && notification.as_deref().is_some_and(|n| self.index.is_queued(n));
        if queued {
            let n = notification.unwrap_or_default();
            return Some(Effect {
                log: false,
                what: format!("queued notification {} pushed without after-commit", short(&n)),
                dispatch: true,
                after_commit: modifiers(Some(&n)),
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

/// `app(Foo::class)`, `resolve(Foo::class)`, `App::make(Foo::class)`.
fn made_class(call: &Call) -> Option<String> {
    let maker = match &call.callee {
        Callee::Function(f) => lower_in(f, &["app", "resolve"]),
        Callee::Static { class, name } => {
            facade(class, "App") && lower_in(name, &["make", "makeWith"])
        }
        Callee::Method { name, .. } => lower_in(name, &["make", "makeWith"]),
        Callee::Dynamic(_) => false,
    };
    match (maker, call.args.first().map(|a| &a.value)) {
        (true, Some(Expr::ClassName(c))) => Some(c.clone()),
        _ => None,
    }
}

fn starts_with_url(e: &Expr) -> bool {
    match e {
        Expr::Str(s) => s.starts_with("http://") || s.starts_with("https://"),
        Expr::Other(parts) => parts.first().is_some_and(starts_with_url),
        _ => false,
    }
}

fn short(class: &str) -> &str {
    class.rsplit('\\').next().unwrap_or(class)
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

fn collect_env<'a>(e: &'a Expr, env: &mut Env<'a>) {
    match e {
        Expr::Assign { target, value } => {
            if let Expr::Var(v) = &**target {
                match &**value {
                    Expr::New { class, .. } if class != "?" => {
                        env.types.insert(v.clone(), vec![class.clone()]);
                    }
                    Expr::Call(c) => {
                        if let Some(class) = made_class(c) {
                            env.types.insert(v.clone(), vec![class]);
                        }
                    }
                    Expr::Closure(c) => {
                        env.closures.insert(v.clone(), c);
                    }
                    _ => {}
                }
            }
        }
        Expr::Closure(c) => {
            for p in &c.params {
                if !p.types.is_empty() {
                    env.types.entry(p.name.clone()).or_insert_with(|| p.types.clone());
                }
            }
            for s in &c.body {
                collect_env(s, env);
            }
            return;
        }
        _ => {}
    }
    e.for_each_child(&mut |c| collect_env(c, env));
}
