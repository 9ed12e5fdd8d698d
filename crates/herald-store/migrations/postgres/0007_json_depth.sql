-- Nesting is limited to 31 levels of arrays and objects, not 32 (herald_core's
-- JSON_DEPTH_MAX): MariaDB's JSON functions, with which its SQL API computes the same
-- canonical form, refuse a 32nd level. Only the limit changes; every canonical text within
-- it stays what it was.

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
