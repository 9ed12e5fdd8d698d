//! The one module that knows the PHP parser (mago-syntax, with mago-names for resolved
//! names): it parses a file and lowers the parts the rules read into `ir`. Replacing
//! the parser means rewriting this file only.
//!
//! A file with any syntax error is reported as unparsable and not lowered at all: a rule
//! that saw half a tree would report half the truth.

use crate::ir::{
    Arg, Call, Callee, Catch, Class, ClassKind, Closure, Expr, File, Function, Param, Pos, Try,
};
use bumpalo::Bump;
use mago_database::file::FileId;
use mago_names::ResolvedNames;
use mago_names::resolver::NameResolver;
use mago_span::HasSpan;
use mago_syntax::ast::*;

mod flow;

/// How deep the lowering follows nested nodes; past it the file is reported as
/// unparsable rather than risking the stack.
const DEPTH_MAX: u32 = 400;
/// How many links of one method chain are lowered side by side (past it, the rest nest as
/// depth, and a chain longer than both is reported as unparsable).
const CHAIN_MAX: usize = 2_000;

/// Why a file was not analysed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparsable {
    pub pos: Pos,
    pub message: String,
}

/// Parses `source` and lowers it, or says why it cannot.
pub fn parse(source: &[u8]) -> Result<File, Unparsable> {
    let arena = Bump::new();
    let lines = LineIndex::new(source);
    let program = mago_syntax::parser::parse_file_content(&arena, FileId::zero(), source);
    if let Some(error) = program.errors.first() {
        return Err(Unparsable {
            pos: lines.pos(error.span().start.offset),
            message: one_line(&error.to_string()),
        });
    }
    let names = NameResolver::new(&arena).resolve(program);
    let mut lowering =
        Lowering { names: &names, lines: &lines, file: File::default(), depth: 0, too_deep: None };
    let mut top = Vec::new();
    for statement in program.statements.iter() {
        lowering.lower_into(Node::Statement(statement), &mut top);
    }
    if let Some(pos) = lowering.too_deep {
        return Err(Unparsable {
            pos,
            message: format!("nested deeper than {DEPTH_MAX} levels; not analysed"),
        });
    }
    lowering.file.top = top;
    Ok(lowering.file)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Byte offset → line and column.
struct LineIndex<'s> {
    source: &'s [u8],
    starts: Vec<u32>,
}

impl<'s> LineIndex<'s> {
    fn new(source: &'s [u8]) -> Self {
        let mut starts = vec![0];
        for (i, b) in source.iter().enumerate() {
            if *b == b'\n' {
                starts.push(u32::try_from(i + 1).unwrap_or(u32::MAX));
            }
        }
        LineIndex { source, starts }
    }

    fn pos(&self, offset: u32) -> Pos {
        let line = self.starts.partition_point(|s| *s <= offset).max(1);
        let start = self.starts[line - 1] as usize;
        let end = (offset as usize).min(self.source.len()).max(start);
        let col = String::from_utf8_lossy(&self.source[start..end]).chars().count() + 1;
        Pos {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            col: u32::try_from(col).unwrap_or(u32::MAX),
        }
    }
}

struct Lowering<'n, 'arena> {
    names: &'n ResolvedNames<'arena>,
    lines: &'n LineIndex<'n>,
    file: File,
    depth: u32,
    too_deep: Option<Pos>,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn var_name(v: &DirectVariable<'_>) -> String {
    text(v.name.strip_prefix(b"$").unwrap_or(v.name))
}

impl<'arena> Lowering<'_, 'arena> {
    fn pos(&self, span: mago_span::Span) -> Pos {
        self.lines.pos(span.start.offset)
    }

    /// The resolved name at `identifier`, without a leading backslash.
    fn resolved(&self, identifier: &Identifier<'_>) -> String {
        let name = match self.names.resolve(&identifier.span()) {
            Some(name) => text(name),
            None => text(identifier.value()),
        };
        name.trim_start_matches('\\').to_string()
    }

    fn class_ref(&mut self, expr: &Expression<'arena>) -> Option<String> {
        match expr {
            Expression::Identifier(id) => Some(self.resolved(id)),
            Expression::Self_(_) => Some("self".into()),
            Expression::Static(_) => Some("static".into()),
            Expression::Parent(_) => Some("parent".into()),
            _ => None,
        }
    }

    fn hint_types(&self, hint: &Hint<'_>, out: &mut Vec<String>) {
        match hint {
            Hint::Identifier(id) => out.push(self.resolved(id)),
            Hint::Parenthesized(h) => self.hint_types(h.hint, out),
            Hint::Nullable(h) => self.hint_types(h.hint, out),
            Hint::Union(h) => {
                self.hint_types(h.left, out);
                self.hint_types(h.right, out);
            }
            Hint::Intersection(h) => {
                self.hint_types(h.left, out);
                self.hint_types(h.right, out);
            }
            Hint::Self_(_) | Hint::Static(_) => out.push("self".into()),
            _ => {}
        }
    }

    fn params(&mut self, list: &FunctionLikeParameterList<'arena>) -> Vec<Param> {
        let mut params = Vec::new();
        for p in list.parameters.iter() {
            let mut types = Vec::new();
            if let Some(hint) = &p.hint {
                self.hint_types(hint, &mut types);
            }
            let default =
                p.default_value.as_ref().and_then(|d| self.lower(Node::Expression(d.value)));
            params.push(Param {
                name: var_name(&p.variable),
                types,
                promoted: !p.modifiers.is_empty(),
                default,
            });
        }
        params
    }

    fn block(&mut self, block: &Block<'arena>) -> Vec<Expr> {
        let mut out = Vec::new();
        for s in block.statements.iter() {
            self.lower_into(Node::Statement(s), &mut out);
        }
        out
    }

    fn args(&mut self, list: &ArgumentList<'arena>) -> Vec<Arg> {
        let mut args = Vec::new();
        for a in list.arguments.iter() {
            match a {
                Argument::Positional(p) => {
                    let value =
                        self.lower(Node::Expression(p.value)).unwrap_or(Expr::Other(vec![]));
                    let name = p.ellipsis.map(|_| "...".to_string());
                    args.push(Arg { name, value });
                }
                Argument::Named(n) => {
                    let value =
                        self.lower(Node::Expression(n.value)).unwrap_or(Expr::Other(vec![]));
                    args.push(Arg { name: Some(text(n.name.value)), value });
                }
            }
        }
        args
    }

    fn selector(&mut self, selector: &ClassLikeMemberSelector<'arena>) -> String {
        match selector {
            ClassLikeMemberSelector::Identifier(id) => text(id.value),
            _ => "?".into(),
        }
    }

    fn lower_into(&mut self, node: Node<'_, 'arena>, out: &mut Vec<Expr>) {
        if let Some(e) = self.lower(node) {
            out.push(e);
        }
    }

    /// Lowers the children of `node`: nothing, the one child, or `Other`.
    fn children(&mut self, node: Node<'_, 'arena>) -> Option<Expr> {
        let mut out = Vec::new();
        node.visit_children(|child| self.lower_into(child, &mut out));
        match out.len() {
            0 => None,
            1 => out.pop(),
            _ => Some(Expr::Other(out)),
        }
    }

    fn lower(&mut self, node: Node<'_, 'arena>) -> Option<Expr> {
        if self.too_deep.is_some() {
            return None;
        }
        self.depth += 1;
        if self.depth > DEPTH_MAX {
            self.too_deep = Some(self.pos(node.span()));
            self.depth -= 1;
            return None;
        }
        let lowered = self.lower_node(node);
        self.depth -= 1;
        lowered
    }

    fn lower_node(&mut self, node: Node<'_, 'arena>) -> Option<Expr> {
        match node {
            Node::FunctionCall(c) => {
                let callee = match c.function {
                    // An unqualified name in a namespace falls back to the global function
                    // at run time; helpers such as dispatch() are global.
                    Expression::Identifier(Identifier::Local(id)) => {
                        Callee::Function(text(id.value))
                    }
                    Expression::Identifier(id) => Callee::Function(self.resolved(id)),
                    other => Callee::Dynamic(
                        self.lower(Node::Expression(other)).unwrap_or(Expr::Other(vec![])),
                    ),
                };
                let args = self.args(&c.argument_list);
                Some(Expr::Call(Box::new(Call { callee, args, pos: self.pos(c.function.span()) })))
            }
            // A chain `$q->a()->b()->…` is as deep as it is long; its links are lowered one
            // after the other, so a long builder chain is not mistaken for deep nesting.
            Node::MethodCall(c) => Some(self.method_chain(c.object, &c.method, &c.argument_list)),
            Node::NullSafeMethodCall(c) => {
                Some(self.method_chain(c.object, &c.method, &c.argument_list))
            }
            Node::StaticMethodCall(c) => {
                let class = self.class_ref(c.class).unwrap_or_else(|| "?".into());
                let name = self.selector(&c.method);
                let args = self.args(&c.argument_list);
                let pos = self.pos(c.class.span());
                Some(Expr::Call(Box::new(Call {
                    callee: Callee::Static { class, name },
                    args,
                    pos,
                })))
            }
            Node::Closure(c) => {
                let params = self.params(&c.parameter_list);
                let body = self.block(&c.body);
                Some(Expr::Closure(Box::new(Closure { params, body, pos: self.pos(c.span()) })))
            }
            Node::ArrowFunction(c) => {
                let params = self.params(&c.parameter_list);
                let body = self.lower(Node::Expression(c.expression)).into_iter().collect();
                Some(Expr::Closure(Box::new(Closure { params, body, pos: self.pos(c.span()) })))
            }
            Node::Try(t) => {
                let body = self.block(&t.block);
                let mut catches = Vec::new();
                for c in t.catch_clauses.iter() {
                    let mut types = Vec::new();
                    self.hint_types(&c.hint, &mut types);
                    let ends_in_throw = matches!(
                        c.block.statements.last(),
                        Some(Statement::Expression(ExpressionStatement {
                            expression: Expression::Throw(_),
                            ..
                        }))
                    );
                    let body = self.block(&c.block);
                    catches.push(Catch { types, body, pos: self.pos(c.span()), ends_in_throw });
                }
                let finally = match &t.finally_clause {
                    Some(f) => self.block(&f.block),
                    None => Vec::new(),
                };
                Some(Expr::Try(Box::new(Try { body, catches, finally })))
            }
            Node::Throw(t) => {
                let inner = self.lower(Node::Expression(t.exception)).into_iter().collect();
                Some(Expr::Throw(inner, self.pos(t.span())))
            }
            Node::Return(r) => {
                let inner =
                    r.value.and_then(|v| self.lower(Node::Expression(v))).into_iter().collect();
                Some(Expr::Return(inner, self.pos(r.span())))
            }
            Node::LiteralInteger(i) => Some(match i.value.and_then(|v| i64::try_from(v).ok()) {
                Some(v) => Expr::Int(v),
                None => Expr::Other(vec![]),
            }),
            Node::LiteralString(s) => Some(Expr::Str(text(s.value.unwrap_or(b"")))),
            Node::Literal(Literal::True(_)) => Some(Expr::Bool(true)),
            Node::Literal(Literal::False(_)) => Some(Expr::Bool(false)),
            Node::Literal(Literal::Null(_)) => Some(Expr::Null),
            Node::LiteralStringPart(p) => Some(Expr::Str(text(p.value))),
            Node::ClassConstantAccess(a) => {
                let Some(class) = self.class_ref(a.class) else {
                    return self.children(node);
                };
                match &a.constant {
                    ClassLikeConstantSelector::Identifier(id)
                        if id.value.eq_ignore_ascii_case(b"class") =>
                    {
                        Some(Expr::ClassName(class))
                    }
                    ClassLikeConstantSelector::Identifier(id) => {
                        Some(Expr::ClassConst { class, name: text(id.value) })
                    }
                    _ => None,
                }
            }
            Node::DirectVariable(v) => Some(Expr::Var(var_name(v))),
            Node::PropertyAccess(p) => {
                let object = self.lower(Node::Expression(p.object)).unwrap_or(Expr::Other(vec![]));
                let name = self.selector(&p.property);
                Some(Expr::Prop { object: Box::new(object), name })
            }
            Node::NullSafePropertyAccess(p) => {
                let object = self.lower(Node::Expression(p.object)).unwrap_or(Expr::Other(vec![]));
                let name = self.selector(&p.property);
                Some(Expr::Prop { object: Box::new(object), name })
            }
            Node::Instantiation(n) => {
                let pos = self.pos(n.span());
                let args = match &n.argument_list {
                    Some(list) => self.args(list),
                    None => Vec::new(),
                };
                let class = match n.class {
                    Expression::AnonymousClass(c) => self.anonymous_class(c),
                    other => self.class_ref(other).unwrap_or_else(|| "?".into()),
                };
                Some(Expr::New { class, args, pos })
            }
            Node::AnonymousClass(c) => {
                let class = self.anonymous_class(c);
                Some(Expr::New { class, args: Vec::new(), pos: self.pos(c.span()) })
            }
            Node::Assignment(a) if a.operator.is_assign() => {
                let target = self.lower(Node::Expression(a.lhs)).unwrap_or(Expr::Other(vec![]));
                let value = self.lower(Node::Expression(a.rhs)).unwrap_or(Expr::Other(vec![]));
                Some(Expr::Assign { target: Box::new(target), value: Box::new(value) })
            }
            Node::ArrayAccess(a) => {
                let base = self.lower(Node::Expression(a.array)).unwrap_or(Expr::Other(vec![]));
                let key = self.lower(Node::Expression(a.index)).unwrap_or(Expr::Other(vec![]));
                Some(Expr::Index { base: Box::new(base), key: Box::new(key) })
            }
            Node::EmptyConstruct(e) => {
                let inner = self.lower(Node::Expression(e.value)).unwrap_or(Expr::Other(vec![]));
                Some(Expr::Empty(Box::new(inner)))
            }
            Node::Array(a) => Some(self.array(a.elements.iter())),
            Node::LegacyArray(a) => Some(self.array(a.elements.iter())),
            Node::Class(c) => {
                let name = self.resolved_local(&c.name);
                let mut class = self.class(name, ClassKind::Class, c.members.iter(), c.span());
                class.extends = self.identifiers(c.extends.iter().flat_map(|e| e.types.iter()));
                class.implements =
                    self.identifiers(c.implements.iter().flat_map(|e| e.types.iter()));
                self.file.classes.push(class);
                None
            }
            Node::Interface(c) => {
                let name = self.resolved_local(&c.name);
                let mut class = self.class(name, ClassKind::Interface, c.members.iter(), c.span());
                class.extends = self.identifiers(c.extends.iter().flat_map(|e| e.types.iter()));
                self.file.classes.push(class);
                None
            }
            Node::Trait(c) => {
                let name = self.resolved_local(&c.name);
                let class = self.class(name, ClassKind::Trait, c.members.iter(), c.span());
                self.file.classes.push(class);
                None
            }
            Node::Enum(c) => {
                let name = self.resolved_local(&c.name);
                let mut class = self.class(name, ClassKind::Enum, c.members.iter(), c.span());
                class.implements =
                    self.identifiers(c.implements.iter().flat_map(|e| e.types.iter()));
                self.file.classes.push(class);
                None
            }
            Node::Function(f) => {
                let name = self.resolved_local(&f.name);
                let params = self.params(&f.parameter_list);
                let body = self.block(&f.body);
                let returns = self.return_types(f.return_type_hint.as_ref());
                self.file.functions.push(Function {
                    name,
                    params,
                    body,
                    returns,
                    pos: self.pos(f.span()),
                });
                None
            }
            // A flat chain `a . b . c …` (or `+`, `&&`, `??`) is a left-deep tree as deep
            // as it is long; its operands are lowered side by side so that a long
            // concatenation is not mistaken for deep nesting (issue 39).
            Node::Binary(b) => {
                let and = |op: &BinaryOperator<'_>| {
                    matches!(op, BinaryOperator::And(_) | BinaryOperator::LowAnd(_))
                };
                let mut all_and = and(&b.operator);
                let mut operands = vec![b.rhs];
                let mut left = b.lhs;
                while let Expression::Binary(inner) = left {
                    all_and = all_and && and(&inner.operator);
                    operands.push(inner.rhs);
                    left = inner.lhs;
                }
                operands.push(left);
                let mut out = Vec::new();
                for operand in operands.into_iter().rev() {
                    // Each operand kept in place (a `false` or a bare variable matters to
                    // a conjunction), an empty one as an empty `Other`.
                    out.push(self.lower(Node::Expression(operand)).unwrap_or(Expr::Other(vec![])));
                }
                if all_and {
                    return Some(Expr::And(out));
                }
                out.retain(|e| !matches!(e, Expr::Other(v) if v.is_empty()));
                match out.len() {
                    0 => None,
                    1 => out.pop(),
                    _ => Some(Expr::Other(out)),
                }
            }
            Node::If(i) => Some(self.if_statement(i)),
            Node::Foreach(_) | Node::For(_) | Node::While(_) | Node::DoWhile(_) => {
                let mut out = Vec::new();
                node.visit_children(|child| self.lower_into(child, &mut out));
                Some(Expr::Loop(out))
            }
            // Names that are not calls, instantiations or class constants carry nothing
            // the rules read.
            Node::Identifier(_) | Node::LocalIdentifier(_) | Node::Use(_) | Node::Inline(_) => None,
            _ => self.children(node),
        }
    }

    fn return_types(&self, hint: Option<&FunctionLikeReturnTypeHint<'_>>) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(h) = hint {
            self.hint_types(&h.hint, &mut out);
        }
        out
    }

    fn resolved_local(&self, name: &LocalIdentifier<'_>) -> String {
        match self.names.resolve(&name.span) {
            Some(n) => text(n).trim_start_matches('\\').to_string(),
            None => text(name.value),
        }
    }

    fn identifiers<'a>(&self, ids: impl Iterator<Item = &'a Identifier<'a>>) -> Vec<String> {
        ids.map(|id| self.resolved(id)).collect()
    }

    fn anonymous_class(&mut self, c: &AnonymousClass<'arena>) -> String {
        let pos = self.pos(c.span());
        let name = format!("class@anonymous:{}:{}", pos.line, pos.col);
        let mut class = self.class(name.clone(), ClassKind::Class, c.members.iter(), c.span());
        class.extends = self.identifiers(c.extends.iter().flat_map(|e| e.types.iter()));
        class.implements = self.identifiers(c.implements.iter().flat_map(|e| e.types.iter()));
        self.file.classes.push(class);
        name
    }

    fn array<'a>(&mut self, elements: impl Iterator<Item = &'a ArrayElement<'arena>>) -> Expr
    where
        'arena: 'a,
    {
        let mut items = Vec::new();
        for element in elements {
            match element {
                ArrayElement::KeyValue(kv) => {
                    let key = self.lower(Node::Expression(kv.key));
                    let value =
                        self.lower(Node::Expression(kv.value)).unwrap_or(Expr::Other(vec![]));
                    items.push((key, value));
                }
                ArrayElement::Value(v) => {
                    let value =
                        self.lower(Node::Expression(v.value)).unwrap_or(Expr::Other(vec![]));
                    items.push((None, value));
                }
                ArrayElement::Variadic(v) => {
                    let value =
                        self.lower(Node::Expression(v.value)).unwrap_or(Expr::Other(vec![]));
                    items.push((None, value));
                }
                ArrayElement::Missing(_) => {}
            }
        }
        Expr::Array(items)
    }

    fn class<'a>(
        &mut self,
        name: String,
        kind: ClassKind,
        members: impl Iterator<Item = &'a ClassLikeMember<'arena>>,
        span: mago_span::Span,
    ) -> Class
    where
        'arena: 'a,
    {
        let mut class = Class {
            name,
            kind,
            extends: Vec::new(),
            implements: Vec::new(),
            traits: Vec::new(),
            constants: Vec::new(),
            properties: Vec::new(),
            methods: Vec::new(),
            pos: self.pos(span),
        };
        for member in members {
            match member {
                ClassLikeMember::TraitUse(t) => {
                    class.traits.extend(t.trait_names.iter().map(|id| self.resolved(id)));
                }
                ClassLikeMember::Constant(c) => {
                    for item in c.items.iter() {
                        let value =
                            self.lower(Node::Expression(item.value)).unwrap_or(Expr::Other(vec![]));
                        class.constants.push((text(item.name.value), value));
                    }
                }
                ClassLikeMember::Property(Property::Plain(p)) => {
                    let mut types = Vec::new();
                    if let Some(hint) = &p.hint {
                        self.hint_types(hint, &mut types);
                    }
                    for item in p.items.iter() {
                        let (variable, default) = match item {
                            PropertyItem::Abstract(a) => (&a.variable, None),
                            PropertyItem::Concrete(c) => {
                                (&c.variable, self.lower(Node::Expression(c.value)))
                            }
                        };
                        class.properties.push(crate::ir::Property {
                            name: var_name(variable),
                            types: types.clone(),
                            default,
                        });
                    }
                }
                ClassLikeMember::Property(Property::Hooked(_)) | ClassLikeMember::EnumCase(_) => {}
                ClassLikeMember::Method(m) => {
                    let params = self.params(&m.parameter_list);
                    for p in params.iter().filter(|p| p.promoted) {
                        class.properties.push(crate::ir::Property {
                            name: p.name.clone(),
                            types: p.types.clone(),
                            default: None,
                        });
                    }
                    let body = match &m.body {
                        MethodBody::Concrete(block) => self.block(block),
                        MethodBody::Abstract(_) => Vec::new(),
                    };
                    let returns = self.return_types(m.return_type_hint.as_ref());
                    class.methods.push(Function {
                        name: text(m.name.value),
                        params,
                        body,
                        returns,
                        pos: self.pos(m.span()),
                    });
                }
            }
        }
        class
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn resolves_aliases_and_positions() {
        let source = b"<?php\nnamespace App;\nuse Illuminate\\Support\\Facades\\DB as Database;\n\nDatabase::transaction(fn () => 1, attempts: 3);\n";
        let file = parse(source).expect("parses");
        let Some(Expr::Call(call)) = file.top.first() else { panic!("{:?}", file.top) };
        let Callee::Static { class, name } = &call.callee else { panic!("{call:?}") };
        assert_eq!(
            (class.as_str(), name.as_str()),
            ("Illuminate\\Support\\Facades\\DB", "transaction")
        );
        assert_eq!(call.pos, Pos { line: 5, col: 1 });
        assert!(matches!(call.arg(1, "attempts"), Some(Expr::Int(3))));
    }

    #[test]
    fn a_syntax_error_is_reported_with_its_line() {
        let error = parse(b"<?php\n\nfunction (\n").expect_err("does not parse");
        assert_eq!(error.pos.line, 3, "{error:?}");
    }
}
