-- herald schema 8 (SQLite): the dashboard's sessions as rows (PostgreSQL schema 14 has the
-- same table and says why).
CREATE TABLE herald_ui_sessions (
    id         TEXT PRIMARY KEY CHECK (length(id) = 32),
    tenant_id  BLOB REFERENCES tenants (id),
    key_id     TEXT,
    created_ms INTEGER NOT NULL,
    seen_ms    INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    ended_ms   INTEGER,
    ended_why  TEXT CHECK (ended_why IN ('signed_out', 'revoked', 'replaced')),
    address    TEXT CHECK (length(address) <= 64),
    agent      TEXT CHECK (length(agent) <= 200),
    CHECK ((tenant_id IS NULL) = (key_id IS NULL)),
    CHECK ((ended_ms IS NULL) = (ended_why IS NULL))
) STRICT;
CREATE INDEX herald_ui_sessions_tenant ON herald_ui_sessions (tenant_id, created_ms);
CREATE INDEX herald_ui_sessions_expires ON herald_ui_sessions (expires_ms);
