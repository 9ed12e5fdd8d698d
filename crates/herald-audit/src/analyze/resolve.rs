//! What the walk knows of a name: whether a receiver is a database connection, which
//! connection a chain names, the classes a variable or property holds, the functions a
//! call can land on, and the integer an attempts argument (or a class constant) holds.

use super::effects::{facade, lower_in, short};
use super::{Analysis, Frame};
use crate::index::FunctionRef;
use crate::ir::{Call, Callee, Expr};

pub(super) const DB_FACADES: [&str; 2] = ["Illuminate\\Support\\Facades\\DB", "DB"];

fn is_db_type(t: &str) -> bool {
    let t = t.to_ascii_lowercase();
    t.starts_with("illuminate\\database\\")
        && (t.contains("connection") || t.ends_with("databasemanager"))
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
            return types.iter().any(|t| is_db_type(t));
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
    pub(super) fn targets(
        &self,
        call: &'a Call,
        frame: &Frame<'a>,
    ) -> Vec<(FunctionRef<'a>, String)> {
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
}

/// `app(Foo::class)`, `resolve(Foo::class)`, `App::make(Foo::class)`.
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
        _ => None,
    }
}
