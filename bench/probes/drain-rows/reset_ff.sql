ALTER TABLE deliveries DROP COLUMN IF EXISTS settle_kind, DROP COLUMN IF EXISTS settle_id, DROP COLUMN IF EXISTS settled_at;
ALTER TABLE deliveries SET (fillfactor = 100); VACUUM FULL deliveries; ANALYZE deliveries; CHECKPOINT;
