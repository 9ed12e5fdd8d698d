-- a fresh queue of :n pending deliveries over 100 tenants (untimed)
SET client_min_messages = warning;
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending'; CREATE INDEX IF NOT EXISTS deliveries_leased ON deliveries (lease_until) WHERE state = 'sending'; CREATE INDEX IF NOT EXISTS deliveries_final ON deliveries (updated_at) WHERE state IN ('sent', 'failed', 'cancelled'); CREATE INDEX IF NOT EXISTS deliveries_lanes ON deliveries (tenant_id, destination, next_attempt_at) WHERE state = 'pending';
SET client_min_messages = warning; TRUNCATE deliveries, delivery_payloads, delivery_attempts, quota_movements, quota_accounts, tenants CASCADE;
INSERT INTO tenants (id, name, webhook_secret)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(t), 12, '0'))::uuid, 'p' || t, 'whsec_x'
FROM generate_series(1, 100) t;
INSERT INTO quota_accounts (tenant_id, quota_key, stripe, granted, available, reserved, spent)
SELECT id, 'webhook', 0, 10000000, 10000000 - 100000, 100000, 0 FROM tenants;
INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient, fingerprint, quota_key,
    cost, state, max_attempts, next_attempt_at, reserve_stripe, reserve_id, created_at, updated_at)
SELECT gen_random_uuid(), ('00000000-0000-7000-8000-' || lpad(to_hex(1 + i % 100), 12, '0'))::uuid,
    'k' || i, 'webhook', 'https://h' || (i % 100) || '.example/hook', '\x00'::bytea, 'webhook',
    1, 'pending', 5, now() - interval '1 minute' + i * interval '1 microsecond', 0, i, now(), now()
FROM generate_series(1, :n) i;
INSERT INTO delivery_payloads (delivery_id, payload)
SELECT id, '{"event":"order.created","order":17,"lines":[1,2,3]}'::jsonb FROM deliveries;
VACUUM ANALYZE deliveries; VACUUM ANALYZE delivery_payloads; VACUUM ANALYZE quota_accounts; VACUUM ANALYZE quota_movements;
CHECKPOINT;
DROP TABLE IF EXISTS q;
