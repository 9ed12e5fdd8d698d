-- herald schema 8 (MariaDB 10.11+, and the subset MySQL 8.4 shares): the dashboard's
-- sessions as rows (PostgreSQL schema 14 has the same table and says why).
--
-- Safe to run again (see 0001_schema.sql).

CREATE TABLE IF NOT EXISTS herald_ui_sessions (
    id         CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    tenant_id  BINARY(16),
    key_id     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin,
    created_ms BIGINT NOT NULL,
    seen_ms    BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    ended_ms   BIGINT,
    ended_why  VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin,
    address    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin,
    agent      VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    CONSTRAINT herald_ui_sessions_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT herald_ui_sessions_why
        CHECK (ended_why IS NULL OR ended_why IN ('signed_out', 'revoked', 'replaced')),
    CONSTRAINT herald_ui_sessions_who CHECK ((tenant_id IS NULL) = (key_id IS NULL)),
    CONSTRAINT herald_ui_sessions_ended CHECK ((ended_ms IS NULL) = (ended_why IS NULL)),
    KEY herald_ui_sessions_tenant (tenant_id, created_ms),
    KEY herald_ui_sessions_expires (expires_ms)
) ENGINE = InnoDB;
