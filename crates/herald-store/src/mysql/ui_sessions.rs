//! The dashboard's session rows ([`crate::ui_sessions`]): this backend's statements; the
//! functions are the module's one body over them.

crate::ui_sessions::ui_session_fns!(sqlx::MySqlConnection, SQL);

const SQL: crate::ui_sessions::UiSessionSql = crate::ui_sessions::UiSessionSql {
    insert: "INSERT INTO herald_ui_sessions (id, tenant_id, key_id, created_ms, seen_ms,
                 expires_ms, address, agent, viewer)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    get: "SELECT id, tenant_id, key_id, created_ms, seen_ms, expires_ms, ended_ms, ended_why,
              address, agent, viewer
          FROM herald_ui_sessions WHERE id = ?",
    touch: "UPDATE herald_ui_sessions SET seen_ms = ? WHERE id = ? AND ended_ms IS NULL",
    end: "UPDATE herald_ui_sessions SET ended_ms = ?, ended_why = ?
          WHERE id = ? AND ended_ms IS NULL AND tenant_id <=> coalesce(?, tenant_id)",
    open: "SELECT id, tenant_id, key_id, created_ms, seen_ms, expires_ms, ended_ms, ended_why,
              address, agent, viewer
           FROM herald_ui_sessions
           WHERE ended_ms IS NULL AND expires_ms > ? AND tenant_id <=> coalesce(?, tenant_id)
           ORDER BY created_ms DESC, id LIMIT ?",
    prune: "DELETE FROM herald_ui_sessions
            WHERE LEAST(expires_ms, coalesce(ended_ms, expires_ms)) < ? LIMIT ?",
};
