//! API keys: a key id looked up to its tenant and secret hash, revoked only by its tenant,
//! and both the id and the hash unique.

use super::*;
use herald_store::keys::{KeyRow, api_key_insert, api_key_lookup, api_key_revoke};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Now, StoreError};

conformance!(
    a_key_is_looked_up_by_its_id,
    only_its_tenant_revokes_a_key_and_it_stays_revoked,
    key_ids_and_secret_hashes_are_unique,
);

async fn insert(db: &Db, key_id: &str, tenant: Uuid, hash: &[u8]) -> Result<(), StoreError> {
    let mut tx = db.tx().await;
    api_key_insert(tx.as_conn(), key_id, tenant, hash, Now::At(T0)).await?;
    tx.commit().await
}

async fn lookup(db: &Db, key_id: &str) -> Option<KeyRow> {
    api_key_lookup(db.conn().await.as_conn(), key_id).await.unwrap()
}

async fn revoke(db: &Db, tenant: Uuid, key_id: &str) -> bool {
    let mut tx = db.tx().await;
    let revoked = api_key_revoke(tx.as_conn(), tenant, key_id, Now::At(T0 + 1)).await.unwrap();
    tx.commit().await.unwrap();
    revoked
}

async fn a_key_is_looked_up_by_its_id(db: &Db) {
    let t = tenant(db, "acme").await;
    insert(db, "0123456789abcdef", t, &[7; 32]).await.unwrap();
    let found = lookup(db, "0123456789abcdef").await.expect("the key");
    let expected = KeyRow {
        key_id: "0123456789abcdef".into(),
        tenant_id: t,
        secret_sha256: vec![7; 32],
        revoked: false,
    };
    assert_eq!(found, expected);
    assert!(lookup(db, "fedcba9876543210").await.is_none());
}

async fn only_its_tenant_revokes_a_key_and_it_stays_revoked(db: &Db) {
    let acme = tenant(db, "acme").await;
    let globex = tenant(db, "globex").await;
    insert(db, "acme-key", acme, &[1; 32]).await.unwrap();
    insert(db, "other-key", acme, &[2; 32]).await.unwrap();

    assert!(!revoke(db, globex, "acme-key").await, "another tenant revoked it");
    assert!(!lookup(db, "acme-key").await.unwrap().revoked);
    assert!(!revoke(db, acme, "no-such-key").await);
    assert!(revoke(db, acme, "acme-key").await);
    assert!(lookup(db, "acme-key").await.unwrap().revoked, "a revoked key looks live");
    assert!(revoke(db, acme, "acme-key").await, "revoking again finds the key");
    assert!(lookup(db, "acme-key").await.unwrap().revoked);
    assert!(!lookup(db, "other-key").await.unwrap().revoked, "revoked a neighbour");
}

async fn key_ids_and_secret_hashes_are_unique(db: &Db) {
    let t = tenant(db, "acme").await;
    insert(db, "key-1", t, &[1; 32]).await.unwrap();
    let same_id = insert(db, "key-1", t, &[2; 32]).await.expect_err("a second key-1");
    assert!(same_id.is_unique_violation(), "{same_id:?}");
    let same_hash = insert(db, "key-2", t, &[1; 32]).await.expect_err("a second hash");
    assert!(same_hash.is_unique_violation(), "{same_hash:?}");
    let short = insert(db, "key-3", t, &[3; 16]).await.expect_err("a 16-byte hash");
    assert!(!short.is_unique_violation(), "{short:?}");
    assert_eq!(lookup(db, "key-1").await.unwrap().secret_sha256, vec![1; 32]);
    assert!(lookup(db, "key-2").await.is_none() && lookup(db, "key-3").await.is_none());
}
