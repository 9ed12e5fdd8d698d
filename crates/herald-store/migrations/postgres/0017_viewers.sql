-- herald schema 17 (PostgreSQL): a read-only operator (HERALD_VIEWER_KEY). Its dashboard
-- session is marked as one, so no request of it can act, and its sign-ins are logged as
-- the `viewer`'s.
ALTER TABLE herald_ui_sessions ADD COLUMN viewer boolean NOT NULL DEFAULT false;
ALTER TABLE herald_ui_sessions ADD CONSTRAINT herald_ui_sessions_viewer
    CHECK (NOT viewer OR tenant_id IS NULL);
ALTER TABLE herald_audit DROP CONSTRAINT herald_audit_actor_check;
ALTER TABLE herald_audit ADD CONSTRAINT herald_audit_actor
    CHECK (actor IN ('admin', 'viewer', 'tenant', 'operator', 'anonymous'));
