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
    pause: "INSERT INTO herald_lane_pauses (tenant_id, destination, until_ms) VALUES ($1, $2, $3)
            ON CONFLICT (tenant_id, destination) DO UPDATE SET
                until_ms = greatest(herald_lane_pauses.until_ms, excluded.until_ms)",
    pauses_prune: "DELETE FROM herald_lane_pauses WHERE until_ms < $1",
    weight: "UPDATE tenants SET send_weight = $1 WHERE id = $2",
};
