-- herald schema 10 (PostgreSQL): SQL routines as files. A function of the SQL API has one
-- home, a file under `routines/postgres/`, which `herald migrate` runs again whenever its
-- text changes (herald_store::routines); this table remembers which text each one ran.
CREATE TABLE IF NOT EXISTS herald_routines (
    name       text PRIMARY KEY,
    checksum   bytea NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
