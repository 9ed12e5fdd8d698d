//! The audit log ([`crate::audit`]): this backend's statements; the functions are the
//! module's one body over them.

crate::audit::audit_fns!(sqlx::SqliteConnection, SQL);

const SQL: crate::audit::AuditSql = crate::audit::AuditSql {
    insert: "INSERT INTO herald_audit (at_ms, actor, key_id, tenant_id, action, target, count,
                 address)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    list: "SELECT id, at_ms, actor, key_id, tenant_id, action, target, count, address
           FROM herald_audit
           WHERE (?1 IS NULL OR tenant_id = ?1) AND (?2 IS NULL OR id < ?2)
           ORDER BY id DESC LIMIT ?3",
    prune: "DELETE FROM herald_audit WHERE id IN (
                SELECT id FROM herald_audit WHERE at_ms < ?1 ORDER BY at_ms LIMIT ?2)",
};
