//! The audit log ([`crate::audit`]): this backend's statements; the functions are the
//! module's one body over them.

crate::audit::audit_fns!(sqlx::MySqlConnection, SQL);

const SQL: crate::audit::AuditSql = crate::audit::AuditSql {
    insert: "INSERT INTO herald_audit (at_ms, actor, key_id, tenant_id, action, target, count,
                 address)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    list: "SELECT id, at_ms, actor, key_id, tenant_id, action, target, count, address
           FROM herald_audit
           WHERE tenant_id <=> coalesce(?, tenant_id)
             AND id < coalesce(?, 9223372036854775807)
           ORDER BY id DESC LIMIT ?",
    prune: "DELETE FROM herald_audit WHERE at_ms < ? ORDER BY at_ms LIMIT ?",
};
