-- herald schema 22 (PostgreSQL): payloads compressed by LZ4 instead of pglz. A payload over
-- about 2 KiB is compressed when its row is written (TOAST), on the submit's path; pglz
-- took ~22 µs of the server's time for a 4 KiB JSON payload, LZ4 ~5 µs, for rows a sixth
-- larger (895 against 773 bytes), and reading it back on the lease is quicker too
-- (docs/perf.md, "Issue 35: the 4 KiB submit"). Rows written before keep pglz: both read.
-- A server built without LZ4 (`--without-lz4`) keeps pglz and says so.
DO $$
BEGIN
    ALTER TABLE delivery_payloads ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'herald: this PostgreSQL has no LZ4; payloads stay compressed by pglz';
END $$;
