//! Holds ([`crate::holds`]): this backend's statements; the functions are the module's one
//! body over them.

crate::holds::holds_fns!(sqlx::PgConnection, SQL);

const SQL: crate::holds::HoldSql = crate::holds::HoldSql {
    exists: "SELECT id FROM herald_holds WHERE kind = $1 AND value = $2 AND scope_key = $3",
    insert: "INSERT INTO herald_holds (kind, value, tenant_id, scope_key, created_ms, actor)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (kind, value, scope_key) DO NOTHING",
    delete: "DELETE FROM herald_holds WHERE kind = $1 AND value = $2 AND scope_key = $3",
    list: "SELECT id, kind, value, tenant_id, created_ms, actor FROM herald_holds ORDER BY id",
    // crate::holds::HELD_DUE_MS, as a time.
    hold: "UPDATE deliveries SET held_due_at = next_attempt_at,
               next_attempt_at = to_timestamp(253402171200)
           WHERE state = 'pending' AND next_attempt_at < to_timestamp(253402171200) AND ",
    release: "UPDATE deliveries SET next_attempt_at = held_due_at, held_due_at = NULL
              WHERE state = 'pending' AND next_attempt_at = to_timestamp(253402171200)
                AND held_due_at IS NOT NULL AND ",
    hold_leased: "UPDATE deliveries SET state = 'pending', attempts = attempts - 1,
                      lease_owner = NULL, lease_until = NULL, attempt_worker = NULL,
                      attempt_started_at = NULL, held_due_at = next_attempt_at,
                      next_attempt_at = to_timestamp(253402171200)
                  WHERE id = $1 AND state = 'sending' AND lease_owner = $2 AND attempts = $3",
    ph: |n| format!("${n}"),
};
