-- MariaDB only. The SQL API: `CALL herald.submit_v1(…)`, `CALL herald.receipt_v1(…)`.
--
-- The SQL API on MariaDB (SPEC "Any language, inside its own transaction"): an
-- application claims a delivery with its own connection, in its own transaction, by
-- `CALL herald.submit_v1(…)` (herald's database on the application's server), so the
-- claim commits or rolls back with its business change. The PostgreSQL functions'
-- counterpart (postgres/0006_sql_api.sql): the same checks in the same order, the same
-- fingerprint (version 2, ARCHITECTURE.md "The fingerprint"; the golden vectors of
-- testdata/fingerprint-vectors.json test both), the same statuses.
--
-- MySQL's JSON functions keep the last of duplicate keys and rewrite numbers, so the
-- canonical form cannot be computed with them: dialect.rs runs nothing of this file there
-- (its first line says so). Every statement is safe to run again (see 0001_schema.sql). The
-- routines keep the sql_mode they were created with (herald_store::migrate pins it), so a
-- caller's own mode (ANSI_QUOTES, NO_BACKSLASH_ESCAPES) changes nothing in them. Their
-- local names start with `v_` and their parameters with `p_`: in a routine a variable
-- named like a column would win over the column.

-- Which database users may submit for which tenants through SQL (`herald sql grant`): a
-- row with no tenant grants every tenant. A user with no row is refused. `tenant_key`
-- makes "every tenant" one value of the unique key (NULLs never collide).
CREATE TABLE IF NOT EXISTS herald_sql_grants (
    role_name  VARCHAR(80) NOT NULL,
    tenant_id  BINARY(16),
    granted_at BIGINT NOT NULL,
    tenant_key VARBINARY(16) AS (COALESCE(tenant_id, '')) STORED,
    CONSTRAINT herald_sql_grants_one UNIQUE (role_name, tenant_key),
    CONSTRAINT herald_sql_grants_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT herald_sql_grants_role_length CHECK (CHAR_LENGTH(role_name) BETWEEN 1 AND 80)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- A UTF-16 surrogate encoded as if it were a character (see herald_text_problem).
CREATE OR REPLACE FUNCTION herald_has_surrogate(
    p_value LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
) RETURNS BOOLEAN DETERMINISTIC NO SQL
RETURN CAST(p_value AS BINARY) REGEXP '\\xED[\\xA0-\\xBF]';

-- herald's text rules (herald_core's `check_text`): not empty, at most `p_max` bytes, no
-- control character (Unicode Cc). NULL when the value is fine, else the problem's code.
-- MariaDB's utf8mb4 lets a UTF-16 surrogate through in its 3-byte UTF-8 form (ED A0..BF
-- xx), which every REGEXP then refuses with an error: it is found by its bytes first.
CREATE OR REPLACE FUNCTION herald_text_problem(
    p_value LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, p_max INT
) RETURNS VARCHAR(32) DETERMINISTIC NO SQL
RETURN CASE
    WHEN p_value IS NULL OR p_value = '' THEN 'empty'
    WHEN LENGTH(p_value) > p_max THEN 'too_long'
    WHEN herald_has_surrogate(p_value) THEN 'lone_surrogate'
    WHEN p_value REGEXP '[\\x{00}-\\x{1f}\\x{7f}-\\x{9f}]' THEN 'control_character'
END;

-- A JSON string as canonical text: raw UTF-8, only `"`, `\` and U+0001..U+001F escaped,
-- the latter as lowercase \u00xx.
CREATE OR REPLACE FUNCTION herald_json_string(
    p_s LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
) RETURNS LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DETERMINISTIC NO SQL
BEGIN
    DECLARE v_out LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
        DEFAULT REPLACE(REPLACE(p_s, '\\', '\\\\'), '"', '\\"');
    DECLARE v_c INT DEFAULT 1;
    IF v_out REGEXP '[\\x{01}-\\x{1f}]' THEN
        WHILE v_c <= 31 DO
            SET v_out = REPLACE(v_out, CHAR(v_c USING utf8mb4),
                                CONCAT('\\u00', LPAD(LOWER(HEX(v_c)), 2, '0')));
            SET v_c = v_c + 1;
        END WHILE;
    END IF;
    RETURN CONCAT('"', v_out, '"');
END;

-- The exact value of a JSON number in plain notation (herald_core's canonical_number), or
-- `!` and the problem's code: `!syntax` for a literal RFC 8259 refuses (MariaDB's
-- JSON_VALID lets `1.` through), `!number_too_large`, `!number_too_precise`.
CREATE OR REPLACE FUNCTION herald_json_number(p_literal LONGTEXT CHARACTER SET ascii)
RETURNS LONGTEXT CHARACTER SET ascii DETERMINISTIC NO SQL
BEGIN
    DECLARE v_negative BOOLEAN DEFAULT LEFT(p_literal, 1) = '-';
    DECLARE v_body LONGTEXT CHARACTER SET ascii
        DEFAULT IF(LEFT(p_literal, 1) = '-', SUBSTR(p_literal, 2), p_literal);
    DECLARE v_e INT DEFAULT LOCATE('e', LOWER(v_body));
    DECLARE v_mantissa LONGTEXT CHARACTER SET ascii;
    DECLARE v_int LONGTEXT CHARACTER SET ascii;
    DECLARE v_frac LONGTEXT CHARACTER SET ascii DEFAULT '';
    DECLARE v_exp_text LONGTEXT CHARACTER SET ascii DEFAULT '0';
    DECLARE v_exp BIGINT;
    DECLARE v_all LONGTEXT CHARACTER SET ascii;
    DECLARE v_digits LONGTEXT CHARACTER SET ascii;
    DECLARE v_point BIGINT;
    DECLARE v_len BIGINT;
    IF p_literal NOT REGEXP '^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$' THEN
        RETURN '!syntax';
    END IF;
    SET v_mantissa = IF(v_e > 0, LEFT(v_body, v_e - 1), v_body);
    IF v_e > 0 THEN
        SET v_exp_text = SUBSTR(v_body, v_e + 1);
    END IF;
    SET v_int = SUBSTRING_INDEX(v_mantissa, '.', 1);
    IF LOCATE('.', v_mantissa) > 0 THEN
        SET v_frac = SUBSTRING_INDEX(v_mantissa, '.', -1);
    END IF;
    -- Saturated far beyond any exponent a number within the limits can have.
    SET v_exp_text = TRIM(LEADING '+' FROM v_exp_text);
    SET v_exp = IF(LENGTH(TRIM(LEADING '0' FROM TRIM(LEADING '-' FROM v_exp_text))) > 12,
                   IF(LEFT(v_exp_text, 1) = '-', -1099511627776, 1099511627776),
                   CAST(v_exp_text AS SIGNED));
    SET v_all = CONCAT(v_int, v_frac);
    SET v_digits = TRIM(TRAILING '0' FROM TRIM(LEADING '0' FROM v_all));
    IF v_digits = '' THEN
        RETURN '0';
    END IF;
    -- The decimal point sits v_point digits into v_digits.
    SET v_point = LENGTH(v_int) + v_exp - (LENGTH(v_all) - LENGTH(TRIM(LEADING '0' FROM v_all)));
    SET v_len = LENGTH(v_digits);
    IF GREATEST(v_point, 0) > 35 THEN
        RETURN '!number_too_large';
    ELSEIF GREATEST(v_len - v_point, 0) > 30 THEN
        RETURN '!number_too_precise';
    END IF;
    RETURN CONCAT(IF(v_negative, '-', ''),
        CASE
            WHEN v_point >= v_len THEN CONCAT(v_digits, REPEAT('0', v_point - v_len))
            WHEN v_point <= 0 THEN CONCAT('0.', REPEAT('0', -v_point), v_digits)
            ELSE CONCAT(LEFT(v_digits, v_point), '.', SUBSTR(v_digits, v_point + 1))
        END);
END;

-- The canonical text of the JSON value `p_j` (as MariaDB's JSON functions print a value:
-- every number's text as written), or the problem that makes it invalid. A loop, not a
-- recursion: each recursive CALL takes about 6 KiB of the server's thread stack, and the
-- default stack (299,008 bytes) runs out before 31 levels. The open container is in the
-- `f_` variables; those it is nested in are suspended in the `s_` stacks, one field per
-- stack, newest last, separated by CHAR(1) (which no JSON text from MariaDB holds: a raw
-- control character is invalid in a string, and canonical text escapes it).
--
-- A container's members are read one by one with JSON_EXTRACT(…, '$[i]'), which parses
-- the container up to member i; past LISTED_FROM (64) members that is quadratic (an
-- array of 32,767 numbers took 32 s), so a bigger container is read once, by JSON_TABLE,
-- into a list (`f_list`, bytes, members separated by CHAR(26); an object's each as its
-- canonical key, CHAR(2), its value) that is then consumed from `f_pos` on.
CREATE OR REPLACE PROCEDURE herald_json_canonical(
    IN p_j LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    OUT p_canonical LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    OUT p_problem VARCHAR(32))
DETERMINISTIC READS SQL DATA
walk: BEGIN
    DECLARE v_sep CHAR(1) CHARACTER SET utf8mb4 DEFAULT CHAR(1 USING utf8mb4);
    -- The value to canonicalize next, and the canonical text of the one just done.
    DECLARE v_cur LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT p_j;
    DECLARE v_result LONGBLOB;
    DECLARE v_kind VARCHAR(16);
    DECLARE v_n INT;
    DECLARE v_at INT;
    DECLARE v_end BIGINT;
    DECLARE v_entry LONGBLOB;
    DECLARE v_unique BOOLEAN;
    DECLARE v_number LONGTEXT CHARACTER SET ascii;
    DECLARE v_depth INT DEFAULT 0;
    -- The open container: its kind (`O`, `A`); read by index: its members' values as a
    -- JSON array (`f_src`), an object's keys (JSON_KEYS) and their sorted order (1-based
    -- positions); listed: `f_list` and the position of its next member (`f_pos` > 0);
    -- how many members, how many are done, the canonical key of the member under way,
    -- the members' canonical text so far.
    DECLARE f_kind CHAR(1) CHARACTER SET utf8mb4 DEFAULT '';
    DECLARE f_src LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '';
    DECLARE f_names LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '';
    DECLARE f_order LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '';
    DECLARE f_list LONGBLOB DEFAULT '';
    DECLARE f_pos BIGINT DEFAULT 0;
    DECLARE f_n INT DEFAULT 0;
    DECLARE f_i INT DEFAULT 0;
    DECLARE f_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '';
    -- Bytes, not text: appending to a text variable checks the whole text again.
    DECLARE f_acc LONGBLOB DEFAULT '';
    DECLARE s_kind, s_src, s_names, s_order, s_n, s_i, s_key, s_pos
        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '';
    DECLARE s_list, s_acc LONGBLOB DEFAULT '';
    SET p_canonical = NULL, p_problem = NULL;
    value: LOOP
        SET v_kind = JSON_TYPE(v_cur), v_result = NULL;
        IF v_kind IN ('OBJECT', 'ARRAY') THEN
            IF v_depth + 1 > 31 THEN
                SET p_problem = 'too_deep';
                LEAVE walk;
            END IF;
            SET v_n = JSON_LENGTH(v_cur);
            IF v_n = 0 THEN
                SET v_result = IF(v_kind = 'OBJECT', '{}', '[]');
            ELSE
                IF v_depth > 0 THEN
                    SET s_kind = CONCAT(s_kind, v_sep, f_kind),
                        s_src = CONCAT(s_src, v_sep, f_src),
                        s_names = CONCAT(s_names, v_sep, f_names),
                        s_order = CONCAT(s_order, v_sep, f_order),
                        s_list = CONCAT(s_list, CHAR(1), SUBSTRING(f_list, GREATEST(f_pos, 1))),
                        s_pos = CONCAT(s_pos, v_sep, IF(f_pos > 0, 1, 0)),
                        s_n = CONCAT(s_n, v_sep, f_n),
                        s_i = CONCAT(s_i, v_sep, f_i),
                        s_key = CONCAT(s_key, v_sep, f_key),
                        s_acc = CONCAT(s_acc, CHAR(1), f_acc);
                END IF;
                SET v_depth = v_depth + 1, f_n = v_n, f_i = 0, f_acc = '',
                    f_src = '', f_names = '', f_order = '', f_list = '', f_pos = 0;
                IF v_kind = 'OBJECT' THEN
                    -- JSON_KEYS drops a key written twice alike; JSON_LENGTH counts both.
                    SET f_kind = 'O', f_names = JSON_KEYS(v_cur);
                    IF JSON_LENGTH(f_names) <> v_n THEN
                        SET p_problem = 'duplicate_key';
                        LEAVE walk;
                    END IF;
                    -- Unescaped (`"a"` and `"\u0061"` are one key), sorted by UTF-8 bytes.
                    -- A LONGTEXT column sends the sort to a temporary table on disk (650 µs
                    -- a query, measured; 20 µs as VARCHAR): only keys too long for the
                    -- VARCHAR take it, and big objects, which are read once.
                    IF v_n > 64 THEN
                        SELECT COUNT(*) = COUNT(DISTINCT k.k),
                               CAST(GROUP_CONCAT(CONCAT(herald_json_string(k.k), CHAR(2 USING utf8mb4), v.v)
                                                 ORDER BY k.k SEPARATOR '\Z') AS BINARY)
                          INTO v_unique, f_list
                          FROM JSON_TABLE(f_names, '$[*]' COLUMNS (
                                   i FOR ORDINALITY,
                                   k LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin
                                     PATH '$')) k
                          JOIN JSON_TABLE(v_cur, '$.*' COLUMNS (
                                   i FOR ORDINALITY, v JSON PATH '$')) v ON v.i = k.i;
                        SET f_pos = 1;
                    ELSEIF CHAR_LENGTH(f_names) <= 1000 THEN
                        SELECT COUNT(*) = COUNT(DISTINCT k), GROUP_CONCAT(i ORDER BY k SEPARATOR ',')
                          INTO v_unique, f_order
                          FROM JSON_TABLE(f_names, '$[*]' COLUMNS (
                                   i FOR ORDINALITY,
                                   k VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin
                                     PATH '$')) t;
                    ELSE
                        SELECT COUNT(*) = COUNT(DISTINCT k), GROUP_CONCAT(i ORDER BY k SEPARATOR ',')
                          INTO v_unique, f_order
                          FROM JSON_TABLE(f_names, '$[*]' COLUMNS (
                                   i FOR ORDINALITY,
                                   k LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin
                                     PATH '$')) t;
                    END IF;
                    IF NOT v_unique THEN
                        SET p_problem = 'duplicate_key';
                        LEAVE walk;
                    END IF;
                    IF f_pos = 0 THEN
                        SET f_src = JSON_EXTRACT(v_cur, '$.*');
                    END IF;
                ELSE
                    SET f_kind = 'A';
                    IF v_n > 64 THEN
                        SELECT CAST(GROUP_CONCAT(v SEPARATOR '\Z') AS BINARY) INTO f_list
                          FROM JSON_TABLE(v_cur, '$[*]' COLUMNS (v JSON PATH '$')) t;
                        SET f_pos = 1;
                    ELSE
                        SET f_src = v_cur;
                    END IF;
                END IF;
            END IF;
        ELSEIF v_kind = 'STRING' THEN
            SET v_result = herald_json_string(JSON_UNQUOTE(v_cur));
        ELSEIF v_kind IN ('BOOLEAN', 'NULL') THEN
            SET v_result = TRIM(v_cur);
        ELSE
            SET v_number = TRIM(v_cur);
            -- An integer within the limits is its own canonical text (the common case,
            -- without the call).
            IF v_number NOT REGEXP '^(0|-?[1-9][0-9]{0,34})$' THEN
                SET v_number = herald_json_number(v_number);
            END IF;
            IF LEFT(v_number, 1) = '!' THEN
                SET p_problem = SUBSTR(v_number, 2);
                LEAVE walk;
            END IF;
            SET v_result = v_number;
        END IF;
        -- Hand the finished value to the open containers; start the next member.
        done: LOOP
            IF v_result IS NOT NULL THEN
                IF v_depth = 0 THEN
                    SET p_canonical = CONVERT(v_result USING utf8mb4);
                    LEAVE walk;
                END IF;
                SET f_acc = CONCAT(f_acc, IF(f_i > 0, ',', ''),
                                   IF(f_kind = 'O', CONCAT(f_key, ':'), ''), v_result);
                SET f_i = f_i + 1;
            END IF;
            IF f_i < f_n THEN
                IF f_pos > 0 THEN
                    SET v_end = LOCATE(X'1A', f_list, f_pos);
                    IF v_end = 0 THEN
                        SET v_end = LENGTH(f_list) + 1;
                    END IF;
                    SET v_entry = SUBSTRING(f_list, f_pos, v_end - f_pos), f_pos = v_end + 1;
                    IF f_kind = 'O' THEN
                        SET v_end = LOCATE(X'02', v_entry);
                        SET f_key = CONVERT(LEFT(v_entry, v_end - 1) USING utf8mb4),
                            v_cur = CONVERT(SUBSTRING(v_entry, v_end + 1) USING utf8mb4);
                    ELSE
                        SET v_cur = CONVERT(v_entry USING utf8mb4);
                    END IF;
                ELSE
                    IF f_kind = 'O' THEN
                        SET v_at = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(f_order, ',', f_i + 1), ',', -1)
                                        AS SIGNED) - 1;
                        SET f_key = herald_json_string(JSON_UNQUOTE(
                            JSON_EXTRACT(f_names, CONCAT('$[', v_at, ']'))));
                    ELSE
                        SET v_at = f_i;
                    END IF;
                    SET v_cur = JSON_EXTRACT(f_src, CONCAT('$[', v_at, ']'));
                END IF;
                ITERATE value;
            END IF;
            SET v_result = IF(f_kind = 'O', CONCAT('{', f_acc, '}'), CONCAT('[', f_acc, ']'));
            SET v_depth = v_depth - 1;
            IF v_depth > 0 THEN
                SET f_kind = SUBSTRING_INDEX(s_kind, v_sep, -1),
                    s_kind = LEFT(s_kind, CHAR_LENGTH(s_kind) - CHAR_LENGTH(f_kind) - 1),
                    f_src = SUBSTRING_INDEX(s_src, v_sep, -1),
                    s_src = LEFT(s_src, CHAR_LENGTH(s_src) - CHAR_LENGTH(f_src) - 1),
                    f_names = SUBSTRING_INDEX(s_names, v_sep, -1),
                    s_names = LEFT(s_names, CHAR_LENGTH(s_names) - CHAR_LENGTH(f_names) - 1),
                    f_order = SUBSTRING_INDEX(s_order, v_sep, -1),
                    s_order = LEFT(s_order, CHAR_LENGTH(s_order) - CHAR_LENGTH(f_order) - 1),
                    f_list = SUBSTRING_INDEX(s_list, CHAR(1), -1),
                    s_list = LEFT(s_list, LENGTH(s_list) - LENGTH(f_list) - 1),
                    f_pos = CAST(SUBSTRING_INDEX(s_pos, v_sep, -1) AS SIGNED),
                    s_pos = LEFT(s_pos, CHAR_LENGTH(s_pos) - 2),
                    f_n = CAST(SUBSTRING_INDEX(s_n, v_sep, -1) AS SIGNED),
                    s_n = LEFT(s_n, CHAR_LENGTH(s_n) - CHAR_LENGTH(SUBSTRING_INDEX(s_n, v_sep, -1)) - 1),
                    f_i = CAST(SUBSTRING_INDEX(s_i, v_sep, -1) AS SIGNED),
                    s_i = LEFT(s_i, CHAR_LENGTH(s_i) - CHAR_LENGTH(SUBSTRING_INDEX(s_i, v_sep, -1)) - 1),
                    f_key = SUBSTRING_INDEX(s_key, v_sep, -1),
                    s_key = LEFT(s_key, CHAR_LENGTH(s_key) - CHAR_LENGTH(f_key) - 1),
                    f_acc = SUBSTRING_INDEX(s_acc, CHAR(1), -1),
                    s_acc = LEFT(s_acc, LENGTH(s_acc) - LENGTH(f_acc) - 1);
            END IF;
        END LOOP;
    END LOOP;
END;

-- The canonical text of a payload, or the problem that makes it invalid (never raises).
-- MariaDB's JSON_VALID does the parsing; its verdicts are sharpened to herald's: what it
-- refuses is told apart (a raw control character or a lone surrogate inside a string,
-- nesting past 31, any other syntax error) and what it lets through that RFC 8259 does
-- not (an unknown escape, `1.`) is refused.
CREATE OR REPLACE PROCEDURE herald_payload_canonical(
    IN p_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    OUT p_canonical LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    OUT p_problem VARCHAR(32))
DETERMINISTIC READS SQL DATA
payload: BEGIN
    -- The text of every string token (each followed by a space), escaped backslashes out.
    DECLARE v_strings LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_brackets LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_before LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_levels INT DEFAULT 0;
    DECLARE v_concat_max BIGINT UNSIGNED DEFAULT @@group_concat_max_len;
    -- A safety net: whatever MariaDB's JSON functions refuse of what JSON_VALID let
    -- through is a syntax error of the payload, never an error raised in the caller's
    -- transaction (nothing here touches a table, so no concurrency error is caught).
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        SET SESSION group_concat_max_len = v_concat_max;
        SET p_canonical = NULL, p_problem = 'syntax';
    END;
    SET p_canonical = NULL, p_problem = NULL;
    IF herald_has_surrogate(p_payload) THEN
        SET p_problem = 'lone_surrogate';
        LEAVE payload;
    END IF;
    SET v_strings = REPLACE(
        REGEXP_REPLACE(p_payload, '(?s)"((?:[^"\\\\]|\\\\.)*)"?|.', '\\1 '), '\\\\', '');
    -- A raw control character in a string (JSON_VALID lets a tab or a newline through at
    -- the start of a key).
    IF v_strings REGEXP '[\\x{00}-\\x{1f}]' THEN
        SET p_problem = 'control_character';
    ELSEIF NOT JSON_VALID(p_payload) THEN
        IF REGEXP_REPLACE(v_strings, '\\\\u[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}', '')
               REGEXP '\\\\u[dD][89a-fA-F][0-9a-fA-F]{2}' THEN
            SET p_problem = 'lone_surrogate';
        ELSE
            -- Nesting past 31 levels: innermost pairs of brackets taken out, level by
            -- level, 32 times over.
            SET v_brackets = REGEXP_REPLACE(
                REGEXP_REPLACE(p_payload, '(?s)"(?:[^"\\\\]|\\\\.)*"', ''), '[^\\[\\]{}]', '');
            REPEAT
                SET v_before = v_brackets;
                SET v_brackets = REGEXP_REPLACE(v_brackets, '\\[\\]|\\{\\}', '');
                SET v_levels = v_levels + 1;
            UNTIL v_brackets = v_before OR v_levels > 32 END REPEAT;
            SET p_problem = IF(v_levels > 32, 'too_deep', 'syntax');
        END IF;
    ELSEIF v_strings REGEXP '\\\\([^"\\\\/bfnrtu]|u(?![0-9a-fA-F]{4}))'
        -- A number with no digit after its point or exponent (`1.`, `[1e]`), outside strings.
        OR REGEXP_REPLACE(p_payload, '(?s)"(?:[^"\\\\]|\\\\.)*"', '""')
           REGEXP '[0-9](\\.(?![0-9])|[eE](?![+-]?[0-9]))' THEN
        SET p_problem = 'syntax';
    ELSEIF v_strings REGEXP '\\\\u0000' THEN
        SET p_problem = 'nul';
    ELSE
        SET SESSION group_concat_max_len = 4294967295;
        CALL herald_json_canonical(JSON_EXTRACT(p_payload, '$'), p_canonical, p_problem);
        SET SESSION group_concat_max_len = v_concat_max;
    END IF;
END;

-- The fingerprint of a request whose defaults are resolved, its payload already in
-- canonical text: SHA-256 of the canonical envelope.
CREATE OR REPLACE FUNCTION herald_fingerprint_v2(
    p_channel LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    p_recipient LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    p_payload_canonical LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    p_quota_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    p_cost BIGINT, p_send_at_ms BIGINT, p_max_attempts INT
) RETURNS BINARY(32) DETERMINISTIC NO SQL
RETURN UNHEX(SHA2(CONCAT(
    '{"channel":', herald_json_string(p_channel),
    ',"cost":', p_cost,
    ',"max_attempts":', p_max_attempts,
    ',"payload":', p_payload_canonical,
    ',"quota_key":', herald_json_string(p_quota_key),
    ',"send_at":', COALESCE(p_send_at_ms, 'null'),
    ',"to":', herald_json_string(p_recipient), '}'), 256));

-- RFC 3339 text (`2026-12-01T10:00:00Z`, `…T10:00:00.250+02:00`) as Unix milliseconds,
-- or NULL when it is not a time.
CREATE OR REPLACE FUNCTION herald_rfc3339_ms(p_text LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
RETURNS BIGINT DETERMINISTIC NO SQL
BEGIN
    DECLARE v_days BIGINT;
    DECLARE v_frac VARCHAR(64) CHARACTER SET utf8mb4;
    DECLARE v_zone VARCHAR(8) CHARACTER SET utf8mb4;
    DECLARE v_offset_min INT DEFAULT 0;
    IF herald_has_surrogate(p_text) THEN
        RETURN NULL;
    END IF;
    IF p_text NOT REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$' THEN
        RETURN NULL;
    END IF;
    -- A leap second (`:60`) is read as :59, as herald's own parser reads it.
    IF SUBSTR(p_text, 12, 2) > '23' OR SUBSTR(p_text, 15, 2) > '59' OR SUBSTR(p_text, 18, 2) > '60' THEN
        RETURN NULL;
    END IF;
    -- NULL for a day that does not exist (`2026-02-30`).
    IF SUBSTR(p_text, 6, 2) NOT BETWEEN '01' AND '12' OR SUBSTR(p_text, 9, 2) < '01'
       OR CAST(SUBSTR(p_text, 9, 2) AS SIGNED)
          > DAY(LAST_DAY(CONCAT(LEFT(p_text, 7), '-01'))) THEN
        RETURN NULL;
    END IF;
    SET v_days = TO_DAYS(CONCAT(LEFT(p_text, 10))) - TO_DAYS('1970-01-01');
    SET v_frac = REGEXP_SUBSTR(p_text, '(?<=:[0-9]{2}\\.)[0-9]+');
    SET v_zone = REGEXP_SUBSTR(p_text, '([Zz]|[+-][0-9]{2}:[0-9]{2})$');
    IF UPPER(v_zone) <> 'Z' THEN
        IF SUBSTR(v_zone, 2, 2) > '23' OR SUBSTR(v_zone, 5, 2) > '59' THEN
            RETURN NULL;
        END IF;
        SET v_offset_min = (CAST(SUBSTR(v_zone, 2, 2) AS SIGNED) * 60 + CAST(SUBSTR(v_zone, 5, 2) AS SIGNED))
                           * IF(LEFT(v_zone, 1) = '-', -1, 1);
    END IF;
    RETURN v_days * 86400000
         + (CAST(SUBSTR(p_text, 12, 2) AS SIGNED) * 3600 + CAST(SUBSTR(p_text, 15, 2) AS SIGNED) * 60
            + LEAST(CAST(SUBSTR(p_text, 18, 2) AS SIGNED), 59)) * 1000
         + CAST(RPAD(COALESCE(v_frac, ''), 3, '0') AS SIGNED) -- milliseconds: RPAD also cuts
         - v_offset_min * 60000;
END;

-- A UUIDv7 (time-ordered, as every delivery id herald makes): 48 bits of Unix
-- milliseconds, the version, random bits, the variant.
CREATE OR REPLACE FUNCTION herald_uuid_v7(p_ms BIGINT) RETURNS BINARY(16) NOT DETERMINISTIC NO SQL
BEGIN
    DECLARE v_random CHAR(20) CHARACTER SET ascii DEFAULT HEX(RANDOM_BYTES(10));
    RETURN UNHEX(CONCAT(LPAD(HEX(p_ms), 12, '0'), '7', SUBSTR(v_random, 1, 3),
                        HEX(8 | (CONV(SUBSTR(v_random, 4, 1), 16, 10) & 3)), SUBSTR(v_random, 5, 15)));
END;

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
-- Versioned by name: a later version with more parameters is `submit_v2`, and a call
-- written against v1 keeps working after every upgrade (MariaDB has neither named
-- parameters nor defaults, so adding one to v1 would break every call).
CREATE OR REPLACE PROCEDURE submit_v1(
    IN p_tenant LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_operation_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
    IN p_channel LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
    IN p_recipient LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
    IN p_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_quota_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
    IN p_cost BIGINT, IN p_send_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_max_attempts INT,
    OUT p_status VARCHAR(16), OUT p_delivery_id CHAR(36), OUT p_field VARCHAR(32),
    OUT p_code VARCHAR(32))
MODIFIES SQL DATA SQL SECURITY DEFINER
submit: BEGIN
    DECLARE v_tenant BINARY(16);
    DECLARE v_quota_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin
        DEFAULT COALESCE(p_quota_key, p_channel);
    DECLARE v_cost BIGINT DEFAULT COALESCE(p_cost, 1);
    DECLARE v_due BIGINT;
    DECLARE v_attempts INT DEFAULT p_max_attempts;
    DECLARE v_canonical LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_problem VARCHAR(32);
    DECLARE v_print BINARY(32);
    DECLARE v_granted BOOLEAN;
    DECLARE v_known BOOLEAN;
    DECLARE v_now BIGINT;
    DECLARE v_available BIGINT;
    DECLARE v_covered BOOLEAN DEFAULT TRUE;
    DECLARE v_own_tx BOOLEAN DEFAULT @@autocommit = 1 AND @@in_transaction = 0;
    DECLARE v_id BINARY(16);
    DECLARE v_existing BINARY(16);
    DECLARE v_existing_print VARBINARY(64);
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
    -- The request's fields, in herald's order.
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
        INSERT INTO herald_settings (id, max_attempts) VALUES (1, 8)
            ON DUPLICATE KEY UPDATE id = id;
        SELECT s.max_attempts INTO v_attempts FROM herald_settings s WHERE s.id = 1;
    END IF;
    IF v_attempts NOT BETWEEN 1 AND 100 THEN
        SET p_field = 'max_attempts', p_code = 'out_of_range';
        LEAVE submit;
    END IF;
    IF p_payload IS NULL THEN
        SET p_field = 'payload', p_code = 'empty';
        LEAVE submit;
    END IF;
    IF LENGTH(p_payload) > 65536 THEN
        SET p_field = 'payload', p_code = 'too_long';
        LEAVE submit;
    END IF;
    CALL herald_payload_canonical(p_payload, v_canonical, v_problem);
    IF v_problem IS NOT NULL THEN
        SET p_field = 'payload', p_code = v_problem;
        LEAVE submit;
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
    SET v_print = herald_fingerprint_v2(p_channel, p_recipient, v_canonical, v_quota_key,
                                        v_cost, v_due, v_attempts);
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
    claim: WHILE v_round < 3 DO
        SET v_round = v_round + 1;
        -- Budget first, then claim, as the library's: the account row locked (a locking
        -- read sees its latest version whatever the isolation) before the identity.
        SET v_now = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);
        IF v_cost > 0 THEN
            SET v_available = NULL;
            SELECT a.available INTO v_available FROM quota_accounts a
             WHERE a.tenant_id = v_tenant AND a.quota_key = v_quota_key FOR UPDATE;
            SET v_covered = COALESCE(v_available >= v_cost, FALSE);
        END IF;
        IF v_covered THEN
            SET v_id = herald_uuid_v7(v_now);
            SAVEPOINT herald_submit_v1_claim;
            BEGIN
                DECLARE v_errno INT;
                DECLARE EXIT HANDLER FOR 1062 SET v_id = NULL;
                -- Any other error undoes the claim's own writes, then goes to the caller
                -- (a deadlock has rolled back the whole transaction: no savepoint left).
                DECLARE EXIT HANDLER FOR SQLEXCEPTION
                BEGIN
                    GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
                    IF v_errno <> 1213 AND @@in_transaction = 1 THEN
                        ROLLBACK TO SAVEPOINT herald_submit_v1_claim;
                    END IF;
                    RESIGNAL;
                END;
                INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                    fingerprint, fingerprint_version, quota_key, cost, state, max_attempts,
                    next_attempt_at, created_at, updated_at)
                VALUES (v_id, v_tenant, p_operation_key, p_channel, p_recipient, v_print, 2,
                    v_quota_key, v_cost, 'pending', v_attempts, COALESCE(v_due, v_now),
                    v_now, v_now);
                INSERT INTO delivery_payloads (delivery_id, payload) VALUES (v_id, p_payload);
                IF v_cost > 0 THEN
                    UPDATE quota_accounts a
                       SET a.available = a.available - v_cost, a.reserved = a.reserved + v_cost,
                           a.updated_at = v_now
                     WHERE a.tenant_id = v_tenant AND a.quota_key = v_quota_key;
                    INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                        reservation_seq, at)
                    VALUES (v_tenant, v_quota_key, 'reserve', v_cost, v_id, 1, v_now);
                END IF;
            END;
            RELEASE SAVEPOINT herald_submit_v1_claim;
            IF v_id IS NOT NULL THEN
                SET p_status = 'created', p_delivery_id = LOWER(INSERT(INSERT(INSERT(INSERT(
                    HEX(v_id), 21, 0, '-'), 17, 0, '-'), 13, 0, '-'), 9, 0, '-'));
                LEAVE claim;
            END IF;
        END IF;
        -- The identity exists (or the quota is short): a locking read finds the latest
        -- committed row under REPEATABLE READ too.
        SET v_existing = NULL;
        -- Every MariaDB row has fingerprint version 2 (the backend began with it).
        SELECT d.id, d.fingerprint INTO v_existing, v_existing_print
          FROM deliveries d
         WHERE d.tenant_id = v_tenant AND d.operation_key = p_operation_key
           AND d.channel = p_channel
          LOCK IN SHARE MODE;
        IF v_existing IS NOT NULL THEN
            IF v_existing_print = v_print THEN
                SET p_status = 'duplicate', p_delivery_id = LOWER(INSERT(INSERT(INSERT(INSERT(
                    HEX(v_existing), 21, 0, '-'), 17, 0, '-'), 13, 0, '-'), 9, 0, '-'));
            ELSE
                SET p_status = 'reused';
            END IF;
            LEAVE claim;
        END IF;
        IF NOT v_covered THEN
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

-- Records that the operation `p_operation_id` of `p_scope` was applied, inside the caller's
-- transaction: `applied` the first time (the caller then applies it, in the same
-- transaction), `duplicate` after (it was applied before: skip it), `invalid` with the
-- field and code. A concurrent call of the same receipt waits for the first to end and
-- answers what it did. Never raises but for concurrency errors, like submit_v1.
CREATE OR REPLACE PROCEDURE receipt_v1(
    IN p_scope LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
    IN p_operation_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin,
    OUT p_status VARCHAR(16), OUT p_field VARCHAR(32), OUT p_code VARCHAR(32))
MODIFIES SQL DATA SQL SECURITY DEFINER
receipt: BEGIN
    DECLARE EXIT HANDLER FOR 1062 SET p_status = 'duplicate';
    SET p_status = 'invalid', p_field = NULL;
    SET p_code = herald_text_problem(p_scope, 200);
    IF p_code IS NOT NULL THEN SET p_field = 'scope'; LEAVE receipt; END IF;
    SET p_code = herald_text_problem(p_operation_id, 255);
    IF p_code IS NOT NULL THEN SET p_field = 'operation_id'; LEAVE receipt; END IF;
    INSERT INTO receipts (scope, operation_id, created_at)
        VALUES (p_scope, p_operation_id, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
    SET p_status = 'applied';
END;
