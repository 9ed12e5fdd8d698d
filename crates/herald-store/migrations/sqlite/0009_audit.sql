-- herald schema 9 (SQLite): the audit log (PostgreSQL schema 15 has the same table and
-- says why). Append-only: a trigger refuses every UPDATE.
CREATE TABLE herald_audit (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms     INTEGER NOT NULL,
    actor     TEXT NOT NULL CHECK (actor IN ('admin', 'tenant', 'operator', 'anonymous')),
    key_id    TEXT CHECK (length(key_id) <= 64),
    tenant_id BLOB,
    action    TEXT NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
    target    TEXT CHECK (length(target) <= 200),
    count     INTEGER,
    address   TEXT CHECK (length(address) <= 64)
) STRICT;
CREATE INDEX herald_audit_tenant ON herald_audit (tenant_id, id);
CREATE INDEX herald_audit_at ON herald_audit (at_ms);
CREATE TRIGGER herald_audit_append_only BEFORE UPDATE ON herald_audit
BEGIN
    SELECT RAISE(ABORT, 'herald_audit is append-only');
END;
