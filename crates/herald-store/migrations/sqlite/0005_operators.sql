-- herald schema 5 (SQLite): what operators read beside the deliveries.
--
-- herald_workers: which release each worker process runs. A worker id names one process,
-- so a row is written once and never changed: an attempt's worker says which release ran
-- it, for as long as the attempt is kept.
CREATE TABLE herald_workers (
    worker     TEXT PRIMARY KEY,
    release    TEXT NOT NULL,
    started_at INTEGER NOT NULL
) STRICT;

-- herald_rollup: outcome counts per minute, flushed by each server process (`node`) for
-- the minutes it saw, one row per (minute, tenant, channel, node); a flush adds to the row.
-- `minute` is the Unix milliseconds at the start of the minute.
CREATE TABLE herald_rollup (
    minute    INTEGER NOT NULL,
    tenant_id BLOB NOT NULL CHECK (length(tenant_id) = 16),
    channel   TEXT NOT NULL,
    node      TEXT NOT NULL,
    sent      INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    lost      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, tenant_id, channel, node)
) STRICT;
