-- herald schema 3 (SQLite): the current attempt's worker and start live on the delivery
-- row, set by the lease; an attempt that ends `sent` under its own lease gets no row in
-- delivery_attempts (see the PostgreSQL file of the same number for the whole rule).

ALTER TABLE deliveries ADD COLUMN attempt_worker TEXT;
ALTER TABLE deliveries ADD COLUMN attempt_started_at INTEGER;

UPDATE deliveries SET attempt_worker = lease_owner, attempt_started_at = updated_at
WHERE state = 'sending';
