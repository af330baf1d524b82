//! Keys kept in the store (issue 38) across two `ripcord serve` replicas over one database (a
//! real SQLite file, and a real Postgres when `RIPCORD_TEST_POSTGRES_URL` names one): a key made
//! through `POST /admin/keys` on one replica works on the other within the stated bound (one
//! `keys_poll_ms` plus a query), keeps its limits and budget, rotates with a grace period, and
//! stops working everywhere within the same bound once revoked; the config file's key keeps
//! working beside them, and every admin action is in the audit table; a key's own budget
//! survives a change to its limits and a `kill -9`.
#![allow(clippy::unwrap_used, clippy::print_stderr)] // test helpers fail the test by panicking

#[path = "support/store.rs"]
mod store_support;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ripcord_chaos::{FakeVendor, Wire};
use serde_json::{Value, json};
use store_support::{Dir, postgres_db, sqlite_url, store_config, temp_dir};

const POLL_MS: u64 = 200;
/// The stated bound (one poll plus a query), with room for a loaded CI machine.
const BOUND: Duration = Duration::from_millis(POLL_MS + 2800);
const KEY: &str = "acme-keys-config-key-0123456789abcdef";
const ADMIN: &str = "admin-keys-key-0123456789abcdef";

fn config(dir: &Path, vendor: &FakeVendor, url: &str, replica: &str) -> PathBuf {
    let path = dir.join(format!("ripcord-{replica}.toml"));
    let text = store_config(
        &vendor.base_url(),
        "KEYS",
        url,
        &dir.join(format!("spool-{replica}.jsonl")),
        100,
        &format!("keys = true\nkeys_poll_ms = {POLL_MS}\n"),
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn serve(config: &Path) -> support::Served {
    support::serve_with_env(
        config,
        &[
            ("RIPCORD_TEST_KEYS_KEY", KEY),
            ("RIPCORD_TEST_KEYS_ADMIN", ADMIN),
        ],
    )
}

async fn chat(client: &reqwest::Client, s: &support::Served, key: &str, max_tokens: u32) -> u16 {
    support::call_route_with(client, &s.url, "gpt-4o", Some(key), max_tokens)
        .await
        .0
}

async fn admin(
    client: &reqwest::Client,
    s: &support::Served,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = client
        .request(method, format!("{}{path}", s.url))
        .bearer_auth(ADMIN);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Asks `s` with `key` until it answers `want`; how long that took, and how many of the
/// answers were past the key check (calls the ledger records). Fails past [`BOUND`].
async fn until_status(
    client: &reqwest::Client,
    s: &support::Served,
    key: &str,
    want: u16,
) -> (Duration, i64) {
    let started = Instant::now();
    let mut passed = 0;
    loop {
        let got = chat(client, s, key, 16).await;
        passed += i64::from(got != 401);
        if got == want {
            return (started.elapsed(), passed);
        }
        assert!(
            started.elapsed() < BOUND,
            "still {got} (not {want}) on the other replica after {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_key_made_on_one_replica_works_on_the_other(url: String, dir: Dir) {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let a = serve(&config(&dir.0, &vendor, &url, "a"));
    let b = serve(&config(&dir.0, &vendor, &url, "b"));
    let client = reqwest::Client::new();
    use reqwest::Method;

    assert_eq!(chat(&client, &b, "rck_not-a-key", 16).await, 401);
    let (status, made) = admin(
        &client,
        &a,
        Method::POST,
        "/admin/keys",
        Some(json!({"name": "globex-app", "tenant": "globex", "rpm": 3})),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let secret = made["secret"].as_str().unwrap().to_owned();
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(made["state"], "active");
    assert_eq!(
        chat(&client, &a, &secret, 16).await,
        200,
        "at once on the replica that made it"
    );
    let (seen, passed_seen) = until_status(&client, &b, &secret, 200).await;
    eprintln!("the key made on a worked on b after {seen:?} (poll {POLL_MS} ms)");
    // Its rpm (3 a minute, per replica without Redis) holds on the replica that made it.
    assert_eq!(chat(&client, &a, &secret, 16).await, 200);
    assert_eq!(chat(&client, &a, &secret, 16).await, 200);
    assert_eq!(
        chat(&client, &a, &secret, 16).await,
        429,
        "the key's rpm = 3"
    );
    // The config file's key works beside the store's.
    assert_eq!(chat(&client, &b, KEY, 16).await, 200);

    // A budget of its own: a request that needs more than the whole budget is refused.
    let (status, small) = admin(
        &client,
        &a,
        Method::POST,
        "/admin/keys",
        Some(json!({"tenant": "globex", "budget_tokens": 40})),
    )
    .await;
    assert_eq!(status, 201, "{small}");
    let small_secret = small["secret"].as_str().unwrap();
    assert_eq!(chat(&client, &a, small_secret, 8).await, 200);
    assert_eq!(
        chat(&client, &a, small_secret, 200).await,
        429,
        "more than the key's budget"
    );

    // A bad change is refused naming the field, and changes nothing.
    let (status, refused) = admin(
        &client,
        &a,
        Method::PATCH,
        &format!("/admin/keys/{id}"),
        Some(json!({"rpm": 0})),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("rpm"), "{refused}");
    let (status, _) = admin(
        &client,
        &a,
        Method::PATCH,
        &format!("/admin/keys/{id}"),
        Some(json!({"rpm": null})),
    )
    .await;
    assert_eq!(status, 200);

    // Rotation: the new secret works, the old one too until the grace period ends.
    let (status, rotated) = admin(
        &client,
        &a,
        Method::POST,
        &format!("/admin/keys/{id}/rotate"),
        Some(json!({"grace_s": 600})),
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    let fresh = rotated["secret"].as_str().unwrap().to_owned();
    assert_ne!(fresh, secret);
    let (_, passed_fresh) = until_status(&client, &b, &fresh, 200).await;
    assert_eq!(
        chat(&client, &b, &secret, 16).await,
        200,
        "the old secret within its grace"
    );

    // Revocation: both secrets stop on the other replica within the bound.
    let (status, revoked) = admin(
        &client,
        &a,
        Method::POST,
        &format!("/admin/keys/{id}/revoke"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(revoked["state"], "revoked");
    assert_eq!(chat(&client, &a, &fresh, 16).await, 401, "at once on a");
    let (gone, passed_gone) = until_status(&client, &b, &fresh, 401).await;
    eprintln!("the revoked key stopped on b after {gone:?}");
    assert_eq!(chat(&client, &b, &secret, 16).await, 401);
    assert_eq!(chat(&client, &b, KEY, 16).await, 200);

    // The list never shows a secret; the audit holds every action, read on the other replica.
    let (_, list) = admin(&client, &b, Method::GET, "/admin/keys", None).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 2, "{list}");
    assert!(!list.to_string().contains(&fresh[4..]), "{list}");
    let (_, audit) = admin(&client, &b, Method::GET, "/admin/audit", None).await;
    let actions: Vec<&str> = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["key_id"] == id.as_str())
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["revoke", "rotate", "change", "create"], "{audit}");

    // The store key's calls are in the ledger under its id: five asked directly (four on a, one
    // of them refused by its rpm; one on b with the old secret), and those made while waiting
    // for b to see a change.
    let recorded = 5 + passed_seen + passed_fresh + passed_gone;
    let started = Instant::now();
    loop {
        let (_, spent) = admin(
            &client,
            &b,
            Method::GET,
            &format!("/admin/spend?key={id}"),
            None,
        )
        .await;
        if spent["groups"][0]["calls"] == recorded {
            break;
        }
        assert!(started.elapsed() < BOUND, "{spent}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A tenant key does not reach the key endpoints.
    let tenant = support::get_keyed(&format!("{}/admin/keys", a.url), KEY).await;
    assert_eq!(tenant.status(), 401);
}

/// A store key's own budget survives a `kill -9` and a change to its limits: what it spent (in
/// the ledger within the flush bound) is charged again at the next start.
async fn a_key_s_budget_survives_a_restart(url: String, dir: Dir) {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let cfg = config(&dir.0, &vendor, &url, "a");
    let client = reqwest::Client::new();
    let store = ripcord_store::Store::connect(&url, &ripcord_store::StoreOptions::default())
        .await
        .unwrap();
    let mut a = serve(&cfg);
    let (status, made) = admin(
        &client,
        &a,
        reqwest::Method::POST,
        "/admin/keys",
        Some(json!({"tenant": "globex", "budget_tokens": 400})),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let secret = made["secret"].as_str().unwrap().to_owned();
    let id = made["id"].as_str().unwrap().to_owned();
    let spent_of = |store: ripcord_store::Store, id: String| async move {
        let by_key = store.tokens_by_key_since(0).await.unwrap();
        by_key.iter().find(|(k, _)| *k == id).map_or(0, |(_, t)| *t)
    };
    let mut spent = 0;
    while spent < 250 {
        assert_eq!(chat(&client, &a, &secret, 16).await, 200);
        let started = Instant::now();
        let before = spent;
        while spent == before {
            assert!(
                started.elapsed() < BOUND,
                "the ledger did not take the call"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
            spent = spent_of(store.clone(), id.clone()).await;
        }
    }
    // A change to its limits rebuilds its limiter, not what it spent.
    let (status, _) = admin(
        &client,
        &a,
        reqwest::Method::PATCH,
        &format!("/admin/keys/{id}"),
        Some(json!({"rpm": 1000})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        chat(&client, &a, &secret, 200).await,
        429,
        "about 210 tokens do not fit what is left of 400 after {spent}"
    );
    a.child.kill().unwrap(); // SIGKILL
    let _ = a.child.wait();
    let a = serve(&cfg);
    assert_eq!(
        chat(&client, &a, &secret, 200).await,
        429,
        "after the restart the {spent} tokens are still charged"
    );
    assert_eq!(
        chat(&client, &a, &secret, 16).await,
        200,
        "what is left serves"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_key_s_budget_survives_a_restart() {
    let dir = temp_dir("key-budget-sqlite");
    let url = sqlite_url(&dir);
    a_key_s_budget_survives_a_restart(url, dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_key_s_budget_survives_a_restart() {
    let Some(url) = postgres_db().await else {
        return;
    };
    a_key_s_budget_survives_a_restart(url, temp_dir("key-budget-postgres")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_key_made_on_one_replica_works_on_the_other() {
    let dir = temp_dir("keys-sqlite");
    let url = sqlite_url(&dir);
    a_key_made_on_one_replica_works_on_the_other(url, dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_key_made_on_one_replica_works_on_the_other() {
    let Some(url) = postgres_db().await else {
        return;
    };
    a_key_made_on_one_replica_works_on_the_other(url, temp_dir("keys-postgres")).await;
}
