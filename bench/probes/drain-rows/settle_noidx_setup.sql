SET client_min_messages = warning;
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS settle_kind text, ADD COLUMN IF NOT EXISTS settle_id bigint, ADD COLUMN IF NOT EXISTS settled_at timestamptz;
DROP INDEX IF EXISTS deliveries_settled;
VACUUM ANALYZE deliveries; CHECKPOINT;
