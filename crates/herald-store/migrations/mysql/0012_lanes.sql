-- herald schema 12 (MariaDB 10.11+, and the subset MySQL 8.4 shares): lanes, destination
-- limits and pacing (PostgreSQL schema 18 has the same and says why). The destination is
-- a stored generated column, so the SQL API's routines write it as the library does;
-- MySQL spells the regular expression's back reference `$1` (mysql::dialect rewrites it).
--
-- Safe to run again (see 0001_schema.sql): information_schema decides each step, in the
-- one form both servers run (a prepared statement).

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'deliveries'
                         AND column_name = 'destination') = 0,
    'ALTER TABLE deliveries ADD COLUMN destination VARCHAR(255) AS (
         CASE channel
             WHEN ''email'' THEN ''smtp''
             WHEN ''webhook'' THEN LEFT(LOWER(REGEXP_REPLACE(recipient,
                 ''^(?i)https?://(?:[^/?#]*@)?(?![^/?#]*@)(\\\\[[^]/?#]*\\\\]|[^/?#@:[][^:/?#]*)(?s).*$'',
                 ''\\\\1'')), 255)
             ELSE channel
         END) STORED,
         ADD KEY deliveries_lanes (state, tenant_id, destination, next_attempt_at)',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'tenants'
                         AND column_name = 'send_weight') = 0,
    'ALTER TABLE tenants ADD COLUMN send_weight INT NOT NULL DEFAULT 1,
         ADD CONSTRAINT tenants_send_weight CHECK (send_weight BETWEEN 1 AND 100)',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

CREATE TABLE IF NOT EXISTS herald_destination_limits (
    destination   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    tenant_id     BINARY(16),
    scope_key     VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    max_in_flight INT,
    per_second    DOUBLE,
    updated_ms    BIGINT NOT NULL,
    actor         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (destination, scope_key),
    CONSTRAINT herald_destination_limits_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT herald_destination_limits_values CHECK (
        CHAR_LENGTH(destination) BETWEEN 1 AND 255
        AND (max_in_flight IS NULL OR max_in_flight >= 1)
        AND (per_second IS NULL OR (per_second > 0 AND per_second <= 1000000))
        AND (max_in_flight IS NOT NULL OR per_second IS NOT NULL)
        AND CHAR_LENGTH(actor) BETWEEN 1 AND 64)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS herald_destination_pace (
    destination VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    scope_key   VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    tokens      DOUBLE NOT NULL,
    tokens_ms   BIGINT NOT NULL,
    PRIMARY KEY (destination, scope_key)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS herald_lanes (
    tenant_id        BINARY(16) NOT NULL,
    destination      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    until_ms         BIGINT NOT NULL DEFAULT 0,
    failures         INT NOT NULL DEFAULT 0,
    failing_since_ms BIGINT,
    probe_ms         BIGINT,
    opened_ms        BIGINT,
    disabled_ms      BIGINT,
    updated_ms       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, destination),
    CONSTRAINT herald_lanes_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT herald_lanes_failures CHECK (failures >= 0)
) ENGINE = InnoDB;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'tenants'
                         AND column_name = 'events_url') = 0,
    'ALTER TABLE tenants ADD COLUMN events_url VARCHAR(2048) CHARACTER SET utf8mb4
         COLLATE utf8mb4_bin NULL',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;
