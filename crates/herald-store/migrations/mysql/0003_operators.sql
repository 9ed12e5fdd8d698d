-- herald schema 3 (MariaDB 10.11+, and the subset MySQL 8.4 shares): what operators read
-- beside the deliveries. Every statement is safe to run again (see 0001_schema.sql).
--
-- herald_workers: which release each worker process runs. A worker id names one process,
-- so a row is written once and never changed: an attempt's worker says which release ran
-- it, for as long as the attempt is kept. `worker` is as wide as deliveries.attempt_worker.
CREATE TABLE IF NOT EXISTS herald_workers (
    worker     VARCHAR(200) NOT NULL PRIMARY KEY,
    `release`  VARCHAR(200) NOT NULL,
    started_at BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- herald_rollup: outcome counts per minute, flushed by each server process (`node`) for
-- the minutes it saw, one row per (minute, tenant, channel, node); a flush adds to the row.
-- `minute` is the Unix milliseconds at the start of the minute.
CREATE TABLE IF NOT EXISTS herald_rollup (
    minute    BIGINT NOT NULL,
    tenant_id BINARY(16) NOT NULL,
    channel   VARCHAR(100) NOT NULL,
    node      VARCHAR(200) NOT NULL,
    sent      BIGINT NOT NULL DEFAULT 0,
    retried   BIGINT NOT NULL DEFAULT 0,
    failed    BIGINT NOT NULL DEFAULT 0,
    lost      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, tenant_id, channel, node)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
