//! Destination limits and pacing ([`crate::destinations`]): this backend's statements.

crate::destinations::destinations_fns!(sqlx::MySqlConnection, SQL);

const SQL: crate::destinations::DestinationSql = crate::destinations::DestinationSql {
    list: "SELECT destination, tenant_id, max_in_flight, per_second, updated_ms, actor
           FROM herald_destination_limits ORDER BY destination, scope_key",
    set: "INSERT INTO herald_destination_limits
              (destination, tenant_id, scope_key, max_in_flight, per_second, updated_ms, actor)
          VALUES (?, ?, ?, ?, ?, ?, ?)
          ON DUPLICATE KEY UPDATE
              max_in_flight = VALUES(max_in_flight), per_second = VALUES(per_second),
              updated_ms = VALUES(updated_ms), actor = VALUES(actor)",
    remove: "DELETE FROM herald_destination_limits WHERE destination = ? AND scope_key = ?",
    remove_pace: "DELETE FROM herald_destination_pace WHERE destination = ? AND scope_key = ?",
    pace_create: "INSERT IGNORE INTO herald_destination_pace
                      (destination, scope_key, tokens, tokens_ms) VALUES (?, ?, ?, ?)",
    pace_lock: "SELECT tokens, tokens_ms FROM herald_destination_pace
                WHERE destination = ? AND scope_key = ? FOR UPDATE",
    pace_save: "UPDATE herald_destination_pace SET tokens = ?, tokens_ms = ?
                WHERE destination = ? AND scope_key = ?",
    in_flight: "SELECT tenant_id, COUNT(*) FROM deliveries
                WHERE state = 'sending' AND destination = ? GROUP BY tenant_id",
    pause: "INSERT INTO herald_lane_pauses (tenant_id, destination, until_ms) VALUES (?, ?, ?)
            ON DUPLICATE KEY UPDATE until_ms = GREATEST(until_ms, VALUES(until_ms))",
    pauses_prune: "DELETE FROM herald_lane_pauses WHERE until_ms < ?",
    weight: "UPDATE tenants SET send_weight = ? WHERE id = ?",
};
