-- Striped quota accounts (ARCHITECTURE.md, "Striped quota accounts"), MariaDB and the
-- subset MySQL 8.4 shares: which stripe a reservation takes, and how balance moves between
-- stripes. Called by the library's claim and replay and by submit_v1.
--
-- This file is the routines' one home: `herald migrate` runs it again whenever its text
-- changes (herald_store::routines).

-- Moves available balance (granted with it, so each stripe stays balanced) between the
-- stripes of an account whose stripes the caller has all locked: into stripe `p_target`,
-- or, with `p_target` NULL, evenly over every stripe. A journal row for each side of each
-- move; a stripe that keeps its balance gets none. Locking reads, which see the latest
-- versions whatever the isolation (a plain read under REPEATABLE READ sees the snapshot).
DROP PROCEDURE IF EXISTS herald_quota_move;
CREATE PROCEDURE herald_quota_move(IN p_tenant BINARY(16), IN p_key VARCHAR(100),
                                   IN p_target SMALLINT, IN p_at BIGINT)
MODIFIES SQL DATA
BEGIN
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_total BIGINT;
    DECLARE v_n INT;
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_stripe SMALLINT;
    DECLARE v_available BIGINT;
    DECLARE v_delta BIGINT;
    DECLARE v_stripes CURSOR FOR
        SELECT a.stripe, a.available FROM quota_accounts a
         WHERE a.tenant_id = p_tenant AND a.quota_key = p_key
         ORDER BY a.stripe FOR UPDATE;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    SELECT SUM(a.available), COUNT(*) INTO v_total, v_n FROM quota_accounts a
     WHERE a.tenant_id = p_tenant AND a.quota_key = p_key FOR UPDATE;
    OPEN v_stripes;
    moves: LOOP
        FETCH v_stripes INTO v_stripe, v_available;
        IF v_done = 1 THEN
            LEAVE moves;
        END IF;
        SET v_delta = CASE WHEN p_target IS NULL
                           THEN v_total DIV v_n + IF(v_i < v_total MOD v_n, 1, 0)
                           WHEN v_stripe = p_target THEN v_total
                           ELSE 0 END - v_available;
        SET v_i = v_i + 1;
        IF v_delta <> 0 THEN
            UPDATE quota_accounts
               SET available = available + v_delta, granted = granted + v_delta,
                   updated_at = p_at
             WHERE tenant_id = p_tenant AND quota_key = p_key AND stripe = v_stripe;
            INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount, at)
            VALUES (p_tenant, p_key, v_stripe, IF(v_delta > 0, 'move_in', 'move_out'),
                    ABS(v_delta), p_at);
        END IF;
    END LOOP;
    CLOSE v_stripes;
END;

-- A stripe of the account that covers `p_cost`, once no free one did: every stripe locked
-- in stripe order (waiting for the transactions that hold them, which is what makes the
-- answer exact: a held stripe may be given back by a rollback), then the lowest stripe
-- that covers the cost; or, when none does alone but the stripes together do, everything
-- available moved into the lowest stripe, which is returned. The account stays locked to
-- the end of the caller's transaction then: the one path that holds a whole account. NULL
-- when the account as a whole cannot pay (or has no stripes). Under READ COMMITTED
-- (herald's own transactions) an account whose committed balance cannot pay is answered
-- by a plain read, holding nothing: a held stripe's committed balance already counts what
-- its holder would give back by a rollback, and no lock is taken. Otherwise the answer
-- comes from the locks, and then an exhausted answer holds the account to the end of the
-- caller's transaction like a gathered one: InnoDB keeps a lock it waited for, even on a
-- row the WHERE refused, and ROLLBACK TO SAVEPOINT keeps every lock.
DROP PROCEDURE IF EXISTS herald_quota_gather;
CREATE PROCEDURE herald_quota_gather(IN p_tenant BINARY(16), IN p_key VARCHAR(100),
                                     IN p_cost BIGINT, IN p_at BIGINT,
                                     OUT p_stripe SMALLINT)
MODIFIES SQL DATA
gather: BEGIN
    DECLARE v_covering SMALLINT;
    DECLARE v_lowest SMALLINT;
    DECLARE v_total BIGINT;
    DECLARE v_stripe INT DEFAULT 0;
    DECLARE v_available BIGINT;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SET p_stripe = NULL;
    IF @@tx_isolation = 'READ-COMMITTED' THEN
        SELECT SUM(a.available) INTO v_total FROM quota_accounts a
         WHERE a.tenant_id = p_tenant AND a.quota_key = p_key;
        IF v_total IS NULL OR v_total < p_cost THEN
            LEAVE gather;
        END IF;
        SET v_total = NULL;
    END IF;
    -- Stripe by stripe, each by its key: a locking range read would also lock the gaps and
    -- the record after the account's last stripe (another account's), under REPEATABLE
    -- READ.
    WHILE v_stripe < 64 DO
        SET v_available = NULL;
        SELECT a.available INTO v_available FROM quota_accounts a
         WHERE a.tenant_id = p_tenant AND a.quota_key = p_key AND a.stripe = v_stripe
         FOR UPDATE;
        IF v_available IS NOT NULL THEN
            SET v_lowest = COALESCE(v_lowest, v_stripe);
            SET v_total = COALESCE(v_total, 0) + v_available;
            IF v_covering IS NULL AND v_available >= p_cost THEN
                SET v_covering = v_stripe;
            END IF;
        END IF;
        SET v_stripe = v_stripe + 1;
    END WHILE;
    IF v_covering IS NOT NULL THEN
        SET p_stripe = v_covering;
    ELSEIF v_total IS NULL OR v_total < p_cost THEN
        SET p_stripe = NULL;
    ELSE
        CALL herald_quota_move(p_tenant, p_key, v_lowest, p_at);
        SET p_stripe = v_lowest;
    END IF;
END gather;

-- The stripe a reservation of `p_cost` takes, locked for the rest of the transaction: a
-- stripe that covers it and that no other transaction holds — found by a plain read of
-- the next stripe with enough, in the key's order from `p_first` (herald passes 0: the
-- lowest free stripe, so a tenant's reservations sit on few stripes) and then from 0,
-- and tried by its key with SKIP LOCKED (a locking scan would lock every stripe it
-- passed); usually one of each. With `p_gather`,
-- herald_quota_gather's instead, without searching first: a caller gathers after a search
-- found none free, and a second search would lock again the stripes its snapshot still
-- shows with enough — stripes drained since, whose locks InnoDB keeps, and which two
-- gathering claims then wait for in opposite orders. NULL: none free (or, gathered, the
-- account as a whole cannot pay). Under READ COMMITTED the search is one locking scan.
DROP PROCEDURE IF EXISTS herald_quota_take;
CREATE PROCEDURE herald_quota_take(IN p_tenant BINARY(16), IN p_key VARCHAR(100),
                                   IN p_cost BIGINT, IN p_first INT, IN p_at BIGINT,
                                   IN p_gather BOOLEAN, OUT p_stripe SMALLINT)
MODIFIES SQL DATA
BEGIN
    DECLARE v_from INT DEFAULT p_first;
    DECLARE v_wrapped BOOLEAN DEFAULT FALSE;
    DECLARE v_candidate SMALLINT;
    DECLARE v_available BIGINT;
    -- A SELECT ... INTO that finds no row leaves its variables as they were.
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SET p_stripe = NULL;
    IF p_gather THEN
        CALL herald_quota_gather(p_tenant, p_key, p_cost, p_at, p_stripe);
    ELSEIF @@tx_isolation = 'READ-COMMITTED' THEN
        -- READ COMMITTED (herald's own transactions set it on the session): InnoDB lets go
        -- of a row the scan locked but the WHERE refused, so one locking scan that skips
        -- the held stripes and passes the drained ones leaves only the stripe it returns
        -- locked — one statement where the search below takes two per stripe it passes.
        SELECT a.stripe INTO p_stripe FROM quota_accounts a
         WHERE a.tenant_id = p_tenant AND a.quota_key = p_key AND a.available >= p_cost
         ORDER BY a.stripe LIMIT 1
         FOR UPDATE SKIP LOCKED;
    ELSE
        candidates: LOOP
            SET v_candidate = NULL;
            SELECT a.stripe INTO v_candidate FROM quota_accounts a
             WHERE a.tenant_id = p_tenant AND a.quota_key = p_key AND a.stripe >= v_from
               AND a.available >= p_cost
             ORDER BY a.stripe LIMIT 1;
            IF v_candidate IS NULL OR (v_wrapped AND v_candidate >= p_first) THEN
                IF v_wrapped OR p_first = 0 THEN
                    LEAVE candidates;
                END IF;
                SET v_wrapped = TRUE, v_from = 0;
                ITERATE candidates;
            END IF;
            SET v_available = NULL;
            SELECT a.available INTO v_available FROM quota_accounts a
             WHERE a.tenant_id = p_tenant AND a.quota_key = p_key AND a.stripe = v_candidate
             FOR UPDATE SKIP LOCKED;
            IF v_available >= p_cost THEN
                SET p_stripe = v_candidate;
                LEAVE candidates;
            END IF;
            SET v_from = v_candidate + 1;
        END LOOP;
    END IF;
END;

-- What a group-committed batch plans from (ARCHITECTURE.md, "MariaDB's batch in a few
-- statements"), in one round trip. `p_accounts` is a JSON array of [tenant, quota key,
-- what the batch needs at most], in the one order of accounts (tenant, then key);
-- `p_items` one of [tenant, operation key, channel] per member; every string hex (of its
-- bytes, of its UTF-8), so nothing needs escaping. For each account, a free stripe that
-- covers the whole need, locked (herald_quota_take, which never waits); for an account
-- that has none, every stripe, each locked by its key in stripe order (waiting for the
-- transactions that hold them, so the batch sees the account whole). Then, after the
-- locks, a plain read of which identities are taken and which tenants exist, each member
-- looked up by its key (STRAIGHT_JOIN: on a small table the optimizer would rather scan
-- the index than the member list). The answer,
-- one row: "account index:stripe:available" for each stripe locked, in the order locked;
-- the (1-based) members whose identity is taken; those whose tenant exists; `p_at`.
DROP PROCEDURE IF EXISTS herald_batch_take;
CREATE PROCEDURE herald_batch_take(IN p_accounts LONGTEXT, IN p_items LONGTEXT,
                                   IN p_at BIGINT)
MODIFIES SQL DATA
BEGIN
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_n INT DEFAULT JSON_LENGTH(p_accounts);
    DECLARE v_tenant BINARY(16);
    DECLARE v_key VARCHAR(100);
    DECLARE v_need BIGINT;
    DECLARE v_stripe SMALLINT;
    DECLARE v_each INT;
    DECLARE v_available BIGINT;
    DECLARE v_taken LONGTEXT DEFAULT '';
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    WHILE v_i < v_n DO
        SET v_tenant = UNHEX(JSON_VALUE(p_accounts, CONCAT('$[', v_i, '][0]')));
        SET v_key = CONVERT(UNHEX(JSON_VALUE(p_accounts, CONCAT('$[', v_i, '][1]')))
                            USING utf8mb4);
        SET v_need = JSON_VALUE(p_accounts, CONCAT('$[', v_i, '][2]'));
        CALL herald_quota_take(v_tenant, v_key, v_need, 0, p_at, FALSE, v_stripe);
        IF v_stripe IS NOT NULL THEN
            SELECT a.available INTO v_available FROM quota_accounts a
             WHERE a.tenant_id = v_tenant AND a.quota_key = v_key AND a.stripe = v_stripe
             FOR UPDATE;
            SET v_taken = CONCAT(v_taken, v_i, ':', v_stripe, ':', v_available, ',');
        ELSE
            -- Stripe by stripe, each by its key, as herald_quota_gather (no gap locks under
            -- REPEATABLE READ).
            SET v_each = 0;
            WHILE v_each < 64 DO
                SET v_available = NULL;
                SELECT a.available INTO v_available FROM quota_accounts a
                 WHERE a.tenant_id = v_tenant AND a.quota_key = v_key AND a.stripe = v_each
                 FOR UPDATE;
                IF v_available IS NOT NULL THEN
                    SET v_taken = CONCAT(v_taken, v_i, ':', v_each, ':', v_available, ',');
                END IF;
                SET v_each = v_each + 1;
            END WHILE;
        END IF;
        SET v_i = v_i + 1;
    END WHILE;
    SELECT v_taken,
        (SELECT GROUP_CONCAT(j.i) FROM JSON_TABLE(p_items, '$[*]' COLUMNS (
                i FOR ORDINALITY,
                t VARCHAR(32) CHARACTER SET ascii PATH '$[0]',
                k VARCHAR(1020) CHARACTER SET ascii PATH '$[1]',
                c VARCHAR(400) CHARACTER SET ascii PATH '$[2]')) AS j
           STRAIGHT_JOIN deliveries d
             ON d.tenant_id = UNHEX(j.t)
            AND d.operation_key = CONVERT(UNHEX(j.k) USING utf8mb4) COLLATE utf8mb4_nopad_bin
            AND d.channel = CONVERT(UNHEX(j.c) USING utf8mb4) COLLATE utf8mb4_nopad_bin),
        (SELECT GROUP_CONCAT(j.i) FROM JSON_TABLE(p_items, '$[*]' COLUMNS (
                i FOR ORDINALITY,
                t VARCHAR(32) CHARACTER SET ascii PATH '$[0]')) AS j
           STRAIGHT_JOIN tenants t ON t.id = UNHEX(j.t)),
        p_at;
END;
