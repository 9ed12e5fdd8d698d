//! The audit's own small picture of a PHP file: classes, functions and their bodies as
//! calls, closures, try/catch and the few values the rules read (literals, class
//! constants, variables, property fetches). Names are fully qualified. Built by `php.rs`
//! (the only module that knows the parser); read by `index.rs`, `config.rs` and `analyze/`.
//!
//! Everything else in a body (operators, control flow, echo, …) is kept only as the
//! ordered list of its children, so a rule sees every call in source order.

/// A place in a file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

/// One parsed file.
#[derive(Debug, Default)]
pub struct File {
    pub classes: Vec<Class>,
    pub functions: Vec<Function>,
    /// Statements outside any function or class (scripts, route files, config files).
    pub top: Vec<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassKind {
    Class,
    Interface,
    Trait,
    Enum,
}

#[derive(Debug)]
pub struct Class {
    /// Fully qualified, without a leading backslash; anonymous classes get a made-up name.
    pub name: String,
    pub kind: ClassKind,
    pub extends: Vec<String>,
    pub implements: Vec<String>,
    pub traits: Vec<String>,
    pub constants: Vec<(String, Expr)>,
    pub properties: Vec<Property>,
    pub methods: Vec<Function>,
    pub pos: Pos,
}

#[derive(Debug)]
pub struct Property {
    pub name: String,
    /// The class names in its type hint (a union gives several).
    pub types: Vec<String>,
    pub default: Option<Expr>,
}

#[derive(Debug)]
pub struct Function {
    /// A method's own name, or a function's fully qualified name.
    pub name: String,
    pub params: Vec<Param>,
    pub body: Vec<Expr>,
    /// The class names in its return type hint.
    pub returns: Vec<String>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub types: Vec<String>,
    /// A constructor parameter promoted to a property.
    pub promoted: bool,
    pub default: Option<Expr>,
}

#[derive(Debug, Clone)]
pub enum Expr {
    Call(Box<Call>),
    Closure(Box<Closure>),
    Try(Box<Try>),
    /// `if … elseif … else …`: a branch that leaves (return, throw) does not carry its
    /// state to the code after it.
    If(Box<If>),
    Throw(Vec<Expr>, Pos),
    Return(Vec<Expr>, Pos),
    Int(i64),
    Str(String),
    Bool(bool),
    Null,
    /// `Foo::BAR`, `self::BAR` (class as written after resolution: `self`, `static`,
    /// `parent` stay as they are).
    ClassConst {
        class: String,
        name: String,
    },
    /// `Foo::class`.
    ClassName(String),
    /// A plain `$name`.
    Var(String),
    /// `$object->name` (also `?->`).
    Prop {
        object: Box<Expr>,
        name: String,
    },
    New {
        class: String,
        args: Vec<Arg>,
        pos: Pos,
    },
    Assign {
        target: Box<Expr>,
        value: Box<Expr>,
    },
    /// `[key => value, …]`.
    Array(Vec<(Option<Expr>, Expr)>),
    /// `$base[key]`.
    Index {
        base: Box<Expr>,
        key: Box<Expr>,
    },
    /// `empty(…)`.
    Empty(Box<Expr>),
    /// `a && b && …` (or `and`): its operands in order.
    And(Vec<Expr>),
    /// A loop (`foreach`, `for`, `while`, `do … while`): its header and body, which may run
    /// again after any statement in it.
    Loop(Vec<Expr>),
    /// Any other construct: its children in source order.
    Other(Vec<Expr>),
}

#[derive(Debug, Clone)]
pub struct Call {
    pub callee: Callee,
    pub args: Vec<Arg>,
    /// Where the call's name is (for a method call, the method's name), which is the
    /// place a finding points at.
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub enum Callee {
    /// `foo(…)`: the resolved function name (as PHP would try it first).
    Function(String),
    /// `$object->name(…)` and `$object?->name(…)`.
    Method { object: Expr, name: String },
    /// `Class::name(…)`: `class` resolved, or `self`/`static`/`parent`.
    Static { class: String, name: String },
    /// `$callable(…)`, `$class::name(…)` and other dynamic calls.
    Dynamic(Expr),
}

#[derive(Debug, Clone)]
pub struct Arg {
    /// A named argument's name; `...` for a spread (`...$args`), which no position or
    /// name can be told of.
    pub name: Option<String>,
    pub value: Expr,
}

#[derive(Debug, Clone)]
pub struct Closure {
    pub params: Vec<Param>,
    pub body: Vec<Expr>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct Try {
    pub body: Vec<Expr>,
    pub catches: Vec<Catch>,
    pub finally: Vec<Expr>,
}

#[derive(Debug, Clone)]
pub struct If {
    /// Every condition (the `if`'s, then each `elseif`'s), evaluated before the bodies.
    pub conditions: Vec<Expr>,
    /// The bodies: the `if`'s, each `elseif`'s, then the `else`'s when `has_else`.
    pub branches: Vec<Vec<Expr>>,
    pub has_else: bool,
}

/// Whether a body's last statement leaves it (`return`, `throw`, `abort()`, `exit`): the
/// code after the branch is not reached from it.
pub fn leaves(body: &[Expr]) -> bool {
    match body.last() {
        Some(Expr::Return(..) | Expr::Throw(..)) => true,
        Some(Expr::Call(c)) => {
            matches!(&c.callee, Callee::Function(f) if f.eq_ignore_ascii_case("abort"))
        }
        Some(Expr::If(i)) => i.has_else && i.branches.iter().all(|b| leaves(b)),
        _ => false,
    }
}

#[derive(Debug, Clone)]
pub struct Catch {
    pub types: Vec<String>,
    pub body: Vec<Expr>,
    pub pos: Pos,
    /// The block's last statement is a `throw`: every path that reaches the end rethrows.
    pub ends_in_throw: bool,
}

impl Expr {
    /// The expressions directly inside this one, in source order (a closure's body is not
    /// inside: it runs when the closure is called).
    pub fn for_each_child<'e>(&'e self, f: &mut dyn FnMut(&'e Expr)) {
        match self {
            Expr::Call(call) => {
                match &call.callee {
                    Callee::Method { object, .. } => f(object),
                    Callee::Dynamic(e) => f(e),
                    Callee::Function(_) | Callee::Static { .. } => {}
                }
                for arg in &call.args {
                    f(&arg.value);
                }
            }
            Expr::Try(t) => {
                t.body.iter().for_each(&mut *f);
                for c in &t.catches {
                    c.body.iter().for_each(&mut *f);
                }
                t.finally.iter().for_each(f);
            }
            Expr::If(i) => {
                i.conditions.iter().for_each(&mut *f);
                for b in &i.branches {
                    b.iter().for_each(&mut *f);
                }
            }
            Expr::Throw(v, _)
            | Expr::Return(v, _)
            | Expr::Other(v)
            | Expr::Loop(v)
            | Expr::And(v) => v.iter().for_each(f),
            Expr::Prop { object, .. } => f(object),
            Expr::Index { base, key } => {
                f(base);
                f(key);
            }
            Expr::Empty(inner) => f(inner),
            Expr::New { args, .. } => args.iter().for_each(|a| f(&a.value)),
            Expr::Assign { target, value } => {
                f(target);
                f(value);
            }
            Expr::Array(items) => {
                for (k, v) in items {
                    if let Some(k) = k {
                        f(k);
                    }
                    f(v);
                }
            }
            Expr::Closure(_)
            | Expr::Int(_)
            | Expr::Str(_)
            | Expr::Bool(_)
            | Expr::Null
            | Expr::ClassConst { .. }
            | Expr::ClassName(_)
            | Expr::Var(_) => {}
        }
    }
}

impl Call {
    /// The argument at `index` when positional, or named `name`.
    pub fn arg(&self, index: usize, name: &str) -> Option<&Expr> {
        if let Some(named) = self.args.iter().find(|a| a.name.as_deref() == Some(name)) {
            return Some(&named.value);
        }
        self.args.get(index).filter(|a| a.name.is_none()).map(|a| &a.value)
    }

    pub fn method_name(&self) -> Option<&str> {
        match &self.callee {
            Callee::Method { name, .. } | Callee::Static { name, .. } => Some(name),
            Callee::Function(_) | Callee::Dynamic(_) => None,
        }
    }
}
