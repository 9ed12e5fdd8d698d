-- herald schema 9 (PostgreSQL): what operators read beside the deliveries. Times here are
-- bigint Unix milliseconds, as they cross the store boundary.
--
-- herald_workers: which release each worker process runs. A worker id names one process,
-- so a row is written once and never changed: an attempt's worker says which release ran
-- it, for as long as the attempt is kept.
CREATE TABLE herald_workers (
    worker     text PRIMARY KEY,
    release    text NOT NULL,
    started_at bigint NOT NULL
);

-- herald_rollup: outcome counts per minute, flushed by each server process (`node`) for
-- the minutes it saw, one row per (minute, tenant, channel, node); a flush adds to the row.
-- `minute` is the Unix milliseconds at the start of the minute.
CREATE TABLE herald_rollup (
    minute    bigint NOT NULL,
    tenant_id uuid NOT NULL,
    channel   text NOT NULL,
    node      text NOT NULL,
    sent      bigint NOT NULL DEFAULT 0,
    retried   bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    lost      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, tenant_id, channel, node)
);
