//! What the walk knows of a name: whether a receiver is a database connection, which
//! connection a chain names, the classes a variable or property holds, the functions a
//! call can land on, and the integer an attempts argument (or a class constant) holds.

use super::effects::{facade, lower_in};
use super::services::{Service, binding_type, facade_type, helper_type};
use super::{Analysis, Frame};
use crate::index::FunctionRef;
use crate::ir::{Call, Callee, Expr};

/// A target's name in a finding's path: its class (when a method) and its name, made
/// into text only when a finding needs it.
pub(super) type Label<'a> = (Option<&'a str>, &'a str);

/// How many variables deep a variable's type is looked for through the calls assigned
/// to them.
const TYPING_DEPTH_MAX: usize = 8;

pub(super) const DB_FACADES: [&str; 2] = ["Illuminate\\Support\\Facades\\DB", "DB"];

fn is_db_type(t: &str) -> bool {
    let t = t.to_ascii_lowercase();
    t.starts_with("illuminate\\database\\")
        && (t.contains("connection") || t.ends_with("databasemanager"))
}

impl<'a> Analysis<'a> {
    /// Whether a value of these types is a database connection or manager (also a class
    /// of the tree that wraps one by extending it).
    pub(super) fn is_db(&self, types: &[String]) -> bool {
        types.iter().any(|t| is_db_type(t)) || self.service_of(types) == Some(Service::Db)
    }
}

impl<'a> Analysis<'a> {
    /// An integer literal or a class constant holding one.
    pub(super) fn int(&self, e: &Expr, frame: &Frame<'a>, depth: usize) -> Option<u32> {
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

    pub(super) fn class_name(&self, class: &str, frame: &Frame<'a>) -> Option<String> {
        match class {
            "self" | "static" => frame.class.map(|c| c.name.clone()),
            "parent" => frame.class.and_then(|c| c.extends.first().cloned()),
            other => Some(other.to_string()),
        }
    }

    /// Whether the chain's `transaction()` is called on a database connection.
    pub(super) fn db_receiver(&self, chain: &[&'a Call], frame: &Frame<'a>, on_db: bool) -> bool {
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
            return self.is_db(&types);
        }
        // An unknown receiver: a closure first argument says "transaction".
        matches!(outer.args.first().map(|a| &a.value), Some(Expr::Closure(_)))
    }

    /// `DB::connection('name')` in the chain.
    pub(super) fn connection_name(&self, chain: &[&'a Call]) -> Option<String> {
        chain.iter().find_map(|c| match (c.method_name(), c.args.first()) {
            (Some(n), Some(a)) if n.eq_ignore_ascii_case("connection") => match &a.value {
                Expr::Str(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        })
    }

    pub(super) fn types_of(&self, e: &Expr, frame: &Frame<'a>) -> Vec<String> {
        match e {
            Expr::Var(v) if v == "this" => {
                frame.class.map(|c| vec![c.name.clone()]).unwrap_or_default()
            }
            Expr::Var(v) => {
                let Some(env) = self.env(frame) else { return Vec::new() };
                if let Some(types) = env.types.get(v) {
                    return types.clone();
                }
                let Some(call) = env.calls.get(v).copied() else { return Vec::new() };
                let depth = self.typing_depth.get();
                if depth >= TYPING_DEPTH_MAX {
                    return Vec::new();
                }
                self.typing_depth.set(depth + 1);
                let types = self.returned_types(call, frame);
                self.typing_depth.set(depth);
                types
            }
            Expr::Prop { object, name } if matches!(&**object, Expr::Var(t) if t == "this") => {
                match frame.class {
                    Some(c) => self.index.property_types(&c.name, name),
                    None => Vec::new(),
                }
            }
            Expr::New { class, .. } => self.class_name(class, frame).into_iter().collect(),
            Expr::Call(c) => self.returned_types(c, frame),
            _ => Vec::new(),
        }
    }

    /// The classes a call returns: what `app()`/`resolve()` make, what a function of the
    /// tree returns, the type a facade or helper stands for, and for a method the tree
    /// does not define on a service value, the same service (the framework's fluent
    /// builders: `$mailer->to($u)`, `Http::withToken($t)`, `Storage::disk('s3')`).
    fn returned_types(&self, c: &'a Call, frame: &Frame<'a>) -> Vec<String> {
        if let Some(class) = made_class(c) {
            return vec![class];
        }
        // The receiver's types are asked once: asking them again for the fallback below
        // made a chain of n calls cost 2^n (UNIT3D's 90-call query builder chain).
        let object_types = match &c.callee {
            Callee::Method { object, .. } => Some(self.types_of(object, frame)),
            _ => None,
        };
        let mut out: Vec<String> = Vec::new();
        for (f, _) in self.targets_given(c, frame, object_types.as_deref()) {
            // A fluent `: static`/`: self` setter returns the receiver, typed as the caller
            // typed it (`$this->daemonBackupRepository->setServer($s)->delete()` is the
            // backup repository's delete, not every repository's).
            match &object_types {
                Some(types) if f.function.returns.iter().any(|t| t == "self") => {
                    out.extend(types.iter().cloned());
                }
                _ => out.extend(self.returns_of(f)),
            }
        }
        if !out.is_empty() {
            return out;
        }
        match &c.callee {
            Callee::Static { class, .. } => {
                facade_type(class).map(|t| vec![t.to_string()]).unwrap_or_default()
            }
            Callee::Function(f) => helper_type(f).map(|t| vec![t.to_string()]).unwrap_or_default(),
            Callee::Method { .. } => {
                let types = object_types.unwrap_or_default();
                if self.service_of(&types).is_some() { types } else { Vec::new() }
            }
            Callee::Dynamic(_) => Vec::new(),
        }
    }

    /// A function's declared return classes, or, without a declaration, what its
    /// `return` statements make (`return Http::withToken(…)`, `return new X`,
    /// `return app(X::class)`): a helper that hands out a client is a client.
    fn returns_of(&self, f: FunctionRef<'a>) -> Vec<String> {
        let key = f.function as *const crate::ir::Function;
        if let Some(known) = self.returns.borrow().get(&key) {
            return known.clone();
        }
        let mut out: Vec<String> = f
            .function
            .returns
            .iter()
            .filter_map(|t| match t.as_str() {
                "self" => f.class.map(|c| c.name.clone()),
                _ => Some(t.clone()),
            })
            .collect();
        if out.is_empty() {
            fn scan(e: &Expr, out: &mut Vec<String>) {
                if let Expr::Return(v, _) = e
                    && let Some(value) = v.first()
                {
                    out.extend(made_by(value));
                }
                if !matches!(e, Expr::Closure(_)) {
                    e.for_each_child(&mut |c| scan(c, out));
                }
            }
            for e in &f.function.body {
                scan(e, &mut out);
            }
        }
        self.returns.borrow_mut().insert(key, out.clone());
        out
    }

    /// The functions a call can land on in the tree.
    pub(super) fn targets(
        &self,
        call: &'a Call,
        frame: &Frame<'a>,
    ) -> Vec<(FunctionRef<'a>, Label<'a>)> {
        self.targets_given(call, frame, None)
    }

    /// `targets`, with the receiver's types when the caller already has them.
    fn targets_given(
        &self,
        call: &'a Call,
        frame: &Frame<'a>,
        object_types: Option<&[String]>,
    ) -> Vec<(FunctionRef<'a>, Label<'a>)> {
        let mut out = Vec::new();
        match &call.callee {
            Callee::Function(name) => {
                if let Some(f) = self.index.function(name) {
                    out.push((f, (None, name.as_str())));
                }
            }
            Callee::Static { class, name } => {
                if let Some(class) = self.class_name(class, frame)
                    && let Some(f) = self.index.method(&class, name)
                {
                    out.push((f, (f.class.map(|c| c.name.as_str()), name.as_str())));
                }
            }
            Callee::Method { object, name } => {
                let types = match object_types {
                    Some(t) => t.to_vec(),
                    None => self.types_of(object, frame),
                };
                for t in types {
                    for c in self.index.concrete(&t) {
                        if let Some(f) = self.index.method(&c.name, name)
                            && !out.iter().any(|(o, _)| std::ptr::eq(o.function, f.function))
                        {
                            out.push((f, (Some(c.name.as_str()), name.as_str())));
                        }
                    }
                }
            }
            Callee::Dynamic(_) => {}
        }
        out
    }
}

/// The class an expression makes on its face, without following any call into the tree:
/// `new X`, `app(X::class)`, a chain rooted at a facade or a service helper.
fn made_by(e: &Expr) -> Option<String> {
    match e {
        Expr::New { class, .. } if class != "?" && class != "self" && class != "static" => {
            Some(class.clone())
        }
        Expr::Call(c) => {
            if let Some(class) = made_class(c) {
                return Some(class);
            }
            let mut root = &**c;
            while let Callee::Method { object: Expr::Call(inner), .. } = &root.callee {
                root = inner;
            }
            match &root.callee {
                Callee::Static { class, .. } => facade_type(class).map(str::to_string),
                Callee::Function(f) => helper_type(f).map(str::to_string),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `app(Foo::class)`, `resolve(Foo::class)`, `App::make(Foo::class)`, and the container's
/// named bindings (`app('mailer')`).
pub(super) fn made_class(call: &Call) -> Option<String> {
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
        (true, Some(Expr::Str(s))) => binding_type(s).map(str::to_string),
        _ => None,
    }
}
