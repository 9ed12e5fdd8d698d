WITH due AS (SELECT id FROM q WHERE lease_owner IS NULL AND next_attempt_at <= now()
             AND get_byte(uuid_send(tenant_id), 15) % 4 = :client_id
             ORDER BY next_attempt_at LIMIT 100 FOR UPDATE SKIP LOCKED),
 leased AS (UPDATE q u SET attempts = u.attempts + 1,
     lease_owner = 'w' || :client_id, lease_until = now() + interval '60 s'
   WHERE u.id = ANY(ARRAY(SELECT id FROM due)) RETURNING u.id)
SELECT count(*), sum(length(p.payload)), sum(d.cost) FROM leased l
JOIN deliveries d ON d.id = l.id
CROSS JOIN LATERAL (SELECT p.payload::text AS payload FROM delivery_payloads p WHERE p.delivery_id = l.id) p;
