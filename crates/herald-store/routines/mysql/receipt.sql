-- MariaDB only. The SQL API's receipt: `CALL herald.receipt_v1(…)`.
--
-- This file is the routine's one home: `herald migrate` runs it again whenever its text
-- changes (herald_store::routines). The history of earlier texts is in the migrations.

-- Records that the operation `p_operation_id` of `p_scope` was applied, inside the caller's
-- transaction: `applied` the first time (the caller then applies it, in the same
-- transaction), `duplicate` after (it was applied before: skip it), `invalid` with the
-- field and code. A concurrent call of the same receipt waits for the first to end and
-- answers what it did. Never raises but for concurrency errors, like submit_v1.
CREATE OR REPLACE PROCEDURE receipt_v1(
    IN b_scope LONGBLOB, IN b_operation_id LONGBLOB,
    OUT p_status VARCHAR(16), OUT p_field VARCHAR(32), OUT p_code VARCHAR(32))
MODIFIES SQL DATA SQL SECURITY DEFINER
receipt: BEGIN
    DECLARE p_scope LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
    DECLARE p_operation_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
    DECLARE EXIT HANDLER FOR 1062 SET p_status = 'duplicate';
    SET p_status = 'invalid', p_field = NULL;
    -- Bytes that are not UTF-8 are `not_utf8`, as in submit_v1.
    SET p_code = herald_utf8_problem(b_scope);
    IF p_code IS NOT NULL THEN SET p_field = 'scope'; LEAVE receipt; END IF;
    SET p_code = herald_utf8_problem(b_operation_id);
    IF p_code IS NOT NULL THEN SET p_field = 'operation_id'; LEAVE receipt; END IF;
    SET p_scope = CONVERT(b_scope USING utf8mb4),
        p_operation_id = CONVERT(b_operation_id USING utf8mb4);
    SET p_code = herald_text_problem(p_scope, 200);
    IF p_code IS NOT NULL THEN SET p_field = 'scope'; LEAVE receipt; END IF;
    SET p_code = herald_text_problem(p_operation_id, 255);
    IF p_code IS NOT NULL THEN SET p_field = 'operation_id'; LEAVE receipt; END IF;
    INSERT INTO receipts (scope, operation_id, created_at)
        VALUES (p_scope, p_operation_id, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
    SET p_status = 'applied';
END;
