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
    pace_create: "INSERT INTO herald_destination_pace (destination, scope_key, tokens, tokens_ms)
                  VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE tokens = tokens",
    pace_lock: "SELECT tokens, tokens_ms FROM herald_destination_pace
                WHERE destination = ? AND scope_key = ? FOR UPDATE",
    pace_save: "UPDATE herald_destination_pace SET tokens = ?, tokens_ms = ?
                WHERE destination = ? AND scope_key = ?",
    in_flight: "SELECT tenant_id, COUNT(*) FROM deliveries
                WHERE state = 'sending' AND destination = ? GROUP BY tenant_id",
    weight: "UPDATE tenants SET send_weight = ? WHERE id = ?",
    pause: "INSERT INTO herald_lanes (tenant_id, destination, until_ms, updated_ms)
            VALUES (?, ?, ?, ?)
            ON DUPLICATE KEY UPDATE until_ms = GREATEST(until_ms, VALUES(until_ms))",
    pauses_prune: "DELETE FROM herald_lanes WHERE until_ms < ? AND failures = 0 AND disabled_ms IS NULL",
    health: "SELECT until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms FROM herald_lanes WHERE tenant_id = ? AND destination = ? FOR UPDATE",
    health_put: "INSERT INTO herald_lanes (tenant_id, destination, until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms, updated_ms)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                 ON DUPLICATE KEY UPDATE until_ms = VALUES(until_ms), failures = VALUES(failures),
                     failing_since_ms = VALUES(failing_since_ms), probe_ms = VALUES(probe_ms), opened_ms = VALUES(opened_ms),
                     disabled_ms = VALUES(disabled_ms), updated_ms = VALUES(updated_ms)",
    health_clear: "DELETE FROM herald_lanes WHERE tenant_id = ? AND destination = ?",
    probe: "UPDATE herald_lanes SET until_ms = ? WHERE tenant_id = ? AND destination = ?",
    failing: "SELECT tenant_id, destination, until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms FROM herald_lanes
              WHERE failures > 0 OR disabled_ms IS NOT NULL
              ORDER BY failures DESC, tenant_id, destination LIMIT ?",
    failing_of: "SELECT tenant_id, destination, until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms FROM herald_lanes
                 WHERE tenant_id = ? AND (failures > 0 OR disabled_ms IS NOT NULL)
                 ORDER BY failures DESC, destination LIMIT ?",
    events_url: "SELECT events_url FROM tenants WHERE id = ?",
    events_url_set: "UPDATE tenants SET events_url = ? WHERE id = ?",
};
