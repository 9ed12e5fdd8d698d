-- herald schema 21 (PostgreSQL): where each running worker hears wake-ups by datagram
-- (MariaDB schema 14 says why). PostgreSQL's workers LISTEN instead, so herald writes no
-- row here today; the table keeps the store's operations the same on every backend.
CREATE TABLE herald_wake_targets (
    worker  text NOT NULL PRIMARY KEY,
    address text NOT NULL,
    token   text NOT NULL,
    seen_at bigint NOT NULL
);
