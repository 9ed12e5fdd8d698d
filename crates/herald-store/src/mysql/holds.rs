//! Holds ([`crate::holds`]): this backend's statements; the functions are the module's one
//! body over them. Times are Unix milliseconds here.

crate::holds::holds_fns!(sqlx::MySqlConnection, SQL);

const SQL: crate::holds::HoldSql = crate::holds::HoldSql {
    exists: "SELECT id FROM herald_holds WHERE kind = ? AND value = ? AND scope_key = ?",
    insert: "INSERT INTO herald_holds (kind, value, tenant_id, scope_key, created_ms, actor)
             VALUES (?, ?, ?, ?, ?, ?)",
    delete: "DELETE FROM herald_holds WHERE kind = ? AND value = ? AND scope_key = ?",
    list: "SELECT id, kind, value, tenant_id, created_ms, actor FROM herald_holds ORDER BY id",
    // crate::holds::HELD_DUE_MS.
    hold: "UPDATE deliveries SET held_due_at = next_attempt_at, next_attempt_at = 253402171200000
           WHERE state = 'pending' AND next_attempt_at < 253402171200000 AND ",
    release: "UPDATE deliveries SET next_attempt_at = held_due_at, held_due_at = NULL
              WHERE state = 'pending' AND next_attempt_at = 253402171200000
                AND held_due_at IS NOT NULL AND ",
    hold_leased: "UPDATE deliveries SET state = 'pending', attempts = attempts - 1,
                      lease_owner = NULL, lease_until = NULL, attempt_worker = NULL,
                      attempt_started_at = NULL, held_due_at = next_attempt_at,
                      next_attempt_at = 253402171200000
                  WHERE id = ? AND state = 'sending' AND lease_owner = ? AND attempts = ?",
    ph: |_| "?".to_string(),
};
