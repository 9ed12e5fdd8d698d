-- herald schema 1 (SQLite): the same tables and invariants as the PostgreSQL schema.
-- Times are INTEGER milliseconds since the Unix epoch (UTC), ids are 16-byte BLOB UUIDs.
-- Forward-only: a later change is a new numbered file, never an edit.

CREATE TABLE tenants (
    id                      BLOB PRIMARY KEY CHECK (length(id) = 16),
    name                    TEXT NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    webhook_secret          TEXT NOT NULL,
    webhook_secret_previous TEXT,
    created_at              INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
) STRICT;

CREATE TABLE api_keys (
    key_id        TEXT PRIMARY KEY,
    tenant_id     BLOB NOT NULL REFERENCES tenants (id),
    secret_sha256 BLOB NOT NULL UNIQUE CHECK (length(secret_sha256) = 32),
    created_at    INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    revoked_at    INTEGER
) STRICT;
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE quota_accounts (
    tenant_id  BLOB NOT NULL REFERENCES tenants (id),
    quota_key  TEXT NOT NULL CHECK (length(quota_key) BETWEEN 1 AND 100),
    granted    INTEGER NOT NULL DEFAULT 0 CHECK (granted >= 0),
    available  INTEGER NOT NULL DEFAULT 0 CHECK (available >= 0),
    reserved   INTEGER NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    spent      INTEGER NOT NULL DEFAULT 0 CHECK (spent >= 0),
    updated_at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    PRIMARY KEY (tenant_id, quota_key),
    CONSTRAINT quota_accounts_balanced CHECK (granted = available + reserved + spent)
) STRICT;

CREATE TABLE deliveries (
    id              BLOB PRIMARY KEY CHECK (length(id) = 16),
    tenant_id       BLOB NOT NULL REFERENCES tenants (id),
    operation_key   TEXT NOT NULL CHECK (length(operation_key) BETWEEN 1 AND 255),
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    fingerprint     BLOB NOT NULL,
    quota_key       TEXT NOT NULL,
    cost            INTEGER NOT NULL CHECK (cost >= 0),
    state           TEXT NOT NULL CHECK (state IN ('pending', 'sending', 'sent', 'failed', 'cancelled')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts    INTEGER NOT NULL CHECK (max_attempts >= 1),
    attempts_base   INTEGER NOT NULL DEFAULT 0 CHECK (attempts_base >= 0),
    reservation_seq INTEGER NOT NULL DEFAULT 1 CHECK (reservation_seq >= 1),
    next_attempt_at INTEGER NOT NULL,
    lease_owner     TEXT,
    lease_until     INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    updated_at      INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    sent_at         INTEGER,
    CONSTRAINT deliveries_identity UNIQUE (tenant_id, operation_key, channel),
    CONSTRAINT deliveries_lease_only_when_sending
        CHECK ((state = 'sending') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL))
) STRICT;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE state = 'sending';
CREATE INDEX deliveries_tenant_id ON deliveries (tenant_id, id DESC);
CREATE INDEX deliveries_final ON deliveries (updated_at) WHERE state IN ('sent', 'failed', 'cancelled');

CREATE TABLE delivery_payloads (
    delivery_id BLOB PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    payload     TEXT NOT NULL CHECK (json_valid(payload))
) STRICT;

CREATE TABLE delivery_attempts (
    delivery_id   BLOB NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    n             INTEGER NOT NULL CHECK (n >= 1),
    worker        TEXT NOT NULL,
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    outcome       TEXT CHECK (outcome IN ('sent', 'transient', 'terminal', 'lost', 'late_sent')),
    error_code    TEXT,
    error_message TEXT,
    PRIMARY KEY (delivery_id, n)
) STRICT;

CREATE TABLE quota_journal (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id       BLOB NOT NULL,
    quota_key       TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('grant', 'reserve', 'commit', 'release')),
    amount          INTEGER NOT NULL CHECK (amount > 0),
    delivery_id     BLOB,
    reservation_seq INTEGER,
    idempotency_key TEXT,
    at              INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    FOREIGN KEY (tenant_id, quota_key) REFERENCES quota_accounts (tenant_id, quota_key),
    CHECK ((kind = 'grant') = (delivery_id IS NULL)),
    CHECK ((delivery_id IS NULL) = (reservation_seq IS NULL))
) STRICT;
CREATE UNIQUE INDEX quota_journal_one_reserve
    ON quota_journal (delivery_id, reservation_seq) WHERE kind = 'reserve';
CREATE UNIQUE INDEX quota_journal_one_final
    ON quota_journal (delivery_id, reservation_seq) WHERE kind IN ('commit', 'release');
CREATE UNIQUE INDEX quota_journal_grant_once
    ON quota_journal (tenant_id, quota_key, idempotency_key) WHERE kind = 'grant' AND idempotency_key IS NOT NULL;
CREATE INDEX quota_journal_account ON quota_journal (tenant_id, quota_key, id);

CREATE TABLE receipts (
    scope        TEXT NOT NULL CHECK (length(scope) BETWEEN 1 AND 200),
    operation_id TEXT NOT NULL CHECK (length(operation_id) BETWEEN 1 AND 255),
    created_at   INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    PRIMARY KEY (scope, operation_id)
) STRICT;
CREATE INDEX receipts_created_at ON receipts (created_at);
