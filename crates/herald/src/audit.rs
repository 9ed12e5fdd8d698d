//! The audit log (issue 37, defect 7): who did what to which tenant, how many, and when —
//! sign-ins (and failed ones), sign-outs and ended sessions, replays, cancels and bulk
//! actions, tenants, keys, grants and secrets. Append-only in the database (a trigger
//! refuses updates); written by the faces (the HTTP server, the CLI) after the action
//! commits, so a process that dies between the two loses that entry, never invents one;
//! pruned by retention past its window, as deliveries are.

use crate::error::Error;
use crate::handle::Herald;
use herald_core::TenantId;
use herald_store::audit::{AuditRow, audit_insert, audit_list, audit_prune};
use std::time::Duration;

/// Who acted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditActor {
    /// The admin key (a call or a dashboard session).
    Admin,
    /// The read-only operator's key (a dashboard session).
    Viewer,
    /// A tenant's API key (a call, or a session made from it), by its id.
    Tenant { key_id: String },
    /// An operator at the command line, on the database itself.
    Operator,
    /// Nobody known: a failed sign-in, with the key id it named, if any.
    Anonymous { key_id: Option<String> },
}

/// An entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub actor: AuditActor,
    /// The tenant acted on; `None`: none, or every tenant.
    pub tenant: Option<TenantId>,
    /// What was done: `sign_in`, `sign_in_failed`, `sign_out`, `session_end`, `replay`,
    /// `cancel`, `bulk_replay`, `bulk_cancel`, `tenant_create`, `key_create`, `key_revoke`,
    /// `webhook_secret_rotate`, `grant`, `session_secret_rotate`.
    pub action: &'static str,
    /// What it was done to (a delivery, a key, a quota key, a session).
    pub target: Option<String>,
    /// How many (a bulk action's count, a grant's amount).
    pub count: Option<i64>,
    /// The client's address, where a request made it.
    pub address: Option<String>,
}

impl AuditEntry {
    /// `action` by `actor` on `tenant`, with nothing else said yet.
    pub fn new(actor: AuditActor, tenant: Option<TenantId>, action: &'static str) -> AuditEntry {
        AuditEntry { actor, tenant, action, target: None, count: None, address: None }
    }

    pub fn target(mut self, target: impl Into<String>) -> AuditEntry {
        self.target = Some(target.into());
        self
    }

    pub fn count(mut self, count: i64) -> AuditEntry {
        self.count = Some(count);
        self
    }

    pub fn address(mut self, address: Option<String>) -> AuditEntry {
        self.address = address;
        self
    }
}

/// An entry as the log holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// Its place in the log: newer entries have larger ids.
    pub id: i64,
    /// Unix milliseconds.
    pub at: i64,
    /// `admin`, `tenant`, `operator` or `anonymous`.
    pub actor: String,
    pub key_id: Option<String>,
    pub tenant: Option<TenantId>,
    pub action: String,
    pub target: Option<String>,
    pub count: Option<i64>,
    pub address: Option<String>,
}

impl Herald {
    /// Appends `entry` to the audit log.
    pub async fn audit(&self, entry: AuditEntry) -> Result<(), Error> {
        let (actor, key_id) = match entry.actor {
            AuditActor::Admin => ("admin", None),
            AuditActor::Viewer => ("viewer", None),
            AuditActor::Tenant { key_id } => ("tenant", Some(key_id)),
            AuditActor::Operator => ("operator", None),
            AuditActor::Anonymous { key_id } => ("anonymous", key_id),
        };
        let row = AuditRow {
            id: 0,
            at_ms: self.clock().wall_ms(),
            actor: actor.to_string(),
            key_id: key_id.map(|k| herald_core::ident::shown(&k, 64)),
            tenant_id: entry.tenant.map(|t| t.as_uuid()),
            action: entry.action.to_string(),
            target: entry.target.map(|t| herald_core::ident::shown(&t, 200)),
            count: entry.count,
            address: entry.address.map(|a| herald_core::ident::shown(&a, 64)),
        };
        self.autocommit(|conn, _| {
            let row = row.clone();
            Box::pin(async move { audit_insert(conn, &row).await })
        })
        .await
    }

    /// The log, newest first, at most `limit` entries older than the entry `before` (when
    /// given): every tenant's, or `tenant`'s.
    pub async fn audit_log(
        &self,
        tenant: Option<TenantId>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, Error> {
        let rows = self
            .autocommit(|conn, _| {
                Box::pin(async move {
                    audit_list(conn, tenant.map(|t| t.as_uuid()), before, limit as i64).await
                })
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| AuditRecord {
                id: r.id,
                at: r.at_ms,
                actor: r.actor,
                key_id: r.key_id,
                tenant: r.tenant_id.map(TenantId::from_uuid),
                action: r.action,
                target: r.target,
                count: r.count,
                address: r.address,
            })
            .collect())
    }

    /// Deletes up to `limit` entries older than `keep`; how many (retention runs it).
    pub(crate) async fn audit_prune(&self, keep: Duration, limit: usize) -> Result<u64, Error> {
        let before = self.clock().wall_ms() - keep.as_millis() as i64;
        self.autocommit(|conn, _| {
            Box::pin(async move { audit_prune(conn, before, limit as i64).await })
        })
        .await
    }
}
