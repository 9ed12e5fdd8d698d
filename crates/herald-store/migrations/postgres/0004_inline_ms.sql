-- herald schema 4 (PostgreSQL): herald_ms() is declared STABLE, as its body is.
-- extract(epoch FROM timestamptz) is a STABLE function, and PostgreSQL inlines an SQL
-- function only when its body is no more volatile than the function says it is: declared
-- IMMUTABLE, herald_ms was never inlined, so every call ran as a separate SQL function —
-- its body parsed and planned again in every statement that used it (twice per claim,
-- several times per leased row). Inlined, it is the expression itself. Same result, same
-- signature; nothing indexes it.

CREATE OR REPLACE FUNCTION herald_ms(ts timestamptz) RETURNS bigint
    LANGUAGE sql STABLE AS $$ SELECT (extract(epoch FROM ts) * 1000)::bigint $$;
