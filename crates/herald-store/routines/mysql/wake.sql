-- MariaDB only. The SQL API's wake-up: `CALL herald.wake_targets_v1()`.
--
-- This file is the routine's one home: `herald migrate` runs it again whenever its text
-- changes (herald_store::routines).

-- Where the running workers hear wake-ups (herald_wake_targets, schema 14): one row per
-- worker seen within the last 30 s (a worker writes its row every 10 s), `address`
-- (`host:port`) and `token`. After its commit, a caller that submitted sends each address
-- one UDP datagram, `herald-wake/1 ` followed by the token, so a worker in another process
-- starts the delivery at once instead of at its next poll. Fire and forget: a datagram
-- lost or never sent only leaves the delivery to that poll.
CREATE OR REPLACE PROCEDURE wake_targets_v1()
READS SQL DATA SQL SECURITY DEFINER
BEGIN
    SELECT address, token FROM herald_wake_targets
    WHERE seen_at >= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - 30000
    ORDER BY worker;
END;
