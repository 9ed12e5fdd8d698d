-- The fingerprint (version 2, ARCHITECTURE.md "The fingerprint") in SQL, the first part
-- of the SQL API: an application's transaction will claim through SQL, and a request
-- submitted through SQL and again over HTTP must have one fingerprint. These functions
-- reproduce herald_core::json and herald_core::fingerprint; the golden vectors
-- (testdata/fingerprint-vectors.json) test both.
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

-- Raises HJ001 with the problem's code (herald_core::json::Problem::code) as the message.
CREATE FUNCTION herald_json_problem(code text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'HJ001', MESSAGE = code;
END $$;

-- The string tokens of a JSON text hold a lone surrogate escape (escaped backslashes taken
-- out first, then every valid high-low pair).
CREATE FUNCTION herald_json_has_lone_surrogate(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT regexp_replace(
               regexp_replace(t, '\\\\', '', 'g'),
               '\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}', '', 'g')
           ~ '\\u[dD][89a-fA-F][0-9a-fA-F]{2}'
$$;

-- The canonical text of the JSON value `j` at nesting `depth` (0 at the top).
CREATE FUNCTION herald_json_canonical(j json, depth int) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    kind text := json_typeof(j);
    literal text;
    n numeric;
    integer_digits int;
    result text;
BEGIN
    IF kind IN ('object', 'array') AND depth + 1 > 32 THEN
        PERFORM herald_json_problem('too_deep');
    END IF;
    IF kind = 'object' THEN
        IF (SELECT count(*) <> count(DISTINCT key COLLATE "C") FROM json_each(j)) THEN
            PERFORM herald_json_problem('duplicate_key');
        END IF;
        SELECT coalesce(string_agg(herald_json_string(key) || ':'
                                       || herald_json_canonical(value, depth + 1),
                                   ',' ORDER BY key COLLATE "C"), '')
          INTO result FROM json_each(j);
        RETURN '{' || result || '}';
    ELSIF kind = 'array' THEN
        SELECT coalesce(string_agg(herald_json_canonical(value, depth + 1), ',' ORDER BY i), '')
          INTO result FROM json_array_elements(j) WITH ORDINALITY AS e(value, i);
        RETURN '[' || result || ']';
    ELSIF kind = 'string' THEN
        RETURN herald_json_string(j #>> '{}');
    ELSIF kind = 'number' THEN
        literal := j::text;
        BEGIN
            n := trim_scale(literal::numeric);
        EXCEPTION WHEN numeric_value_out_of_range OR program_limit_exceeded THEN
            -- Beyond numeric's range: past either limit by far.
            IF literal ~ '^-?0(\.0+)?([eE].*)?$' THEN
                RETURN '0';
            ELSIF literal ~ '[eE]-' THEN
                PERFORM herald_json_problem('number_too_precise');
            ELSE
                PERFORM herald_json_problem('number_too_large');
            END IF;
        END;
        IF n = 0 THEN
            RETURN '0';
        END IF;
        integer_digits := CASE WHEN abs(n) >= 1 THEN length(trunc(abs(n))::text) ELSE 0 END;
        IF integer_digits > 35 THEN
            PERFORM herald_json_problem('number_too_large');
        ELSIF scale(n) > 30 THEN
            PERFORM herald_json_problem('number_too_precise');
        END IF;
        RETURN n::text;
    ELSE
        RETURN j::text; -- true, false, null
    END IF;
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
    BEGIN
        canonical := herald_json_canonical(j, 0);
    EXCEPTION WHEN SQLSTATE 'HJ001' THEN
        problem := SQLERRM;
    END;
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
