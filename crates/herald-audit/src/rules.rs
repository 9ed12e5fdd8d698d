//! The rules: their ids, why each matters and the fix, in the seed's order of
//! preference (move the effect after the transaction → queue it with after-commit →
//! give it a unique key).

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    RetriedEffect,
    StrandedEffect,
    DroppedRetry,
    PoisonedTransaction,
    BudgetOutsideClaim,
    LockWaitRetry,
}

pub const RULES: [Rule; 6] = [
    Rule::RetriedEffect,
    Rule::StrandedEffect,
    Rule::DroppedRetry,
    Rule::PoisonedTransaction,
    Rule::BudgetOutsideClaim,
    Rule::LockWaitRetry,
];

impl Rule {
    pub fn id(self) -> &'static str {
        match self {
            Rule::RetriedEffect => "retried-effect",
            Rule::StrandedEffect => "stranded-effect",
            Rule::DroppedRetry => "dropped-retry",
            Rule::PoisonedTransaction => "poisoned-transaction",
            Rule::BudgetOutsideClaim => "budget-outside-claim",
            Rule::LockWaitRetry => "lock-wait-retry",
        }
    }

    pub fn from_id(id: &str) -> Option<Rule> {
        RULES.into_iter().find(|r| r.id() == id)
    }

    pub fn title(self) -> &'static str {
        match self {
            Rule::RetriedEffect => "effect in a retried transaction",
            Rule::StrandedEffect => "effect a rollback strands",
            Rule::DroppedRetry => "retry silently dropped",
            Rule::PoisonedTransaction => "poisoned transaction",
            Rule::BudgetOutsideClaim => "budget outside the claim",
            Rule::LockWaitRetry => "long lock wait × attempts",
        }
    }

    /// One line: why this is a bug.
    pub fn why(self) -> &'static str {
        match self {
            Rule::RetriedEffect => {
                "a transaction with attempts > 1 re-runs its whole closure on a deadlock: this effect fires once per attempt and no rollback takes it back"
            }
            Rule::StrandedEffect => {
                "a rollback undoes the database work but not this effect, and a queued job can start before the commit and find nothing"
            }
            Rule::DroppedRetry => {
                "a transaction nested in another is never retried: Laravel runs it once and rethrows the deadlock (a QueryException in Laravel 8, DeadlockException later) past its attempts"
            }
            Rule::PoisonedTransaction => {
                "on PostgreSQL a failed statement aborts the whole transaction: after this catch every later statement fails (SQLSTATE 25P02) and the commit rolls back"
            }
            Rule::BudgetOutsideClaim => {
                "the credit moves outside the transaction that records the send: one can happen without the other, and the tenant pays for nothing (or sends for free)"
            }
            Rule::LockWaitRetry => {
                "a lock wait timeout counts as a concurrency error and is retried: each attempt can wait the whole timeout again, then repeat the closure"
            }
        }
    }

    /// The fix, in the seed's order of preference.
    pub fn fix(self) -> &'static str {
        match self {
            Rule::RetriedEffect | Rule::StrandedEffect => {
                "move it after the transaction; else queue it with ->afterCommit(); else give it a unique key so a repeat is a no-op"
            }
            Rule::DroppedRetry => {
                "retry at the outermost transaction only (drop attempts here), or do not call this inside a transaction"
            }
            Rule::PoisonedTransaction => {
                "make the statement that may fail its own savepoint (a nested DB::transaction() around it), or avoid the error (insertOrIgnore, upsert, ON CONFLICT DO NOTHING), or rethrow"
            }
            Rule::BudgetOutsideClaim => {
                "reserve the credit and record the claim in one DB::transaction(), and dispatch the send from it with ->afterCommit()"
            }
            Rule::LockWaitRetry => {
                "shorten the transaction or take the locks in one order; lower the lock wait timeout rather than raising attempts"
            }
        }
    }

    /// The SARIF level.
    pub fn level(self) -> &'static str {
        match self {
            Rule::LockWaitRetry => "warning",
            _ => "error",
        }
    }
}
