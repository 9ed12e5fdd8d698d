ALTER TABLE deliveries SET (fillfactor = 100); VACUUM FULL deliveries; ANALYZE deliveries; CHECKPOINT;
