-- herald schema 11 (SQLite): a read-only operator (PostgreSQL schema 17 has the same and
-- says why). SQLite cannot change a CHECK: the audit log is copied into a table with the
-- new one, its indexes and its append-only trigger made again.
ALTER TABLE herald_ui_sessions ADD COLUMN viewer INTEGER NOT NULL DEFAULT 0
    CHECK (viewer IN (0, 1) AND (viewer = 0 OR tenant_id IS NULL));

CREATE TABLE herald_audit_new (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms     INTEGER NOT NULL,
    actor     TEXT NOT NULL CHECK (actor IN ('admin', 'viewer', 'tenant', 'operator', 'anonymous')),
    key_id    TEXT CHECK (length(key_id) <= 64),
    tenant_id BLOB,
    action    TEXT NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
    target    TEXT CHECK (length(target) <= 200),
    count     INTEGER,
    address   TEXT CHECK (length(address) <= 64)
) STRICT;
INSERT INTO herald_audit_new SELECT * FROM herald_audit;
DROP TABLE herald_audit;
ALTER TABLE herald_audit_new RENAME TO herald_audit;
CREATE INDEX herald_audit_tenant ON herald_audit (tenant_id, id);
CREATE INDEX herald_audit_at ON herald_audit (at_ms);
CREATE TRIGGER herald_audit_append_only BEFORE UPDATE ON herald_audit
BEGIN
    SELECT RAISE(ABORT, 'herald_audit is append-only');
END;
