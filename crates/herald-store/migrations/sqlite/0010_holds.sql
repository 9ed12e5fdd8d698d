-- herald schema 10 (SQLite): holds (PostgreSQL schema 16 has the same and says why).
-- held_due_at is in Unix milliseconds, as next_attempt_at.
ALTER TABLE deliveries ADD COLUMN held_due_at INTEGER;

CREATE TABLE herald_holds (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT NOT NULL CHECK (kind IN ('channel', 'tenant', 'destination')),
    value      TEXT NOT NULL CHECK (length(value) BETWEEN 1 AND 255),
    tenant_id  BLOB REFERENCES tenants (id),
    scope_key  TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    actor      TEXT NOT NULL CHECK (length(actor) BETWEEN 1 AND 64),
    UNIQUE (kind, value, scope_key)
) STRICT;
