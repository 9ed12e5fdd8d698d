//! The parts of the lowering that keep a file's shape flat where the source is long
//! rather than deep — method chains link after link — and its control flow: `if` branches
//! (a branch that leaves does not carry its state on). Split from `php.rs` to keep each
//! file readable in one sitting; it is the same `Lowering`.

use super::{CHAIN_MAX, Lowering};
use crate::ir::{Call, Callee, Expr};
use mago_span::HasSpan;
use mago_syntax::ast::*;

impl<'arena> Lowering<'_, 'arena> {
    /// `object->method(args)` and the method calls it is made on, from the innermost
    /// object out, without recursing once per link.
    pub(super) fn method_chain(
        &mut self,
        object: &'arena Expression<'arena>,
        method: &ClassLikeMemberSelector<'arena>,
        args: &ArgumentList<'arena>,
    ) -> Expr {
        let mut links = vec![(method, args)];
        let mut inner = object;
        while links.len() < CHAIN_MAX {
            match inner {
                Expression::Call(mago_syntax::ast::Call::Method(m)) => {
                    links.push((&m.method, &m.argument_list));
                    inner = m.object;
                }
                Expression::Call(mago_syntax::ast::Call::NullSafeMethod(m)) => {
                    links.push((&m.method, &m.argument_list));
                    inner = m.object;
                }
                _ => break,
            }
        }
        let mut object = self.lower(Node::Expression(inner)).unwrap_or(Expr::Other(vec![]));
        for (method, args) in links.into_iter().rev() {
            let name = self.selector(method);
            let args = self.args(args);
            let pos = self.pos(method.span());
            object =
                Expr::Call(Box::new(Call { callee: Callee::Method { object, name }, args, pos }));
        }
        object
    }

    /// A statement as a branch body: a block's statements, or the one statement.
    fn branch(&mut self, statement: &Statement<'arena>) -> Vec<Expr> {
        match statement {
            Statement::Block(b) => self.block(b),
            other => {
                let mut out = Vec::new();
                self.lower_into(Node::Statement(other), &mut out);
                out
            }
        }
    }

    fn statements<'a>(&mut self, list: impl Iterator<Item = &'a Statement<'arena>>) -> Vec<Expr>
    where
        'arena: 'a,
    {
        let mut out = Vec::new();
        for s in list {
            self.lower_into(Node::Statement(s), &mut out);
        }
        out
    }

    pub(super) fn if_statement(&mut self, i: &If<'arena>) -> Expr {
        let mut conditions = Vec::new();
        self.lower_into(Node::Expression(i.condition), &mut conditions);
        let mut branches = Vec::new();
        let has_else = i.body.has_else_clause();
        match &i.body {
            IfBody::Statement(b) => {
                branches.push(self.branch(b.statement));
                for c in b.else_if_clauses.iter() {
                    self.lower_into(Node::Expression(c.condition), &mut conditions);
                    branches.push(self.branch(c.statement));
                }
                if let Some(e) = &b.else_clause {
                    branches.push(self.branch(e.statement));
                }
            }
            IfBody::ColonDelimited(b) => {
                branches.push(self.statements(b.statements.iter()));
                for c in b.else_if_clauses.iter() {
                    self.lower_into(Node::Expression(c.condition), &mut conditions);
                    branches.push(self.statements(c.statements.iter()));
                }
                if let Some(e) = &b.else_clause {
                    branches.push(self.statements(e.statements.iter()));
                }
            }
        }
        Expr::If(Box::new(crate::ir::If { conditions, branches, has_else }))
    }
}
