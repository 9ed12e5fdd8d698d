-- The SQL API on PostgreSQL (SPEC "Any language, inside its own transaction"): an
-- application claims a delivery with its own connection, in its own transaction, so the
-- claim commits or rolls back with its business change. First the fingerprint (version
-- 2, ARCHITECTURE.md "The fingerprint"): a request submitted through SQL and again over
-- HTTP must have one. These functions reproduce herald_core::json and
-- herald_core::fingerprint; the golden vectors (testdata/fingerprint-vectors.json) test
-- both. Then `herald_submit_v1`.
--
-- PostgreSQL's `json` type does the parsing (RFC 8259; it keeps duplicate keys and every
-- number's text), and the walk below adds herald's rules. When the text does not parse,
-- the string tokens are looked at to tell a raw control character or a lone surrogate
-- from any other syntax error, as herald's own parser tells them.

-- A JSON string as canonical text: raw UTF-8, only `"`, `\` and U+0001..U+001F escaped,
-- the latter as lowercase \u00xx.
CREATE FUNCTION herald_json_string(s text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    out text := replace(replace(s, '\', '\\'), '"', '\"');
    c int;
BEGIN
    IF out ~ '[\x01-\x1f]' THEN
        FOR c IN 1..31 LOOP
            out := replace(out, chr(c), '\u00' || lpad(to_hex(c), 2, '0'));
        END LOOP;
    END IF;
    RETURN '"' || out || '"';
END $$;

-- A problem, as herald_json_canonical returns it: chr(1), the code (herald_core's
-- Problem::code), chr(2). Canonical text never holds a raw chr(1) (it is escaped), so a
-- result holding one is a problem; nothing is raised (a raised error would cost a
-- subtransaction per value to catch).
CREATE FUNCTION herald_json_problem(code text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT chr(1) || code || chr(2) $$;

-- The string tokens of a JSON text hold a lone surrogate escape (escaped backslashes taken
-- out first, then every valid high-low pair).
CREATE FUNCTION herald_json_has_lone_surrogate(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT regexp_replace(
               regexp_replace(t, '\\\\', '', 'g'),
               '\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}', '', 'g')
           ~ '\\u[dD][89a-fA-F][0-9a-fA-F]{2}'
$$;

-- The canonical text of the JSON value `j` at nesting `depth` (0 at the top), or a
-- problem (herald_json_problem).
CREATE FUNCTION herald_json_canonical(j json, depth int) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    kind text := json_typeof(j);
    literal text;
    n numeric;
    integer_digits int;
    unique_keys boolean;
    result text;
BEGIN
    IF kind IN ('object', 'array') AND depth + 1 > 32 THEN
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

-- The canonical text of a payload, or the problem that makes it invalid (never raises).
CREATE FUNCTION herald_payload_canonical(payload text, OUT canonical text, OUT problem text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    j json;
    tokens text;
BEGIN
    BEGIN
        j := payload::json;
    EXCEPTION WHEN invalid_text_representation THEN
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

-- The fingerprint of a request whose defaults are resolved, its payload already in
-- canonical text: SHA-256 of the canonical envelope.
CREATE FUNCTION herald_fingerprint_v2(
    channel text, recipient text, payload_canonical text, quota_key text, cost bigint,
    send_at_ms bigint, max_attempts int
) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT sha256(convert_to(
        '{"channel":' || herald_json_string(channel)
        || ',"cost":' || cost
        || ',"max_attempts":' || max_attempts
        || ',"payload":' || payload_canonical
        || ',"quota_key":' || herald_json_string(quota_key)
        || ',"send_at":' || coalesce(send_at_ms::text, 'null')
        || ',"to":' || herald_json_string(recipient) || '}',
        'UTF8'))
$$;

-- A UUIDv7 (time-ordered, as every delivery id herald makes): the random bits of a v4
-- with the first 48 replaced by the Unix milliseconds and the version set to 7.
CREATE FUNCTION herald_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

-- When an SQL submit last queued a wake-up for the workers (`NOTIFY herald_due`).
-- PostgreSQL serialises the commits of transactions that NOTIFY, so SQL submits, like the
-- library's, coalesce: at most one transaction per 20 ms takes this row (SKIP LOCKED: the
-- others neither wait nor notify) and notifies; a woken worker polls quickly for a while,
-- which finds the rows whose wake-up was coalesced away. UNLOGGED: a lost value after a
-- crash costs one early NOTIFY.
CREATE UNLOGGED TABLE herald_wake (
    id smallint PRIMARY KEY CHECK (id = 1),
    at timestamptz NOT NULL
);
INSERT INTO herald_wake (id, at) VALUES (1, '-infinity');

-- Queues a wake-up for when the caller's transaction commits, unless another transaction
-- did within the last 20 ms or is about to.
CREATE FUNCTION herald_wake_soon() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    -- PL/pgSQL, not SQL: its statement's plan is kept between calls (an SQL function's
    -- data-modifying statement is planned again on every call: 55 µs, measured).
    UPDATE herald_wake w SET at = clock_timestamp()
     WHERE w.id = (SELECT v.id FROM herald_wake v
                    WHERE v.id = 1 AND v.at < clock_timestamp() - interval '20 milliseconds'
                    FOR UPDATE SKIP LOCKED);
    IF FOUND THEN
        PERFORM pg_notify('herald_due', '');
    END IF;
END $$;

-- Which database roles may submit for which tenants through SQL (`herald sql grant`):
-- a row with no tenant grants every tenant. A role with no row is refused.
CREATE TABLE herald_sql_grants (
    role_name  text NOT NULL CHECK (length(role_name) BETWEEN 1 AND 63),
    tenant_id  uuid REFERENCES tenants (id) ON DELETE CASCADE,
    granted_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX herald_sql_grants_tenant ON herald_sql_grants (role_name, tenant_id)
    WHERE tenant_id IS NOT NULL;
CREATE UNIQUE INDEX herald_sql_grants_all ON herald_sql_grants (role_name)
    WHERE tenant_id IS NULL;

-- herald's text rules (herald_core's `check_text`): not empty, at most `max` bytes, no
-- control character (Unicode Cc). NULL when the value is fine, else the problem's code.
CREATE FUNCTION herald_text_problem(value text, max int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN value IS NULL OR value = '' THEN 'empty'
        WHEN octet_length(value) > max THEN 'too_long'
        WHEN value ~ '[\x01-\x1f\x7f-\x9f]' THEN 'control_character'
    END
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
CREATE FUNCTION herald_submit_v1(
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
        BEGIN
            due := send_at::timestamptz;
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
                                    AND existing.max_attempts = attempts
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

-- Records that the operation `operation_id` of `scope` was applied, inside the caller's
-- transaction: `applied` the first time (the caller then applies it, in the same
-- transaction), `duplicate` after (it was applied before: skip it), `invalid` with the
-- field and code. A concurrent call of the same receipt waits for the first to end and
-- answers what it did. Never raises but for concurrency errors, like herald_submit_v1.
CREATE FUNCTION herald_receipt_v1(scope text, operation_id text,
                                  OUT status text, OUT field text, OUT code text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    inserted int;
BEGIN
    code := herald_text_problem(scope, 200);
    IF code IS NOT NULL THEN status := 'invalid'; field := 'scope'; RETURN; END IF;
    code := herald_text_problem(operation_id, 255);
    IF code IS NOT NULL THEN status := 'invalid'; field := 'operation_id'; RETURN; END IF;
    INSERT INTO receipts AS r (scope, operation_id) VALUES (scope, operation_id)
        ON CONFLICT ON CONSTRAINT receipts_pkey DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    status := CASE WHEN inserted = 1 THEN 'applied' ELSE 'duplicate' END;
END $$;

-- The API's calls run with herald's rights, not the caller's: the application's role needs
-- no rights on herald's tables (`herald sql grant` gives it USAGE on this schema and a row
-- above). The search_path is fixed to herald's schema, so a caller's own objects named
-- like herald's are never used. Receipts carry no tenant: any role may record its own.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION herald_submit_v1(text, text, text, text, text, text, bigint, text, integer) '
                   'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION herald_receipt_v1(text, text) '
                   'SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END $$;
