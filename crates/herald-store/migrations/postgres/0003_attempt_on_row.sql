-- herald schema 3 (PostgreSQL): the current attempt's worker and start live on the delivery
-- row, set by the lease. An attempt that ends `sent` under its own lease gets no row in
-- delivery_attempts: the delivery row already says who ran it, when it started
-- (attempt_started_at) and when it ended (sent_at), and listing attempts reads it from
-- there — one insert and its foreign-key check fewer per delivery on the hot path. Every
-- other ending (transient, terminal, lost, a stale or late `sent`) still writes its row.
-- attempt_worker is set only while the row stands for its current attempt: `sending`, or
-- `sent` by that attempt; every other transition clears it.

ALTER TABLE deliveries ADD COLUMN attempt_worker text;
ALTER TABLE deliveries ADD COLUMN attempt_started_at timestamptz;

UPDATE deliveries SET attempt_worker = lease_owner, attempt_started_at = updated_at
WHERE state = 'sending';
