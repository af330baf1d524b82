//! `ripcord chat --stream --json` against chaos vendors, one test per streamed failure shape:
//! an error before content (the call falls back, or fails), an error event after content, and
//! a truncated stream. Each checks the JSON's attempts (provider, model, kind, status,
//! latency) and that the stderr provenance line tells the same story.

#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::path::PathBuf;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError};
use serde_json::Value;

/// A config with `primary` (and `backup`, when given) on the fakes, one attempt each.
fn config(tag: &str, primary: &FakeVendor, backup: Option<&FakeVendor>) -> PathBuf {
    let link = |name: &str, fake: &FakeVendor| {
        format!(
            "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key = \"sk-test-cli\"\nbase_url = \"{}/v1\"\n[providers.retry]\nmax_attempts = 1\n",
            fake.base_url()
        )
    };
    let order = if backup.is_some() {
        "[\"primary\", \"backup\"]"
    } else {
        "[\"primary\"]"
    };
    let mut toml = format!("[chain]\norder = {order}\ndeadline_ms = 10000\n");
    toml.push_str(&link("primary", primary));
    if let Some(b) = backup {
        toml.push_str(&link("backup", b));
    }
    let dir = support::temp_dir(&format!("stream-prov-{tag}"));
    let path = dir.join("chain.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// Runs `ripcord chat --stream --json` with this config: (exit code, JSON, stderr line).
async fn chat(config: PathBuf) -> (Option<i32>, Value, String) {
    let out = tokio::task::spawn_blocking(move || {
        support::ripcord()
            .args(["chat", "--stream", "--json", "--config"])
            .arg(&config)
            .arg("Why is the sky blue?")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}); stderr: {stderr}"));
    let line = stderr
        .lines()
        .find(|l| l.starts_with("[ripcord] "))
        .unwrap_or_else(|| panic!("no provenance line in {stderr}"))
        .to_owned();
    (out.status.code(), v, line)
}

/// The call failed on its one attempt, at the primary, with `kind`; the JSON and the summary
/// line say so and agree.
fn failed_on_primary(v: &Value, line: &str, kind: &str) {
    assert_eq!(attempt(v, 0), ("primary", "gpt-4o", Some(kind), None));
    assert!(
        line.starts_with(&format!("[ripcord] failed: {kind}; degraded: true")),
        "{line}"
    );
    agree(v, line);
}

/// The stderr line agrees with the JSON: the same degraded flag and the same attempts, in
/// order, with their kinds and statuses.
fn agree(v: &Value, line: &str) {
    assert!(
        line.contains(&format!("degraded: {};", v["degraded"])),
        "{line} vs {v}"
    );
    let mut rest = line;
    for a in v["attempts"].as_array().unwrap() {
        let kind = a["error_kind"].as_str().unwrap_or("ok");
        let status = a["status"]
            .as_u64()
            .map(|s| format!(" (HTTP {s})"))
            .unwrap_or_default();
        let want = format!(
            "{}/{} {kind}{status} ",
            a["provider"].as_str().unwrap(),
            a["model"].as_str().unwrap()
        );
        let at = rest
            .find(&want)
            .unwrap_or_else(|| panic!("{want:?} missing (or out of order) in {line}"));
        rest = &rest[at + want.len()..];
        assert!(a["latency_ms"].as_f64().unwrap() >= 0.0, "{a}");
    }
}

fn attempt(v: &Value, i: usize) -> (&str, &str, Option<&str>, Option<u64>) {
    let a = &v["attempts"][i];
    (
        a["provider"].as_str().unwrap(),
        a["model"].as_str().unwrap(),
        a["error_kind"].as_str(),
        a["status"].as_u64(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_before_content_falls_back_or_fails_with_its_attempt() {
    let [primary, backup] = support::openai_fakes().await;
    // A 503 before any content: the backup serves, and the answer says so.
    primary.set_script(Script::Always(Behavior::Error(
        VendorError::EmptyServiceUnavailable,
    )));
    let (code, v, line) = chat(config("before", &primary, Some(&backup))).await;
    assert_eq!(code, Some(0), "{v} {line}");
    assert_eq!(v["served_by"], "backup", "{v}");
    assert_eq!(v["degraded"], true, "{v}");
    assert_eq!(v["attempts"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        attempt(&v, 0),
        ("primary", "gpt-4o", Some("overloaded"), Some(503))
    );
    assert_eq!(attempt(&v, 1), ("backup", "gpt-4o", None, None));
    assert!(
        line.starts_with("[ripcord] served by backup; degraded: true"),
        "{line}"
    );
    agree(&v, &line);

    // A rate limit sent as the stream's first event, and nothing to fall back to.
    primary.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 0,
        error: VendorError::RateLimited { retry_after: None },
    }));
    let (code, v, line) = chat(config("before-alone", &primary, None)).await;
    assert_eq!(code, Some(1), "{v} {line}");
    assert_eq!(v["error"]["kind"], "rate_limited", "{v}");
    assert_eq!(v["content"], "", "{v}");
    assert_eq!(v["attempts"].as_array().unwrap().len(), 1, "{v}");
    failed_on_primary(&v, &line, "rate_limited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_after_content_ends_the_call_with_the_committed_attempt() {
    let [primary, backup] = support::openai_fakes().await;
    primary.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 2,
        error: VendorError::ServerError,
    }));
    let (code, v, line) = chat(config("after", &primary, Some(&backup))).await;
    assert_eq!(code, Some(1), "{v} {line}");
    assert_eq!(v["error"]["kind"], "server_error", "{v}");
    // What the user saw stays on record; another model's text is never spliced in.
    assert!(!v["content"].as_str().unwrap().is_empty(), "{v}");
    assert_eq!(backup.hits(), 0);
    assert_eq!(v["attempts"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["degraded"], true, "{v}");
    failed_on_primary(&v, &line, "server_error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_stream_is_a_network_failure_on_record() {
    let [primary, backup] = support::openai_fakes().await;
    // The backup answers the first attempt's fallback... but a truncated stream after content
    // has committed: the call fails with the cut, and says where.
    primary.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 2,
    }));
    let (code, v, line) = chat(config("cut", &primary, Some(&backup))).await;
    assert_eq!(code, Some(1), "{v} {line}");
    assert_eq!(v["error"]["kind"], "network", "{v}");
    assert!(support::error_message(&v).contains("truncated"), "{v}");
    assert!(!v["content"].as_str().unwrap().is_empty(), "{v}");
    failed_on_primary(&v, &line, "network");

    // Cut before any content: the attempt is the chain's to fall back from.
    primary.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 0,
    }));
    let (code, v, line) = chat(config("cut-early", &primary, Some(&backup))).await;
    assert_eq!(code, Some(0), "{v} {line}");
    assert_eq!(v["served_by"], "backup", "{v}");
    assert_eq!(attempt(&v, 0), ("primary", "gpt-4o", Some("network"), None));
    assert_eq!(attempt(&v, 1), ("backup", "gpt-4o", None, None));
    agree(&v, &line);
}
