//! Every class and function of the audited tree by name, so that a rule can follow a
//! call (`$this->method()`, `Service::method()`, an injected service whose class is
//! known), read a class constant, tell a queued job or listener from a synchronous one,
//! and find an event's listeners.

use crate::ir::{Callee, Class, ClassKind, Expr, File, Function};
use std::collections::HashMap;

/// How deep the class hierarchy is followed (a guard against cycles).
const HIERARCHY_DEPTH_MAX: usize = 16;

pub const SHOULD_QUEUE: &str = "Illuminate\\Contracts\\Queue\\ShouldQueue";
const SHOULD_QUEUE_AFTER_COMMIT: &str = "Illuminate\\Contracts\\Queue\\ShouldQueueAfterCommit";
const EVENT_DISPATCHABLE: &str = "Illuminate\\Foundation\\Events\\Dispatchable";

#[derive(Debug, Clone, Copy)]
pub struct ClassRef<'a> {
    pub class: &'a Class,
    pub file: usize,
}

#[derive(Debug, Clone, Copy)]
pub struct FunctionRef<'a> {
    pub function: &'a Function,
    /// The class whose method it is (`$this` inside it).
    pub class: Option<&'a Class>,
    pub file: usize,
}

#[derive(Debug, Default)]
pub struct Index<'a> {
    classes: HashMap<String, ClassRef<'a>>,
    functions: HashMap<String, FunctionRef<'a>>,
    implementers: HashMap<String, Vec<&'a Class>>,
    /// event class (lowercase) → (listener class, method), from `$listen` arrays,
    /// subscribers' `subscribe()` and listeners whose `handle` takes the event.
    listeners: HashMap<String, Vec<(String, String)>>,
    /// (class, method), both lowercase → the class's own method: a lookup, not a scan of
    /// the class's methods (a class of 80 methods calling each other made the scan the
    /// walk's largest cost).
    own_methods: HashMap<(String, String), FunctionRef<'a>>,
}

fn key(name: &str) -> String {
    name.trim_start_matches('\\').to_ascii_lowercase()
}

impl<'a> Index<'a> {
    pub fn build(files: &[(usize, &'a File)]) -> Index<'a> {
        let mut index = Index::default();
        for (file, parsed) in files {
            for class in &parsed.classes {
                let k = key(&class.name);
                if index.classes.contains_key(&k) {
                    continue;
                }
                index.classes.insert(k.clone(), ClassRef { class, file: *file });
                for function in &class.methods {
                    index
                        .own_methods
                        .entry((k.clone(), function.name.to_ascii_lowercase()))
                        .or_insert(FunctionRef { function, class: Some(class), file: *file });
                }
            }
            for function in &parsed.functions {
                index.functions.entry(key(&function.name)).or_insert(FunctionRef {
                    function,
                    class: None,
                    file: *file,
                });
            }
        }
        // In the files' order, not the map's: listeners and implementers come out in the
        // same order on every run, and so do the paths findings name.
        let classes: Vec<&'a Class> = files
            .iter()
            .flat_map(|(_, f)| f.classes.iter())
            .filter(|c| index.class(&c.name).is_some_and(|r| std::ptr::eq(r.class, *c)))
            .collect();
        for class in classes {
            for parent in class.implements.iter().chain(&class.extends) {
                index.implementers.entry(key(parent)).or_default().push(class);
            }
            if let Some(listen) = class.properties.iter().find(|p| p.name == "listen")
                && let Some(Expr::Array(items)) = &listen.default
            {
                for (event, listeners) in items {
                    let Some(Expr::ClassName(event)) = event else { continue };
                    let Expr::Array(listeners) = listeners else { continue };
                    for (_, listener) in listeners {
                        if let Expr::ClassName(listener) = listener {
                            index.add_listener(event, listener, "handle");
                        }
                    }
                }
            }
            if let Some(subscribe) =
                class.methods.iter().find(|m| m.name.eq_ignore_ascii_case("subscribe"))
            {
                let mut found = Vec::new();
                for e in &subscribe.body {
                    subscriptions(e, &class.name, &mut found);
                }
                for (event, listener, method) in found {
                    index.add_listener(&event, &listener, &method);
                }
            }
            if class.kind == ClassKind::Class
                && let Some(handle) = class.methods.iter().find(|m| m.name == "handle")
                && let Some(first) = handle.params.first()
            {
                for t in &first.types {
                    index.add_listener(t, &class.name, "handle");
                }
            }
        }
        index
    }

    fn add_listener(&mut self, event: &str, listener: &str, method: &str) {
        let listeners = self.listeners.entry(key(event)).or_default();
        if !listeners
            .iter()
            .any(|(l, m)| l.eq_ignore_ascii_case(listener) && m.eq_ignore_ascii_case(method))
        {
            listeners.push((listener.to_string(), method.to_string()));
        }
    }

    pub fn class(&self, name: &str) -> Option<ClassRef<'a>> {
        self.classes.get(&key(name)).copied()
    }

    pub fn function(&self, name: &str) -> Option<FunctionRef<'a>> {
        self.functions.get(&key(name)).copied()
    }

    /// The class, its parents and its traits, nearest first.
    pub fn lineage(&self, name: &str) -> Vec<ClassRef<'a>> {
        let mut out: Vec<ClassRef<'a>> = Vec::new();
        let mut todo = vec![(name.to_string(), 0)];
        while let Some((name, depth)) = todo.pop() {
            if depth > HIERARCHY_DEPTH_MAX {
                continue;
            }
            let Some(c) = self.class(&name) else { continue };
            if out.iter().any(|o| std::ptr::eq(o.class, c.class)) {
                continue;
            }
            out.push(c);
            for parent in c.class.extends.iter().rev() {
                todo.push((parent.clone(), depth + 1));
            }
            for t in c.class.traits.iter().rev() {
                todo.push((t.clone(), depth + 1));
            }
        }
        out
    }

    /// Whether `name` is, extends, implements or uses `ancestor` (interfaces and traits
    /// outside the tree count by name).
    pub fn is_a(&self, name: &str, ancestor: &str) -> bool {
        if name.eq_ignore_ascii_case(ancestor) {
            return true;
        }
        self.lineage(name).iter().any(|c| {
            c.class
                .implements
                .iter()
                .chain(&c.class.extends)
                .chain(&c.class.traits)
                .any(|p| p.eq_ignore_ascii_case(ancestor) || self.interface_extends(p, ancestor, 0))
        })
    }

    fn interface_extends(&self, name: &str, ancestor: &str, depth: usize) -> bool {
        if depth > HIERARCHY_DEPTH_MAX {
            return false;
        }
        let Some(c) = self.class(name) else { return false };
        c.class.kind == ClassKind::Interface
            && c.class.extends.iter().any(|p| {
                p.eq_ignore_ascii_case(ancestor) || self.interface_extends(p, ancestor, depth + 1)
            })
    }

    /// The method `name` as `class` sees it (own, inherited or from a trait).
    pub fn method(&self, class: &str, name: &str) -> Option<FunctionRef<'a>> {
        // The common cases without building the lineage: a class outside the tree, a
        // method of the class itself, a class with no parent or trait.
        let k = key(class);
        let own = *self.classes.get(&k)?;
        if let Some(f) = self.own_methods.get(&(k, name.to_ascii_lowercase())) {
            return Some(*f);
        }
        if own.class.extends.is_empty() && own.class.traits.is_empty() {
            return None;
        }
        self.lineage(class).into_iter().find_map(|c| {
            c.class
                .methods
                .iter()
                .find(|m| m.name.eq_ignore_ascii_case(name))
                .map(|function| FunctionRef { function, class: Some(c.class), file: c.file })
        })
    }

    /// The classes in the tree that implement or extend `name`, and `name` itself.
    pub fn concrete(&self, name: &str) -> Vec<&'a Class> {
        let mut out = Vec::new();
        if let Some(c) = self.class(name)
            && c.class.kind != ClassKind::Interface
        {
            out.push(c.class);
        }
        if let Some(implementers) = self.implementers.get(&key(name)) {
            for c in implementers {
                if !out.iter().any(|o| std::ptr::eq(*o, *c)) {
                    out.push(c);
                }
            }
        }
        out
    }

    /// A class constant's value, looked up along the hierarchy.
    pub fn constant(&self, class: &str, name: &str) -> Option<&'a Expr> {
        self.lineage(class)
            .into_iter()
            .find_map(|c| c.class.constants.iter().find(|(n, _)| n == name).map(|(_, v)| v))
    }

    /// The class names a property's type, or a constructor assignment from a typed
    /// parameter, gives it.
    pub fn property_types(&self, class: &str, name: &str) -> Vec<String> {
        for c in self.lineage(class) {
            if let Some(p) = c.class.properties.iter().find(|p| p.name == name)
                && !p.types.is_empty()
            {
                return p.types.clone();
            }
            if let Some(ctor) =
                c.class.methods.iter().find(|m| m.name.eq_ignore_ascii_case("__construct"))
            {
                let mut found = Vec::new();
                for e in &ctor.body {
                    assigned_from_param(e, name, ctor, &mut found);
                }
                if !found.is_empty() {
                    return found;
                }
            }
        }
        Vec::new()
    }

    pub fn is_queued(&self, class: &str) -> bool {
        self.is_a(class, SHOULD_QUEUE)
    }

    /// A job, listener, mailable or notification that asks to wait for commit: a
    /// `$afterCommit = true` property, `$this->afterCommit()` in its constructor, or
    /// `ShouldQueueAfterCommit`.
    pub fn is_after_commit(&self, class: &str) -> bool {
        if self.is_a(class, SHOULD_QUEUE_AFTER_COMMIT) {
            return true;
        }
        self.lineage(class).iter().any(|c| {
            c.class
                .properties
                .iter()
                .any(|p| p.name == "afterCommit" && matches!(p.default, Some(Expr::Bool(true))))
                || c.class
                    .methods
                    .iter()
                    .filter(|m| m.name.eq_ignore_ascii_case("__construct"))
                    .any(|m| m.body.iter().any(calls_after_commit_on_this))
        })
    }

    /// An event class (dispatched through the events dispatcher, not the queue).
    pub fn is_event(&self, class: &str) -> bool {
        self.is_a(class, EVENT_DISPATCHABLE) || self.listeners.contains_key(&key(class))
    }

    pub fn listeners(&self, event: &str) -> &[(String, String)] {
        self.listeners.get(&key(event)).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// `$this->property = $typedParam`, `= new X(…)`, `= app(X::class)` / `resolve(X::class)`
/// in a constructor.
fn assigned_from_param(e: &Expr, property: &str, ctor: &Function, found: &mut Vec<String>) {
    if let Expr::Assign { target, value } = e
        && let Expr::Prop { object, name } = &**target
        && name == property
        && matches!(&**object, Expr::Var(t) if t == "this")
    {
        match &**value {
            Expr::Var(var) => {
                if let Some(p) = ctor.params.iter().find(|p| &p.name == var) {
                    found.extend(p.types.iter().cloned());
                }
            }
            Expr::New { class, .. } if class != "?" => found.push(class.clone()),
            Expr::Call(c)
                if matches!(&c.callee, Callee::Function(f)
                    if f.eq_ignore_ascii_case("app") || f.eq_ignore_ascii_case("resolve")) =>
            {
                if let Some(Expr::ClassName(class)) = c.args.first().map(|a| &a.value) {
                    found.push(class.clone());
                }
            }
            _ => {}
        }
    }
    e.for_each_child(&mut |c| assigned_from_param(c, property, ctor, found));
}

fn calls_after_commit_on_this(e: &Expr) -> bool {
    if let Expr::Call(call) = e
        && let Callee::Method { object: Expr::Var(v), name } = &call.callee
        && v == "this"
        && name.eq_ignore_ascii_case("afterCommit")
    {
        return true;
    }
    let mut found = false;
    e.for_each_child(&mut |c| found = found || calls_after_commit_on_this(c));
    found
}

/// A subscriber's `$events->listen(Event::class, 'Listener@method' | [Listener::class,
/// 'method'] | Listener::class)` calls, and a returned `[Event::class => 'method']`.
fn subscriptions(e: &Expr, subscriber: &str, found: &mut Vec<(String, String, String)>) {
    match e {
        Expr::Call(call)
            if call.method_name().is_some_and(|n| n.eq_ignore_ascii_case("listen")) =>
        {
            let event = match call.arg(0, "events") {
                Some(Expr::ClassName(c)) => Some(c.clone()),
                Some(Expr::Str(s)) => Some(s.trim_start_matches('\\').to_string()),
                _ => None,
            };
            let listener = match call.arg(1, "listener") {
                Some(Expr::Str(s)) => {
                    let (class, method) = s.split_once('@').unwrap_or((s.as_str(), "handle"));
                    Some((class.trim_start_matches('\\').to_string(), method.to_string()))
                }
                Some(Expr::ClassName(c)) => Some((c.clone(), "handle".to_string())),
                Some(Expr::Array(items)) => match (items.first(), items.get(1)) {
                    (Some((None, Expr::ClassName(c))), Some((None, Expr::Str(m)))) => {
                        Some((c.clone(), m.clone()))
                    }
                    _ => None,
                },
                _ => None,
            };
            if let (Some(event), Some((class, method))) = (event, listener) {
                found.push((event, class, method));
            }
        }
        Expr::Return(v, _) => {
            if let Some(Expr::Array(items)) = v.first() {
                for (k, v) in items {
                    if let (Some(Expr::ClassName(event)), Expr::Str(method)) = (k, v) {
                        found.push((event.clone(), subscriber.to_string(), method.clone()));
                    }
                }
            }
        }
        _ => {}
    }
    e.for_each_child(&mut |c| subscriptions(c, subscriber, found));
}
