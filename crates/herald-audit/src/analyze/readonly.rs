//! Two summaries of a body, each computed once per function: whether it writes to the
//! database (a transaction that only reads has nothing for a rollback to undo, so an
//! effect in it strands nothing — issue 39, Pixelfed's `RegenerateThumbnails`), and which
//! of a function's parameters it runs inside a transaction it opens (a closure passed to
//! `$this->atomically(fn () => …)` runs in that transaction, one call away).

use super::effects::lower_in;
use super::{Analysis, Frame};
use crate::ir::{Callee, Expr, Function};

/// How many calls deep a body's writes are looked for.
const WRITES_DEPTH_MAX: usize = 3;

/// Query builder and Eloquent methods that write (or lock, which only a writer does).
const WRITES: [&str; 41] = [
    "save",
    "duplicate",
    "saveQuietly",
    "saveMany",
    "create",
    "createMany",
    "createQuietly",
    "forceCreate",
    "insert",
    "insertGetId",
    "insertOrIgnore",
    "insertUsing",
    "update",
    "updateQuietly",
    "updateOrCreate",
    "updateOrInsert",
    "upsert",
    "firstOrCreate",
    "delete",
    "deleteQuietly",
    "forceDelete",
    "destroy",
    "restore",
    "increment",
    "decrement",
    "incrementEach",
    "decrementEach",
    "attach",
    "detach",
    "sync",
    "syncWithoutDetaching",
    "toggle",
    "updateExistingPivot",
    "push",
    "touch",
    "statement",
    "unprepared",
    "affectingStatement",
    "truncate",
    "lockForUpdate",
    "sharedLock",
];

/// Name prefixes of an application's own methods that write (`storeOrder`,
/// `createInvoice`, `$repo->updateStatus()`), when the method cannot be followed.
const WRITE_PREFIXES: [&str; 10] = [
    "save", "create", "update", "delete", "insert", "store", "remove", "destroy", "attach", "sync",
];

/// Query builder, Eloquent and collection methods that only read or build a query, and
/// the framework's services' reading or fluent calls.
const READS: [&str; 40] = [
    "get",
    "first",
    "firstOrFail",
    "find",
    "findOrFail",
    "findMany",
    "value",
    "pluck",
    "count",
    "exists",
    "doesntExist",
    "sum",
    "avg",
    "min",
    "max",
    "chunk",
    "chunkById",
    "each",
    "lazy",
    "lazyById",
    "cursor",
    "all",
    "paginate",
    "simplePaginate",
    "map",
    "filter",
    "keys",
    "values",
    "limit",
    "take",
    "skip",
    "offset",
    "latest",
    "oldest",
    "query",
    "newQuery",
    "table",
    "connection",
    "refresh",
    "fresh",
];

/// Name prefixes of reading or query-building methods (`whereIn`, `orderByDesc`,
/// `withCount`, `getAttribute`, `isDirty`, `toArray`, `hasMany`, `selectRaw`, `load`).
const READ_PREFIXES: [&str; 14] = [
    "where", "orwhere", "order", "group", "having", "with", "select", "join", "leftjoin", "get",
    "is", "to", "has", "load",
];

fn reads_by_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower_in(name, &READS)
        || READ_PREFIXES.iter().any(|p| lower.starts_with(p))
        || [
            "dispatch",
            "notify",
            "afterCommit",
            "beforeCommit",
            "onQueue",
            "onConnection",
            "delay",
            "to",
            "cc",
            "bcc",
            "disk",
            "store",
            "tags",
            "channel",
            "info",
            "warning",
            "error",
            "debug",
            "log",
            "remember",
            "rememberForever",
            "forget",
            "flush",
        ]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
}

/// A call that runs a statement a deadlock can interrupt (a write or a lock).
pub(super) fn is_statement(name: &str) -> bool {
    writes_by_name(name)
}

/// Whether `e` may run a statement: a write, a lock, a dynamic call, or a method whose
/// name says neither read nor effect (the conservative answer inside a loop).
pub(super) fn may_run_statement(e: &Expr) -> bool {
    let hit = match e {
        Expr::Call(c) => match &c.callee {
            Callee::Dynamic(_) => true,
            Callee::Method { name, .. } | Callee::Static { name, .. } => {
                writes_by_name(name) || (!reads_by_name(name) && !super::effects::effect_name(name))
            }
            Callee::Function(_) => false,
        },
        Expr::Closure(c) => return c.body.iter().any(may_run_statement),
        _ => false,
    };
    if hit {
        return true;
    }
    let mut found = false;
    e.for_each_child(&mut |c| found = found || may_run_statement(c));
    found
}

fn writes_by_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower_in(name, &WRITES) || WRITE_PREFIXES.iter().any(|p| lower.starts_with(p))
}

impl<'a> Analysis<'a> {
    /// Whether `body` (closures in it included, calls into the tree followed a few deep)
    /// may write to the database. Unknown calls with a reading name count as reads.
    pub(super) fn writes(&self, body: &'a [Expr], frame: &Frame<'a>, depth: usize) -> bool {
        body.iter().any(|e| self.expr_writes(e, frame, depth))
    }

    fn expr_writes(&self, e: &'a Expr, frame: &Frame<'a>, depth: usize) -> bool {
        match e {
            Expr::Call(call) => {
                let name = match &call.callee {
                    Callee::Method { name, .. } | Callee::Static { name, .. } => Some(name),
                    Callee::Function(_) | Callee::Dynamic(_) => None,
                };
                if name.is_some_and(|n| writes_by_name(n)) {
                    return true;
                }
                // A call whose target cannot be named (`$this->$method()`, `$callable()`)
                // may write (Akaunting's `RecurringCheck`).
                if matches!(&call.callee, Callee::Dynamic(_)) || name.is_some_and(|n| n == "?") {
                    return true;
                }
                let targets = self.targets(call, frame);
                // A method the audit cannot follow and whose name says neither read nor
                // effect (`$payments->capture($order)` on an untyped `$payments`) may write:
                // a transaction is read-only only when every call in it is known to read.
                if targets.is_empty()
                    && let Some(n) = name
                    && !reads_by_name(n)
                    && !super::effects::effect_name(n)
                {
                    return true;
                }
                if depth < WRITES_DEPTH_MAX {
                    for (target, _) in targets {
                        if self.function_writes(target, frame, depth + 1) {
                            return true;
                        }
                    }
                }
            }
            Expr::Closure(c) => return self.writes(&c.body, frame, depth),
            // A job or action made here is most often run here (`$this->dispatch(new
            // CreateDocument(…))`): its `handle()` writes for it.
            Expr::New { class, .. } if depth < WRITES_DEPTH_MAX => {
                if let Some(handle) = self.index.method(class, "handle")
                    && self.function_writes(handle, frame, depth + 1)
                {
                    return true;
                }
            }
            _ => {}
        }
        let mut found = false;
        e.for_each_child(&mut |c| found = found || self.expr_writes(c, frame, depth));
        found
    }

    fn function_writes(
        &self,
        target: crate::index::FunctionRef<'a>,
        frame: &Frame<'a>,
        depth: usize,
    ) -> bool {
        let key = target.function as *const Function;
        if let Some(known) = self.writes.borrow().get(&key) {
            return *known;
        }
        // Until known, a function in the middle of its own summary counts as writing
        // (recursion, and the conservative answer).
        self.writes.borrow_mut().insert(key, true);
        let inner = Frame {
            file: target.file,
            class: target.class.or(frame.class),
            function: Some(target.function),
            ..frame.clone()
        };
        let writes = self.writes(&target.function.body, &inner, depth);
        self.writes.borrow_mut().insert(key, writes);
        writes
    }

    /// The parameter of `f` that `f` runs inside a transaction it opens, and that
    /// transaction's attempts: `DB::transaction($callback, 3)`, or a transaction closure
    /// (or a `beginTransaction()` … `commit()` body) that calls `$callback()`.
    pub(super) fn tx_param(&self, f: &'a Function) -> Option<(usize, u32)> {
        let key = f as *const Function;
        if let Some(known) = self.tx_params.borrow().get(&key) {
            return *known;
        }
        let mut found = None;
        for (i, p) in f.params.iter().enumerate() {
            for e in &f.body {
                if let Some(attempts) = runs_in_transaction(e, &p.name) {
                    found = Some((i, attempts));
                }
            }
            let begins = f.body.iter().any(begins_transaction);
            if found.is_none() && begins && f.body.iter().any(|e| calls_var(e, &p.name)) {
                found = Some((i, 1));
            }
            if found.is_some() {
                break;
            }
        }
        self.tx_params.borrow_mut().insert(key, found);
        found
    }
}

/// Inside `e`, a `transaction()` that runs `$var` (as its callback, or by calling it in
/// its closure): its attempts.
fn runs_in_transaction(e: &Expr, var: &str) -> Option<u32> {
    if let Expr::Call(c) = e
        && c.method_name().is_some_and(|n| n.eq_ignore_ascii_case("transaction"))
    {
        let attempts = match c.arg(1, "attempts") {
            None => 1,
            Some(Expr::Int(n)) => u32::try_from(*n).unwrap_or(1),
            Some(_) => 1,
        };
        match c.args.first().map(|a| &a.value) {
            Some(Expr::Var(v)) if v == var => return Some(attempts),
            Some(Expr::Closure(closure)) if closure.body.iter().any(|s| calls_var(s, var)) => {
                return Some(attempts);
            }
            _ => {}
        }
    }
    let mut found = None;
    e.for_each_child(&mut |c| {
        if found.is_none() {
            found = runs_in_transaction(c, var);
        }
    });
    found
}

/// `$var()`, `call_user_func($var)`, `$var->__invoke()`, `value($var)`, `app()->call($var)`.
fn calls_var(e: &Expr, var: &str) -> bool {
    if let Expr::Call(c) = e {
        let is_var = |x: Option<&Expr>| matches!(x, Some(Expr::Var(v)) if v == var);
        let hit = match &c.callee {
            Callee::Dynamic(d) => is_var(Some(d)),
            Callee::Function(f) => {
                lower_in(
                    f.trim_start_matches('\\'),
                    &["call_user_func", "call_user_func_array", "value"],
                ) && is_var(c.args.first().map(|a| &a.value))
            }
            Callee::Method { object, name } => {
                (name.eq_ignore_ascii_case("__invoke") && is_var(Some(object)))
                    || (name.eq_ignore_ascii_case("call")
                        && is_var(c.args.first().map(|a| &a.value)))
            }
            Callee::Static { .. } => false,
        };
        if hit {
            return true;
        }
    }
    if let Expr::Closure(c) = e {
        return c.body.iter().any(|s| calls_var(s, var));
    }
    let mut found = false;
    e.for_each_child(&mut |c| found = found || calls_var(c, var));
    found
}

fn begins_transaction(e: &Expr) -> bool {
    if let Expr::Call(c) = e
        && c.method_name().is_some_and(|n| n.eq_ignore_ascii_case("beginTransaction"))
    {
        return true;
    }
    let mut found = false;
    e.for_each_child(&mut |c| found = found || begins_transaction(c));
    found
}
