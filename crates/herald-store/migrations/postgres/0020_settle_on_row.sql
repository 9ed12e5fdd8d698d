-- herald schema 20 (PostgreSQL): a reservation's final movement lives on its delivery's row
-- (issue 34, point 3; ARCHITECTURE.md, "The ledger's rows on PostgreSQL"). The drain wrote
-- a `commit` row per delivery into quota_movements: a heap tuple, three index entries and
-- a foreign-key probe of the stripe it had just updated. Measured on the drain's own
-- statements (bench/probes/drain-rows/run): about +40 % rows/s and -260 WAL bytes per
-- delivery without it. Now the row carries its current reservation's end beside the
-- reservation: `settle_kind` (commit or release), `settle_id` (its place in the journal's
-- order, from the movements' sequence) and `settled_at`.
--
-- A final movement is a row of quota_movements only for a reservation that is no longer
-- its delivery's current one: a replay writes the settled one out before taking the next,
-- and retention writes it out before deleting the delivery, so nothing of a reservation is
-- lost. One final movement per reservation stays the database's: the current one's is a
-- column written once (the trigger below refuses a second, as 23505), the others' the
-- final rows' unique index.
ALTER TABLE deliveries
    ADD COLUMN settle_kind text,
    ADD COLUMN settle_id bigint,
    ADD COLUMN settled_at timestamptz;

-- The current reservations' final rows move onto their deliveries (the final row is what
-- moved the stripe, so its stripe and reservation id are kept), and leave the table.
UPDATE deliveries d SET settle_kind = f.kind, settle_id = f.id, settled_at = f.at,
    reserve_stripe = f.stripe, reserve_id = f.reserve_id
FROM quota_movements f
WHERE f.kind IN ('commit', 'release') AND f.delivery_id = d.id
  AND f.reservation_seq = d.reservation_seq;
DELETE FROM quota_movements f USING deliveries d
WHERE f.kind IN ('commit', 'release') AND f.delivery_id = d.id
  AND f.reservation_seq = d.reservation_seq;

ALTER TABLE deliveries
    ADD CONSTRAINT deliveries_settle_kind CHECK (settle_kind IN ('commit', 'release')),
    ADD CONSTRAINT deliveries_settle_whole
        CHECK ((settle_kind IS NULL) = (settle_id IS NULL)
               AND (settle_id IS NULL) = (settled_at IS NULL)),
    ADD CONSTRAINT deliveries_settle_of_a_reservation
        CHECK (settle_id IS NULL OR reserve_id IS NOT NULL);

-- A settled reservation is not settled again, and its end is cleared only with the next
-- reservation (a replay, which writes it out first). The WHEN is evaluated in C for every
-- row an UPDATE naming settle_id touches; the function runs only to refuse.
CREATE FUNCTION herald_settle_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reservation % of delivery % has ended already (%)',
        OLD.reservation_seq, OLD.id, OLD.settle_kind
        USING ERRCODE = 'unique_violation', CONSTRAINT = 'deliveries_settle_once';
END
$$;
CREATE TRIGGER deliveries_settle_once
    BEFORE UPDATE OF settle_id ON deliveries
    FOR EACH ROW
    WHEN (OLD.settle_id IS NOT NULL
          AND ((NEW.settle_id IS NOT NULL AND NEW.settle_id <> OLD.settle_id)
               OR (NEW.settle_id IS NULL AND NEW.reserve_id IS NOT DISTINCT FROM OLD.reserve_id)))
    EXECUTE FUNCTION herald_settle_once();

-- The dashboard's journal reads an account's newest movements; the settled rows' part of
-- them by this index (written once per delivery, by the update that settles it).
CREATE INDEX deliveries_settled ON deliveries (tenant_id, quota_key, settle_id)
    WHERE settle_id IS NOT NULL;

-- The journal: every movement one row, as before. Written-out rows and their reserves;
-- each delivery's current reservation (open or settled), and its end when settled.
CREATE OR REPLACE VIEW quota_journal AS
    SELECT m.id, m.tenant_id, m.quota_key, m.stripe, m.kind, m.amount, m.delivery_id,
           m.reservation_seq, m.idempotency_key, m.at
      FROM quota_movements m
    UNION ALL
    SELECT f.reserve_id, f.tenant_id, f.quota_key, f.stripe, 'reserve', f.amount,
           f.delivery_id, f.reservation_seq, NULL, f.reserved_at
      FROM quota_movements f
     WHERE f.reserve_id IS NOT NULL
    UNION ALL
    SELECT d.reserve_id, d.tenant_id, d.quota_key, d.reserve_stripe, 'reserve', d.cost,
           d.id, d.reservation_seq, NULL, coalesce(r.at, d.created_at)
      FROM deliveries d
      LEFT JOIN delivery_replays r
        ON r.delivery_id = d.id AND r.reservation_seq = d.reservation_seq
     WHERE d.reserve_id IS NOT NULL
    UNION ALL
    SELECT d.settle_id, d.tenant_id, d.quota_key, d.reserve_stripe, d.settle_kind, d.cost,
           d.id, d.reservation_seq, NULL, d.settled_at
      FROM deliveries d
     WHERE d.settle_id IS NOT NULL;
