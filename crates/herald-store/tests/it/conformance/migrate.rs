//! Migrations: `Store::open` applies every migration this build has, once; a database
//! that records a version newer than this build knows is refused before anything is
//! written; herald's bookkeeping is `herald_migrations`, never sqlx's default table.

use super::*;
use herald_store::migrate::{MigrateReport, schema_version_known};
use herald_store::tenants::tenant_exists;
use herald_store::{AsConn, Backend, Store, StoreError, StoreOptions};

conformance!(
    open_applies_every_migration_this_build_knows,
    opening_again_is_idempotent_and_keeps_the_data,
    a_newer_schema_is_refused_before_anything_is_written,
    herald_keeps_its_own_bookkeeping_table,
    a_routine_whose_text_changed_runs_again,
    a_schema_the_search_path_names_is_created,
);

/// PostgreSQL: a URL whose `search_path` names a schema that does not exist yet (a fresh
/// database, as the README's `herald migrate` is given) gets the schema created, then
/// migrated; before, PostgreSQL answered "no schema has been selected to create in".
async fn a_schema_the_search_path_names_is_created(db: &Db) {
    if db.backend() != Backend::Postgres {
        return;
    }
    let current: (String,) =
        raw_query_as!(db.conn().await.as_conn(), "SELECT current_schema()::text", [], fetch_one)
            .unwrap();
    let fresh = format!("t_{}", uuid::Uuid::now_v7().simple());
    let url = db.url.replace(&current.0, &fresh);
    assert_ne!(url, db.url, "the test's URL names its schema");
    let opened = Store::open(&url, &StoreOptions::default()).await;
    let cleanup = format!("DROP SCHEMA IF EXISTS {fresh} CASCADE");
    let mut conn = db.conn().await;
    let tables: Result<(i64,), _> = raw_query_as!(
        conn.as_conn(),
        "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'herald_migrations'",
        [fresh.as_str()],
        fetch_one
    );
    if let Ok(store) = &opened {
        store.close().await;
    }
    raw_execute!(conn.as_conn(), &cleanup, []).unwrap();
    let store = opened.unwrap_or_else(|e| panic!("open with a fresh schema: {e}"));
    drop(store);
    assert_eq!(tables.unwrap().0, 1, "herald's tables are in the new schema");
}

/// A routine file runs again when its text differs from the text recorded for it (here the
/// record is made to differ, and the routine dropped, as an edit would be seen), and the
/// record then holds the file's text. SQLite has no routines.
async fn a_routine_whose_text_changed_runs_again(db: &Db) {
    let (routines, submit, schema): (&[&str], _, _) = match db.backend() {
        Backend::Sqlite => return,
        Backend::MySql => {
            (&["quota", "receipt", "submit", "text", "utf8", "wake"], "submit_v1", "DATABASE()")
        }
        Backend::Postgres => (&["quota", "submit", "text"], "herald_submit_v1", "current_schema()"),
    };
    let mut conn = db.conn().await;
    let recorded: Vec<(String,)> = raw_query_as!(
        conn.as_conn(),
        "SELECT name FROM herald_routines ORDER BY name",
        [],
        fetch_all
    )
    .unwrap();
    let names: Vec<&str> = recorded.iter().map(|(n,)| n.as_str()).collect();
    assert_eq!(names, routines);
    let drop_it = match db.backend() {
        Backend::MySql => format!("DROP PROCEDURE {submit}"),
        _ => format!("DROP FUNCTION {submit}"),
    };
    raw_execute!(conn.as_conn(), &drop_it, []).unwrap();
    let stale = "UPDATE herald_routines SET checksum = $1 WHERE name = 'submit'";
    assert_eq!(raw_execute!(conn.as_conn(), stale, [vec![0u8; 32]]).unwrap(), 1);
    drop(conn);
    let report = db.store.migrate().await.unwrap();
    assert!(report.applied.is_empty(), "no migration, only the routine: {report:?}");
    let mut conn = db.conn().await;
    let (exists,): (i64,) = raw_query_as!(
        conn.as_conn(),
        &format!(
            "SELECT COUNT(*) FROM information_schema.routines
             WHERE routine_schema = {schema} AND routine_name = '{submit}'"
        ),
        [],
        fetch_one
    )
    .unwrap();
    assert_eq!(exists, 1, "{submit} is back");
    let (zeroed,): (i64,) = raw_query_as!(
        conn.as_conn(),
        "SELECT COUNT(*) FROM herald_routines WHERE checksum = $1",
        [vec![0u8; 32]],
        fetch_one
    )
    .unwrap();
    assert_eq!(zeroed, 0, "the record holds the file's text again");
}

async fn open_applies_every_migration_this_build_knows(db: &Db) {
    let known = schema_version_known(db.backend());
    let expected = match db.backend() {
        Backend::Sqlite => 14,
        Backend::Postgres => 22,
        Backend::MySql => 15,
    };
    assert_eq!(known, expected, "a new migration: update this test and ARCHITECTURE.md");
    let versions = db.store.schema_versions().await.unwrap();
    assert_eq!(versions, (1..=known).collect::<Vec<_>>());
    let report = db.store.migrate().await.unwrap();
    assert_eq!(report, MigrateReport { applied: vec![], version: known });
}

async fn opening_again_is_idempotent_and_keeps_the_data(db: &Db) {
    let t = tenant(db, "acme").await;
    let versions = db.store.schema_versions().await.unwrap();
    for _ in 0..2 {
        let again = Store::open(&db.url, &StoreOptions::default()).await.unwrap();
        assert_eq!(again.schema_versions().await.unwrap(), versions);
        assert!(tenant_exists(again.acquire().await.unwrap().as_conn(), t).await.unwrap());
        again.close().await;
    }
}

/// The database records version `known + 1`, and lacks `known` (as if it were pending):
/// opening must neither apply `known` nor touch anything else.
async fn a_newer_schema_is_refused_before_anything_is_written(db: &Db) {
    let known = schema_version_known(db.backend());
    let mut conn = db.conn().await;
    let newer =
        "INSERT INTO herald_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, 'from a newer herald', TRUE, $2, 0)";
    assert_eq!(raw_execute!(conn.as_conn(), newer, [known + 1, vec![0u8; 48]]).unwrap(), 1);
    let pending = "DELETE FROM herald_migrations WHERE version = $1";
    assert_eq!(raw_execute!(conn.as_conn(), pending, [known]).unwrap(), 1);
    drop(conn);
    let before = db.store.schema_versions().await.unwrap();

    let refused = Store::open(&db.url, &StoreOptions::default()).await.expect_err("opened");
    assert!(
        matches!(refused, StoreError::SchemaNewer { found, known: k } if found == known + 1 && k == known),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("nothing was changed"), "{refused}");
    assert_eq!(db.store.migrate().await.expect_err("migrated").to_string(), refused.to_string());
    assert_eq!(db.store.schema_versions().await.unwrap(), before, "the refusal wrote");
}

async fn herald_keeps_its_own_bookkeeping_table(db: &Db) {
    let catalog = match db.backend() {
        Backend::Sqlite => "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
        Backend::Postgres => {
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1"
        }
        Backend::MySql => {
            "SELECT count(*) FROM information_schema.tables
             WHERE table_schema = DATABASE() AND table_name = $1"
        }
    };
    let mut conn = db.conn().await;
    for (table, expected) in [("herald_migrations", 1), ("_sqlx_migrations", 0)] {
        let (n,): (i64,) = raw_query_as!(conn.as_conn(), catalog, [table], fetch_one).unwrap();
        assert_eq!(n, expected, "{table}");
    }
}
