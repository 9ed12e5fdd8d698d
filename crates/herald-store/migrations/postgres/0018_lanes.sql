-- herald schema 18 (PostgreSQL): lanes, the unit of fair sending (herald_core::fair).
--
-- A lane is a tenant's deliveries to one destination (herald_core::hold::destination_of:
-- a webhook's host, `smtp` for every email, the channel's name otherwise). The lease
-- shares a worker's free slots among the lanes that have due work, walking this index
-- one lane at a time (a skip scan: a probe per lane, never a scan of a lane's backlog).
--
-- The destination is a generated column, so every writer — the library, the SQL API's
-- routines — stores the same one without computing it; herald_store's conformance suite
-- checks it against destination_of. Adding it rewrites the table once.
ALTER TABLE deliveries ADD COLUMN destination text GENERATED ALWAYS AS (
    CASE channel
        WHEN 'email' THEN 'smtp'
        WHEN 'webhook' THEN left(lower(coalesce(substring(recipient FROM
            '^[Hh][Tt][Tt][Pp][Ss]?://(?:[^/?#]*@)?(?![^/?#]*@)(\[[^]/?#]*\]|[^/?#@:[][^:/?#]*)'),
            recipient)), 255)
        ELSE channel
    END) STORED;
CREATE INDEX deliveries_lanes ON deliveries (tenant_id, destination, next_attempt_at)
    WHERE state = 'pending';

-- A tenant's share of a worker's slots against other tenants with due work.
ALTER TABLE tenants ADD COLUMN send_weight integer NOT NULL DEFAULT 1
    CHECK (send_weight BETWEEN 1 AND 100);

-- Limits per destination, across every process on this database: at most max_in_flight
-- sends at once, at most per_second started per second (a token bucket holding one
-- second's worth). destination `*` is the default of every destination without a row of
-- its own; scope_key is a tenant's id (that tenant's sends only) or `*` (every tenant's).
CREATE TABLE herald_destination_limits (
    destination   text NOT NULL CHECK (length(destination) BETWEEN 1 AND 255),
    tenant_id     uuid REFERENCES tenants (id),
    scope_key     text NOT NULL,
    max_in_flight integer CHECK (max_in_flight >= 1),
    per_second    double precision CHECK (per_second > 0 AND per_second <= 1000000),
    updated_ms    bigint NOT NULL,
    actor         text NOT NULL CHECK (length(actor) BETWEEN 1 AND 64),
    PRIMARY KEY (destination, scope_key),
    CHECK (max_in_flight IS NOT NULL OR per_second IS NOT NULL)
);

-- The token bucket of each per_second limit (scope as in herald_destination_limits),
-- locked by the leases that take its destination's rows.
CREATE TABLE herald_destination_pace (
    destination text NOT NULL,
    scope_key   text NOT NULL,
    tokens      double precision NOT NULL,
    tokens_ms   bigint NOT NULL,
    PRIMARY KEY (destination, scope_key)
);

-- A lane's health (herald_core::fair::LaneHealth): until_ms, when the lane may send again
-- — after a pause a receiver asked for (429 or 503 with Retry-After), or an open circuit's
-- next probe; the consecutive failures that open the circuit, since when, its probe
-- interval, and when it was disabled. Per lane: one tenant's receiver never slows
-- another's. A healthy lane has no row.
CREATE TABLE herald_lanes (
    tenant_id        uuid NOT NULL REFERENCES tenants (id),
    destination      text NOT NULL,
    until_ms         bigint NOT NULL DEFAULT 0,
    failures         integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    failing_since_ms bigint,
    probe_ms         bigint,
    opened_ms        bigint,
    disabled_ms      bigint,
    updated_ms       bigint NOT NULL,
    PRIMARY KEY (tenant_id, destination)
);

-- Where a tenant hears of herald's own events (an endpoint disabled, …): a webhook URL.
ALTER TABLE tenants ADD COLUMN events_url text CHECK (length(events_url) BETWEEN 1 AND 2048);
