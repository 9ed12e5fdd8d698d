-- Fingerprint version 2 (ARCHITECTURE.md, "The fingerprint"). Each delivery keeps the
-- version its fingerprint was computed in, and a repeat is compared in that version:
-- rows written before this migration are version 1, and their requests stay duplicates.
ALTER TABLE deliveries ADD COLUMN fingerprint_version smallint NOT NULL DEFAULT 1;

-- Payloads are kept as sent: jsonb rewrote numbers (and sorted keys by length), text
-- keeps every byte. Existing rows keep jsonb's rendering, which is all that is left of
-- them. This rewrites the table once.
ALTER TABLE delivery_payloads ALTER COLUMN payload TYPE text USING payload::text;

-- The defaults a submit resolves before its fingerprint, shared by every process on this
-- database. Its one row is written by the first herald that opens the database, from that
-- process's HERALD_MAX_ATTEMPTS; `herald settings set` changes it.
CREATE TABLE herald_settings (
    id           smallint PRIMARY KEY CHECK (id = 1),
    max_attempts integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100)
);
