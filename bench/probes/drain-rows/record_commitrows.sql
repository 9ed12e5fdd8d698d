WITH s AS (SELECT id FROM deliveries WHERE state = 'sending' AND lease_owner = 'w' || :client_id),
 d AS (UPDATE deliveries u SET state = 'sent', sent_at = now(), updated_at = now(),
           lease_owner = NULL, lease_until = NULL
       WHERE u.id = ANY(ARRAY(SELECT id FROM s)) RETURNING u.id, u.tenant_id, u.cost, u.reserve_id, u.created_at),
 n AS (SELECT tenant_id, sum(cost) AS c FROM d GROUP BY tenant_id),
 a AS (UPDATE quota_accounts q SET reserved = q.reserved - n.c, spent = q.spent + n.c
       FROM n WHERE q.tenant_id = n.tenant_id AND q.quota_key = 'webhook' AND stripe = 0 RETURNING 1)
INSERT INTO quota_movements (tenant_id, quota_key, kind, amount, delivery_id, reservation_seq, at, reserve_id, reserved_at)
SELECT tenant_id, 'webhook', 'commit', cost, id, 1, now(), reserve_id, created_at FROM d;
