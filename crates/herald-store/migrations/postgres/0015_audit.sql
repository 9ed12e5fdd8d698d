-- herald schema 15 (PostgreSQL): the audit log (issue 37, defect 7). Who did what to which
-- tenant, how many, when: sign-ins (and failed ones), sign-outs and ended sessions,
-- replays, cancels and bulk actions, tenants, keys, grants and secrets. Append-only: a
-- trigger refuses every UPDATE; rows leave only by retention, past its window.
CREATE TABLE herald_audit (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms     bigint NOT NULL,
    -- `admin`, `tenant` (an API key or a tenant's session), `operator` (the CLI on the
    -- database) or `anonymous` (a failed sign-in).
    actor     text NOT NULL CHECK (actor IN ('admin', 'tenant', 'operator', 'anonymous')),
    -- The API key a tenant actor used, or the key id a failed sign-in named.
    key_id    text CHECK (length(key_id) <= 64),
    -- The tenant acted on (NULL: none, or every tenant).
    tenant_id uuid,
    action    text NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
    -- What it was done to: a delivery, a key, a quota key, a session.
    target    text CHECK (length(target) <= 200),
    -- How many (a bulk action's count, a grant's amount).
    count     bigint,
    -- The client's address, where a request made it.
    address   text CHECK (length(address) <= 64)
);
CREATE INDEX herald_audit_tenant ON herald_audit (tenant_id, id);
CREATE INDEX herald_audit_at ON herald_audit (at_ms);

CREATE FUNCTION herald_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'herald_audit is append-only' USING ERRCODE = 'HR037';
END $$;
CREATE TRIGGER herald_audit_append_only BEFORE UPDATE ON herald_audit
    FOR EACH ROW EXECUTE FUNCTION herald_audit_append_only();
