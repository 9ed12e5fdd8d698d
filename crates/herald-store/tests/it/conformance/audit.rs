//! The audit log's table and the dashboard's session rows: what the store keeps and reads
//! back on every backend; the audit log refuses every update (a trigger), so what was
//! written stays as it was until retention deletes it.

use super::*;
use herald_store::AsConn;
use herald_store::audit::{AuditRow, audit_insert, audit_list, audit_prune};
use herald_store::sqlx::types::Uuid;
use herald_store::ui_sessions::{
    UiSessionRow, ui_session_end, ui_session_get, ui_session_insert, ui_session_touch,
    ui_sessions_open, ui_sessions_prune,
};

conformance!(
    the_audit_log_reads_newest_first_by_tenant_and_page,
    the_audit_log_refuses_updates_and_is_pruned_by_age,
    a_session_row_ends_once_and_only_for_its_tenant,
);

fn entry(at_ms: i64, tenant: Option<Uuid>, action: &str) -> AuditRow {
    AuditRow {
        id: 0,
        at_ms,
        actor: if tenant.is_some() { "tenant".into() } else { "admin".into() },
        key_id: tenant.map(|_| "0123456789abcdef".to_string()),
        tenant_id: tenant,
        action: action.into(),
        target: Some("target ünïcode".into()),
        count: Some(7),
        address: Some("127.0.0.1".into()),
    }
}

async fn write(db: &Db, row: &AuditRow) {
    audit_insert(db.conn().await.as_conn(), row).await.unwrap();
}

async fn list(db: &Db, tenant: Option<Uuid>, before: Option<i64>, limit: i64) -> Vec<AuditRow> {
    audit_list(db.conn().await.as_conn(), tenant, before, limit).await.unwrap()
}

async fn the_audit_log_reads_newest_first_by_tenant_and_page(db: &Db) {
    let (a, b) = (tenant(db, "acme").await, tenant(db, "globex").await);
    for (i, (t, action)) in
        [(Some(a), "replay"), (None, "grant"), (Some(b), "cancel"), (Some(a), "bulk_replay")]
            .into_iter()
            .enumerate()
    {
        write(db, &entry(T0 + i as i64, t, action)).await;
    }
    let all = list(db, None, None, 10).await;
    let actions: Vec<&str> = all.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["bulk_replay", "cancel", "grant", "replay"]);
    assert!(all.windows(2).all(|w| w[0].id > w[1].id), "ids grow with time");
    let newest = &all[0];
    assert_eq!(
        (newest.at_ms, newest.actor.as_str(), newest.tenant_id, newest.count),
        (T0 + 3, "tenant", Some(a), Some(7))
    );
    assert_eq!(newest.target.as_deref(), Some("target ünïcode"));
    assert_eq!(newest.key_id.as_deref(), Some("0123456789abcdef"));
    let acme: Vec<String> =
        list(db, Some(a), None, 10).await.into_iter().map(|r| r.action).collect();
    assert_eq!(acme, ["bulk_replay", "replay"]);
    let page: Vec<String> =
        list(db, None, Some(all[1].id), 1).await.into_iter().map(|r| r.action).collect();
    assert_eq!(page, ["grant"], "before an id, at most the limit");
}

async fn the_audit_log_refuses_updates_and_is_pruned_by_age(db: &Db) {
    let t = tenant(db, "acme").await;
    write(db, &entry(T0, Some(t), "replay")).await;
    write(db, &entry(T0 + 10_000, Some(t), "cancel")).await;
    let mut conn = db.conn().await;
    for sql in [
        "UPDATE herald_audit SET action = 'nothing' WHERE tenant_id = $1",
        "UPDATE herald_audit SET count = 0 WHERE tenant_id = $1",
    ] {
        assert!(raw_execute!(conn.as_conn(), sql, [t]).is_err(), "{sql}");
    }
    drop(conn);
    let kept: Vec<String> = list(db, None, None, 10).await.into_iter().map(|r| r.action).collect();
    assert_eq!(kept, ["cancel", "replay"], "unchanged");
    let pruned = audit_prune(db.conn().await.as_conn(), T0 + 5_000, 100).await.unwrap();
    assert_eq!(pruned, 1);
    let kept: Vec<String> = list(db, None, None, 10).await.into_iter().map(|r| r.action).collect();
    assert_eq!(kept, ["cancel"]);
}

async fn a_session_row_ends_once_and_only_for_its_tenant(db: &Db) {
    let (a, b) = (tenant(db, "acme").await, tenant(db, "globex").await);
    let row = |id: &str, t: Option<Uuid>| UiSessionRow {
        id: id.into(),
        tenant_id: t,
        key_id: t.map(|_| "0123456789abcdef".to_string()),
        created_ms: T0,
        seen_ms: T0,
        expires_ms: T0 + 1_000,
        ended: None,
        address: Some("::1".into()),
        agent: Some("a browser".into()),
        viewer: false,
    };
    let ids = ["a".repeat(32), "b".repeat(32), "c".repeat(32)];
    for (id, t) in ids.iter().zip([Some(a), Some(b), None]) {
        ui_session_insert(db.conn().await.as_conn(), &row(id, t)).await.unwrap();
    }
    let got = ui_session_get(db.conn().await.as_conn(), &ids[0]).await.unwrap();
    assert_eq!(got, Some(row(&ids[0], Some(a))));
    assert_eq!(ui_session_get(db.conn().await.as_conn(), &"d".repeat(32)).await.unwrap(), None);
    ui_session_touch(db.conn().await.as_conn(), &ids[0], T0 + 500).await.unwrap();
    let open = ui_sessions_open(db.conn().await.as_conn(), None, T0 + 600, 10).await.unwrap();
    assert_eq!(open.len(), 3);
    let acme = ui_sessions_open(db.conn().await.as_conn(), Some(a), T0 + 600, 10).await.unwrap();
    assert_eq!(
        acme.iter().map(|r| (r.id.as_str(), r.seen_ms)).collect::<Vec<_>>(),
        [(&*ids[0], T0 + 500)]
    );
    // globex cannot end acme's or the admin's; the admin's end takes any, once.
    for id in [&ids[0], &ids[2]] {
        assert!(
            !ui_session_end(db.conn().await.as_conn(), id, Some(b), T0, "revoked").await.unwrap()
        );
    }
    assert!(
        ui_session_end(db.conn().await.as_conn(), &ids[0], None, T0 + 700, "signed_out")
            .await
            .unwrap()
    );
    assert!(
        !ui_session_end(db.conn().await.as_conn(), &ids[0], None, T0 + 800, "revoked")
            .await
            .unwrap()
    );
    let ended = ui_session_get(db.conn().await.as_conn(), &ids[0]).await.unwrap().unwrap();
    assert_eq!(ended.ended, Some((T0 + 700, "signed_out".to_string())));
    let open = ui_sessions_open(db.conn().await.as_conn(), None, T0 + 900, 10).await.unwrap();
    assert_eq!(open.len(), 2, "an ended session is not open");
    assert!(
        ui_sessions_open(db.conn().await.as_conn(), None, T0 + 1_000, 10).await.unwrap().is_empty(),
        "expired"
    );
    // Pruned once ended or expired before the cutoff.
    assert_eq!(ui_sessions_prune(db.conn().await.as_conn(), T0 + 750, 10).await.unwrap(), 1);
    assert_eq!(ui_sessions_prune(db.conn().await.as_conn(), T0 + 2_000, 10).await.unwrap(), 2);
}
