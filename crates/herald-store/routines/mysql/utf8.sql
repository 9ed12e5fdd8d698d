-- MariaDB only. `herald_utf8_problem`: whether bytes a caller passed are UTF-8.
--
-- This file is the routine's one home: `herald migrate` runs it again whenever its text
-- changes (herald_store::routines).

-- NULL when `p_bytes` is NULL or UTF-8 text, else `not_utf8`: a cut or overlong sequence,
-- a byte no UTF-8 holds, or a UTF-16 surrogate encoded as if it were a character (ED A0..BF
-- xx), which MariaDB's utf8mb4 lets through but no other face accepts. The SQL API's
-- procedures take their text as bytes and ask this first, so such bytes are answered
-- `invalid`, never raised into the caller's transaction (a LONGTEXT parameter refuses
-- them with error 1366 before the procedure's body runs). The conversion's own error
-- (1300, strict mode) is caught here.
CREATE OR REPLACE FUNCTION herald_utf8_problem(p_bytes LONGBLOB)
RETURNS VARCHAR(32) DETERMINISTIC NO SQL
BEGIN
    DECLARE v_text LONGTEXT CHARACTER SET utf8mb4;
    DECLARE EXIT HANDLER FOR 1300, 1366 RETURN 'not_utf8';
    IF p_bytes IS NULL THEN
        RETURN NULL;
    END IF;
    SET v_text = CONVERT(p_bytes USING utf8mb4);
    IF p_bytes REGEXP '\\xED[\\xA0-\\xBF]' THEN
        RETURN 'not_utf8';
    END IF;
    RETURN NULL;
END;
