WITH j AS (SELECT id FROM g WHERE locked_at IS NULL AND run_at <= now()
           AND get_byte(uuid_send(tenant_id), 15) % 4 = :client_id
           ORDER BY run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED)
UPDATE g SET attempts = g.attempts + 1, locked_at = now(), locked_by = 'w' || :client_id
FROM j WHERE g.id = j.id RETURNING g.id, g.payload::text;
DELETE FROM g WHERE locked_by = 'w' || :client_id;
