//! `Debug` of every herald-server type that holds a key, a secret or a digest of one shows
//! none of it (guarantee 11), while the fields that are not secret stay visible.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::keys;
use crate::serve::{ServeConfig, state};
use crate::wire::{KeyCreated, SecretRotated, TenantCreated};
use herald::Herald;
use herald::{DbUrl, NewApiKey, Store, StoreOptions};

const API_KEY: &str = "hk_0123456789abcdef_k3ysecret";
const WEBHOOK_SECRET: &str = "whsec_c2lnbmluZ3NlY3JldA==";
const ADMIN_KEY: &str = "adm1nsecret";
const METRICS_TOKEN: &str = "m3trics";
const DB_PASSWORD: &str = "s3cr3t";

/// Each secret, and how `Debug` would spell a digest of it (bytes in decimal).
fn forbidden() -> Vec<String> {
    let digest = |s: &str| format!("{:?}", keys::digest(s))[1..20].to_string();
    let mut all: Vec<String> =
        [API_KEY, "k3ysecret", WEBHOOK_SECRET, ADMIN_KEY, METRICS_TOKEN, DB_PASSWORD]
            .map(String::from)
            .into();
    all.extend([digest("k3ysecret"), digest(ADMIN_KEY), digest(METRICS_TOKEN)]);
    all
}

/// (what, its Debug, a non-secret text it must still show)
fn check(cases: &[(&str, String, &str)]) {
    for (what, shown, visible) in cases {
        assert!(shown.contains(visible), "{what}: {visible:?} is missing from {shown}");
        for secret in forbidden() {
            assert!(!shown.contains(&secret), "{what}: shows {secret:?}: {shown}");
        }
    }
}

fn config() -> ServeConfig {
    ServeConfig {
        listen: Some(([127, 0, 0, 1], 8080).into()),
        admin_key: Some(ADMIN_KEY.into()),
        viewer_key: None,
        metrics_token: Some(METRICS_TOKEN.into()),
        worker: None,
        reconciler: None,
        retention: None,
        channels: Vec::new(),
        metrics_per_tenant: false,
        http: crate::listen::HttpOptions::default(),
    }
}

#[test]
fn responses_keys_and_config_hide_their_secrets() {
    let key_id = herald::KeyId::parse("0123456789abcdef").unwrap();
    let key = NewApiKey { key_id, plaintext: API_KEY.into() };
    check(&[
        ("NewApiKey", format!("{key:?}"), "0123456789abcdef"),
        (
            "TenantCreated",
            format!(
                "{:?}",
                TenantCreated {
                    id: "t-1".into(),
                    name: "acme".into(),
                    api_key: API_KEY.into(),
                    webhook_secret: WEBHOOK_SECRET.into(),
                }
            ),
            "acme",
        ),
        (
            "KeyCreated",
            format!(
                "{:?}",
                KeyCreated { key_id: "0123456789abcdef".into(), api_key: API_KEY.into() }
            ),
            "0123456789abcdef",
        ),
        (
            "SecretRotated",
            format!("{:?}", SecretRotated { webhook_secret: WEBHOOK_SECRET.into() }),
            "SecretRotated",
        ),
        ("ServeConfig", format!("{:?}", config()), "127.0.0.1:8080"),
    ]);
}

/// The test PostgreSQL's URL with a password planted (the server trusts, so it is unused).
fn postgres_with_password() -> Option<String> {
    let url = match std::env::var("HERALD_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but HERALD_TEST_POSTGRES_URL is not: PostgreSQL tests must run in CI")
        }
        _ => return None,
    };
    let (scheme, rest) = url.split_once("://")?;
    let (user, host) = rest.split_once('@')?;
    let user = user.split(':').next().unwrap_or(user);
    Some(format!("{scheme}://{user}:{DB_PASSWORD}@{host}"))
}

/// AppState holds digests of the admin key and metrics token, and the store's pool (whose
/// connect options hold the database password).
#[tokio::test]
async fn app_state_hides_digests_and_the_database_password() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut urls = vec![format!("sqlite://{}", dir.path().join("herald.db").display())];
    urls.extend(postgres_with_password());
    for url in urls {
        let store = Store::connect(&DbUrl::parse(&url).expect("url"), &StoreOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let herald = Herald::from_store(store.clone());
        let app = state(&herald, &config());
        assert!(app.admin_key_sha256.is_some() && app.metrics_token_sha256.is_some());
        check(&[
            ("AppState", format!("{app:?}"), store.backend().name()),
            ("Herald", format!("{herald:?}"), store.backend().name()),
        ]);
        store.close().await;
    }
}
