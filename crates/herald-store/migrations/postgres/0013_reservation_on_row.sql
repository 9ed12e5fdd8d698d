-- herald schema 13 (PostgreSQL): a delivery's open reservation lives on its row (issue 34,
-- point 3; ARCHITECTURE.md, "The ledger's rows"). A claim wrote a `reserve` journal row
-- beside the delivery: a heap tuple and three index entries per submit (about 460 of its
-- 1,620 WAL bytes), and the lease and the settle each probed it for the reservation's
-- stripe. Now the row carries the reservation — `reserve_stripe`, and `reserve_id`, its
-- place in the journal's order, drawn from the journal's own sequence — and the final
-- movement (commit or release) still writes its row, carrying the reservation's id and
-- time, so nothing of a reservation is lost when retention deletes its delivery.
--
-- The table of movements is `quota_movements`: grants, moves between stripes, and each
-- reservation's final movement (plus any `reserve` row from before this schema that
-- could not be folded). `quota_journal` is a view with the table's old columns: every
-- movement, the settled reservations' `reserve` rows rebuilt from their final rows, and
-- the open ones from the live deliveries (pending or sending: every other state has
-- settled its reservation in the transaction that entered it) without a final row. So each movement is still
-- one journal row and the journal's sums still equal each stripe's balance.
--
-- The invariants stay in the schema: one reservation per (delivery, seq) is the row
-- itself; one final movement per reservation is the unique index on the final rows; a
-- reservation's stripe exists (a foreign key, as the journal's was).
ALTER TABLE quota_journal RENAME TO quota_movements;
ALTER SEQUENCE quota_journal_id_seq RENAME TO quota_movements_id_seq;

ALTER TABLE quota_movements
    ADD COLUMN reserve_id bigint,
    ADD COLUMN reserved_at timestamptz;

ALTER TABLE deliveries
    ADD COLUMN reserve_stripe smallint,
    ADD COLUMN reserve_id bigint;

-- Settled reservations: the reserve row's id and time move onto the final row.
UPDATE quota_movements f SET reserve_id = r.id, reserved_at = r.at
FROM quota_movements r
WHERE f.kind IN ('commit', 'release') AND r.kind = 'reserve'
  AND r.delivery_id = f.delivery_id AND r.reservation_seq = f.reservation_seq;
-- Every delivery's current reservation: its stripe and id onto the delivery row.
UPDATE deliveries d SET reserve_stripe = r.stripe, reserve_id = r.id
FROM quota_movements r
WHERE r.kind = 'reserve' AND r.delivery_id = d.id AND r.reservation_seq = d.reservation_seq;
-- What is folded is deleted: a reserve row that has its final row, or whose delivery is
-- open and carries it now. Anything else (none is expected) stays a row of its own.
DELETE FROM quota_movements r
WHERE r.kind = 'reserve'
  AND (EXISTS (SELECT 1 FROM quota_movements f
               WHERE f.kind IN ('commit', 'release') AND f.delivery_id = r.delivery_id
                 AND f.reservation_seq = r.reservation_seq)
       OR EXISTS (SELECT 1 FROM deliveries d
                  WHERE d.id = r.delivery_id AND d.reservation_seq = r.reservation_seq
                    AND d.state IN ('pending', 'sending')));
-- A final row of a reservation whose reserve row was missing: its own id and time.
UPDATE quota_movements SET reserve_id = id, reserved_at = at
WHERE kind IN ('commit', 'release') AND reserve_id IS NULL;

ALTER TABLE quota_movements
    ADD CONSTRAINT quota_movements_final_names_its_reserve
        CHECK ((kind IN ('commit', 'release')) = (reserve_id IS NOT NULL AND reserved_at IS NOT NULL));
ALTER TABLE deliveries
    ADD CONSTRAINT deliveries_reservation_whole
        CHECK ((reserve_stripe IS NULL) = (reserve_id IS NULL)),
    ADD CONSTRAINT deliveries_reservation_stripe
        FOREIGN KEY (tenant_id, quota_key, reserve_stripe)
        REFERENCES quota_accounts (tenant_id, quota_key, stripe);

CREATE VIEW quota_journal AS
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
      FROM (SELECT * FROM deliveries WHERE state = 'pending'
            UNION ALL SELECT * FROM deliveries WHERE state = 'sending') AS d
      LEFT JOIN delivery_replays r
        ON r.delivery_id = d.id AND r.reservation_seq = d.reservation_seq
     WHERE d.reserve_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM quota_movements f
                       WHERE f.delivery_id = d.id AND f.reservation_seq = d.reservation_seq
                         AND f.kind IN ('commit', 'release'));
