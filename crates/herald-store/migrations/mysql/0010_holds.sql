-- herald schema 10 (MariaDB 10.11+, and the subset MySQL 8.4 shares): holds (PostgreSQL
-- schema 16 has the same and says why). held_due_at is in Unix milliseconds, as
-- next_attempt_at.
--
-- Safe to run again (see 0001_schema.sql).

-- Whether the column is there yet: information_schema decides, in the one form both
-- servers run (a prepared statement).
SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'deliveries'
                         AND column_name = 'held_due_at') = 0,
    'ALTER TABLE deliveries ADD COLUMN held_due_at BIGINT NULL', 'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

CREATE TABLE IF NOT EXISTS herald_holds (
    id         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    value      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    tenant_id  BINARY(16),
    scope_key  VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_ms BIGINT NOT NULL,
    actor      VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    CONSTRAINT herald_holds_kind CHECK (kind IN ('channel', 'tenant', 'destination')),
    CONSTRAINT herald_holds_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    UNIQUE KEY herald_holds_scope (kind, value, scope_key)
) ENGINE = InnoDB;
