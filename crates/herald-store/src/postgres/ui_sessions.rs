//! The dashboard's session rows ([`crate::ui_sessions`]): this backend's statements; the
//! functions are the module's one body over them.

crate::ui_sessions::ui_session_fns!(sqlx::PgConnection, SQL);

const SQL: crate::ui_sessions::UiSessionSql = crate::ui_sessions::UiSessionSql {
    insert: "INSERT INTO herald_ui_sessions (id, tenant_id, key_id, created_ms, seen_ms,
                 expires_ms, address, agent, viewer)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    get: "SELECT id, tenant_id, key_id, created_ms, seen_ms, expires_ms, ended_ms, ended_why,
              address, agent, viewer
          FROM herald_ui_sessions WHERE id = $1",
    touch: "UPDATE herald_ui_sessions SET seen_ms = $1 WHERE id = $2 AND ended_ms IS NULL",
    end: "UPDATE herald_ui_sessions SET ended_ms = $1, ended_why = $2
          WHERE id = $3 AND ended_ms IS NULL AND ($4::uuid IS NULL OR tenant_id = $4)",
    open: "SELECT id, tenant_id, key_id, created_ms, seen_ms, expires_ms, ended_ms, ended_why,
              address, agent, viewer
           FROM herald_ui_sessions
           WHERE ended_ms IS NULL AND expires_ms > $1 AND ($2::uuid IS NULL OR tenant_id = $2)
           ORDER BY created_ms DESC, id LIMIT $3",
    prune: "DELETE FROM herald_ui_sessions WHERE id IN (
                SELECT id FROM herald_ui_sessions
                WHERE least(expires_ms, coalesce(ended_ms, expires_ms)) < $1 LIMIT $2)",
};
