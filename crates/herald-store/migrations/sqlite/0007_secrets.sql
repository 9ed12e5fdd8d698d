-- herald schema 7 (SQLite): secrets of the server's own, shared by every process on the
-- database (PostgreSQL schema 12 has the same table and says why).
CREATE TABLE herald_secrets (
    name       TEXT PRIMARY KEY,
    secret     BLOB NOT NULL CHECK (length(secret) = 32),
    created_at INTEGER NOT NULL
) STRICT;
