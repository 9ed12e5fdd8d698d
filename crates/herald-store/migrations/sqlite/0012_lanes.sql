-- herald schema 12 (SQLite): lanes, destination limits and pacing (PostgreSQL schema 18
-- has the same and says why). Only herald writes deliveries on SQLite (no SQL API), so the
-- destination is a plain column that the claim writes (destination_of); rows already
-- here get the same value below, computed without regular expressions, which SQLite
-- lacks. The conformance suite checks both against destination_of.
ALTER TABLE deliveries ADD COLUMN destination TEXT NOT NULL DEFAULT '';
-- Rows written before this schema, in steps with the column as scratch: what follows
-- `://` (http and https only), the authority up to the first of `/?#`, the host and port
-- after the authority's last `@`, the host (bracketed, or up to a `:`), lowercased, with `''`
-- while no host is found, and then the recipient itself, as destination_of does.
UPDATE deliveries SET destination = substr(recipient, instr(recipient, '://') + 3)
    WHERE channel = 'webhook'
      AND lower(substr(recipient, 1, instr(recipient, '://') - 1)) IN ('http', 'https');
UPDATE deliveries SET destination = substr(destination, 1,
        instr(replace(replace(destination, '?', '/'), '#', '/') || '/', '/') - 1)
    WHERE destination <> '';
UPDATE deliveries SET destination =
        replace(destination, rtrim(destination, replace(destination, '@', '')), '')
    WHERE destination <> '';
UPDATE deliveries SET destination = CASE
        WHEN substr(destination, 1, 1) = '[' THEN
            CASE WHEN instr(destination, ']') > 0
                 THEN substr(destination, 1, instr(destination, ']')) ELSE '' END
        ELSE substr(destination, 1, instr(destination || ':', ':') - 1)
    END
    WHERE destination <> '';
UPDATE deliveries SET destination = CASE channel
        WHEN 'webhook' THEN substr(lower(CASE destination WHEN '' THEN recipient
                                                        ELSE destination END), 1, 255)
        WHEN 'email' THEN 'smtp'
        ELSE channel
    END;
CREATE INDEX deliveries_lanes ON deliveries (tenant_id, destination, next_attempt_at)
    WHERE state = 'pending';

ALTER TABLE tenants ADD COLUMN send_weight INTEGER NOT NULL DEFAULT 1
    CHECK (send_weight BETWEEN 1 AND 100);

CREATE TABLE herald_destination_limits (
    destination   TEXT NOT NULL CHECK (length(destination) BETWEEN 1 AND 255),
    tenant_id     BLOB REFERENCES tenants (id),
    scope_key     TEXT NOT NULL,
    max_in_flight INTEGER CHECK (max_in_flight >= 1),
    per_second    REAL CHECK (per_second > 0 AND per_second <= 1000000),
    updated_ms    INTEGER NOT NULL,
    actor         TEXT NOT NULL CHECK (length(actor) BETWEEN 1 AND 64),
    PRIMARY KEY (destination, scope_key),
    CHECK (max_in_flight IS NOT NULL OR per_second IS NOT NULL)
);

CREATE TABLE herald_destination_pace (
    destination TEXT NOT NULL,
    scope_key   TEXT NOT NULL,
    tokens      REAL NOT NULL,
    tokens_ms   INTEGER NOT NULL,
    PRIMARY KEY (destination, scope_key)
);

CREATE TABLE herald_lanes (
    tenant_id        BLOB NOT NULL REFERENCES tenants (id),
    destination      TEXT NOT NULL,
    until_ms         INTEGER NOT NULL DEFAULT 0,
    failures         INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
    failing_since_ms INTEGER,
    probe_ms         INTEGER,
    opened_ms        INTEGER,
    disabled_ms      INTEGER,
    updated_ms       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, destination)
);

ALTER TABLE tenants ADD COLUMN events_url TEXT CHECK (length(events_url) BETWEEN 1 AND 2048);
