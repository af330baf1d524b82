//! `ripcord serve` with a `[store]`: every call lands in the ledger (issue 38), through a real
//! SQLite file (and a real Postgres when `RIPCORD_TEST_POSTGRES_URL` names one; `cargo xtask
//! test` starts it), driven over HTTP on loopback against a fake vendor.
//!
//! - a `kill -9` loses nothing that was in the database, which is every row older than the
//!   flush bound (`flush_interval_ms` plus one write);
//! - SIGTERM writes everything queued before the process exits;
//! - a tenant's budget spend survives a `kill -9` (charged again from the ledger at start);
//! - a database that refuses writes (its table taken away) does not stop serving, and every
//!   row is there, once, after it is back.
#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stderr)] // test helpers fail the test by panicking

#[path = "support/store.rs"]
mod store_support;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::Fetch;

use ripcord_chaos::{FakeVendor, Wire};
use ripcord_store::{GroupBy, SpendFilter, Store, StoreOptions};
use serde_json::json;
use store_support::{Dir, postgres_db, sqlite_url, store_config, temp_dir};

const FLUSH_MS: u64 = 100;
/// The documented bound: one flush interval plus one write (generous for a loaded CI box).
const FLUSH_BOUND: Duration = Duration::from_millis(FLUSH_MS + 1900);

fn config(dir: &Path, vendor: &FakeVendor, url: &str, flush_ms: u64) -> PathBuf {
    let path = dir.join("ripcord.toml");
    let text = store_config(
        &vendor.base_url(),
        "LEDGER",
        url,
        &dir.join("spool.jsonl"),
        flush_ms,
        "",
    );
    std::fs::write(&path, text).unwrap();
    path
}

const KEY: &str = "acme-ledger-key-0123456789abcdef";
const ADMIN: &str = "admin-ledger-key-0123456789abcdef";

fn serve(config: &Path) -> support::Served {
    support::serve_with_env(
        config,
        &[
            ("RIPCORD_TEST_LEDGER_KEY", KEY),
            ("RIPCORD_TEST_LEDGER_ADMIN", ADMIN),
        ],
    )
}

async fn ask(client: &reqwest::Client, s: &support::Served) -> u16 {
    client
        .post(format!("{}/v1/chat/completions", s.url))
        .bearer_auth(KEY)
        .json(&json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn calls(store: &Store) -> i64 {
    store.row_counts().await.unwrap().0
}

/// Polls until the ledger holds `n` calls; how long that took. Fails past `bound`.
async fn until_calls(store: &Store, n: i64, bound: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let got = calls(store).await;
        if got == n {
            return started.elapsed();
        }
        assert!(got < n, "more calls than were made: {got} > {n}");
        assert!(
            started.elapsed() < bound,
            "the ledger holds {got} of {n} calls after {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn sigterm(s: &mut support::Served) {
    s.signal("TERM");
    let started = Instant::now();
    while s.child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "ripcord serve did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn kill_nine_loses_nothing_older_than_the_bound(url: String, dir: Dir) {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let cfg = config(&dir.0, &vendor, &url, FLUSH_MS);
    let client = reqwest::Client::new();
    let mut first = serve(&cfg);
    for _ in 0..20 {
        assert_eq!(ask(&client, &first).await, 200);
    }
    let store = Store::connect(&url, &StoreOptions::default())
        .await
        .unwrap();
    let took = until_calls(&store, 20, FLUSH_BOUND).await;
    eprintln!("20 calls were in the ledger {took:?} after the last answer");
    first.child.kill().unwrap(); // SIGKILL: no drain, no flush
    first.child.wait().unwrap();
    assert_eq!(calls(&store).await, 20);
    let second = serve(&cfg);
    for _ in 0..5 {
        assert_eq!(ask(&client, &second).await, 200);
    }
    until_calls(&store, 25, FLUSH_BOUND).await;
    let acme = SpendFilter {
        tenant: Some("acme".into()),
        ..SpendFilter::default()
    };
    let spent = store.spend(&acme, GroupBy::Model).await.unwrap();
    assert_eq!(spent.len(), 1, "{spent:?}");
    assert_eq!(
        (spent[0].group.as_deref(), spent[0].calls),
        (Some("gpt-4o"), 25)
    );
    assert!(
        spent[0].tokens_in > 0 && spent[0].tokens_out > 0,
        "{spent:?}"
    );
    assert_eq!(
        store.row_counts().await.unwrap(),
        (25, 25),
        "one attempt row per call"
    );

    // The same through the admin endpoint, as JSON and CSV, and through `ripcord spend`.
    let url_of = |q: &str| format!("{}/admin/spend?{q}", second.url);
    let v: serde_json::Value = client
        .get(url_of("tenant=acme&group_by=model&from=1970-01-01"))
        .bearer_auth(ADMIN)
        .json_body()
        .await;
    assert_eq!(v["groups"][0]["group"], "gpt-4o", "{v}");
    assert_eq!(v["groups"][0]["calls"], 25, "{v}");
    let csv = client
        .get(url_of("group_by=day"))
        .bearer_auth(ADMIN)
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap();
    assert_eq!(csv.headers()["content-type"], "text/csv; charset=utf-8");
    let text = csv.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "day,calls,degraded,tokens_in,tokens_out,tokens_cached,cost_usd"
    );
    assert!(lines[1].contains(",25,0,"), "{text}");
    let tenant_key = client
        .get(url_of("group_by=day"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(
        tenant_key.status(),
        401,
        "a tenant key does not read the ledger"
    );
    let bad = client
        .get(url_of("group_by=tenant"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("group_by"));
    let out = support::ripcord()
        .env("RIPCORD_TEST_LEDGER_KEY", KEY)
        .env("RIPCORD_TEST_LEDGER_ADMIN", ADMIN)
        .args(["spend", "--config"])
        .arg(&cfg)
        .args(["--tenant", "acme", "--group-by", "model", "--format", "csv"])
        .output()
        .unwrap();
    let text = support::stdout_of("ripcord spend", &out);
    assert!(
        text.lines().nth(1).unwrap().starts_with("gpt-4o,25,0,"),
        "{text}"
    );
}

async fn sigterm_writes_everything_queued(url: String, dir: Dir) {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    // No timed flush within the test: only the shutdown writes.
    let cfg = config(&dir.0, &vendor, &url, 600_000);
    let client = reqwest::Client::new();
    let mut s = serve(&cfg);
    for _ in 0..12 {
        assert_eq!(ask(&client, &s).await, 200);
    }
    let store = Store::connect(&url, &StoreOptions::default())
        .await
        .unwrap();
    assert_eq!(
        calls(&store).await,
        0,
        "nothing is written before a batch is due"
    );
    sigterm(&mut s).await;
    assert_eq!(store.row_counts().await.unwrap(), (12, 12));
}

async fn an_outage_keeps_serving_and_loses_nothing(url: String, dir: Dir) {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let cfg = config(&dir.0, &vendor, &url, FLUSH_MS);
    let client = reqwest::Client::new();
    let mut s = serve(&cfg);
    let store = Store::connect(&url, &StoreOptions::default())
        .await
        .unwrap();
    for _ in 0..5 {
        assert_eq!(ask(&client, &s).await, 200);
    }
    until_calls(&store, 5, FLUSH_BOUND).await;
    sqlx::query("ALTER TABLE ledger_calls RENAME TO ledger_calls_away")
        .execute(store.pool())
        .await
        .unwrap();
    for _ in 0..30 {
        assert_eq!(
            ask(&client, &s).await,
            200,
            "the gateway serves while the store refuses"
        );
    }
    // The rows wait in the spool.
    let spool = dir.0.join("spool.jsonl");
    let started = Instant::now();
    while !spool.exists() {
        assert!(started.elapsed() < FLUSH_BOUND, "nothing was spooled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sqlx::query("ALTER TABLE ledger_calls_away RENAME TO ledger_calls")
        .execute(store.pool())
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(ask(&client, &s).await, 200);
    }
    // The writer retries every second: one retry plus a flush.
    until_calls(&store, 38, FLUSH_BOUND + Duration::from_secs(1)).await;
    sigterm(&mut s).await;
    assert_eq!(
        store.row_counts().await.unwrap(),
        (38, 38),
        "every call once"
    );
    let log: Vec<String> = s.log.try_iter().collect();
    let flushed = log
        .iter()
        .find(|l| l.starts_with("ripcord: ledger flushed"))
        .unwrap_or_else(|| panic!("no flush line in {log:?}"));
    assert!(flushed.contains("0 dropped"), "{flushed}");
}

/// One call of `max_tokens` with the tenant's key: its status and body.
async fn ask_for(client: &reqwest::Client, s: &support::Served, max_tokens: u32) -> (u16, String) {
    support::call_route_with(client, &s.url, "gpt-4o", Some(KEY), max_tokens).await
}

/// A gateway with `[budget] tokens_per_window = 400` (and `budget`) whose tenant has spent at
/// least 250 of them, every call in the ledger, so the request a fresh budget would hold (about
/// 200 tokens) is refused.
struct Spent {
    _vendor: FakeVendor,
    cfg: PathBuf,
    client: reqwest::Client,
    served: support::Served,
    spent: u64,
}

async fn spend_most_of_a_budget(url: &str, dir: &Dir, budget: &str) -> Spent {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let cfg = config(&dir.0, &vendor, url, FLUSH_MS);
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!("\n[budget]\ntokens_per_window = 400\n{budget}\n"));
    std::fs::write(&cfg, text).unwrap();
    let client = reqwest::Client::new();
    let store = Store::connect(url, &StoreOptions::default()).await.unwrap();
    let served = serve(&cfg);
    let mut spent = 0;
    let mut n = 0;
    while spent < 250 {
        assert_eq!(ask_for(&client, &served, 16).await.0, 200);
        n += 1;
        until_calls(&store, n, FLUSH_BOUND).await;
        spent = store.tokens_since(Some("acme"), 0).await.unwrap();
    }
    let (status, body) = ask_for(&client, &served, 200).await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("budget_exhausted"), "{body}");
    Spent {
        _vendor: vendor,
        cfg,
        client,
        served,
        spent,
    }
}

/// After a restart or a reload, `s` still refuses what the spent budget cannot hold, and serves
/// what it can.
async fn still_charged(client: &reqwest::Client, s: &support::Served, spent: u64) {
    let (status, body) = ask_for(client, s, 200).await;
    assert_eq!(
        status, 429,
        "the {spent} tokens spent are no longer charged: {body}"
    );
    assert!(body.contains("budget_exhausted"), "{body}");
    assert_eq!(ask_for(client, s, 16).await.0, 200);
}

/// A tenant's budget survives a `kill -9`: what it spent before (in the ledger within the
/// flush bound) is charged again at the next start, so the request its remaining budget cannot
/// hold is refused after the restart as before it.
async fn a_restart_loses_no_spend(url: String, dir: Dir, budget: &str) {
    let mut b = spend_most_of_a_budget(&url, &dir, budget).await;
    b.served.signal("KILL");
    let _ = b.served.child.wait();
    let s = serve(&b.cfg);
    still_charged(&b.client, &s, b.spent).await;
}

/// Sends `SIGHUP` and waits for the reload's line, which must say it reloaded.
fn reload(s: &support::Served) {
    s.signal("HUP");
    let line = s.line_starting("ripcord: reload", Duration::from_secs(20));
    assert!(line.starts_with("ripcord: reloaded"), "{line}");
}

/// A reload (`SIGHUP`) that changes the budget's window builds the accounts afresh; they are
/// charged from the ledger as at start, so the request the remaining budget cannot hold is
/// refused after the reload as before. (With the window unchanged the accounts are kept.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_reload_loses_no_spend() {
    let dir = temp_dir("budget-reload");
    let mut b = spend_most_of_a_budget(&sqlite_url(&dir), &dir, "window_s = 3600").await;
    let text = std::fs::read_to_string(&b.cfg).unwrap();
    std::fs::write(&b.cfg, text.replace("window_s = 3600", "window_s = 7200")).unwrap();
    reload(&b.served);
    still_charged(&b.client, &b.served, b.spent).await;
    sigterm(&mut b.served).await;
}

/// Without `[store]` there is no ledger to replay: a reload keeps the in-process accounts
/// themselves, so what a tenant spent before it still counts after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_without_a_store_keeps_the_spend() {
    let dir = temp_dir("budget-reload-local");
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let cfg = config(&dir.0, &vendor, "unused", FLUSH_MS);
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text[..text.find("\n[store]").unwrap()].to_owned();
    std::fs::write(&cfg, text + "\n[budget]\ntokens_per_window = 400\n").unwrap();
    let client = reqwest::Client::new();
    let mut s = serve(&cfg);
    // Spend until a request of about 200 tokens no longer fits.
    let mut calls = 0;
    while ask_for(&client, &s, 200).await.0 == 200 {
        assert_eq!(ask_for(&client, &s, 16).await.0, 200);
        calls += 1;
        assert!(calls < 40, "the budget never ran low");
    }
    reload(&s);
    still_charged(&client, &s, 0).await;
    sigterm(&mut s).await;
}

/// A reload with the window unchanged keeps the accounts as they are: the ledger is not
/// replayed into them on top (which would charge the spend twice and refuse what is left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_reload_keeps_the_accounts_and_charges_nothing_twice() {
    let dir = temp_dir("budget-reload-unused");
    let mut b = spend_most_of_a_budget(&sqlite_url(&dir), &dir, "window_s = 3600").await;
    reload(&b.served);
    still_charged(&b.client, &b.served, b.spent).await;
    sigterm(&mut b.served).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_restart_loses_no_spend() {
    let dir = temp_dir("budget");
    a_restart_loses_no_spend(sqlite_url(&dir), dir, "window_s = 3600").await;
}

/// The same over a calendar day: the ledger is read from 00:00 UTC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_restart_loses_no_spend_of_the_day() {
    let dir = temp_dir("budget-day");
    a_restart_loses_no_spend(sqlite_url(&dir), dir, "period = \"day\"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_restart_loses_no_spend() {
    if let Some(url) = postgres_db().await {
        a_restart_loses_no_spend(url, temp_dir("pg-budget"), "period = \"month\"").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_kill_nine_loses_nothing_older_than_the_bound() {
    let dir = temp_dir("kill9");
    kill_nine_loses_nothing_older_than_the_bound(sqlite_url(&dir), dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigterm_writes_everything_queued() {
    let dir = temp_dir("term");
    sigterm_writes_everything_queued(sqlite_url(&dir), dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_outage_keeps_serving_and_loses_nothing() {
    let dir = temp_dir("outage");
    an_outage_keeps_serving_and_loses_nothing(sqlite_url(&dir), dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_kill_nine_loses_nothing_older_than_the_bound() {
    if let Some(url) = postgres_db().await {
        kill_nine_loses_nothing_older_than_the_bound(url, temp_dir("pg-kill9")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigterm_writes_everything_queued() {
    if let Some(url) = postgres_db().await {
        sigterm_writes_everything_queued(url, temp_dir("pg-term")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_outage_keeps_serving_and_loses_nothing() {
    if let Some(url) = postgres_db().await {
        an_outage_keeps_serving_and_loses_nothing(url, temp_dir("pg-outage")).await;
    }
}
