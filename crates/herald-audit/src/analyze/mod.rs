//! The walk that applies the rules: every function, method and top-level script is
//! walked once from outside any transaction; a transaction's closure is walked with the
//! transaction in force, and inside it calls into the tree are followed (a bounded
//! depth) so that an effect or a retried transaction one call away is still seen. A
//! finding made through a followed call points at the call inside the transaction.
//!
//! This file holds the walk and the state it carries (`Frame`, `Tx`, `Env`); what counts
//! as an effect is in `effects.rs`, the rules' checks on each call are in `checks.rs`,
//! and what a receiver, a variable or a call resolves to is in `resolve.rs`.

mod checks;
mod effects;
mod harmless;
mod readonly;
mod resolve;
mod services;

use resolve::made_class;

use crate::config::{AppConfig, Driver};
use crate::index::{FunctionRef, Index};
use crate::ir::{Call, Callee, Class, Closure, Expr, File, Function, Pos, leaves};
use crate::rules::Rule;
use std::cell::RefCell;
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

/// A function walked: which, in which outermost transaction, from which call of the
/// transaction's own body (none: from deeper down).
type Walked = (*const Function, u32, Option<(usize, Pos)>);

/// A log line reported as `retried-effect`, waiting for the end of its transaction's
/// closure: with no statement after it (and in no loop) a deadlock retry, which can only
/// interrupt a statement, cannot repeat it (issue 39's corpus: 2FAuth's log lines after
/// its transaction's last statement).
struct PendingRetried {
    index: usize,
    root: u32,
    statements: u64,
    in_loop: bool,
}

/// A transaction in force.
#[derive(Debug, Clone)]
struct Tx {
    id: u32,
    /// The outermost transaction's id (its own when not nested).
    root: u32,
    /// This transaction or one around it has attempts > 1: its closure can re-run.
    retried: bool,
    attempts: u32,
    pos: Pos,
    driver: Option<Driver>,
    /// The database connection it runs on (`None`: the default one).
    connection: Option<String>,
    /// Its closure writes nothing (reads only): a rollback has nothing to undo, so an
    /// effect in it strands nothing.
    read_only: bool,
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
    /// Parameters of a followed function that its call leaves false or null (a default
    /// `$purge = false` not passed, or a literal `false`/`null`): an `if ($purge)` branch
    /// is not taken on this path (Pixelfed's `StatusService::del($id)`).
    falsy: Vec<String>,
    /// Parameters of a followed function bound to an array literal of the call (passed on
    /// from call to call), with the keys it has: `if (empty($data['swatch_value'])) {
    /// return; }` returns at once on this path when the literal lacks the key (UnoPim's
    /// `update(['sort_order' => …])`).
    literal_keys: Vec<(String, Vec<String>)>,
}

/// One function's variables: the classes they hold and the closures assigned to them.
#[derive(Default)]
struct Env<'a> {
    types: HashMap<String, Vec<String>>,
    closures: HashMap<String, &'a Closure>,
    /// Variables assigned a call's result (`$client = $this->client();`): typed by what
    /// the call returns, when asked.
    calls: HashMap<String, &'a Call>,
    /// Variables assigned a name made random (`$name = Str::random(32).'.jpg'`).
    fresh: HashSet<String>,
    /// Variables assigned a string, literal or built (`$url = "https://…/{$model}:…"`),
    /// and nothing else anywhere in the function (`None` otherwise): where a request goes
    /// (`harmless::computes_only`).
    strings: HashMap<String, Option<&'a Expr>>,
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
    /// Each send's transaction and when it was walked (`seq`).
    sends: Vec<(Option<u32>, u64)>,
    /// Calls classified so far: the order in which the walk met them.
    seq: u64,
    /// When each transaction's closure (or manual transaction) ended, by id.
    tx_ends: HashMap<u32, u64>,
    lock_reported: HashSet<u32>,
    following: Vec<*const Function>,
    envs: HashMap<*const Function, Env<'a>>,
    /// Functions already walked inside one outermost transaction (and, for a call made
    /// in the transaction's own body, from that call): in a call graph of n methods
    /// calling each other, each is walked about n times per transaction, not n^depth
    /// times (issue 39: 80 such methods took 43 s). An effect reached again deeper down
    /// through a second call of the body is reported once, at the first call. The cost:
    /// a function first reached near the depth limit is not walked again from nearer the
    /// transaction, so what lies below it past the limit stays unseen.
    walked: HashSet<Walked>,
    /// Per function: the parameter it runs inside a transaction it opens, if any.
    tx_params: RefCell<HashMap<*const Function, Option<(usize, u32)>>>,
    /// Per function: whether it (or what it calls, a few calls deep) writes.
    writes: RefCell<HashMap<*const Function, bool>>,
    /// Per function: the classes it returns (declared, or read off its returns).
    returns: RefCell<HashMap<*const Function, Vec<String>>>,
    /// Statements (writes, locks) walked so far, in source order.
    statements: u64,
    /// Loops (and closures walked in place: `each`, `chunk`) being walked whose body may
    /// run a statement: an effect in one is followed by the next turn's statements.
    loops_with_statements: usize,
    /// Retried log lines waiting for the end of their transaction's closure.
    pending: Vec<PendingRetried>,
    /// Findings taken back (by index).
    dropped: HashSet<usize>,
    /// The transaction closures being walked now (a guard against one reaching itself).
    in_transaction_bodies: Vec<*const Expr>,
    /// How deep `types_of` is in itself (a variable typed by a call on a variable …).
    typing_depth: std::cell::Cell<usize>,
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
            seq: 0,
            tx_ends: HashMap::new(),
            lock_reported: HashSet::new(),
            following: Vec::new(),
            envs: HashMap::new(),
            walked: HashSet::new(),
            tx_params: RefCell::new(HashMap::new()),
            writes: RefCell::new(HashMap::new()),
            returns: RefCell::new(HashMap::new()),
            typing_depth: std::cell::Cell::new(0),
            in_transaction_bodies: Vec::new(),
            statements: 0,
            loops_with_statements: 0,
            pending: Vec::new(),
            dropped: HashSet::new(),
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
        let dropped = std::mem::take(&mut self.dropped);
        let findings = std::mem::take(&mut self.findings);
        self.findings = findings
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !dropped.contains(i))
            .map(|(_, f)| f)
            .collect();
        self.findings.sort_by_key(|a| (a.file, a.pos, a.rule));
    }

    /// Reports an effect inside a retried transaction; a log line waits for the end of
    /// the transaction's closure (`settle_retried`).
    fn report_retried(&mut self, tx: &Tx, site: (usize, Pos), message: String, log: bool) {
        let index = self.findings.len();
        self.report(Rule::RetriedEffect, site.0, site.1, message);
        if log && self.findings.len() > index {
            self.pending.push(PendingRetried {
                index,
                root: tx.root,
                statements: self.statements,
                in_loop: self.loops_with_statements > 0,
            });
        }
    }

    /// At the end of the outermost retried closure `root`: a log line with no statement
    /// after it (and in no loop) is not repeated by a retry, which can only interrupt a
    /// statement, and a stranded log line still tells the truth: it is taken back. Other
    /// effects stay `retried-effect` there: a retry after a failed commit (a
    /// serialization failure on PostgreSQL) repeats them, and a rollback strands them.
    fn settle_retried(&mut self, root: u32) {
        let now = self.statements;
        let (mine, others): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|p| p.root == root);
        self.pending = others;
        for p in mine {
            if !p.in_loop && p.statements == now {
                self.dropped.insert(p.index);
            }
        }
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
        let frame = Frame {
            file,
            class,
            function,
            tx: None,
            via: None,
            depth: 0,
            falsy: Vec::new(),
            literal_keys: Vec::new(),
        };
        self.env_for(function, body);
        for e in body {
            self.walk(e, &frame);
        }
        self.check_budget(file);
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
                // tap()); its body is walked in place, as a loop's.
                let again = c.body.iter().any(readonly::may_run_statement);
                self.loops_with_statements += usize::from(again);
                for s in &c.body {
                    self.walk(s, frame);
                }
                self.loops_with_statements -= usize::from(again);
            }
            Expr::Loop(body) => {
                let again = body.iter().any(readonly::may_run_statement);
                self.loops_with_statements += usize::from(again);
                for s in body {
                    self.walk(s, frame);
                }
                self.loops_with_statements -= usize::from(again);
            }
            Expr::Try(t) => {
                // A catch starts from the deepest manual transaction the try body opened
                // (the exception may come from anywhere in it); the code after the try
                // goes on from where the try body ended.
                let mut peak = self.manual.clone();
                for s in &t.body {
                    self.walk(s, frame);
                    if self.manual.len() > peak.len() {
                        peak = self.manual.clone();
                    }
                }
                let after_try = self.manual.clone();
                self.check_catches(t, frame);
                for c in &t.catches {
                    self.manual = peak.clone();
                    for s in &c.body {
                        self.walk(s, frame);
                    }
                }
                self.manual = after_try;
                for s in &t.finally {
                    self.walk(s, frame);
                }
            }
            Expr::If(i) => {
                // Each branch starts from the state before the `if`; a branch that leaves
                // (`DB::rollBack(); return;`) ends its transaction for itself only.
                for c in &i.conditions {
                    self.walk(c, frame);
                }
                let start = self.manual.clone();
                let mut ends = Vec::new();
                // `if ($purge)` or `if ($publish && …)` with the parameter left false.
                let falsy = |e: &Expr| matches!(e, Expr::Var(v) if frame.falsy.contains(v));
                let skipped = match i.conditions.first() {
                    Some(Expr::And(operands)) if operands.iter().any(falsy) => Some(0),
                    Some(e) if falsy(e) => Some(0),
                    _ => None,
                };
                for (n, b) in i.branches.iter().enumerate() {
                    if skipped == Some(n) {
                        continue;
                    }
                    self.manual = start.clone();
                    let pending_before = self.pending.len();
                    for s in b {
                        self.walk(s, frame);
                    }
                    if !leaves(b) {
                        ends.push(std::mem::take(&mut self.manual));
                    } else if frame.via.is_none() && frame.tx.is_some() {
                        // A branch of the transaction's own closure that returns or
                        // throws: what its log lines are followed by ends here.
                        let now = self.statements;
                        for p in self.pending.drain(pending_before..) {
                            if !p.in_loop && p.statements == now {
                                self.dropped.insert(p.index);
                            }
                        }
                    }
                }
                if !i.has_else {
                    ends.push(start.clone());
                }
                // A transaction begun on one path that goes on is taken as begun
                // (`if (!App::runningUnitTests()) { DB::beginTransaction(); }`, Lychee);
                // else one ended on one path is taken as ended.
                let opened = ends.iter().any(|e| e.len() > start.len());
                self.manual = if opened {
                    ends.into_iter().max_by_key(Vec::len)
                } else {
                    ends.into_iter().min_by_key(Vec::len)
                }
                .unwrap_or(start);
            }
            other => other.for_each_child(&mut |c| self.walk(c, frame)),
        }
    }

    /// Where a finding made now points: the call inside the transaction that led here,
    /// or the place itself.
    /// Whether a finding of `rule` made now at `pos` is already reported (checked before
    /// its message is made: the walk meets the same site many times).
    fn reported(&self, rule: Rule, frame: &Frame<'a>, pos: Pos) -> bool {
        let (file, pos) = match &frame.via {
            Some(via) => (via.file, via.pos),
            None => (frame.file, pos),
        };
        self.seen.contains(&(rule, file, pos))
    }

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

    fn env(&self, frame: &Frame<'a>) -> Option<&Env<'a>> {
        let key = frame.function.map_or(std::ptr::null(), |f| f as *const Function);
        self.envs.get(&key)
    }

    /// Walks `target`'s body for `call`, inside the transaction in force; `label` names
    /// the step in the path a finding's message gives (made only when it is walked).
    fn follow(
        &mut self,
        target: FunctionRef<'a>,
        call: &'a Call,
        label: &dyn Fn() -> String,
        frame: &Frame<'a>,
    ) {
        let key = target.function as *const Function;
        if frame.depth >= FOLLOW_DEPTH_MAX || self.following.contains(&key) {
            return;
        }
        let tx_root = self.tx(frame).map_or(u32::MAX, |t| t.root);
        // A call made in the transaction's own body is walked for each place it is made
        // (two `event(new Shipped)` are two mails); below it, once per transaction.
        let site = if frame.via.is_none() { Some((frame.file, call.pos)) } else { None };
        let memo = (key, tx_root, site);
        if !self.walked.insert(memo) {
            return;
        }
        let via = match &frame.via {
            Some(v) => Via { path: format!("{} → {}", v.path, label()), ..v.clone() },
            None => Via { file: frame.file, pos: call.pos, path: label() },
        };
        let inner = Frame {
            file: target.file,
            class: target.class.or(frame.class),
            function: Some(target.function),
            tx: self.tx(frame),
            via: Some(via),
            depth: frame.depth + 1,
            falsy: falsy_params(target.function, call),
            literal_keys: literal_params(target.function, call, frame),
        };
        self.env_for(Some(target.function), &target.function.body);
        self.following.push(key);
        for s in &target.function.body {
            if returns_at_once(s, &inner.literal_keys) {
                break;
            }
            self.walk(s, &inner);
        }
        self.following.pop();
    }
}

/// The parameters `call` leaves false or null: not passed (nor named) with a `false` or
/// `null` default, or passed a literal `false` or `null`.
fn falsy_params(f: &Function, call: &Call) -> Vec<String> {
    let spread = call.args.iter().any(|a| a.name.as_deref() == Some("..."));
    let mut out = Vec::new();
    for (i, p) in f.params.iter().enumerate() {
        let falsy = |e: &Expr| matches!(e, Expr::Bool(false) | Expr::Null);
        let passed = call
            .args
            .iter()
            .find(|a| a.name.as_deref() == Some(p.name.as_str()))
            .or_else(|| call.args.get(i).filter(|a| a.name.is_none()));
        let is_falsy = match passed {
            Some(a) => falsy(&a.value),
            None => !spread && p.default.as_ref().is_some_and(falsy),
        };
        if is_falsy && !f.body.iter().any(|e| assigns(e, &p.name)) {
            out.push(p.name.clone());
        }
    }
    out
}

/// The parameters `call` binds to an array literal with string keys only (or to a
/// variable the caller itself has so bound), and those keys.
fn literal_params(f: &Function, call: &Call, frame: &Frame<'_>) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (i, p) in f.params.iter().enumerate() {
        let passed = call
            .args
            .iter()
            .find(|a| a.name.as_deref() == Some(p.name.as_str()))
            .or_else(|| call.args.get(i).filter(|a| a.name.is_none()));
        let keys = match passed.map(|a| &a.value) {
            Some(Expr::Array(items)) => items
                .iter()
                .map(|(k, _)| match k {
                    Some(Expr::Str(k)) => Some(k.clone()),
                    _ => None,
                })
                .collect::<Option<Vec<String>>>(),
            Some(Expr::Var(v)) => {
                frame.literal_keys.iter().find(|(n, _)| n == v).map(|(_, k)| k.clone())
            }
            _ => None,
        };
        if let Some(keys) = keys
            && !f.body.iter().any(|e| assigns(e, &p.name))
        {
            out.push((p.name.clone(), keys));
        }
    }
    out
}

/// `if (empty($param['key'])) { return; }` where `$param` is bound to a literal without
/// that key: the function returns here.
fn returns_at_once(e: &Expr, literal_keys: &[(String, Vec<String>)]) -> bool {
    let Expr::If(i) = e else { return false };
    if i.has_else
        || i.branches.len() != 1
        || !matches!(i.branches[0].as_slice(), [Expr::Return(..)])
    {
        return false;
    }
    let Some(Expr::Empty(inner)) = i.conditions.first() else { return false };
    let Expr::Index { base, key } = &**inner else { return false };
    let (Expr::Var(var), Expr::Str(key)) = (&**base, &**key) else { return false };
    literal_keys.iter().any(|(p, keys)| p == var && !keys.contains(key))
}

/// Whether `e` assigns to variable `var` (a parameter then no longer holds its default).
fn assigns(e: &Expr, var: &str) -> bool {
    if let Expr::Assign { target, .. } = e
        && matches!(&**target, Expr::Var(v) if v == var)
    {
        return true;
    }
    let mut found = false;
    e.for_each_child(&mut |c| found = found || assigns(c, var));
    found
}

fn collect_env<'a>(e: &'a Expr, env: &mut Env<'a>) {
    match e {
        Expr::Assign { target, value } => {
            if let Expr::Var(v) = &**target
                && harmless::fresh_name(value)
            {
                env.fresh.insert(v.clone());
            }
            if let Expr::Var(v) = &**target {
                let string = matches!(&**value, Expr::Str(_) | Expr::Other(_));
                env.strings
                    .entry(v.clone())
                    .and_modify(|s| *s = None)
                    .or_insert(string.then_some(&**value));
                match &**value {
                    Expr::New { class, .. } if class != "?" => {
                        env.types.insert(v.clone(), vec![class.clone()]);
                    }
                    Expr::Call(c) => match made_class(c) {
                        Some(class) => {
                            env.types.insert(v.clone(), vec![class]);
                        }
                        None => {
                            env.calls.entry(v.clone()).or_insert(c);
                        }
                    },
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
