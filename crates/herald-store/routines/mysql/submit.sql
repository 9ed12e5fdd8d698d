-- MariaDB only. The SQL API's submit: `CALL herald.submit_v1(…)`, and `submit_v2(…)`, the
-- same with the fingerprint computed by the caller.
--
-- This file is the routine's one home: `herald migrate` runs it again whenever its text
-- changes (herald_store::routines). The history of earlier texts is in the migrations.

-- Submits a delivery inside the caller's transaction: the claim, its payload, its
-- reservation and journal row commit or roll back with the caller's own work (called
-- outside a transaction, it commits its own). Positional, as every MariaDB procedure: NULL
-- for a default — p_quota_key the channel, p_cost 1, p_send_at now (RFC 3339 text),
-- p_max_attempts the shared setting.
--
-- Answers, never raises: OUT p_status is `created`, `duplicate` (the same request again:
-- the existing delivery), `reused` (the key with another request: nothing written),
-- `quota_exhausted` (nothing written) or `invalid` (p_field and p_code say what; nothing
-- written); p_delivery_id is the delivery's id (text) for created and duplicate. Only
-- concurrency errors — a deadlock, a lock wait timeout — are raised, as MariaDB's own,
-- for the caller's retry loop; the claim's writes are undone first (a lock wait timeout
-- undoes only the statement that waited). The checks run in the order of every other
-- face: the request's fields, then the tenant, then an existing delivery of the
-- identity, then the quota.
--
-- Versioned by name: `submit_v2` adds a parameter, and a call written against v1 keeps
-- working after every upgrade (MariaDB has neither named parameters nor defaults, so
-- adding one to v1 would break every call). Both are `herald_submit`, one body.
CREATE OR REPLACE PROCEDURE submit_v1(
    IN b_tenant LONGBLOB, IN b_operation_key LONGBLOB, IN b_channel LONGBLOB,
    IN b_recipient LONGBLOB, IN b_payload LONGBLOB, IN b_quota_key LONGBLOB,
    IN p_cost BIGINT, IN b_send_at LONGBLOB, IN p_max_attempts INT,
    OUT p_status VARCHAR(16), OUT p_delivery_id CHAR(36), OUT p_field VARCHAR(32),
    OUT p_code VARCHAR(32))
MODIFIES SQL DATA SQL SECURITY DEFINER
CALL herald_submit(b_tenant, b_operation_key, b_channel, b_recipient, b_payload, b_quota_key,
                   p_cost, b_send_at, p_max_attempts, NULL,
                   p_status, p_delivery_id, p_field, p_code);

-- v1's parameters, then b_fingerprint: the request's fingerprint (version 2, 32 bytes:
-- SHA-256 of its canonical text, ARCHITECTURE.md "The fingerprint"), computed by the
-- caller — the PHP package's Herald\Fingerprint — so that the payload is not walked here:
-- only JSON_VALID (in C) checks it. The row records fingerprint version 3, "computed by
-- the client"; herald checks it against the stored request before each send, and a
-- delivery whose fingerprint does not hold is failed unsent (`fingerprint_mismatch`).
-- With p_max_attempts NULL the shared setting applies, and the fingerprint must have
-- been computed with it. Answers as v1; a missing fingerprint or one that is not 32
-- bytes is `invalid` (field `fingerprint`, code `empty` or `not_a_fingerprint`).
CREATE OR REPLACE PROCEDURE submit_v2(
    IN b_tenant LONGBLOB, IN b_operation_key LONGBLOB, IN b_channel LONGBLOB,
    IN b_recipient LONGBLOB, IN b_payload LONGBLOB, IN b_quota_key LONGBLOB,
    IN p_cost BIGINT, IN b_send_at LONGBLOB, IN p_max_attempts INT, IN b_fingerprint LONGBLOB,
    OUT p_status VARCHAR(16), OUT p_delivery_id CHAR(36), OUT p_field VARCHAR(32),
    OUT p_code VARCHAR(32))
MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    IF b_fingerprint IS NULL THEN
        SET p_status = 'invalid', p_delivery_id = NULL, p_field = 'fingerprint',
            p_code = 'empty';
    ELSE
        CALL herald_submit(b_tenant, b_operation_key, b_channel, b_recipient, b_payload,
                           b_quota_key, p_cost, b_send_at, p_max_attempts, b_fingerprint,
                           p_status, p_delivery_id, p_field, p_code);
    END IF;
END;

-- Whether `p_payload` is a payload herald accepts, proved by MariaDB's own JSON functions
-- and regular expressions (all in C), for the common payload: compact JSON text with no
-- `\u` or `\/` escape, no raw control character, no exponent, no run of 31 digits, no
-- number ending in its point, nested at most 30 levels, and no key twice in one object
-- (JSON_NORMALIZE sorts each object's keys, so a key given twice is then given twice in
-- a row, which a recursive pattern finds). FALSE is not "invalid": such a payload is
-- walked by herald_payload_canonical, which finds the exact problem, if any. A payload
-- proved here keeps its fingerprint uncomputed (version 0) until a repeat needs it
-- (herald_row_fingerprint), as PostgreSQL's SQL API does since its schema 8: the walk is
-- nearly all of a v1 submit's time with a 4 KiB payload.
CREATE OR REPLACE FUNCTION herald_payload_plain(
    p_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
) RETURNS BOOLEAN DETERMINISTIC NO SQL
BEGIN
    DECLARE v_normal LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION RETURN FALSE;
    IF p_payload REGEXP '[\\x{00}-\\x{1f}]|\\\\[^"\\\\bfnrt]|[0-9][eE]|[0-9]{31}|[0-9]\\.(?![0-9])'
       OR herald_has_surrogate(p_payload) OR NOT JSON_VALID(p_payload)
       OR JSON_DEPTH(p_payload) > 31 THEN
        RETURN FALSE;
    END IF;
    SET v_normal = JSON_NORMALIZE(p_payload);
    IF v_normal IS NULL THEN
        RETURN FALSE;
    END IF;
    -- A key (group 1), its value — a string, a scalar, or a balanced object (group 2) or
    -- array (group 3) — then the same key again. Possessive and atomic: a value is matched
    -- one way only, so a key that is not repeated costs one scan of its value (backtracking
    -- into values made this four times slower on a 4 KiB payload).
    RETURN v_normal NOT REGEXP CONCAT(
        '[{,]("(?:[^"\\\\]++|\\\\.)*+"):',
        '(?>"(?:[^"\\\\]++|\\\\.)*+"|[^][{},"]++',
        '|(\\{(?:[^{}"]++|"(?:[^"\\\\]++|\\\\.)*+"|(?2))*+\\})',
        '|(\\[(?:[^][{}"]++|"(?:[^"\\\\]++|\\\\.)*+"|(?2)|(?3))*+\\])),\\1:');
END;

-- The fingerprint (version 2) of delivery `p_id` as its request was made: the one stored,
-- or, for a row whose fingerprint was not computed (version 0), computed now from the row
-- (its payload walked). NULL for no such delivery.
CREATE OR REPLACE PROCEDURE herald_row_fingerprint(IN p_id BINARY(16), OUT p_print VARBINARY(64))
READS SQL DATA
BEGIN
    DECLARE v_version SMALLINT;
    DECLARE v_channel, v_recipient, v_quota_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
    DECLARE v_payload, v_canonical LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_cost, v_due BIGINT;
    DECLARE v_attempts INT;
    DECLARE v_problem VARCHAR(32);
    SET p_print = NULL;
    SELECT d.fingerprint, d.fingerprint_version, d.channel, d.recipient, d.quota_key, d.cost,
           d.fingerprint_send_at_ms, d.max_attempts, p.payload
      INTO p_print, v_version, v_channel, v_recipient, v_quota_key, v_cost, v_due,
           v_attempts, v_payload
      FROM deliveries d JOIN delivery_payloads p ON p.delivery_id = d.id
     WHERE d.id = p_id;
    IF v_version = 0 THEN
        CALL herald_payload_canonical(v_payload, v_canonical, v_problem);
        SET p_print = herald_fingerprint_v2(v_channel, v_recipient, v_canonical, v_quota_key,
                                            v_cost, v_due, v_attempts);
    END IF;
END;

-- The one body of v1 and v2: b_fingerprint NULL computes the fingerprint here (v1).
CREATE OR REPLACE PROCEDURE herald_submit(
    IN b_tenant LONGBLOB, IN b_operation_key LONGBLOB, IN b_channel LONGBLOB,
    IN b_recipient LONGBLOB, IN b_payload LONGBLOB, IN b_quota_key LONGBLOB,
    IN p_cost BIGINT, IN b_send_at LONGBLOB, IN p_max_attempts INT, IN b_fingerprint LONGBLOB,
    OUT p_status VARCHAR(16), OUT p_delivery_id CHAR(36), OUT p_field VARCHAR(32),
    OUT p_code VARCHAR(32))
MODIFIES SQL DATA SQL SECURITY DEFINER
submit: BEGIN
    -- The text parameters, once their bytes are known to be UTF-8.
    DECLARE p_tenant LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE p_operation_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
    DECLARE p_channel LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
    DECLARE p_recipient LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
    DECLARE p_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE p_quota_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
    DECLARE p_send_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_tenant BINARY(16);
    DECLARE v_quota_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
    DECLARE v_cost BIGINT DEFAULT COALESCE(p_cost, 1);
    DECLARE v_due BIGINT;
    DECLARE v_attempts INT DEFAULT p_max_attempts;
    DECLARE v_canonical LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_problem VARCHAR(32);
    DECLARE v_print BINARY(32);
    DECLARE v_granted BOOLEAN;
    DECLARE v_known BOOLEAN;
    DECLARE v_now BIGINT;
    DECLARE v_stripe SMALLINT;
    -- Whether a claim that found no free stripe gathers the account (after the identity
    -- was looked for: a duplicate is answered before short quota, and moves no balance).
    DECLARE v_gather BOOLEAN DEFAULT FALSE;
    DECLARE v_covered BOOLEAN DEFAULT TRUE;
    DECLARE v_own_tx BOOLEAN DEFAULT @@autocommit = 1 AND @@in_transaction = 0;
    DECLARE v_id BINARY(16);
    DECLARE v_existing BINARY(16);
    DECLARE v_existing_print VARBINARY(64);
    DECLARE v_existing_version SMALLINT;
    -- v1 with a payload herald_payload_plain proved valid: the fingerprint is computed
    -- only if a repeat needs it.
    DECLARE v_plain BOOLEAN DEFAULT FALSE;
    DECLARE v_round INT DEFAULT 0;
    -- Called outside a transaction: the claim is one of its own, undone whole on an error.
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        IF v_own_tx THEN
            ROLLBACK;
        END IF;
        RESIGNAL;
    END;

    SET p_status = 'invalid', p_delivery_id = NULL, p_field = NULL, p_code = NULL;
    -- Bytes that are not UTF-8 (a cut character, an encoded surrogate) are refused as
    -- `not_utf8`, never raised: a text parameter would have refused them with error 1366
    -- before this body ran. Then the request's fields, in herald's order.
    SET p_code = herald_utf8_problem(b_tenant);
    IF p_code IS NOT NULL THEN SET p_field = 'tenant'; LEAVE submit; END IF;
    SET p_code = herald_utf8_problem(b_operation_key);
    IF p_code IS NOT NULL THEN SET p_field = 'operation_key'; LEAVE submit; END IF;
    SET p_code = herald_utf8_problem(b_channel);
    IF p_code IS NOT NULL THEN SET p_field = 'channel'; LEAVE submit; END IF;
    SET p_code = herald_utf8_problem(b_recipient);
    IF p_code IS NOT NULL THEN SET p_field = 'to'; LEAVE submit; END IF;
    SET p_code = herald_utf8_problem(b_quota_key);
    IF p_code IS NOT NULL THEN SET p_field = 'quota_key'; LEAVE submit; END IF;
    SET p_code = herald_utf8_problem(b_payload);
    IF p_code IS NOT NULL THEN SET p_field = 'payload'; LEAVE submit; END IF;
    SET p_code = herald_utf8_problem(b_send_at);
    IF p_code IS NOT NULL THEN SET p_field = 'send_at'; LEAVE submit; END IF;
    SET p_tenant = CONVERT(b_tenant USING utf8mb4),
        p_operation_key = CONVERT(b_operation_key USING utf8mb4),
        p_channel = CONVERT(b_channel USING utf8mb4),
        p_recipient = CONVERT(b_recipient USING utf8mb4),
        p_payload = CONVERT(b_payload USING utf8mb4),
        p_quota_key = CONVERT(b_quota_key USING utf8mb4),
        p_send_at = CONVERT(b_send_at USING utf8mb4);
    SET v_quota_key = COALESCE(p_quota_key, p_channel);
    IF p_tenant IS NULL OR p_tenant = '' THEN
        SET p_field = 'tenant', p_code = 'empty';
        LEAVE submit;
    END IF;
    IF herald_has_surrogate(p_tenant) THEN
        SET p_field = 'tenant', p_code = 'not_a_uuid';
        LEAVE submit;
    END IF;
    IF p_tenant NOT REGEXP '^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$' THEN
        SET p_field = 'tenant', p_code = 'not_a_uuid';
        LEAVE submit;
    END IF;
    SET v_tenant = UNHEX(REPLACE(p_tenant, '-', ''));
    SET p_code = herald_text_problem(p_operation_key, 255);
    IF p_code IS NOT NULL THEN SET p_field = 'operation_key'; LEAVE submit; END IF;
    SET p_code = herald_text_problem(p_channel, 50);
    IF p_code IS NOT NULL THEN SET p_field = 'channel'; LEAVE submit; END IF;
    SET p_code = herald_text_problem(p_recipient, 2048);
    IF p_code IS NOT NULL THEN SET p_field = 'to'; LEAVE submit; END IF;
    SET p_code = herald_text_problem(v_quota_key, 100);
    IF p_code IS NOT NULL THEN SET p_field = 'quota_key'; LEAVE submit; END IF;
    IF v_cost NOT BETWEEN 0 AND 1000000 THEN
        SET p_field = 'cost', p_code = 'out_of_range';
        LEAVE submit;
    END IF;
    -- One query for what the database knows: the shared max_attempts, the tenant wall
    -- (the session's user, since the procedure runs with herald's rights, must have been
    -- granted this tenant or every tenant), the tenant.
    SELECT COALESCE(v_attempts, (SELECT s.max_attempts FROM herald_settings s WHERE s.id = 1)),
           EXISTS (SELECT 1 FROM herald_sql_grants g
                   WHERE g.role_name = LEFT(SESSION_USER(), CHAR_LENGTH(SESSION_USER())
                                            - CHAR_LENGTH(SUBSTRING_INDEX(SESSION_USER(), '@', -1)) - 1)
                     AND (g.tenant_id IS NULL OR g.tenant_id = v_tenant)),
           EXISTS (SELECT 1 FROM tenants t WHERE t.id = v_tenant)
      INTO v_attempts, v_granted, v_known;
    IF v_attempts IS NULL THEN
        -- No herald process has started on this database yet: the build's default.
        -- A concurrent first submit may have written the row after this transaction's
        -- snapshot was taken: the locking read sees the latest committed version, where
        -- a plain read would see none (and the fingerprint would be NULL).
        INSERT INTO herald_settings (id, max_attempts) VALUES (1, 8)
            ON DUPLICATE KEY UPDATE id = id;
        SELECT s.max_attempts INTO v_attempts FROM herald_settings s WHERE s.id = 1
          LOCK IN SHARE MODE;
    END IF;
    IF v_attempts NOT BETWEEN 1 AND 100 THEN
        SET p_field = 'max_attempts', p_code = 'out_of_range';
        LEAVE submit;
    END IF;
    IF p_payload IS NULL THEN
        SET p_field = 'payload', p_code = 'empty';
        LEAVE submit;
    END IF;
    -- herald_core::limits::payload_bytes_max: 4 MiB for email (a rendered message), else 64 KiB.
    IF LENGTH(p_payload) > IF(p_channel = 'email', 4194304, 65536) THEN
        SET p_field = 'payload', p_code = 'too_long';
        LEAVE submit;
    END IF;
    IF b_fingerprint IS NULL THEN
        SET v_plain = herald_payload_plain(p_payload);
        IF NOT v_plain THEN
            CALL herald_payload_canonical(p_payload, v_canonical, v_problem);
            IF v_problem IS NOT NULL THEN
                SET p_field = 'payload', p_code = v_problem;
                LEAVE submit;
            END IF;
        END IF;
    ELSE
        IF LENGTH(b_fingerprint) <> 32 THEN
            SET p_field = 'fingerprint', p_code = 'not_a_fingerprint';
            LEAVE submit;
        END IF;
        -- The rest of herald's rules (a duplicate key, \u0000, a lone surrogate, depth,
        -- number limits) are the worker's check: a payload they refuse has no fingerprint.
        IF NOT JSON_VALID(p_payload) THEN
            SET p_field = 'payload', p_code = 'syntax';
            LEAVE submit;
        END IF;
    END IF;
    IF p_send_at IS NOT NULL THEN
        SET v_due = herald_rfc3339_ms(p_send_at);
        IF v_due IS NULL THEN
            SET p_field = 'send_at', p_code = 'not_a_time';
            LEAVE submit;
        END IF;
        IF v_due NOT BETWEEN 0 AND 253402128000000 THEN
            SET p_field = 'send_at', p_code = 'out_of_range';
            LEAVE submit;
        END IF;
    END IF;
    IF b_fingerprint IS NOT NULL THEN
        SET v_print = b_fingerprint;
    ELSEIF NOT v_plain THEN
        SET v_print = herald_fingerprint_v2(p_channel, p_recipient, v_canonical, v_quota_key,
                                            v_cost, v_due, v_attempts);
    END IF;
    IF NOT v_granted THEN
        SET p_field = 'tenant', p_code = 'not_granted';
        LEAVE submit;
    END IF;
    IF NOT v_known THEN
        SET p_field = 'tenant', p_code = 'unknown_tenant';
        LEAVE submit;
    END IF;
    SET p_status = NULL;

    IF v_own_tx THEN
        START TRANSACTION;
    END IF;
    claim: WHILE v_round < 4 DO
        SET v_round = v_round + 1;
        -- Budget first, then claim, as the library's: a stripe of the account that covers
        -- the cost and that no other transaction holds locked (a locking read sees its
        -- latest version whatever the isolation) before the identity.
        SET v_now = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);
        IF v_cost > 0 THEN
            -- The search starts at the stripe this session took last (a session variable):
            -- under REPEATABLE READ it goes stripe by stripe, and an application's
            -- connections each come back to a stripe of their own instead of all passing
            -- the same held ones from stripe 0.
            CALL herald_quota_take(v_tenant, v_quota_key, v_cost,
                                   IF(@herald_stripe_hint BETWEEN 0 AND 63,
                                      @herald_stripe_hint, 0),
                                   v_now, v_gather, v_stripe);
            SET v_covered = v_stripe IS NOT NULL;
            IF v_covered THEN
                SET @herald_stripe_hint = v_stripe;
            END IF;
        END IF;
        IF v_covered THEN
            SET v_id = herald_uuid_v7(v_now);
            SAVEPOINT herald_submit_claim;
            BEGIN
                DECLARE v_errno INT;
                DECLARE EXIT HANDLER FOR 1062 SET v_id = NULL;
                -- Any other error undoes the claim's own writes, then goes to the caller
                -- (a deadlock has rolled back the whole transaction: no savepoint left).
                DECLARE EXIT HANDLER FOR SQLEXCEPTION
                BEGIN
                    GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
                    IF v_errno <> 1213 AND @@in_transaction = 1 THEN
                        ROLLBACK TO SAVEPOINT herald_submit_claim;
                    END IF;
                    RESIGNAL;
                END;
                -- A client's fingerprint (v2) is version 3, one not computed yet version 0,
                -- each with the send_at it covers.
                INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                    fingerprint, fingerprint_version, fingerprint_send_at_ms, quota_key, cost,
                    state, max_attempts, next_attempt_at, created_at, updated_at)
                VALUES (v_id, v_tenant, p_operation_key, p_channel, p_recipient,
                    COALESCE(v_print, ''),
                    CASE WHEN b_fingerprint IS NOT NULL THEN 3 WHEN v_plain THEN 0 ELSE 2 END,
                    IF(b_fingerprint IS NULL AND NOT v_plain, NULL, v_due),
                    v_quota_key, v_cost, 'pending', v_attempts, COALESCE(v_due, v_now),
                    v_now, v_now);
                -- The caller's W3C traceparent (`SET @herald_traceparent = '00-…-01'` before
                -- the call) when it reads as one, else NULL: tracing never fails a submit.
                INSERT INTO delivery_payloads (delivery_id, payload, traceparent)
                VALUES (v_id, p_payload,
                    -- (?-i): lower-case hex only, whatever the session's collation.
                    IF(@herald_traceparent REGEXP
                           '(?-i)^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-|$)'
                       AND (CHAR_LENGTH(@herald_traceparent) = 55
                            OR LEFT(@herald_traceparent, 2) <> '00'),
                       LEFT(@herald_traceparent, 55), NULL));
                IF v_cost > 0 THEN
                    UPDATE quota_accounts a
                       SET a.available = a.available - v_cost, a.reserved = a.reserved + v_cost,
                           a.updated_at = v_now
                     WHERE a.tenant_id = v_tenant AND a.quota_key = v_quota_key
                       AND a.stripe = v_stripe;
                    INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount,
                        delivery_id, reservation_seq, at)
                    VALUES (v_tenant, v_quota_key, v_stripe, 'reserve', v_cost, v_id, 1, v_now);
                END IF;
            END;
            RELEASE SAVEPOINT herald_submit_claim;
            IF v_id IS NOT NULL THEN
                SET p_status = 'created', p_delivery_id = LOWER(INSERT(INSERT(INSERT(INSERT(
                    HEX(v_id), 21, 0, '-'), 17, 0, '-'), 13, 0, '-'), 9, 0, '-'));
                LEAVE claim;
            END IF;
        END IF;
        -- The identity exists (or the quota is short): a locking read finds the latest
        -- committed row under REPEATABLE READ too. Before the account is gathered, only
        -- when a plain read finds the row: the locking read of a missing key holds a gap
        -- lock, which a claim holding one of the stripes this one is about to wait for
        -- would wait for in turn when it inserts (a deadlock).
        SET v_existing = NULL;
        IF NOT (v_covered OR v_gather) THEN
            -- A SELECT ... INTO: MariaDB runs a subquery of an IF condition in a procedure as
            -- a locking read, gap lock included.
            SELECT d.id INTO v_existing FROM deliveries d
             WHERE d.tenant_id = v_tenant AND d.operation_key = p_operation_key
               AND d.channel = p_channel;
        END IF;
        IF v_covered OR v_gather OR v_existing IS NOT NULL THEN
            SET v_existing = NULL;
            -- Every MariaDB row has fingerprint version 2 (the backend began with it), 3
            -- (version 2's bytes computed by the client) or 0 (version 2's, not computed yet).
            SELECT d.id, d.fingerprint, d.fingerprint_version
              INTO v_existing, v_existing_print, v_existing_version
              FROM deliveries d
             WHERE d.tenant_id = v_tenant AND d.operation_key = p_operation_key
               AND d.channel = p_channel
              LOCK IN SHARE MODE;
        END IF;
        IF v_existing IS NOT NULL THEN
            -- A repeat: the fingerprints left uncomputed are computed now.
            IF v_print IS NULL THEN
                CALL herald_payload_canonical(p_payload, v_canonical, v_problem);
                SET v_print = herald_fingerprint_v2(p_channel, p_recipient, v_canonical,
                                                    v_quota_key, v_cost, v_due, v_attempts);
            END IF;
            IF v_existing_version = 0 THEN
                CALL herald_row_fingerprint(v_existing, v_existing_print);
            END IF;
            IF v_existing_print = v_print THEN
                SET p_status = 'duplicate', p_delivery_id = LOWER(INSERT(INSERT(INSERT(INSERT(
                    HEX(v_existing), 21, 0, '-'), 17, 0, '-'), 13, 0, '-'), 9, 0, '-'));
            ELSE
                SET p_status = 'reused';
            END IF;
            LEAVE claim;
        END IF;
        IF NOT v_covered THEN
            IF NOT v_gather THEN
                -- No free stripe covered the cost: claim again, waiting for the held
                -- stripes and gathering the balance if none covers it alone.
                SET v_gather = TRUE;
                ITERATE claim;
            END IF;
            SET p_status = 'quota_exhausted';
            LEAVE claim;
        END IF;
        -- The row the claim ran into was deleted before it could be read (retention):
        -- claim again.
    END WHILE;
    IF v_own_tx THEN
        COMMIT;
    END IF;
    IF p_status IS NULL THEN
        SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT =
            'the delivery with this identity was deleted each time it was about to be read';
    END IF;
END;
