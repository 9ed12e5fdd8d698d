-- herald schema 7 (MariaDB 10.11+, and the subset MySQL 8.4 shares): secrets of the
-- server's own, shared by every process on the database (PostgreSQL schema 12 has the
-- same table and says why).
--
-- Safe to run again (see 0001_schema.sql).

CREATE TABLE IF NOT EXISTS herald_secrets (
    name       VARCHAR(100) NOT NULL PRIMARY KEY,
    secret     VARBINARY(32) NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT herald_secrets_32 CHECK (LENGTH(secret) = 32)
) ENGINE = InnoDB;
