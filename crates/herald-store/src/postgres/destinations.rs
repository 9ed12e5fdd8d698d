//! Destination limits and pacing ([`crate::destinations`]): this backend's statements.

crate::destinations::destinations_fns!(sqlx::PgConnection, SQL);

const SQL: crate::destinations::DestinationSql = crate::destinations::DestinationSql {
    list: "SELECT destination, tenant_id, max_in_flight, per_second, updated_ms, actor
           FROM herald_destination_limits ORDER BY destination, scope_key",
    set: "INSERT INTO herald_destination_limits
              (destination, tenant_id, scope_key, max_in_flight, per_second, updated_ms, actor)
          VALUES ($1, $2, $3, $4, $5, $6, $7)
          ON CONFLICT (destination, scope_key) DO UPDATE SET
              max_in_flight = excluded.max_in_flight, per_second = excluded.per_second,
              updated_ms = excluded.updated_ms, actor = excluded.actor",
    remove: "DELETE FROM herald_destination_limits WHERE destination = $1 AND scope_key = $2",
    remove_pace: "DELETE FROM herald_destination_pace WHERE destination = $1 AND scope_key = $2",
    pace_create: "INSERT INTO herald_destination_pace (destination, scope_key, tokens, tokens_ms)
                  VALUES ($1, $2, $3, $4) ON CONFLICT (destination, scope_key) DO NOTHING",
    pace_lock: "SELECT tokens, tokens_ms FROM herald_destination_pace
                WHERE destination = $1 AND scope_key = $2 FOR UPDATE",
    pace_save: "UPDATE herald_destination_pace SET tokens = $1, tokens_ms = $2
                WHERE destination = $3 AND scope_key = $4",
    in_flight: "SELECT tenant_id, count(*) FROM deliveries
                WHERE state = 'sending' AND destination = $1 GROUP BY tenant_id",
    weight: "UPDATE tenants SET send_weight = $1 WHERE id = $2",
    pause: "INSERT INTO herald_lanes (tenant_id, destination, until_ms, updated_ms)
            VALUES ($1, $2, $3, $4)
            ON CONFLICT (tenant_id, destination) DO UPDATE SET
                until_ms = greatest(herald_lanes.until_ms, excluded.until_ms)",
    pauses_prune: "DELETE FROM herald_lanes WHERE until_ms < $1 AND failures = 0 AND disabled_ms IS NULL",
    health: "SELECT until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms FROM herald_lanes WHERE tenant_id = $1 AND destination = $2 FOR UPDATE",
    health_put: "INSERT INTO herald_lanes (tenant_id, destination, until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms, updated_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (tenant_id, destination) DO UPDATE SET
                     until_ms = excluded.until_ms, failures = excluded.failures,
                     failing_since_ms = excluded.failing_since_ms, probe_ms = excluded.probe_ms, opened_ms = excluded.opened_ms,
                     disabled_ms = excluded.disabled_ms, updated_ms = excluded.updated_ms",
    health_clear: "DELETE FROM herald_lanes WHERE tenant_id = $1 AND destination = $2",
    probe: "UPDATE herald_lanes SET until_ms = $1 WHERE tenant_id = $2 AND destination = $3",
    failing: "SELECT tenant_id, destination, until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms FROM herald_lanes
              WHERE failures > 0 OR disabled_ms IS NOT NULL
              ORDER BY failures DESC, tenant_id, destination LIMIT $1",
    failing_of: "SELECT tenant_id, destination, until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms FROM herald_lanes
                 WHERE tenant_id = $1 AND (failures > 0 OR disabled_ms IS NOT NULL)
                 ORDER BY failures DESC, destination LIMIT $2",
    events_url: "SELECT events_url FROM tenants WHERE id = $1",
    events_url_set: "UPDATE tenants SET events_url = $1 WHERE id = $2",
};
