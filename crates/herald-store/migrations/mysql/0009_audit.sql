-- herald schema 9 (MariaDB 10.11+, and the subset MySQL 8.4 shares): the audit log
-- (PostgreSQL schema 15 has the same table and says why). Append-only: a trigger refuses
-- every UPDATE.
--
-- Safe to run again (see 0001_schema.sql).

CREATE TABLE IF NOT EXISTS herald_audit (
    id        BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at_ms     BIGINT NOT NULL,
    actor     VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    key_id    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin,
    tenant_id BINARY(16),
    action    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    target    VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    count     BIGINT,
    address   VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin,
    CONSTRAINT herald_audit_actor CHECK (actor IN ('admin', 'tenant', 'operator', 'anonymous')),
    KEY herald_audit_tenant (tenant_id, id),
    KEY herald_audit_at (at_ms)
) ENGINE = InnoDB;

DROP TRIGGER IF EXISTS herald_audit_append_only;
CREATE TRIGGER herald_audit_append_only BEFORE UPDATE ON herald_audit FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'herald_audit is append-only';
