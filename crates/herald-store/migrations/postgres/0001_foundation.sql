-- herald schema 1 (PostgreSQL): tenants, keys, the quota ledger, deliveries and their
-- attempts, receipts. Forward-only: a later change is a new numbered file, never an edit.
-- Invariants that must not depend on code are constraints here (see ARCHITECTURE.md).

CREATE TABLE tenants (
    id             uuid PRIMARY KEY,
    name           text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    -- Standard Webhooks signing secrets ("whsec_..."); previous one kept during rotation.
    webhook_secret          text NOT NULL,
    webhook_secret_previous text,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    key_id        text PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants (id),
    -- SHA-256 of the secret part: fast and indexable (the secret is long and random, so
    -- a slow password hash buys nothing).
    secret_sha256 bytea NOT NULL UNIQUE CHECK (length(secret_sha256) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

-- Two-phase ledger: reserve moves available -> reserved; commit moves reserved -> spent;
-- release moves reserved -> available. granted only grows.
CREATE TABLE quota_accounts (
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    quota_key  text NOT NULL CHECK (length(quota_key) BETWEEN 1 AND 100),
    granted    bigint NOT NULL DEFAULT 0 CHECK (granted >= 0),
    available  bigint NOT NULL DEFAULT 0 CHECK (available >= 0),
    reserved   bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    spent      bigint NOT NULL DEFAULT 0 CHECK (spent >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, quota_key),
    CONSTRAINT quota_accounts_balanced CHECK (granted = available + reserved + spent)
);

CREATE TABLE deliveries (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id),
    operation_key   text NOT NULL CHECK (length(operation_key) BETWEEN 1 AND 255),
    channel         text NOT NULL,
    recipient       text NOT NULL,
    fingerprint     bytea NOT NULL,
    quota_key       text NOT NULL,
    cost            bigint NOT NULL CHECK (cost >= 0),
    state           text NOT NULL CHECK (state IN ('pending', 'sending', 'sent', 'failed', 'cancelled')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts    integer NOT NULL CHECK (max_attempts >= 1),
    -- Attempts used before the current replay: max_attempts counts from the replay.
    attempts_base   integer NOT NULL DEFAULT 0 CHECK (attempts_base >= 0),
    reservation_seq integer NOT NULL DEFAULT 1 CHECK (reservation_seq >= 1),
    next_attempt_at timestamptz NOT NULL,
    lease_owner     text,
    lease_until     timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    CONSTRAINT deliveries_identity UNIQUE (tenant_id, operation_key, channel),
    CONSTRAINT deliveries_lease_only_when_sending
        CHECK ((state = 'sending') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL))
);
-- The queue: due pending rows, oldest first. Narrow on purpose; payloads live elsewhere.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
-- The reconciler's scan for expired leases.
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE state = 'sending';
-- Listing per tenant, newest first (ids are UUIDv7, so id order is creation order).
CREATE INDEX deliveries_tenant_id ON deliveries (tenant_id, id DESC);
-- Retention pruning of final rows.
CREATE INDEX deliveries_final ON deliveries (updated_at) WHERE state IN ('sent', 'failed', 'cancelled');

-- Payloads are kept out of the rows the lease query scans.
CREATE TABLE delivery_payloads (
    delivery_id uuid PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    payload     jsonb NOT NULL
);

CREATE TABLE delivery_attempts (
    delivery_id   uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    n             integer NOT NULL CHECK (n >= 1),
    worker        text NOT NULL,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    outcome       text CHECK (outcome IN ('sent', 'transient', 'terminal', 'lost', 'late_sent')),
    error_code    text,
    error_message text,
    PRIMARY KEY (delivery_id, n)
);

CREATE TABLE quota_journal (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       uuid NOT NULL,
    quota_key       text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('grant', 'reserve', 'commit', 'release')),
    amount          bigint NOT NULL CHECK (amount > 0),
    -- Set for reserve/commit/release; NULL for grants.
    delivery_id     uuid,
    reservation_seq integer,
    -- Set for grants made under an Idempotency-Key.
    idempotency_key text,
    at              timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, quota_key) REFERENCES quota_accounts (tenant_id, quota_key),
    CHECK ((kind = 'grant') = (delivery_id IS NULL)),
    CHECK ((delivery_id IS NULL) = (reservation_seq IS NULL))
);
-- One reserve per reservation, and at most one final movement (commit XOR release) per
-- reservation: the ledger's exactly-once charge is this index, not a check in code.
CREATE UNIQUE INDEX quota_journal_one_reserve
    ON quota_journal (delivery_id, reservation_seq) WHERE kind = 'reserve';
CREATE UNIQUE INDEX quota_journal_one_final
    ON quota_journal (delivery_id, reservation_seq) WHERE kind IN ('commit', 'release');
CREATE UNIQUE INDEX quota_journal_grant_once
    ON quota_journal (tenant_id, quota_key, idempotency_key) WHERE kind = 'grant' AND idempotency_key IS NOT NULL;
CREATE INDEX quota_journal_account ON quota_journal (tenant_id, quota_key, id);

-- Receipts: "this operation was applied", written in the transaction that applies it.
CREATE TABLE receipts (
    scope        text NOT NULL CHECK (length(scope) BETWEEN 1 AND 200),
    operation_id text NOT NULL CHECK (length(operation_id) BETWEEN 1 AND 255),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, operation_id)
);
CREATE INDEX receipts_created_at ON receipts (created_at);
