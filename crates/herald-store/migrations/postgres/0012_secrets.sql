-- herald schema 12 (PostgreSQL): secrets of the server's own, shared by every process on
-- the database (issue 37). `ui_session` signs the dashboard's sessions: random, never
-- derived from a credential (a tenant holding its own cookie could otherwise guess the
-- admin key offline), replaced by `herald settings rotate-session-secret`.
CREATE TABLE herald_secrets (
    name       text PRIMARY KEY,
    secret     bytea NOT NULL CHECK (octet_length(secret) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);
