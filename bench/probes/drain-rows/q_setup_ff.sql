SET client_min_messages = warning;
DROP TABLE IF EXISTS q;
CREATE TABLE q (id uuid PRIMARY KEY, tenant_id uuid NOT NULL, destination text NOT NULL,
  channel text NOT NULL, next_attempt_at timestamptz NOT NULL, attempts int NOT NULL DEFAULT 0,
  lease_owner text, lease_until timestamptz);
INSERT INTO q (id, tenant_id, destination, channel, next_attempt_at)
  SELECT id, tenant_id, destination, channel, next_attempt_at FROM deliveries WHERE state = 'pending';
CREATE INDEX q_due ON q (next_attempt_at) WHERE lease_owner IS NULL;
CREATE INDEX q_lanes ON q (tenant_id, destination, next_attempt_at) WHERE lease_owner IS NULL;
DROP INDEX deliveries_due, deliveries_lanes, deliveries_leased, deliveries_final;
VACUUM ANALYZE q; CHECKPOINT;
ALTER TABLE deliveries SET (fillfactor = 70); VACUUM FULL deliveries; ANALYZE deliveries; CHECKPOINT;
