-- herald_text_problem, the SQL API's text rule (PostgreSQL). Its history is migration 6;
-- from here on a change is an edit of this file (herald_store::routines).

-- herald's text rules (herald_core's `ident::check`): not empty, at most `max` bytes, no
-- control character (Unicode Cc) nor bidirectional formatting character (U+061C,
-- U+200E, U+200F, U+202A..U+202E, U+2066..U+2069: shown, they reorder the text around
-- them, so a key would read as another in a log or on the dashboard), both answered
-- `control_character`. NULL when the value is fine, else the problem's code.
CREATE OR REPLACE FUNCTION herald_text_problem(value text, max int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN value IS NULL OR value = '' THEN 'empty'
        WHEN octet_length(value) > max THEN 'too_long'
        WHEN value ~ '[\x01-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]'
            THEN 'control_character'
    END
$$;
