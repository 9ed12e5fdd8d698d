-- herald schema 1 (MariaDB 10.11+, and the subset MySQL 8.4 shares): the tables and
-- invariants of the SQLite and PostgreSQL schemas, as they stand after their latest
-- migration. Times are BIGINT milliseconds since the Unix epoch (UTC; no TIMESTAMP, which
-- ends in 2038), ids are BINARY(16) UUIDs. Identities compare byte for byte:
-- utf8mb4_nopad_bin neither folds case nor pads spaces (`k` and `k ` are two keys).
--
-- DDL commits implicitly, so a migration cannot be one transaction: every statement here
-- is safe to run again (IF NOT EXISTS), and a migration left half-applied by a crash is
-- run again to its end (herald_store::migrate). Forward-only: a change is a new file.

CREATE TABLE IF NOT EXISTS tenants (
    id                      BINARY(16) NOT NULL PRIMARY KEY,
    name                    VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    webhook_secret          VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    webhook_secret_previous VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    created_at              BIGINT NOT NULL,
    CONSTRAINT tenants_name UNIQUE (name),
    CONSTRAINT tenants_name_length CHECK (CHAR_LENGTH(name) BETWEEN 1 AND 200)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS api_keys (
    key_id        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    tenant_id     BINARY(16) NOT NULL,
    secret_sha256 VARBINARY(32) NOT NULL,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT,
    CONSTRAINT api_keys_secret UNIQUE (secret_sha256),
    -- BINARY(n) would pad a short value with zero bytes instead of refusing it.
    CONSTRAINT api_keys_secret_length CHECK (LENGTH(secret_sha256) = 32),
    KEY api_keys_tenant (tenant_id),
    CONSTRAINT api_keys_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS quota_accounts (
    tenant_id  BINARY(16) NOT NULL,
    quota_key  VARCHAR(100) NOT NULL,
    granted    BIGINT NOT NULL DEFAULT 0,
    available  BIGINT NOT NULL DEFAULT 0,
    reserved   BIGINT NOT NULL DEFAULT 0,
    spent      BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, quota_key),
    CONSTRAINT quota_accounts_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT quota_accounts_key_length CHECK (CHAR_LENGTH(quota_key) BETWEEN 1 AND 100),
    CONSTRAINT quota_accounts_nonnegative
        CHECK (granted >= 0 AND available >= 0 AND reserved >= 0 AND spent >= 0),
    CONSTRAINT quota_accounts_balanced CHECK (granted = available + reserved + spent)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS deliveries (
    id                  BINARY(16) NOT NULL PRIMARY KEY,
    tenant_id           BINARY(16) NOT NULL,
    operation_key       VARCHAR(255) NOT NULL,
    channel             VARCHAR(100) NOT NULL,
    recipient           VARCHAR(2048) NOT NULL,
    fingerprint         VARBINARY(64) NOT NULL,
    fingerprint_version SMALLINT NOT NULL DEFAULT 2,
    quota_key           VARCHAR(100) NOT NULL,
    cost                BIGINT NOT NULL,
    state               VARCHAR(16) NOT NULL,
    attempts            INT NOT NULL DEFAULT 0,
    max_attempts        INT NOT NULL,
    attempts_base       INT NOT NULL DEFAULT 0,
    reservation_seq     INT NOT NULL DEFAULT 1,
    next_attempt_at     BIGINT NOT NULL,
    lease_owner         VARCHAR(200),
    lease_until         BIGINT,
    last_error          TEXT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    sent_at             BIGINT,
    attempt_worker      VARCHAR(200),
    attempt_started_at  BIGINT,
    CONSTRAINT deliveries_identity UNIQUE (tenant_id, operation_key, channel),
    -- No partial indexes here: the queue and the reconciler's scan lead with the state.
    KEY deliveries_due (state, next_attempt_at),
    KEY deliveries_leased (state, lease_until),
    KEY deliveries_tenant_id (tenant_id, id),
    KEY deliveries_final (state, updated_at),
    CONSTRAINT deliveries_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT deliveries_operation_key_length CHECK (CHAR_LENGTH(operation_key) BETWEEN 1 AND 255),
    CONSTRAINT deliveries_counts CHECK (cost >= 0 AND attempts >= 0 AND max_attempts >= 1
        AND attempts_base >= 0 AND reservation_seq >= 1),
    CONSTRAINT deliveries_state
        CHECK (state IN ('pending', 'sending', 'sent', 'failed', 'cancelled')),
    CONSTRAINT deliveries_lease_only_when_sending
        CHECK ((state = 'sending') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- A payload is kept as sent: up to 64 KiB of text, more than TEXT holds.
CREATE TABLE IF NOT EXISTS delivery_payloads (
    delivery_id BINARY(16) NOT NULL PRIMARY KEY,
    payload     MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    CONSTRAINT delivery_payloads_fk FOREIGN KEY (delivery_id) REFERENCES deliveries (id)
        ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS delivery_attempts (
    delivery_id   BINARY(16) NOT NULL,
    n             INT NOT NULL,
    worker        VARCHAR(200) NOT NULL,
    started_at    BIGINT NOT NULL,
    finished_at   BIGINT,
    outcome       VARCHAR(16),
    error_code    VARCHAR(200),
    error_message TEXT,
    PRIMARY KEY (delivery_id, n),
    CONSTRAINT delivery_attempts_fk FOREIGN KEY (delivery_id) REFERENCES deliveries (id)
        ON DELETE CASCADE,
    CONSTRAINT delivery_attempts_n CHECK (n >= 1),
    CONSTRAINT delivery_attempts_outcome
        CHECK (outcome IN ('sent', 'transient', 'terminal', 'lost', 'late_sent'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The ledger. "One reserve, and one final movement, per reservation" and "one grant per
-- idempotency key" are partial unique indexes elsewhere; here each is a generated column
-- that is NULL outside its rows (NULLs never collide in a unique index) under a unique key.
CREATE TABLE IF NOT EXISTS quota_journal (
    id              BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    tenant_id       BINARY(16) NOT NULL,
    quota_key       VARCHAR(100) NOT NULL,
    kind            VARCHAR(16) NOT NULL,
    amount          BIGINT NOT NULL,
    delivery_id     BINARY(16),
    reservation_seq INT,
    idempotency_key VARCHAR(255),
    at              BIGINT NOT NULL,
    reserve_of      BINARY(16) AS (IF(kind = 'reserve', delivery_id, NULL)) STORED,
    final_of        BINARY(16) AS (IF(kind IN ('commit', 'release'), delivery_id, NULL)) STORED,
    grant_key       VARCHAR(255) AS (IF(kind = 'grant', idempotency_key, NULL)) STORED,
    CONSTRAINT quota_journal_one_reserve UNIQUE (reserve_of, reservation_seq),
    CONSTRAINT quota_journal_one_final UNIQUE (final_of, reservation_seq),
    CONSTRAINT quota_journal_grant_once UNIQUE (tenant_id, quota_key, grant_key),
    KEY quota_journal_account (tenant_id, quota_key, id),
    KEY quota_journal_delivery (delivery_id),
    CONSTRAINT quota_journal_account_fk FOREIGN KEY (tenant_id, quota_key)
        REFERENCES quota_accounts (tenant_id, quota_key),
    CONSTRAINT quota_journal_kind CHECK (kind IN ('grant', 'reserve', 'commit', 'release')),
    CONSTRAINT quota_journal_amount CHECK (amount > 0),
    CONSTRAINT quota_journal_grant_has_no_delivery CHECK ((kind = 'grant') = (delivery_id IS NULL)),
    CONSTRAINT quota_journal_seq_with_delivery CHECK ((delivery_id IS NULL) = (reservation_seq IS NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS receipts (
    scope        VARCHAR(200) NOT NULL,
    operation_id VARCHAR(255) NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (scope, operation_id),
    KEY receipts_created_at (created_at),
    CONSTRAINT receipts_lengths CHECK (CHAR_LENGTH(scope) BETWEEN 1 AND 200
        AND CHAR_LENGTH(operation_id) BETWEEN 1 AND 255)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS delivery_replays (
    delivery_id     BINARY(16) NOT NULL,
    reservation_seq INT NOT NULL,
    at              BIGINT NOT NULL,
    PRIMARY KEY (delivery_id, reservation_seq),
    CONSTRAINT delivery_replays_fk FOREIGN KEY (delivery_id) REFERENCES deliveries (id)
        ON DELETE CASCADE,
    CONSTRAINT delivery_replays_seq CHECK (reservation_seq >= 2)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS herald_settings (
    id           SMALLINT NOT NULL PRIMARY KEY,
    max_attempts INT NOT NULL,
    CONSTRAINT herald_settings_one_row CHECK (id = 1),
    CONSTRAINT herald_settings_max_attempts CHECK (max_attempts BETWEEN 1 AND 100)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
