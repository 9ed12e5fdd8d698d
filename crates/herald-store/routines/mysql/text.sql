-- MariaDB only. herald_text_problem, the SQL API's text rule. Its history is migration 2;
-- from here on a change is an edit of this file (herald_store::routines).

-- herald's text rules (herald_core's `ident::check`): not empty, at most `p_max` bytes, no
-- control character (Unicode Cc) nor bidirectional formatting character (U+061C,
-- U+200E, U+200F, U+202A..U+202E, U+2066..U+2069: shown, they reorder the text around
-- them), both answered `control_character`. NULL when the value is fine, else the
-- problem's code. MariaDB's utf8mb4 lets a UTF-16 surrogate through in its 3-byte UTF-8
-- form (ED A0..BF xx), which every REGEXP then refuses with an error: it is found by its
-- bytes first.
CREATE OR REPLACE FUNCTION herald_text_problem(
    p_value LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, p_max INT
) RETURNS VARCHAR(32) DETERMINISTIC NO SQL
RETURN CASE
    WHEN p_value IS NULL OR p_value = '' THEN 'empty'
    WHEN LENGTH(p_value) > p_max THEN 'too_long'
    WHEN herald_has_surrogate(p_value) THEN 'lone_surrogate'
    WHEN p_value REGEXP
        '[\\x{00}-\\x{1f}\\x{7f}-\\x{9f}\\x{061c}\\x{200e}\\x{200f}\\x{202a}-\\x{202e}\\x{2066}-\\x{2069}]'
        THEN 'control_character'
END;
