-- herald schema 14 (MariaDB 10.11+, and the subset MySQL 8.4 shares): where each running
-- worker hears wake-ups from other processes. MariaDB has no LISTEN/NOTIFY, so a worker
-- binds a UDP socket, writes its address here with a random token, and writes `seen_at`
-- again every 10 s while it runs (its row is deleted when it stops). Whoever commits new
-- due work — another herald process, or an application through the SQL API
-- (`wake_targets_v1`) — sends each fresh address one datagram carrying its token; a
-- datagram without the token is ignored. Polling stays the fallback. Not in herald_workers:
-- a worker's row there is written once and kept as long as its attempts are.
--
-- Safe to run again (see 0001_schema.sql).
CREATE TABLE IF NOT EXISTS herald_wake_targets (
    worker  VARCHAR(200) NOT NULL PRIMARY KEY,
    address VARCHAR(300) NOT NULL,
    token   VARCHAR(64) NOT NULL,
    seen_at BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
