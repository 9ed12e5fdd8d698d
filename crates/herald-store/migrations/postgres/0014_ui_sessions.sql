-- herald schema 14 (PostgreSQL): the dashboard's sessions as rows (issue 37, defect 4).
-- A signed cookie alone could not be ended: a copied one worked for its whole 8 hours
-- after sign-out. Now the cookie names a row here (and is still signed, so a row's id
-- alone forges nothing); signing out, a revocation by an operator or a new sign-in ends
-- the row, and a session unused for the idle timeout is over. Times are Unix ms, judged
-- by the library. Rows past their end are pruned by retention.
CREATE TABLE herald_ui_sessions (
    id         text PRIMARY KEY CHECK (length(id) = 32),
    -- NULL for an admin session; a tenant session names its tenant and API key.
    tenant_id  uuid REFERENCES tenants (id),
    key_id     text,
    created_ms bigint NOT NULL,
    seen_ms    bigint NOT NULL,
    expires_ms bigint NOT NULL,
    ended_ms   bigint,
    ended_why  text CHECK (ended_why IN ('signed_out', 'revoked', 'replaced')),
    address    text CHECK (length(address) <= 64),
    agent      text CHECK (length(agent) <= 200),
    CONSTRAINT herald_ui_sessions_who CHECK ((tenant_id IS NULL) = (key_id IS NULL)),
    CONSTRAINT herald_ui_sessions_ended CHECK ((ended_ms IS NULL) = (ended_why IS NULL))
);
CREATE INDEX herald_ui_sessions_tenant ON herald_ui_sessions (tenant_id, created_ms);
CREATE INDEX herald_ui_sessions_expires ON herald_ui_sessions (expires_ms);
