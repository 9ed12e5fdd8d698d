SET client_min_messages = warning;
DROP TABLE IF EXISTS g;
CREATE TABLE g (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, task text NOT NULL, payload json NOT NULL,
  run_at timestamptz NOT NULL, attempts int NOT NULL DEFAULT 0, locked_at timestamptz, locked_by text, key text UNIQUE);
INSERT INTO g (tenant_id, task, payload, run_at, key)
  SELECT d.tenant_id, 'noop', p.payload::json, d.next_attempt_at, d.operation_key FROM deliveries d JOIN delivery_payloads p ON p.delivery_id = d.id;
CREATE INDEX g_main ON g (run_at, id) WHERE locked_at IS NULL;
VACUUM ANALYZE g; CHECKPOINT;
