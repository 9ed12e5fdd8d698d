PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE herald_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    success BOOLEAN NOT NULL,
    checksum BLOB NOT NULL,
    execution_time BIGINT NOT NULL
);
INSERT INTO herald_migrations VALUES(1,'foundation','2026-12-01 12:51:49',1,X'3bd2759d3be372d58992901ea95e5f580529c468ed99e0cd05ee92a2d7dd1902c35675615720336666aa944ac939585d',4725324);
INSERT INTO herald_migrations VALUES(2,'engine','2026-12-01 12:51:49',1,X'91d8a26f2e7884c01b6a96c7d62dcf712fee24938106f4b34b69e330e0462979dd18de87a3193903207e1697bc2c2738',688101);
INSERT INTO herald_migrations VALUES(3,'attempt on row','2026-12-01 12:51:49',1,X'9e55f2df26eb26bbdef10e9e4f167932a1034741c63d6714589ecb259157eb4d6b7bdee4e577879b4d99c1c5495ca870',2365347);
CREATE TABLE tenants (
    id                      BLOB PRIMARY KEY CHECK (length(id) = 16),
    name                    TEXT NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    webhook_secret          TEXT NOT NULL,
    webhook_secret_previous TEXT,
    created_at              INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
) STRICT;
INSERT INTO tenants VALUES(X'01a231a9522b70b093efd8277e3afcfd','fixture','whsec_px/mbKAa97q0SIMK65EDRfGeWmTb0h9N4YXEfaHjY+U=',NULL,1796129509933);
CREATE TABLE api_keys (
    key_id        TEXT PRIMARY KEY,
    tenant_id     BLOB NOT NULL REFERENCES tenants (id),
    secret_sha256 BLOB NOT NULL UNIQUE CHECK (length(secret_sha256) = 32),
    created_at    INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    revoked_at    INTEGER
) STRICT;
INSERT INTO api_keys VALUES('962901db238d31ba',X'01a231a9522b70b093efd8277e3afcfd',X'5cb9ee41385c022f4581e781d5503a0f9874c7274080880dd07a1975f3c39d26',1796129509933,NULL);
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
INSERT INTO quota_accounts VALUES(X'01a231a9522b70b093efd8277e3afcfd','webhook',100,93,7,0,1796129510067);
INSERT INTO quota_accounts VALUES(X'01a231a9522b70b093efd8277e3afcfd','premium',100,98,2,0,1796129510060);
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
    sent_at         INTEGER, attempt_worker TEXT, attempt_started_at INTEGER,
    CONSTRAINT deliveries_identity UNIQUE (tenant_id, operation_key, channel),
    CONSTRAINT deliveries_lease_only_when_sending
        CHECK ((state = 'sending') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL))
) STRICT;
INSERT INTO deliveries VALUES(X'01a231a9523f7759a92c572a4a89009c',X'01a231a9522b70b093efd8277e3afcfd','plain','webhook','http://127.0.0.1:9/hooks/a',X'd438c0fff9cd309d9da9a53a25496a6bf2490fdfba4368631e1b627375e321e7','webhook',1,'pending',1,12,0,1,1796129510683,NULL,NULL,'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)',1796129509951,1796129509967,NULL,NULL,1796129509957);
INSERT INTO deliveries VALUES(X'01a231a9526b77ea936255841a935026',X'01a231a9522b70b093efd8277e3afcfd','float','webhook','http://127.0.0.1:9/hooks/a',X'31af201739460336acd3ff73a724873cbe1e95a122544df3f31a9752f83b8424','webhook',1,'pending',1,12,0,1,1796129510481,NULL,NULL,'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)',1796129509995,1796129510026,NULL,NULL,1796129510001);
INSERT INTO deliveries VALUES(X'01a231a95275730d972fba67a74b2b41',X'01a231a9522b70b093efd8277e3afcfd','beyond-u64','webhook','http://127.0.0.1:9/hooks/a',X'28664215bd7891646ba189098ff74e85879745346f7241e50805f9d400e07c14','webhook',1,'pending',1,12,0,1,1796129510609,NULL,NULL,'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)',1796129510005,1796129510096,NULL,NULL,1796129510086);
INSERT INTO deliveries VALUES(X'01a231a95296761ebebf28174ce09899',X'01a231a9522b70b093efd8277e3afcfd','integers','webhook','http://127.0.0.1:9/hooks/a',X'c33e44e28738c8d5fdd04f5000c5fecbe3524713c8701f2a6c5e1a1aea50ceb8','webhook',1,'pending',1,12,0,1,1796129510416,NULL,NULL,'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)',1796129510038,1796129510095,NULL,NULL,1796129510086);
INSERT INTO deliveries VALUES(X'01a231a9529e70eb8fe2ed74ed55c86d',X'01a231a9522b70b093efd8277e3afcfd','strings','webhook','http://127.0.0.1:9/hooks/a',X'2daf536e303d5e26d192a55c4ea24a04bd2ea964a0835e09b8d488a36072e11a','webhook',1,'pending',1,12,0,1,1796129510360,NULL,NULL,'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)',1796129510046,1796129510102,NULL,NULL,1796129510086);
INSERT INTO deliveries VALUES(X'01a231a952a574478c22d6dd0786481f',X'01a231a9522b70b093efd8277e3afcfd','order','webhook','http://127.0.0.1:9/hooks/a',X'e4dbbd959e479cc021b70b6fdd4092141e5743fa057a8ff77fec8f7f50cb457e','webhook',1,'pending',1,12,0,1,1796129510506,NULL,NULL,'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)',1796129510053,1796129510094,NULL,NULL,1796129510086);
INSERT INTO deliveries VALUES(X'01a231a952ac719e8b5858275e3ab607',X'01a231a9522b70b093efd8277e3afcfd','explicit','webhook','http://127.0.0.1:9/hooks/b',X'92dbbe9bfc24fca9319a039b945c38cdb569448b5b66d7ce91a8d088c55d4391','premium',2,'pending',0,3,0,1,4071006245000,NULL,NULL,NULL,1796129510060,1796129510060,NULL,NULL,NULL);
INSERT INTO deliveries VALUES(X'01a231a952b376ebb484e27ec0e3022a',X'01a231a9522b70b093efd8277e3afcfd','explicit-default','webhook','http://127.0.0.1:9/hooks/c',X'5e25e4fa19e59a200936ce05c4614bf8755ea71c4caa0a5829a3d88f47a0e84a','webhook',1,'pending',0,12,0,1,4083948000000,NULL,NULL,NULL,1796129510067,1796129510067,NULL,NULL,NULL);
CREATE TABLE delivery_payloads (
    delivery_id BLOB PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    payload     TEXT NOT NULL CHECK (json_valid(payload))
) STRICT;
INSERT INTO delivery_payloads VALUES(X'01a231a9523f7759a92c572a4a89009c','{"event":"order.paid","order":1042}');
INSERT INTO delivery_payloads VALUES(X'01a231a9526b77ea936255841a935026','{"amount":0.3,"big":1e+21,"price":19.99,"tiny":1e-7}');
INSERT INTO delivery_payloads VALUES(X'01a231a95275730d972fba67a74b2b41','{"m":-9.223372036854776e+18,"n":1.8446744073709552e+19}');
INSERT INTO delivery_payloads VALUES(X'01a231a95296761ebebf28174ce09899','{"hundred":100.0,"long":1.2345678901234567e+20,"max":18446744073709551615,"min":-9223372036854775808,"zero":-0.0}');
INSERT INTO delivery_payloads VALUES(X'01a231a9529e70eb8fe2ed74ed55c86d','{"ctl":"\u0001\b\t\f\r","emoji":"😀","raw":"été 😀","text":"Grüße\n\"quoted\" \\ /"}');
INSERT INTO delivery_payloads VALUES(X'01a231a952a574478c22d6dd0786481f','{"E":{},"a":true,"z":{"a":null,"b":[1,2.5,-0.0]},"é":[]}');
INSERT INTO delivery_payloads VALUES(X'01a231a952ac719e8b5858275e3ab607','{"k":"v"}');
INSERT INTO delivery_payloads VALUES(X'01a231a952b376ebb484e27ec0e3022a','[1,"two",{"three":3}]');
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
INSERT INTO delivery_attempts VALUES(X'01a231a9523f7759a92c572a4a89009c',1,'w12633-c01a0dee',1796129509957,1796129509968,'transient','connection','error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO delivery_attempts VALUES(X'01a231a9526b77ea936255841a935026',1,'w12633-c01a0dee',1796129510001,1796129510029,'transient','connection','error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO delivery_attempts VALUES(X'01a231a952a574478c22d6dd0786481f',1,'w12633-c01a0dee',1796129510086,1796129510095,'transient','connection','error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO delivery_attempts VALUES(X'01a231a95296761ebebf28174ce09899',1,'w12633-c01a0dee',1796129510086,1796129510096,'transient','connection','error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO delivery_attempts VALUES(X'01a231a95275730d972fba67a74b2b41',1,'w12633-c01a0dee',1796129510086,1796129510096,'transient','connection','error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO delivery_attempts VALUES(X'01a231a9529e70eb8fe2ed74ed55c86d',1,'w12633-c01a0dee',1796129510086,1796129510102,'transient','connection','error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
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
INSERT INTO quota_journal VALUES(1,X'01a231a9522b70b093efd8277e3afcfd','webhook','grant',100,NULL,NULL,NULL,1796129509938);
INSERT INTO quota_journal VALUES(2,X'01a231a9522b70b093efd8277e3afcfd','premium','grant',100,NULL,NULL,NULL,1796129509944);
INSERT INTO quota_journal VALUES(3,X'01a231a9522b70b093efd8277e3afcfd','webhook','reserve',1,X'01a231a9523f7759a92c572a4a89009c',1,NULL,1796129509951);
INSERT INTO quota_journal VALUES(4,X'01a231a9522b70b093efd8277e3afcfd','webhook','reserve',1,X'01a231a9526b77ea936255841a935026',1,NULL,1796129509995);
INSERT INTO quota_journal VALUES(5,X'01a231a9522b70b093efd8277e3afcfd','webhook','reserve',1,X'01a231a95275730d972fba67a74b2b41',1,NULL,1796129510005);
INSERT INTO quota_journal VALUES(6,X'01a231a9522b70b093efd8277e3afcfd','webhook','reserve',1,X'01a231a95296761ebebf28174ce09899',1,NULL,1796129510038);
INSERT INTO quota_journal VALUES(7,X'01a231a9522b70b093efd8277e3afcfd','webhook','reserve',1,X'01a231a9529e70eb8fe2ed74ed55c86d',1,NULL,1796129510046);
INSERT INTO quota_journal VALUES(8,X'01a231a9522b70b093efd8277e3afcfd','webhook','reserve',1,X'01a231a952a574478c22d6dd0786481f',1,NULL,1796129510053);
INSERT INTO quota_journal VALUES(9,X'01a231a9522b70b093efd8277e3afcfd','premium','reserve',2,X'01a231a952ac719e8b5858275e3ab607',1,NULL,1796129510060);
INSERT INTO quota_journal VALUES(10,X'01a231a9522b70b093efd8277e3afcfd','webhook','reserve',1,X'01a231a952b376ebb484e27ec0e3022a',1,NULL,1796129510067);
CREATE TABLE receipts (
    scope        TEXT NOT NULL CHECK (length(scope) BETWEEN 1 AND 200),
    operation_id TEXT NOT NULL CHECK (length(operation_id) BETWEEN 1 AND 255),
    created_at   INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    PRIMARY KEY (scope, operation_id)
) STRICT;
CREATE TABLE delivery_replays (
    delivery_id     BLOB NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    reservation_seq INTEGER NOT NULL CHECK (reservation_seq >= 2),
    at              INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, reservation_seq)
) STRICT;
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence VALUES('quota_journal',10);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE state = 'sending';
CREATE INDEX deliveries_tenant_id ON deliveries (tenant_id, id DESC);
CREATE INDEX deliveries_final ON deliveries (updated_at) WHERE state IN ('sent', 'failed', 'cancelled');
CREATE UNIQUE INDEX quota_journal_one_reserve
    ON quota_journal (delivery_id, reservation_seq) WHERE kind = 'reserve';
CREATE UNIQUE INDEX quota_journal_one_final
    ON quota_journal (delivery_id, reservation_seq) WHERE kind IN ('commit', 'release');
CREATE UNIQUE INDEX quota_journal_grant_once
    ON quota_journal (tenant_id, quota_key, idempotency_key) WHERE kind = 'grant' AND idempotency_key IS NOT NULL;
CREATE INDEX quota_journal_account ON quota_journal (tenant_id, quota_key, id);
CREATE INDEX receipts_created_at ON receipts (created_at);
COMMIT;
