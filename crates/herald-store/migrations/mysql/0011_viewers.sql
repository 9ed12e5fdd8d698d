-- herald schema 11 (MariaDB 10.11+, and the subset MySQL 8.4 shares): a read-only
-- operator (PostgreSQL schema 17 has the same and says why).
--
-- Safe to run again (see 0001_schema.sql): information_schema decides each step, in the
-- one form both servers run (a prepared statement).

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.columns
                       WHERE table_schema = DATABASE() AND table_name = 'herald_ui_sessions'
                         AND column_name = 'viewer') = 0,
    'ALTER TABLE herald_ui_sessions ADD COLUMN viewer BOOLEAN NOT NULL DEFAULT FALSE,
         ADD CONSTRAINT herald_ui_sessions_viewer CHECK (NOT viewer OR tenant_id IS NULL)',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;

SET @herald_sql = IF((SELECT COUNT(*) FROM information_schema.check_constraints
                       WHERE constraint_schema = DATABASE() AND table_name = 'herald_audit'
                         AND constraint_name = 'herald_audit_actor'
                         AND check_clause LIKE '%viewer%') = 0,
    'ALTER TABLE herald_audit DROP CONSTRAINT herald_audit_actor,
         ADD CONSTRAINT herald_audit_actor
             CHECK (actor IN (''admin'', ''viewer'', ''tenant'', ''operator'', ''anonymous''))',
    'DO 0');
PREPARE herald_step FROM @herald_sql;
EXECUTE herald_step;
DEALLOCATE PREPARE herald_step;
