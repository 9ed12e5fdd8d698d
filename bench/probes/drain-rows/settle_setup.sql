SET client_min_messages = warning;
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS settle_kind text, ADD COLUMN IF NOT EXISTS settle_id bigint, ADD COLUMN IF NOT EXISTS settled_at timestamptz;
CREATE INDEX IF NOT EXISTS deliveries_settled ON deliveries (tenant_id, quota_key, settle_id) WHERE settle_id IS NOT NULL;
VACUUM ANALYZE deliveries; CHECKPOINT;
