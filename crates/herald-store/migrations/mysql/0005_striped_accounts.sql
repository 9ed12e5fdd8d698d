-- herald schema 5 (MariaDB 10.11+, and the subset MySQL 8.4 shares): striped quota
-- accounts (issue 33; ARCHITECTURE.md, "Striped quota accounts"). An account (tenant,
-- quota_key) is the sum of its stripes, rows of quota_accounts numbered 0..63, each
-- balanced on its own; a reservation in a caller's transaction locks one stripe, not the
-- account. Every journal row names its stripe; `move_out` and `move_in` rows record
-- balance moved between stripes. An account from before this keeps its one stripe (0)
-- until its next grant, which makes the others.
--
-- Safe to run again (see 0001_schema.sql): each change is guarded by what
-- information_schema says, in the one form both servers run (a prepared statement).

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.table_constraints
                       WHERE constraint_schema = DATABASE() AND table_name = 'quota_journal'
                         AND constraint_name = 'quota_journal_account_fk') > 0,
    'ALTER TABLE quota_journal DROP FOREIGN KEY quota_journal_account_fk', 'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'quota_accounts'
                         AND column_name = 'stripe') = 0,
    'ALTER TABLE quota_accounts ADD COLUMN stripe SMALLINT NOT NULL DEFAULT 0,
         ADD CONSTRAINT quota_accounts_stripe CHECK (stripe BETWEEN 0 AND 63)', 'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.key_column_usage
                       WHERE table_schema = DATABASE() AND table_name = 'quota_accounts'
                         AND constraint_name = 'PRIMARY' AND column_name = 'stripe') = 0,
    'ALTER TABLE quota_accounts DROP PRIMARY KEY, ADD PRIMARY KEY (tenant_id, quota_key, stripe)',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'quota_journal'
                         AND column_name = 'stripe') = 0,
    'ALTER TABLE quota_journal ADD COLUMN stripe SMALLINT NOT NULL DEFAULT 0', 'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.table_constraints
                       WHERE constraint_schema = DATABASE() AND table_name = 'quota_journal'
                         AND constraint_name = 'quota_journal_stripe_fk') = 0,
    'ALTER TABLE quota_journal ADD CONSTRAINT quota_journal_stripe_fk
         FOREIGN KEY (tenant_id, quota_key, stripe)
         REFERENCES quota_accounts (tenant_id, quota_key, stripe)', 'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.table_constraints
                       WHERE constraint_schema = DATABASE() AND table_name = 'quota_journal'
                         AND constraint_name = 'quota_journal_kind') > 0,
    'ALTER TABLE quota_journal DROP CONSTRAINT quota_journal_kind', 'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.table_constraints
                       WHERE constraint_schema = DATABASE() AND table_name = 'quota_journal'
                         AND constraint_name = 'quota_journal_kinds') = 0,
    'ALTER TABLE quota_journal ADD CONSTRAINT quota_journal_kinds
         CHECK (kind IN (''grant'', ''reserve'', ''commit'', ''release'', ''move_out'', ''move_in''))',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.table_constraints
                       WHERE constraint_schema = DATABASE() AND table_name = 'quota_journal'
                         AND constraint_name = 'quota_journal_grant_has_no_delivery') > 0,
    'ALTER TABLE quota_journal DROP CONSTRAINT quota_journal_grant_has_no_delivery', 'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.table_constraints
                       WHERE constraint_schema = DATABASE() AND table_name = 'quota_journal'
                         AND constraint_name = 'quota_journal_delivery_when_reservation') = 0,
    'ALTER TABLE quota_journal ADD CONSTRAINT quota_journal_delivery_when_reservation
         CHECK ((kind IN (''reserve'', ''commit'', ''release'')) = (delivery_id IS NOT NULL))',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;
