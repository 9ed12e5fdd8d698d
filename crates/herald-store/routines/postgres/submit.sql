-- herald_submit_v1 and herald_submit_v2, the SQL API's submit (PostgreSQL). Their history is
-- migrations 6-8; from here on a change is an edit of this file (herald_store::routines).

-- Submits a delivery inside the caller's transaction: the claim, its payload, its
-- reservation (held on the delivery row) commit or roll back with the caller's own work. Named
-- parameters with the HTTP API's defaults (quota_key = the channel, cost = 1, send_at =
-- now, max_attempts = the shared setting). `send_at` is RFC 3339 text, so that a bad one
-- is an answer, not an error raised at the call.
--
-- Answers, never raises (a raised error would abort the caller's transaction, and an
-- application that catches it and commits would lose its work): `status` is `created`,
-- `duplicate` (the same request again: the existing delivery), `reused` (the key with
-- another request: nothing written), `quota_exhausted` (nothing written) or `invalid`
-- (`field` and `code` say what; nothing written). Only concurrency errors — a deadlock,
-- a serialization failure, a lock timeout — are raised, as PostgreSQL's own, for the
-- caller's retry loop. The checks run in the order of every other face: the request's
-- fields, then the tenant, then an existing delivery of the identity, then the quota.
--
-- Versioned by name: a later version with more parameters is a new name, and a call
-- written against v1 keeps working after every upgrade (an overload with more defaulted
-- parameters would make calls by name ambiguous). Both versions are herald_submit, one
-- body, which only they may call.
-- The one body of v1 and v2: `from_client` says whether `client_print` is the request's
-- fingerprint (v2) or the fingerprint is left to the first repeat (v1: version 0).
CREATE OR REPLACE FUNCTION herald_submit(
    tenant text, operation_key text, channel text, recipient text, payload text,
    quota_key text, cost bigint, send_at text, max_attempts integer, from_client boolean,
    client_print bytea,
    OUT status text, OUT delivery_id uuid, OUT field text, OUT code text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    tenant_uuid uuid;
    qkey text := coalesce(quota_key, channel);
    due timestamptz;
    due_ms bigint;
    canonical text;
    claim record;
    existing record;
    same boolean;
    -- The stripe the claim reserves from when herald_quota_gather chose it (NULL: the lowest
    -- free one).
    given smallint;
    -- The caller's W3C traceparent, from the transaction's `herald.traceparent` setting
    -- (`SELECT set_config('herald.traceparent', '00-…-01', true)` before the submit), kept
    -- beside the payload when it reads as one (herald_core::trace reads it again in full);
    -- otherwise NULL: a caller's tracing never fails its submit. Checked here, in PL/pgSQL:
    -- a SQL function called from the claim's statement cost 9 % of the SQL API's rate.
    traced text := current_setting('herald.traceparent', true);
BEGIN
    IF traced IS NOT NULL THEN
        traced := CASE WHEN traced ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-|$)'
                            AND (length(traced) = 55 OR left(traced, 2) <> '00')
                       THEN left(traced, 55) END;
    END IF;
    IF from_client AND client_print IS NULL THEN
        status := 'invalid'; field := 'fingerprint'; code := 'empty'; RETURN;
    END IF;
    -- The request's fields, in herald's order.
    IF tenant IS NULL OR tenant = '' THEN
        status := 'invalid'; field := 'tenant'; code := 'empty'; RETURN;
    END IF;
    -- Checked before the cast: catching the cast's error would cost a subtransaction.
    IF tenant !~ '^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$' THEN
        status := 'invalid'; field := 'tenant'; code := 'not_a_uuid'; RETURN;
    END IF;
    tenant_uuid := tenant::uuid;
    code := herald_text_problem(operation_key, 255);
    IF code IS NOT NULL THEN status := 'invalid'; field := 'operation_key'; RETURN; END IF;
    code := herald_text_problem(channel, 50);
    IF code IS NOT NULL THEN status := 'invalid'; field := 'channel'; RETURN; END IF;
    code := herald_text_problem(recipient, 2048);
    IF code IS NOT NULL THEN status := 'invalid'; field := 'to'; RETURN; END IF;
    code := herald_text_problem(qkey, 100);
    IF code IS NOT NULL THEN status := 'invalid'; field := 'quota_key'; RETURN; END IF;
    IF cost IS NULL OR cost NOT BETWEEN 0 AND 1000000 THEN
        status := 'invalid'; field := 'cost'; code := 'out_of_range'; RETURN;
    END IF;
    -- The shared setting, when it is the default, is within range by its table's CHECK.
    IF max_attempts NOT BETWEEN 1 AND 100 THEN
        status := 'invalid'; field := 'max_attempts'; code := 'out_of_range'; RETURN;
    END IF;
    IF payload IS NULL THEN
        status := 'invalid'; field := 'payload'; code := 'empty'; RETURN;
    END IF;
    -- herald_core::limits::payload_bytes_max: 4 MiB for email (a rendered message), else 64 KiB.
    IF octet_length(payload) > (CASE WHEN channel = 'email' THEN 4194304 ELSE 65536 END) THEN
        status := 'invalid'; field := 'payload'; code := 'too_long'; RETURN;
    END IF;
    IF from_client THEN
        IF octet_length(client_print) <> 32 THEN
            status := 'invalid'; field := 'fingerprint'; code := 'not_a_fingerprint'; RETURN;
        END IF;
        -- JSON to PostgreSQL's parser; the rest of herald's rules (a duplicate key, depth,
        -- number limits) are the worker's check: a payload they refuse has no fingerprint.
        -- A payload the parser refuses is walked for herald's own code. `json` reads the
        -- syntax without building the value (9 against 39 µs for 4 KiB) but lets `\u0000`
        -- and a lone surrogate through: a payload with such an escape goes to `jsonb`.
        BEGIN
            IF strpos(payload, '\u') > 0 AND payload ~ '\\u(0000|[dD][89a-fA-F])' THEN
                PERFORM payload::jsonb;
            ELSE
                PERFORM payload::json;
            END IF;
        EXCEPTION WHEN OTHERS THEN -- a cast has no concurrency error to let through
            code := coalesce((herald_payload_canonical(payload)).problem, 'syntax');
            status := 'invalid'; field := 'payload'; RETURN;
        END;
    ELSIF NOT herald_payload_plain(payload) THEN
        SELECT c.canonical, c.problem INTO canonical, code FROM herald_payload_canonical(payload) c;
        IF code IS NOT NULL THEN status := 'invalid'; field := 'payload'; RETURN; END IF;
    END IF;
    IF send_at IS NOT NULL THEN
        -- RFC 3339 only, as every other face reads it: PostgreSQL's own parser would also
        -- take `tomorrow`, `now` or a date alone. A leap second reads as :59.
        IF send_at !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$' THEN
            status := 'invalid'; field := 'send_at'; code := 'not_a_time'; RETURN;
        END IF;
        BEGIN
            -- Cut to the millisecond, as herald_core reads it: the instant the fingerprint
            -- names on every face (rounding made a repeat over HTTP another request).
            due := date_trunc('milliseconds',
                              regexp_replace(send_at, '^(.{17})60', '\159')::timestamptz);
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow
                       OR invalid_text_representation THEN
            status := 'invalid'; field := 'send_at'; code := 'not_a_time'; RETURN;
        END;
        due_ms := herald_ms(due);
        IF due_ms NOT BETWEEN 0 AND 253402128000000 THEN
            status := 'invalid'; field := 'send_at'; code := 'out_of_range'; RETURN;
        END IF;
    END IF;

    FOR round IN 1..4 LOOP
        -- The claim, one statement: what the database knows (`s`: the shared max_attempts;
        -- the tenant wall — the session's role, since the function runs with herald's
        -- rights, must have been granted this tenant or every tenant; the tenant), then as
        -- the library's claim: a stripe of the account that covers the cost and that no
        -- other transaction holds locked first (none: `covered` is false), the identity
        -- inserted (carrying its reservation), its payload, the stripe's update; then the
        -- wake-up (`w`): at most one transaction per 20 ms takes herald_wake's row
        -- (SKIP LOCKED: the others neither wait nor notify) and notifies below.
        -- In a block of its own (a subtransaction): when no free stripe covered the cost,
        -- the search may still have locked a stripe that a transaction drained after this
        -- statement's snapshot (PostgreSQL keeps the lock of a row whose re-check failed).
        -- Undoing the block releases it, so the wait of herald_quota_gather below holds
        -- nothing another waiter waits for: without it, two such waits deadlocked.
        BEGIN
            WITH s AS (
                     SELECT coalesce(herald_submit.max_attempts,
                                     (SELECT x.max_attempts FROM herald_settings x WHERE x.id = 1))
                                AS attempts,
                            EXISTS (SELECT 1 FROM herald_sql_grants g
                                    WHERE g.role_name = session_user
                                      AND (g.tenant_id IS NULL OR g.tenant_id = tenant_uuid))
                                AS granted,
                            EXISTS (SELECT 1 FROM tenants t WHERE t.id = tenant_uuid) AS known),
                 -- The lowest free stripe that covers the cost: one row read when free.
                 q AS (
                     SELECT (SELECT a.stripe FROM quota_accounts a
                             WHERE a.tenant_id = tenant_uuid AND a.quota_key = qkey
                               AND a.available >= cost
                               AND a.stripe BETWEEN coalesce(given, 0) AND coalesce(given, 63)
                             ORDER BY a.stripe LIMIT 1 FOR UPDATE SKIP LOCKED) AS stripe
                     FROM s
                     WHERE cost > 0 AND s.granted AND s.known),
                 d AS (
                     INSERT INTO deliveries AS d (id, tenant_id, operation_key, channel, recipient,
                         fingerprint, fingerprint_version, fingerprint_send_at_ms, quota_key, cost,
                         state, max_attempts, next_attempt_at, created_at, updated_at,
                         reserve_stripe, reserve_id)
                     SELECT herald_uuid_v7(), tenant_uuid, operation_key, channel, recipient,
                         CASE WHEN from_client THEN client_print ELSE '\x' END,
                         CASE WHEN from_client THEN 3 ELSE 0 END, due_ms, qkey, cost,
                         'pending', s.attempts, coalesce(due, now()), now(), now(),
                         (SELECT q.stripe FROM q),
                         CASE WHEN cost > 0 THEN nextval('quota_movements_id_seq') END
                     FROM s
                     WHERE s.granted AND s.known AND s.attempts IS NOT NULL
                       AND (cost = 0 OR (SELECT q.stripe FROM q) IS NOT NULL)
                     ON CONFLICT ON CONSTRAINT deliveries_identity DO NOTHING
                     RETURNING d.id),
                 p AS (INSERT INTO delivery_payloads (delivery_id, payload, traceparent)
                       SELECT d.id, payload, traced FROM d),
                 a AS (UPDATE quota_accounts a SET available = a.available - cost,
                           reserved = a.reserved + cost, updated_at = now()
                       WHERE cost > 0 AND a.tenant_id = tenant_uuid AND a.quota_key = qkey
                         AND a.stripe = (SELECT q.stripe FROM q) AND EXISTS (SELECT 1 FROM d)
                       RETURNING a.stripe),
                 w AS (UPDATE herald_wake w SET at = clock_timestamp()
                       WHERE w.id = (SELECT v.id FROM herald_wake v
                                     WHERE v.id = 1
                                       AND v.at < clock_timestamp() - interval '20 milliseconds'
                                       AND EXISTS (SELECT 1 FROM d)
                                     FOR UPDATE SKIP LOCKED)
                       RETURNING 1)
            SELECT (SELECT d.id FROM d) AS id, EXISTS (SELECT 1 FROM w) AS wake,
                   cost = 0 OR (SELECT q.stripe FROM q) IS NOT NULL AS covered, s.attempts, s.granted, s.known
              INTO claim FROM s;
            IF claim.id IS NULL AND NOT claim.covered AND given IS NULL THEN
                RAISE SQLSTATE 'HR033';
            END IF;
        EXCEPTION WHEN SQLSTATE 'HR033' THEN
            NULL; -- `claim` keeps what the statement answered
        END;
        IF claim.id IS NOT NULL THEN
            IF claim.wake THEN
                PERFORM pg_notify('herald_due', '');
            END IF;
            status := 'created'; delivery_id := claim.id; RETURN;
        END IF;
        IF NOT claim.granted THEN
            status := 'invalid'; field := 'tenant'; code := 'not_granted'; RETURN;
        END IF;
        IF NOT claim.known THEN
            status := 'invalid'; field := 'tenant'; code := 'unknown_tenant'; RETURN;
        END IF;
        IF claim.attempts IS NULL THEN
            -- No herald process has started on this database yet: the build's default,
            -- kept for every later submit, then claim again.
            INSERT INTO herald_settings (id, max_attempts) VALUES (1, 8) ON CONFLICT DO NOTHING;
            CONTINUE;
        END IF;
        SELECT d.id, d.fingerprint, d.fingerprint_version, d.fingerprint_send_at_ms,
               d.recipient, d.quota_key, d.cost, d.max_attempts, p.payload
          INTO existing
          FROM deliveries d JOIN delivery_payloads p ON p.delivery_id = d.id
         WHERE d.tenant_id = tenant_uuid
           AND d.operation_key = herald_submit.operation_key
           AND d.channel = herald_submit.channel;
        IF FOUND THEN
            -- The same request compares equal field by field, in any version; a payload
            -- of other text may still mean the same JSON. Two fingerprints of version 2's
            -- bytes compare as they are (the client's is checked before its send).
            same := existing.recipient = recipient AND existing.quota_key = qkey
                    AND existing.cost = cost;
            IF from_client AND existing.fingerprint_version IN (2, 3) THEN
                same := existing.fingerprint = client_print;
            ELSIF same AND existing.payload <> payload THEN
                canonical := coalesce(canonical,
                                      (herald_payload_canonical(payload)).canonical);
            END IF;
            IF from_client AND existing.fingerprint_version IN (2, 3) THEN
                NULL; -- compared above
            ELSIF existing.fingerprint_version = 0 THEN
                same := same AND existing.max_attempts = claim.attempts
                        AND existing.fingerprint_send_at_ms IS NOT DISTINCT FROM due_ms
                        AND (existing.payload = payload
                             OR (herald_payload_canonical(existing.payload)).canonical
                                = canonical);
            ELSIF existing.fingerprint_version IN (2, 3) THEN
                -- (3: version 2's bytes, computed by the client: submit_v2.)
                canonical := coalesce(canonical,
                                      (herald_payload_canonical(payload)).canonical);
                same := existing.fingerprint
                        = herald_fingerprint_v2(channel, recipient, canonical, qkey, cost,
                                                due_ms, claim.attempts);
            ELSE
                -- A row from before fingerprint version 2: the same meaning, compared field
                -- by field (version 1's serde_json form has no SQL implementation). Left
                -- out, max_attempts is what the submitting process resolved, the row's own
                -- (as herald's own repeat).
                same := same AND (herald_submit.max_attempts IS NULL
                                  OR existing.max_attempts = claim.attempts)
                        AND (existing.payload = payload
                             OR (herald_payload_canonical(existing.payload)).canonical
                                = canonical);
            END IF;
            status := CASE WHEN same THEN 'duplicate' ELSE 'reused' END;
            delivery_id := CASE WHEN same THEN existing.id END;
            RETURN;
        END IF;
        IF NOT claim.covered THEN
            -- No free stripe covered the cost: wait for the held ones, gather the
            -- account's balance if no stripe covers it alone, and claim again on the
            -- stripe that covers it (held by this transaction now, so not skipped).
            IF given IS NULL THEN
                given := herald_quota_gather(tenant_uuid, qkey, cost, now());
                IF given IS NOT NULL THEN
                    CONTINUE;
                END IF;
            END IF;
            status := 'quota_exhausted'; RETURN;
        END IF;
        -- The row the claim ran into was deleted before it could be read (retention):
        -- claim again.
    END LOOP;
    RAISE EXCEPTION 'the delivery with this identity was deleted each time it was about to be read';
END $$;

CREATE OR REPLACE FUNCTION herald_submit_v1(
    tenant text, operation_key text, channel text, recipient text, payload text,
    quota_key text DEFAULT NULL, cost bigint DEFAULT 1, send_at text DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    OUT status text, OUT delivery_id uuid, OUT field text, OUT code text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    -- PL/pgSQL, not SQL: a SQL function that cannot be inlined (SECURITY DEFINER, SET) is
    -- planned again at every call: 76 µs of the 4 KiB call's 590 µs (docs/perf.md).
    SELECT s.status, s.delivery_id, s.field, s.code INTO status, delivery_id, field, code
      FROM herald_submit(tenant, operation_key, channel, recipient, payload, quota_key,
                         cost, send_at, max_attempts, false, NULL) s;
END $$;

-- v1's parameters, then `fingerprint`: the request's fingerprint (version 2, 32 bytes:
-- SHA-256 of its canonical text, ARCHITECTURE.md "The fingerprint"), computed by the
-- caller — the PHP package's Herald\Fingerprint — so that the payload is not walked here:
-- PostgreSQL's own JSON parser (in C) checks it. The row records fingerprint version 3,
-- "computed by the client"; herald checks it against the stored request before each send,
-- and a delivery whose fingerprint does not hold is failed unsent (`fingerprint_mismatch`).
-- With max_attempts left out the shared setting applies, and the fingerprint must have
-- been computed with it. Answers as v1; a missing fingerprint or one that is not 32 bytes
-- is `invalid` (field `fingerprint`, code `empty` or `not_a_fingerprint`).
CREATE OR REPLACE FUNCTION herald_submit_v2(
    tenant text, operation_key text, channel text, recipient text, payload text,
    quota_key text DEFAULT NULL, cost bigint DEFAULT 1, send_at text DEFAULT NULL,
    max_attempts integer DEFAULT NULL, fingerprint bytea DEFAULT NULL,
    OUT status text, OUT delivery_id uuid, OUT field text, OUT code text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    SELECT s.status, s.delivery_id, s.field, s.code INTO status, delivery_id, field, code
      FROM herald_submit(tenant, operation_key, channel, recipient, payload, quota_key,
                         cost, send_at, max_attempts, true, fingerprint) s;
END $$;

-- The body runs with the rights of the version that called it; nobody calls it directly.
REVOKE ALL ON FUNCTION herald_submit(text, text, text, text, text, text, bigint, text, integer,
                                     boolean, bytea) FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION herald_submit_v1(text, text, text, text, text, text, bigint, text, integer) '
                   'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION herald_submit_v2(text, text, text, text, text, text, bigint, text, integer, bytea) '
                   'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END $$;
