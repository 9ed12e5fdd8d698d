-- herald schema 13 (MariaDB 10.11+, and the subset MySQL 8.4 shares): the W3C traceparent
-- a delivery was submitted under, beside its payload (PostgreSQL schema 19 says why). The
-- SQL API's submit writes it from the session's `@herald_traceparent`.
--
-- Safe to run again (see 0001_schema.sql): information_schema decides, in the one form
-- both servers run (a prepared statement).

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'delivery_payloads'
                         AND column_name = 'traceparent') = 0,
    'ALTER TABLE delivery_payloads ADD COLUMN traceparent VARCHAR(64) NULL',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;
