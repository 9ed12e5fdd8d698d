-- herald schema 6 (MariaDB 10.11+, and the subset MySQL 8.4 shares): what a fingerprint
-- the client computed is checked against (issue 35; ARCHITECTURE.md, "The client's
-- fingerprint"). `submit_v2` stores the fingerprint its caller computed (version 3) and
-- the `send_at` the request gave, in Unix ms (NULL when none): the row's due time moves
-- with retries, and the worker recomputes the fingerprint from the row before the first
-- send. PostgreSQL has had the same column since its schema 8.
--
-- Safe to run again (see 0001_schema.sql).

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'deliveries'
                         AND column_name = 'fingerprint_send_at_ms') = 0,
    'ALTER TABLE deliveries ADD COLUMN fingerprint_send_at_ms BIGINT NULL', 'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;
