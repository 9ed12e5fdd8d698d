-- Two corrections to the SQL API of migration 6, found beside MariaDB's.
--
-- Nesting is limited to 31 levels of arrays and objects, not 32 (herald_core's
-- JSON_DEPTH_MAX): MariaDB's JSON functions, with which its SQL API computes the same
-- canonical form, refuse a 32nd level. Only the limit changes; every canonical text within
-- it stays what it was.
--
-- herald_submit_v1 reads `send_at` as RFC 3339 only, as the HTTP API and MariaDB's
-- submit_v1 do (PostgreSQL's parser took `tomorrow` too), and compares a version-1 row
-- whose repeat leaves max_attempts out with the row's own value, as herald's own repeat
-- does. The function is declared again whole (a migration never edits an earlier one).

-- The canonical text of the JSON value `j` at nesting `depth` (0 at the top), or a
-- problem (herald_json_problem).
CREATE OR REPLACE FUNCTION herald_json_canonical(j json, depth int) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    kind text := json_typeof(j);
    literal text;
    n numeric;
    integer_digits int;
    unique_keys boolean;
    result text;
BEGIN
    IF kind IN ('object', 'array') AND depth + 1 > 31 THEN
        RETURN herald_json_problem('too_deep');
    END IF;
    IF kind = 'object' THEN
        SELECT count(*) = count(DISTINCT key COLLATE "C"),
               coalesce(string_agg(herald_json_string(key) || ':'
                                       || herald_json_canonical(value, depth + 1),
                                   ',' ORDER BY key COLLATE "C"), '')
          INTO unique_keys, result FROM json_each(j);
        IF NOT unique_keys THEN
            RETURN herald_json_problem('duplicate_key');
        END IF;
        result := '{' || result || '}';
    ELSIF kind = 'array' THEN
        SELECT coalesce(string_agg(herald_json_canonical(value, depth + 1), ',' ORDER BY i), '')
          INTO result FROM json_array_elements(j) WITH ORDINALITY AS e(value, i);
        result := '[' || result || ']';
    ELSIF kind = 'string' THEN
        RETURN herald_json_string(j #>> '{}');
    ELSIF kind = 'number' THEN
        literal := j::text;
        IF literal !~ '[eE]' AND length(literal) < 1000 THEN
            n := trim_scale(literal::numeric); -- within numeric's range: no error possible
        ELSE
            BEGIN
                n := trim_scale(literal::numeric);
            EXCEPTION WHEN numeric_value_out_of_range OR program_limit_exceeded THEN
                -- Beyond numeric's range: past either limit by far.
                IF literal ~ '^-?0(\.0+)?([eE].*)?$' THEN
                    RETURN '0';
                ELSIF literal ~ '[eE]-' THEN
                    RETURN herald_json_problem('number_too_precise');
                ELSE
                    RETURN herald_json_problem('number_too_large');
                END IF;
            END;
        END IF;
        IF n = 0 THEN
            RETURN '0';
        END IF;
        integer_digits := CASE WHEN abs(n) >= 1 THEN length(trunc(abs(n))::text) ELSE 0 END;
        IF integer_digits > 35 THEN
            RETURN herald_json_problem('number_too_large');
        ELSIF scale(n) > 30 THEN
            RETURN herald_json_problem('number_too_precise');
        END IF;
        RETURN n::text;
    ELSE
        RETURN j::text; -- true, false, null
    END IF;
    -- A problem below this object or array: the first one in the text, passed up.
    IF position(chr(1) IN result) > 0 THEN
        RETURN chr(1) || split_part(split_part(result, chr(1), 2), chr(2), 1) || chr(2);
    END IF;
    RETURN result;
END $$;

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
    attempts integer := max_attempts;
    parsed record;
    print bytea;
    covered boolean;
    granted boolean;
    tenant_known boolean;
    existing record;
    id uuid;
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
    -- One query for what the database knows: the shared max_attempts, the tenant wall
    -- (the session's role, since the function runs with herald's rights, must have been
    -- granted this tenant or every tenant), the tenant.
    SELECT coalesce(attempts, (SELECT s.max_attempts FROM herald_settings s WHERE s.id = 1)),
           EXISTS (SELECT 1 FROM herald_sql_grants g
                   WHERE g.role_name = session_user
                     AND (g.tenant_id IS NULL OR g.tenant_id = tenant_uuid)),
           EXISTS (SELECT 1 FROM tenants t WHERE t.id = tenant_uuid)
      INTO attempts, granted, tenant_known;
    IF attempts IS NULL THEN
        -- No herald process has started on this database yet: the build's default.
        INSERT INTO herald_settings (id, max_attempts) VALUES (1, 8) ON CONFLICT DO NOTHING;
        SELECT s.max_attempts INTO attempts FROM herald_settings s WHERE s.id = 1;
    END IF;
    IF attempts NOT BETWEEN 1 AND 100 THEN
        status := 'invalid'; field := 'max_attempts'; code := 'out_of_range'; RETURN;
    END IF;
    IF payload IS NULL THEN
        status := 'invalid'; field := 'payload'; code := 'empty'; RETURN;
    END IF;
    IF octet_length(payload) > 65536 THEN
        status := 'invalid'; field := 'payload'; code := 'too_long'; RETURN;
    END IF;
    SELECT * INTO parsed FROM herald_payload_canonical(payload);
    IF parsed.problem IS NOT NULL THEN
        status := 'invalid'; field := 'payload'; code := parsed.problem; RETURN;
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
        IF herald_ms(due) NOT BETWEEN 0 AND 253402128000000 THEN
            status := 'invalid'; field := 'send_at'; code := 'out_of_range'; RETURN;
        END IF;
    END IF;
    print := herald_fingerprint_v2(channel, recipient, parsed.canonical, qkey, cost,
                                   herald_ms(due), attempts);
    code := NULL;

    IF NOT granted THEN
        status := 'invalid'; field := 'tenant'; code := 'not_granted'; RETURN;
    END IF;
    IF NOT tenant_known THEN
        status := 'invalid'; field := 'tenant'; code := 'unknown_tenant'; RETURN;
    END IF;
    -- The claim, one statement as the library's: the account row locked first (if it
    -- covers the cost), then the identity inserted, its payload, the reservation and its
    -- journal row.
    FOR round IN 1..3 LOOP
        WITH q AS (
                 SELECT 1 FROM quota_accounts a
                 WHERE cost > 0 AND a.tenant_id = tenant_uuid AND a.quota_key = qkey
                   AND a.available >= cost
                 FOR UPDATE),
             d AS (
                 INSERT INTO deliveries AS d (id, tenant_id, operation_key, channel, recipient,
                     fingerprint, fingerprint_version, quota_key, cost, state, max_attempts,
                     next_attempt_at, created_at, updated_at)
                 SELECT herald_uuid_v7(), tenant_uuid, operation_key, channel, recipient, print,
                     2, qkey, cost, 'pending', attempts, coalesce(due, now()), now(), now()
                 WHERE cost = 0 OR EXISTS (SELECT 1 FROM q)
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
                   SELECT tenant_uuid, qkey, 'reserve', cost, d.id, 1, now() FROM d, a)
        SELECT (SELECT d.id FROM d), cost = 0 OR EXISTS (SELECT 1 FROM q) INTO id, covered;
        IF id IS NOT NULL THEN
            PERFORM herald_wake_soon();
            status := 'created'; delivery_id := id; RETURN;
        END IF;
        SELECT d.id, d.fingerprint, d.fingerprint_version, d.channel, d.recipient, d.quota_key,
               d.cost, d.max_attempts, p.payload
          INTO existing
          FROM deliveries d JOIN delivery_payloads p ON p.delivery_id = d.id
         WHERE d.tenant_id = tenant_uuid
           AND d.operation_key = herald_submit_v1.operation_key
           AND d.channel = herald_submit_v1.channel;
        IF FOUND THEN
            delivery_id := existing.id;
            IF existing.fingerprint_version = 2 THEN
                status := CASE WHEN existing.fingerprint = print THEN 'duplicate' ELSE 'reused' END;
            ELSE
                -- A row from before fingerprint version 2: the same meaning, compared field
                -- by field (version 1's serde_json form has no SQL implementation).
                status := CASE WHEN existing.recipient = recipient AND existing.quota_key = qkey
                                    AND existing.cost = cost
                                    -- Left out: what the submitting process
                                    -- resolved, the row's own (as herald's own repeat).
                                    AND (herald_submit_v1.max_attempts IS NULL
                                         OR existing.max_attempts = attempts)
                                    AND (herald_payload_canonical(existing.payload)).canonical
                                        = parsed.canonical
                               THEN 'duplicate' ELSE 'reused' END;
            END IF;
            IF status = 'reused' THEN
                delivery_id := NULL;
            END IF;
            RETURN;
        END IF;
        IF NOT covered THEN
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
