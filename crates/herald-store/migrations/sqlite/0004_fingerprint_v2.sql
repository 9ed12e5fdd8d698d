-- Fingerprint version 2 (ARCHITECTURE.md, "The fingerprint"). Each delivery keeps the
-- version its fingerprint was computed in, and a repeat is compared in that version:
-- rows written before this migration are version 1, and their requests stay duplicates.
ALTER TABLE deliveries ADD COLUMN fingerprint_version INTEGER NOT NULL DEFAULT 1;

-- The defaults a submit resolves before its fingerprint, shared by every process on this
-- database. Its one row is written by the first herald that opens the database, from that
-- process's HERALD_MAX_ATTEMPTS; `herald settings set` changes it.
CREATE TABLE herald_settings (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    max_attempts INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 100)
);
