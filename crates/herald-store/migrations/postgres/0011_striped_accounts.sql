-- herald schema 11 (PostgreSQL): striped quota accounts (issue 33; ARCHITECTURE.md,
-- "Striped quota accounts"). An account (tenant, quota_key) is the sum of its stripes,
-- rows of quota_accounts numbered 0..63, each balanced on its own (the same CHECKs). A
-- reservation in a caller's transaction locks one stripe, not the account, so a tenant's
-- transactions no longer wait for each other. Every journal row names its stripe; moves
-- of balance between stripes (`move_out`, `move_in`: granted and available together) keep
-- the journal's sums equal to each stripe's balance. An account from before this keeps
-- its one stripe (0) until its next grant, which makes the others.
ALTER TABLE quota_journal DROP CONSTRAINT quota_journal_tenant_id_quota_key_fkey;
ALTER TABLE quota_accounts
    ADD COLUMN stripe smallint NOT NULL DEFAULT 0,
    ADD CONSTRAINT quota_accounts_stripe CHECK (stripe BETWEEN 0 AND 63),
    DROP CONSTRAINT quota_accounts_pkey,
    ADD PRIMARY KEY (tenant_id, quota_key, stripe);
ALTER TABLE quota_journal
    ADD COLUMN stripe smallint NOT NULL DEFAULT 0,
    ADD CONSTRAINT quota_journal_stripe_fkey FOREIGN KEY (tenant_id, quota_key, stripe)
        REFERENCES quota_accounts (tenant_id, quota_key, stripe),
    DROP CONSTRAINT quota_journal_kind_check,
    ADD CONSTRAINT quota_journal_kind_check
        CHECK (kind IN ('grant', 'reserve', 'commit', 'release', 'move_out', 'move_in')),
    DROP CONSTRAINT quota_journal_check,
    ADD CONSTRAINT quota_journal_delivery_when_reservation
        CHECK ((kind IN ('reserve', 'commit', 'release')) = (delivery_id IS NOT NULL));
