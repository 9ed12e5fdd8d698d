-- Striped quota accounts (ARCHITECTURE.md, "Striped quota accounts"): what a reservation
-- does when no free stripe covers it, and how balance moves between stripes. The common
-- case — a stripe that covers the cost and that no other transaction holds, taken with
-- SKIP LOCKED — is a CTE of the claim itself (herald_store's claim, herald_submit_v1).

-- Moves available balance (granted with it, so each stripe stays balanced) between the
-- stripes of an account whose stripes the caller has all locked: into stripe `p_target`,
-- or, with `p_target` NULL, evenly over every stripe. A journal row for each side of each
-- move, so the journal's sums stay each stripe's balance; a stripe that keeps its balance
-- gets none.
CREATE OR REPLACE FUNCTION herald_quota_move(p_tenant uuid, p_key text, p_target smallint,
                                             p_at timestamptz)
RETURNS void LANGUAGE sql VOLATILE AS $$
    WITH s AS (
        SELECT a.stripe, a.available,
               CAST(sum(a.available) OVER () AS bigint) AS total, count(*) OVER () AS n,
               row_number() OVER (ORDER BY a.stripe) - 1 AS i
          FROM quota_accounts a
         WHERE a.tenant_id = p_tenant AND a.quota_key = p_key),
    t AS (
        SELECT s.stripe,
               CASE WHEN p_target IS NULL
                    THEN s.total / s.n + CASE WHEN s.i < s.total % s.n THEN 1 ELSE 0 END
                    WHEN s.stripe = p_target THEN s.total
                    ELSE 0 END - s.available AS delta
          FROM s),
    u AS (
        UPDATE quota_accounts a SET available = a.available + t.delta,
               granted = a.granted + t.delta, updated_at = p_at
          FROM t
         WHERE a.tenant_id = p_tenant AND a.quota_key = p_key AND a.stripe = t.stripe
           AND t.delta <> 0
        RETURNING a.stripe, t.delta)
    INSERT INTO quota_movements (tenant_id, quota_key, stripe, kind, amount, at)
    SELECT p_tenant, p_key, u.stripe,
           CASE WHEN u.delta > 0 THEN 'move_in' ELSE 'move_out' END, abs(u.delta), p_at
      FROM u
$$;

-- A stripe of the account that covers `p_cost`, once no free one did: every stripe locked
-- in stripe order (waiting for the transactions that hold them, which is what makes the
-- answer exact: a held stripe may be given back by a rollback), then the lowest stripe
-- that covers the cost; or, when none does alone but the stripes together do, everything
-- available moved into the lowest stripe, which is returned. The account stays locked to
-- the end of the caller's transaction then: the one path that holds a whole account.
-- NULL when the account as a whole cannot pay (or has no stripes), and then the stripes
-- are let go at once: the locks are taken in a block of their own (a subtransaction),
-- which the answer undoes, so an exhausted account's submits wait for the transactions
-- holding its stripes but never for each other's (an application's transaction that got
-- `quota_exhausted` goes on holding nothing of the account).
CREATE OR REPLACE FUNCTION herald_quota_gather(p_tenant uuid, p_key text, p_cost bigint,
                                               p_at timestamptz)
RETURNS smallint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    covering smallint;
    lowest smallint;
    total bigint;
BEGIN
    BEGIN
        SELECT min(l.stripe) FILTER (WHERE l.available >= p_cost), min(l.stripe),
               sum(l.available)
          INTO covering, lowest, total
          FROM (SELECT a.stripe, a.available FROM quota_accounts a
                 WHERE a.tenant_id = p_tenant AND a.quota_key = p_key
                 ORDER BY a.stripe FOR UPDATE) l;
        IF total IS NULL OR total < p_cost THEN
            RAISE SQLSTATE 'HQ001';
        END IF;
    EXCEPTION WHEN SQLSTATE 'HQ001' THEN
        RETURN NULL;
    END;
    IF covering IS NOT NULL THEN
        RETURN covering;
    END IF;
    PERFORM herald_quota_move(p_tenant, p_key, lowest, p_at);
    RETURN lowest;
END $$;
