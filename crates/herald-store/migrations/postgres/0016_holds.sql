-- herald schema 16 (PostgreSQL): holds, an operator's "stop sending" for a channel, a tenant
-- or a destination (herald_core::hold), with or without a tenant to narrow it.
--
-- A held pending delivery keeps its state; its next_attempt_at moves to the sentinel
-- 9999-12-30T12:00:00Z, past every time herald accepts, so the due index never returns it
-- and no lease, attempt or scan of the backlog touches it; held_due_at keeps when it was due,
-- and releasing the hold puts it back. Nothing else changes: its reservation, its attempts.
ALTER TABLE deliveries ADD COLUMN held_due_at timestamptz;

CREATE TABLE herald_holds (
    id         bigserial PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('channel', 'tenant', 'destination')),
    value      text NOT NULL CHECK (length(value) BETWEEN 1 AND 255),
    tenant_id  uuid REFERENCES tenants (id),
    -- One hold per scope: the tenant's id, or `*` for every tenant.
    scope_key  text NOT NULL,
    created_ms bigint NOT NULL,
    actor      text NOT NULL CHECK (length(actor) BETWEEN 1 AND 64),
    UNIQUE (kind, value, scope_key)
);
