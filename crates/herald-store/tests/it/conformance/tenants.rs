//! Tenants: a unique name, and a signing secret rotated with the previous one kept.

use super::*;
use herald_store::AsConn;
use herald_store::sqlx::types::Uuid;
use herald_store::tenants::{tenant_exists, tenant_get, tenant_insert, tenant_rotate_secret};

conformance!(a_tenant_name_is_taken_once, a_rotation_keeps_the_previous_secret);

async fn a_tenant_name_is_taken_once(db: &Db) {
    let acme = Uuid::now_v7();
    let mut tx = db.tx().await;
    assert!(tenant_insert(tx.as_conn(), acme, "acme", "whsec_one").await.unwrap());
    let again = Uuid::now_v7();
    assert!(!tenant_insert(tx.as_conn(), again, "acme", "whsec_two").await.unwrap());
    // No statement failed: the transaction goes on.
    assert!(tenant_exists(tx.as_conn(), acme).await.unwrap());
    tx.commit().await.unwrap();

    let mut conn = db.conn().await;
    assert!(!tenant_exists(conn.as_conn(), again).await.unwrap());
    let row = tenant_get(conn.as_conn(), acme).await.unwrap().expect("acme");
    assert_eq!((row.id, row.name.as_str()), (acme, "acme"));
    assert_eq!((row.webhook_secret.as_str(), row.webhook_secret_previous), ("whsec_one", None));
    assert!(tenant_get(conn.as_conn(), again).await.unwrap().is_none());
}

async fn a_rotation_keeps_the_previous_secret(db: &Db) {
    let t = tenant(db, "acme").await;
    let mut tx = db.tx().await;
    assert!(tenant_rotate_secret(tx.as_conn(), t, "whsec_two").await.unwrap());
    assert!(tenant_rotate_secret(tx.as_conn(), t, "whsec_three").await.unwrap());
    assert!(!tenant_rotate_secret(tx.as_conn(), Uuid::now_v7(), "whsec_x").await.unwrap());
    tx.commit().await.unwrap();
    let row = tenant_get(db.conn().await.as_conn(), t).await.unwrap().unwrap();
    assert_eq!(row.webhook_secret, "whsec_three");
    assert_eq!(row.webhook_secret_previous.as_deref(), Some("whsec_two"));
}
