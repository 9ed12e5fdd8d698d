-- A leaner herald_submit_v1: what a created submit must do, and nothing a repeat alone needs.
--
-- The fingerprint is computed when a repeat needs it, not at every submit. Computing it in
-- PL/pgSQL (the canonical form: a function call per JSON value) was most of an SQL
-- submit's server time: about a fifth with a small payload and five sixths with a 4 KiB
-- nested one. A row the SQL API creates keeps fingerprint version 0, "not computed yet",
-- and what its fingerprint (version 2) is made of: its fields, its payload, kept exactly,
-- and the `send_at` its request gave (`fingerprint_send_at_ms`, NULL when none; the row's
-- due time moves with retries). herald_delivery_fingerprint computes it from the row;
-- herald's own repeat path (the store's identity lookup) and this function's call it.
--
-- The payload is still checked at every submit, by herald_payload_plain first: PostgreSQL's
-- own parser and a few text scans, all in C, prove the common payload valid; only a payload
-- they cannot clear goes through herald_payload_canonical, which finds the exact problem
-- in herald's order. The shared settings, the grant and the tenant are read by the claim's
-- own statement, and the wake-up's coalescing is one more CTE of it.
--
-- herald_payload_canonical answers `too_deep` for a payload nested past the parser's stack
-- (tens of thousands of levels, still within 64 KiB), which raised before and so aborted the
-- caller's transaction.

ALTER TABLE deliveries ADD COLUMN fingerprint_send_at_ms bigint;

-- The canonical text of a payload, or the problem that makes it invalid (never raises).
CREATE OR REPLACE FUNCTION herald_payload_canonical(payload text, OUT canonical text, OUT problem text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    j json;
    tokens text;
BEGIN
    BEGIN
        j := payload::json;
    EXCEPTION
        WHEN statement_too_complex THEN
            -- Nested deeper than PostgreSQL's parser recurses: far past herald's 31 levels.
            problem := 'too_deep';
            RETURN;
        WHEN invalid_text_representation THEN
            tokens := (SELECT string_agg(m[1], ' ')
                         FROM regexp_matches(payload, '("(?:[^"\\]|\\.)*)', 'g') AS m);
            IF tokens ~ '[\x01-\x1f]' THEN
                problem := 'control_character';
            ELSIF coalesce(herald_json_has_lone_surrogate(tokens), false) THEN
                problem := 'lone_surrogate';
            ELSE
                problem := 'syntax';
            END IF;
            RETURN;
    END;
    IF herald_json_has_lone_surrogate(payload) THEN
        problem := 'lone_surrogate';
        RETURN;
    END IF;
    IF regexp_replace(payload, '\\\\', '', 'g') ~ '\\u0000' THEN
        problem := 'nul';
        RETURN;
    END IF;
    canonical := herald_json_canonical(j, 0);
    IF left(canonical, 1) = chr(1) THEN
        problem := split_part(substr(canonical, 2), chr(2), 1);
        canonical := NULL;
    END IF;
END $$;

-- Whether the payload is valid JSON by herald's rules, proven cheaply: true means valid;
-- false means "not proven", and herald_payload_canonical decides. Each step is one call
-- into PostgreSQL's C code:
-- - no exponent and no run of 31 digits: every number is within herald's limits (at most
--   30 digits either side of the point);
-- - the text parses as jsonb: RFC 8259 syntax, no raw control character, no lone
--   surrogate, no \u0000 (jsonb refuses all of these);
-- - no duplicate key: jsonb keeps one of each, so its key count equals the text's count of
--   `"` followed by `:` — which counts every key, and more only when a string holds such
--   a pair (then not proven) — exactly when no object repeats a key;
-- - nesting: at most 31 opening brackets in the whole text, or no array or object below
--   the 31st level.
CREATE FUNCTION herald_payload_plain(payload text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    j jsonb;
    keys_in_text int;
BEGIN
    IF payload ~ '[0-9][eE]|[0-9]{31}' THEN
        RETURN false;
    END IF;
    BEGIN
        j := payload::jsonb;
    EXCEPTION WHEN OTHERS THEN
        RETURN false; -- a cast has no concurrency error to let through; the walk decides
    END;
    keys_in_text := regexp_count(payload, '"[ \t\n\r]*:');
    IF keys_in_text > 1 AND keys_in_text <> jsonb_array_length(jsonb_path_query_array(j,
           'strict $.** ? (@.type() == "object").keyvalue()')) THEN
        RETURN false;
    END IF;
    IF octet_length(payload) - octet_length(replace(replace(payload, '[', ''), '{', '')) > 31
       AND jsonb_path_exists(j,
           'strict $.**{31 to last} ? (@.type() == "object" || @.type() == "array")') THEN
        RETURN false;
    END IF;
    RETURN true;
END $$;

-- The fingerprint (version 2) of delivery `id`: the one it was claimed with, or, for a row
-- whose fingerprint was not computed yet (version 0), computed now from the row. NULL when
-- there is no such delivery.
CREATE FUNCTION herald_delivery_fingerprint(id uuid) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN d.fingerprint_version = 0
                THEN herald_fingerprint_v2(d.channel, d.recipient,
                         (herald_payload_canonical(p.payload)).canonical, d.quota_key, d.cost,
                         d.fingerprint_send_at_ms, d.max_attempts)
                ELSE d.fingerprint END
      FROM deliveries d JOIN delivery_payloads p ON p.delivery_id = d.id
     WHERE d.id = herald_delivery_fingerprint.id AND d.fingerprint_version IN (0, 2)
$$;

-- Submits a delivery inside the caller's transaction: the claim, its payload, its
-- reservation and journal row commit or roll back with the caller's own work. Named
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
-- Versioned by name: a later version with more parameters is `herald_submit_v2`, and a
-- call written against v1 keeps working after every upgrade (an overload with more
-- defaulted parameters would make calls by name ambiguous).
CREATE OR REPLACE FUNCTION herald_submit_v1(
    tenant text, operation_key text, channel text, recipient text, payload text,
    quota_key text DEFAULT NULL, cost bigint DEFAULT 1, send_at text DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
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
BEGIN
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
    IF octet_length(payload) > 65536 THEN
        status := 'invalid'; field := 'payload'; code := 'too_long'; RETURN;
    END IF;
    IF NOT herald_payload_plain(payload) THEN
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
            due := regexp_replace(send_at, '^(.{17})60', '\159')::timestamptz;
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow
                       OR invalid_text_representation THEN
            status := 'invalid'; field := 'send_at'; code := 'not_a_time'; RETURN;
        END;
        due_ms := herald_ms(due);
        IF due_ms NOT BETWEEN 0 AND 253402128000000 THEN
            status := 'invalid'; field := 'send_at'; code := 'out_of_range'; RETURN;
        END IF;
    END IF;

    FOR round IN 1..3 LOOP
        -- The claim, one statement: what the database knows (`s`: the shared max_attempts;
        -- the tenant wall — the session's role, since the function runs with herald's
        -- rights, must have been granted this tenant or every tenant; the tenant), then as
        -- the library's claim: the account row locked first (if it covers the cost), the
        -- identity inserted, its payload, the reservation and its journal row; then the
        -- wake-up (`w`): at most one transaction per 20 ms takes herald_wake's row
        -- (SKIP LOCKED: the others neither wait nor notify) and notifies below.
        WITH s AS (
                 SELECT coalesce(herald_submit_v1.max_attempts,
                                 (SELECT x.max_attempts FROM herald_settings x WHERE x.id = 1))
                            AS attempts,
                        EXISTS (SELECT 1 FROM herald_sql_grants g
                                WHERE g.role_name = session_user
                                  AND (g.tenant_id IS NULL OR g.tenant_id = tenant_uuid))
                            AS granted,
                        EXISTS (SELECT 1 FROM tenants t WHERE t.id = tenant_uuid) AS known),
             q AS (
                 SELECT 1 FROM quota_accounts a, s
                 WHERE cost > 0 AND a.tenant_id = tenant_uuid AND a.quota_key = qkey
                   AND a.available >= cost AND s.granted AND s.known
                 FOR UPDATE OF a),
             d AS (
                 INSERT INTO deliveries AS d (id, tenant_id, operation_key, channel, recipient,
                     fingerprint, fingerprint_version, fingerprint_send_at_ms, quota_key, cost,
                     state, max_attempts, next_attempt_at, created_at, updated_at)
                 SELECT herald_uuid_v7(), tenant_uuid, operation_key, channel, recipient, '\x',
                     0, due_ms, qkey, cost, 'pending', s.attempts, coalesce(due, now()), now(),
                     now()
                 FROM s
                 WHERE s.granted AND s.known AND s.attempts IS NOT NULL
                   AND (cost = 0 OR EXISTS (SELECT 1 FROM q))
                 ON CONFLICT ON CONSTRAINT deliveries_identity DO NOTHING
                 RETURNING d.id),
             p AS (INSERT INTO delivery_payloads (delivery_id, payload)
                   SELECT d.id, payload FROM d),
             a AS (UPDATE quota_accounts a SET available = a.available - cost,
                       reserved = a.reserved + cost, updated_at = now()
                   WHERE cost > 0 AND a.tenant_id = tenant_uuid AND a.quota_key = qkey
                     AND EXISTS (SELECT 1 FROM d)
                   RETURNING 1),
             j AS (INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                       reservation_seq, at)
                   SELECT tenant_uuid, qkey, 'reserve', cost, d.id, 1, now() FROM d, a),
             w AS (UPDATE herald_wake w SET at = clock_timestamp()
                   WHERE w.id = (SELECT v.id FROM herald_wake v
                                 WHERE v.id = 1
                                   AND v.at < clock_timestamp() - interval '20 milliseconds'
                                   AND EXISTS (SELECT 1 FROM d)
                                 FOR UPDATE SKIP LOCKED)
                   RETURNING 1)
        SELECT (SELECT d.id FROM d) AS id, EXISTS (SELECT 1 FROM w) AS wake,
               cost = 0 OR EXISTS (SELECT 1 FROM q) AS covered, s.attempts, s.granted, s.known
          INTO claim FROM s;
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
           AND d.operation_key = herald_submit_v1.operation_key
           AND d.channel = herald_submit_v1.channel;
        IF FOUND THEN
            -- The same request compares equal field by field, in any version; a payload
            -- of other text may still mean the same JSON.
            same := existing.recipient = recipient AND existing.quota_key = qkey
                    AND existing.cost = cost;
            IF same AND existing.payload <> payload THEN
                canonical := coalesce(canonical,
                                      (herald_payload_canonical(payload)).canonical);
            END IF;
            IF existing.fingerprint_version = 0 THEN
                same := same AND existing.max_attempts = claim.attempts
                        AND existing.fingerprint_send_at_ms IS NOT DISTINCT FROM due_ms
                        AND (existing.payload = payload
                             OR (herald_payload_canonical(existing.payload)).canonical
                                = canonical);
            ELSIF existing.fingerprint_version = 2 THEN
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
                same := same AND (herald_submit_v1.max_attempts IS NULL
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
            status := 'quota_exhausted'; RETURN;
        END IF;
        -- The row the claim ran into was deleted before it could be read (retention):
        -- claim again.
    END LOOP;
    RAISE EXCEPTION 'the delivery with this identity was deleted each time it was about to be read';
END $$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION herald_submit_v1(text, text, text, text, text, text, bigint, text, integer) '
                   'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END $$;
