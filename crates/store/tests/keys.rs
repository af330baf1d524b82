//! Keys in the store, against a real SQLite file and a real Postgres: made with a secret shown
//! once and kept as a digest, rotated with a grace period, revoked, changed, every action in
//! the audit table.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stderr)]

#[macro_use]
mod support;

use std::time::Duration;

use ripcord_store::{KeyChange, KeySettings, Store, StoreError, StoreOptions, digest_of};
use support::Db;

async fn open(db: &Db) -> Store {
    Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap()
}

/// A key with default settings, made by `admin@test`.
async fn plain_key(store: &Store) -> (ripcord_store::StoredKey, ripcord_store::NewSecret) {
    store
        .create_key(&KeySettings::default(), "admin@test")
        .await
        .unwrap()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn a_key_is_kept_as_a_digest_and_read_back(db: Db) {
    let store = open(&db).await;
    let settings = KeySettings {
        name: Some("acme-backend".into()),
        tenant: Some("acme".into()),
        routes: Some(vec!["chat".into()]),
        rpm: Some(60),
        tpm: Some(10_000),
        budget_tokens: Some(1_000_000),
        expires_ms: None,
    };
    let (key, secret) = store.create_key(&settings, "admin@test").await.unwrap();
    assert!(secret.expose().starts_with("rck_"));
    assert_eq!(key.digest, digest_of(secret.expose()));
    assert_eq!(key.settings, settings);
    // Nothing in the table holds the secret.
    let raw: Vec<String> = sqlx::query_scalar("SELECT digest FROM gateway_keys")
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert!(raw.iter().all(|d| !d.contains(&secret.expose()[4..])));
    let all = store.keys().await.unwrap();
    assert_eq!(all, vec![key.clone()]);
    assert_eq!(store.key(&key.id).await.unwrap(), key);
    assert!(matches!(
        store.key("key_nope").await,
        Err(StoreError::NoSuchKey(_))
    ));
}

async fn rotation_keeps_the_old_secret_for_the_grace_period(db: Db) {
    let store = open(&db).await;
    let (key, old) = plain_key(&store).await;
    let (rotated, new) = store
        .rotate_key(&key.id, Duration::from_secs(60), "admin@test")
        .await
        .unwrap();
    assert_ne!(old, new);
    let now = now_ms();
    let accepted: Vec<_> = rotated.digests_at(now).collect();
    assert_eq!(
        accepted,
        vec![digest_of(new.expose()), digest_of(old.expose())]
    );
    assert_eq!(
        rotated.digests_at(now + 61_000).collect::<Vec<_>>(),
        vec![digest_of(new.expose())],
        "after the grace period only the new secret"
    );
    // Without grace the old one ends at once.
    let (now_only, newer) = store
        .rotate_key(&key.id, Duration::ZERO, "admin@test")
        .await
        .unwrap();
    assert_eq!(
        now_only.digests_at(now_ms()).collect::<Vec<_>>(),
        vec![digest_of(newer.expose())]
    );
}

async fn revocation_ends_every_secret_and_blocks_changes(db: Db) {
    let store = open(&db).await;
    let (key, _) = plain_key(&store).await;
    store
        .rotate_key(&key.id, Duration::from_secs(60), "admin@test")
        .await
        .unwrap();
    let revoked = store.revoke_key(&key.id, "admin@test").await.unwrap();
    assert!(!revoked.live_at(now_ms()));
    assert_eq!(revoked.digests_at(now_ms()).count(), 0);
    assert!(matches!(
        store
            .rotate_key(&key.id, Duration::ZERO, "admin@test")
            .await,
        Err(StoreError::NoSuchKey(_))
    ));
    assert!(matches!(
        store
            .change_key(&key.id, &KeyChange::default(), "admin@test", |_| Ok(()))
            .await,
        Err(StoreError::NoSuchKey(_))
    ));
}

async fn changes_are_checked_and_audited(db: Db) {
    let store = open(&db).await;
    let (key, _) = store
        .create_key(
            &KeySettings {
                tenant: Some("acme".into()),
                rpm: Some(5),
                ..KeySettings::default()
            },
            "admin@test",
        )
        .await
        .unwrap();
    let change: KeyChange =
        serde_json::from_str(r#"{"rpm": null, "tpm": 500, "routes": ["chat"]}"#).unwrap();
    let changed = store
        .change_key(&key.id, &change, "ops@test", |_| Ok(()))
        .await
        .unwrap();
    assert_eq!(changed.settings.rpm, None);
    assert_eq!(changed.settings.tpm, Some(500));
    assert_eq!(changed.settings.routes, Some(vec!["chat".into()]));
    assert_eq!(changed.settings.tenant.as_deref(), Some("acme"));
    // The caller's check refuses, and nothing changes.
    let err = store
        .change_key(&key.id, &change, "ops@test", |_| {
            Err("no route `chat`".into())
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no route"), "{err}");
    let zero: KeyChange = serde_json::from_str(r#"{"tpm": 0}"#).unwrap();
    let err = store
        .change_key(&key.id, &zero, "ops@test", |_| Ok(()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`tpm`"), "{err}");
    assert_eq!(store.key(&key.id).await.unwrap(), changed);
    store.revoke_key(&key.id, "ops@test").await.unwrap();
    let audit = store.audit(10).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(actions, ["revoke", "change", "create"]);
    assert!(audit.iter().all(|a| a.key_id.as_deref() == Some(&key.id)));
    assert_eq!(audit[1].actor, "ops@test");
    assert_eq!(audit[1].detail["after"]["tpm"], 500);
    assert_eq!(audit[1].detail["before"]["rpm"], 5);
}

on_both!(
    a_key_is_kept_as_a_digest_and_read_back,
    rotation_keeps_the_old_secret_for_the_grace_period,
    revocation_ends_every_secret_and_blocks_changes,
    changes_are_checked_and_audited,
);
