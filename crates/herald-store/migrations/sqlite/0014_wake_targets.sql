-- herald schema 14 (SQLite): where each running worker hears wake-ups from other
-- processes (MariaDB schema 14 says why; PostgreSQL's workers LISTEN instead).
CREATE TABLE herald_wake_targets (
    worker  TEXT NOT NULL PRIMARY KEY,
    address TEXT NOT NULL,
    token   TEXT NOT NULL,
    seen_at INTEGER NOT NULL
);
