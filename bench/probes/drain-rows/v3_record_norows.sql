WITH s AS (DELETE FROM q WHERE lease_owner = 'w' || :client_id RETURNING id, attempts),
 d AS (UPDATE deliveries u SET state = 'sent', sent_at = now(), updated_at = now(), attempts = s.attempts
       FROM s WHERE u.id = s.id RETURNING u.id, u.tenant_id, u.cost),
 n AS (SELECT tenant_id, sum(cost) AS c FROM d GROUP BY tenant_id)
UPDATE quota_accounts q SET reserved = q.reserved - n.c, spent = q.spent + n.c
FROM n WHERE q.tenant_id = n.tenant_id AND q.quota_key = 'webhook' AND stripe = 0;
