WITH due AS (SELECT id FROM deliveries WHERE state = 'pending' AND next_attempt_at <= now() AND get_byte(uuid_send(tenant_id), 15) % 4 = :client_id
             ORDER BY next_attempt_at LIMIT 100 FOR UPDATE SKIP LOCKED),
 leased AS (UPDATE deliveries u SET state = 'sending', attempts = u.attempts + 1,
     lease_owner = 'w' || :client_id, lease_until = now() + interval '60 s', updated_at = now(),
     attempt_worker = 'w' || :client_id, attempt_started_at = now()
   WHERE u.id = ANY(ARRAY(SELECT id FROM due)) RETURNING u.*)
SELECT count(*), sum(length(p.payload)) FROM leased d
CROSS JOIN LATERAL (SELECT p.payload::text AS payload FROM delivery_payloads p WHERE p.delivery_id = d.id) p;
