-- herald schema 4 (MariaDB 10.11+, and the subset MySQL 8.4 shares): SQL routines as
-- files. A procedure of the SQL API has one home, a file under `routines/mysql/`, which
-- `herald migrate` runs again whenever its text changes (herald_store::routines); this
-- table remembers which text each one ran. Safe to run again (see 0001_schema.sql).
CREATE TABLE IF NOT EXISTS herald_routines (
    name       VARCHAR(100) NOT NULL PRIMARY KEY,
    checksum   VARBINARY(32) NOT NULL,
    applied_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
