//! Every opt-in policy and per-request control through the real `ripcord serve` over fake
//! vendors on loopback: `[providers.validate]`, `[providers.cache]`, `[providers.hedge]`,
//! breaker `kinds`, provider facts (`data_region`), the control headers
//! (`x-ripcord-locality`, `x-ripcord-retry-safe`, `Idempotency-Key`, `x-ripcord-priority`,
//! `x-ripcord-intent`) and what a key may send, and the degradation notice on every door —
//! plus `check-config` showing the library's defaults.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod knobs_support;
mod support;

use knobs_support::*;

use std::time::{Duration, Instant};

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError};
use serde_json::{Value, json};

#[tokio::test]
async fn a_json_request_answered_in_prose_by_the_first_link_is_served_by_the_second() {
    let primary = fake("Sure! The city is Oslo.", Script::default()).await;
    let backup = fake(r#"{"city": "Oslo"}"#, Script::default()).await;
    let dir = tempdir("validate");
    let text = format!(
        "[chain]\norder = [\"primary\", \"backup\"]\ndeadline_ms = 5000\n{}{}\n[server]\nexpose_errors = true\n",
        provider(
            "primary",
            "gpt-4o",
            &primary.base_url(),
            "[providers.validate]"
        ),
        provider(
            "backup",
            "gpt-4o-mini",
            &backup.base_url(),
            "[providers.validate]"
        ),
    );
    let served = support::serve(&write_config(&dir, &text));
    let a = post(
        &served.url,
        "/v1/chat/completions",
        &[],
        json!({"model": "m", "messages": [{"role": "user", "content": "Where?"}],
               "response_format": {"type": "json_object"}}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(content(&a), r#"{"city": "Oslo"}"#);
    assert_eq!(header(&a, "x-ripcord-served-by"), "backup");
    assert!(
        header(&a, "x-ripcord-attempts").contains("primary/gpt-4o=invalid_response"),
        "{}",
        header(&a, "x-ripcord-attempts")
    );
    // A plain-text request is not checked: the primary's prose serves it.
    let plain = ask(&served.url, &[]).await;
    assert_eq!(header(&plain, "x-ripcord-served-by"), "primary");
    assert_eq!(chats(&primary), 2);
    assert_eq!(chats(&backup), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_cached_answer_is_served_again_without_calling_the_vendor() {
    let primary = fake("cached answer", Script::default()).await;
    let dir = tempdir("cache");
    let text = format!(
        "[chain]\norder = [\"primary\"]\ndeadline_ms = 5000\n{}",
        provider(
            "primary",
            "gpt-4o",
            &primary.base_url(),
            "[providers.cache]\nttl_ms = 60000"
        ),
    );
    let served = support::serve(&write_config(&dir, &text));
    let first = ask(&served.url, &[]).await;
    let second = ask(&served.url, &[]).await;
    assert_eq!(content(&first), "cached answer");
    assert_eq!(content(&second), "cached answer");
    assert_eq!(
        chats(&primary),
        1,
        "the second call must come from the cache"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_slow_primary_is_hedged_with_the_named_provider() {
    let primary = fake(
        "slow primary",
        Script::Always(Behavior::SlowFirstToken(Duration::from_secs(3))),
    )
    .await;
    let backup = fake("quick hedge", Script::default()).await;
    let dir = tempdir("hedge");
    let text = format!(
        "[chain]\norder = [\"primary\"]\ndeadline_ms = 8000\n{}{}",
        provider(
            "primary",
            "gpt-4o",
            &primary.base_url(),
            "[providers.hedge]\nwith = \"backup\"\ndelay_ms = 100\nmax_extra_percent = 100"
        ),
        provider("backup", "gpt-4o-mini", &backup.base_url(), ""),
    );
    let served = support::serve(&write_config(&dir, &text));
    let started = Instant::now();
    let a = ask(&served.url, &[]).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(content(&a), "quick hedge");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(chats(&backup), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_per_kind_override_trips_the_breaker_on_the_first_server_error() {
    let primary = failing("never", VendorError::ServerError).await;
    let backup = fake("from backup", Script::default()).await;
    let dir = tempdir("kinds");
    let text = format!(
        "[chain]\norder = [\"primary\", \"backup\"]\ndeadline_ms = 5000\n{}\nfailure_threshold = 5\nsuccess_threshold = 2\nkinds = {{ server_error = {{ trip_for_ms = 600000 }} }}\n{}",
        provider("primary", "gpt-4o", &primary.base_url(), ""),
        provider("backup", "gpt-4o-mini", &backup.base_url(), ""),
    );
    let served = support::serve(&write_config(&dir, &text));
    for _ in 0..3 {
        let a = ask(&served.url, &[]).await;
        assert_eq!(content(&a), "from backup");
    }
    // Five consecutive failures would trip the default rule; the override trips on the first.
    assert_eq!(chats(&primary), 1);
    assert_eq!(chats(&backup), 3);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_local_only_request_never_reaches_a_cloud_vendor() {
    let cloud = fake("from the cloud", Script::default()).await;
    let local = fake("from this machine", Script::default()).await;
    let dir = tempdir("local-only");
    // An Ollama endpoint on loopback is a local link.
    let text = format!(
        r#"[chain]
order = ["cloud", "local"]
deadline_ms = 5000
{}
[[providers]]
name = "local"
kind = "ollama"
model = "llama3.2"
base_url = "{}/v1"
[providers.breaker]
background_probe_ms = 0
"#,
        provider("cloud", "gpt-4o", &cloud.base_url(), ""),
        local.base_url()
    );
    let served = support::serve(&write_config(&dir, &text));
    let a = ask(&served.url, &[("x-ripcord-locality", "local-only")]).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(content(&a), "from this machine");
    assert_eq!(header(&a, "x-ripcord-skipped"), "cloud=locality");
    // The same request as a stream, and on the Anthropic door.
    let s = post(
        &served.url,
        "/v1/chat/completions",
        &[("x-ripcord-locality", "local-only")],
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(header(&s, "x-ripcord-served-by"), "local");
    let m = post(
        &served.url,
        "/v1/messages",
        &[("x-ripcord-locality", "local-only")],
        json!({"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(m.status, 200, "{}", m.body);
    assert_eq!(header(&m, "x-ripcord-served-by"), "local");
    assert_eq!(
        chats(&cloud),
        0,
        "a local-only request reached the cloud fake"
    );
    let anywhere = ask(&served.url, &[]).await;
    assert_eq!(content(&anywhere), "from the cloud");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_region_restricted_request_skips_links_of_other_regions() {
    let us = fake("from the us", Script::default()).await;
    let eu = fake("from the eu", Script::default()).await;
    let dir = tempdir("region");
    let text = format!(
        "[chain]\norder = [\"us\", \"eu\"]\ndeadline_ms = 5000\n{}{}",
        provider("us", "gpt-4o", &us.base_url(), "data_region = \"us\""),
        provider("eu", "gpt-4o", &eu.base_url(), "data_region = \"EU\""),
    );
    let served = support::serve(&write_config(&dir, &text));
    let a = ask(&served.url, &[("x-ripcord-locality", "region=eu,ch")]).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(content(&a), "from the eu");
    assert_eq!(header(&a, "x-ripcord-skipped"), "us=locality");
    assert_eq!(chats(&us), 0);
    let bad = ask(&served.url, &[("x-ripcord-locality", "region=eu;us")]).await;
    assert_eq!(bad.status, 400);
    assert!(
        support::error_message(&bad.body).contains("x-ripcord-locality"),
        "{}",
        bad.body
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_request_not_retry_safe_is_not_sent_again_after_a_timeout_unless_it_has_an_idempotency_key()
 {
    let primary = fake("never", Script::Always(Behavior::HangBeforeHeaders)).await;
    let backup = fake("from backup", Script::default()).await;
    let dir = tempdir("retry-safe");
    let text = format!(
        r#"[chain]
order = ["primary", "backup"]
deadline_ms = 6000
[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
base_url = "{}/v1"
api_key = "sk-test"
[providers.retry]
max_attempts = 2
base_delay_ms = 10
[providers.timeouts]
first_token_ms = 300
[providers.breaker]
background_probe_ms = 0
failure_threshold = 100
{}"#,
        primary.base_url(),
        provider("backup", "gpt-4o-mini", &backup.base_url(), ""),
    );
    let served = support::serve(&write_config(&dir, &text));
    let unsafe_call = ask(&served.url, &[("x-ripcord-retry-safe", "false")]).await;
    // The vendor may have acted on it: neither a retry nor the backup sends it again.
    assert_ne!(unsafe_call.status, 200, "{}", unsafe_call.body);
    assert_eq!(chats(&primary), 1);
    assert_eq!(chats(&backup), 0);
    let keyed = ask(
        &served.url,
        &[
            ("x-ripcord-retry-safe", "false"),
            ("idempotency-key", "order-1042"),
        ],
    )
    .await;
    assert_eq!(keyed.status, 200, "{}", keyed.body);
    // Sent again after the timeout: a silent vendor is not retried by default (`retry_on`),
    // so the keyed request falls over to the backup.
    assert_eq!(content(&keyed), "from backup");
    assert_eq!(chats(&primary), 2);
    assert_eq!(chats(&backup), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn intents_pick_their_static_reply_and_keys_limit_the_controls() {
    let primary = failing("never", VendorError::ServerError).await;
    let dir = tempdir("intent");
    let text = format!(
        r#"[chain]
order = ["primary"]
deadline_ms = 5000
static_reply = "The assistant is unavailable."
intent_replies = {{ billing = "Billing help is unavailable; email billing@example.com." }}
{}{}{}controls = {{ allow = ["intent", "priority"], max_priority = "normal" }}
"#,
        provider("primary", "gpt-4o", &primary.base_url(), ""),
        support::tenant_key("full", "FULL_KEY"),
        support::tenant_key("narrow", "NARROW_KEY"),
    );
    let full = "full-gateway-key-0123456789";
    let narrow = "narrow-gateway-key-0123456789";
    let served = support::serve_with_env(
        &write_config(&dir, &text),
        &[("FULL_KEY", full), ("NARROW_KEY", narrow)],
    );
    let bearer = |k: &str| format!("Bearer {k}");
    let (fb, nb) = (bearer(full), bearer(narrow));
    let billing = ask(
        &served.url,
        &[("authorization", &fb), ("x-ripcord-intent", "billing")],
    )
    .await;
    assert_eq!(
        content(&billing),
        "Billing help is unavailable; email billing@example.com."
    );
    let other = ask(&served.url, &[("authorization", &nb)]).await;
    assert_eq!(content(&other), "The assistant is unavailable.");
    let ok = ask(
        &served.url,
        &[("authorization", &nb), ("x-ripcord-priority", "low")],
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    for (name, value) in [
        ("x-ripcord-locality", "local-only"),
        ("x-ripcord-retry-safe", "false"),
        ("idempotency-key", "k-1"),
        ("x-ripcord-priority", "high"),
    ] {
        let refused = ask(&served.url, &[("authorization", &nb), (name, value)]).await;
        assert_eq!(refused.status, 400, "{name}: {}", refused.body);
        assert_eq!(refused.body["error"]["param"], name, "{}", refused.body);
    }
    let malformed = ask(
        &served.url,
        &[("authorization", &fb), ("x-ripcord-priority", "urgent")],
    )
    .await;
    assert_eq!(malformed.status, 400);
    assert_eq!(malformed.body["error"]["param"], "x-ripcord-priority");
    let _ = std::fs::remove_dir_all(dir);
}

/// The `data:` payloads of an SSE body, parsed.
fn events(body: &Value) -> Vec<Value> {
    body.as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

#[tokio::test]
async fn the_degradation_notice_reaches_every_door_json_and_streams() {
    let primary = failing("never", VendorError::Overloaded).await;
    let backup = fake("the backup's answer", Script::default()).await;
    let dir = tempdir("notice");
    let text = format!(
        "[chain]\norder = [\"primary\", \"backup\"]\ndeadline_ms = 5000\nfallback_notice = \"Answered by a backup model.\"\nfallback_notice_in_text = true\nintent_notices = {{ billing = \"Billing answers may be less precise right now.\" }}\n{}{}",
        provider("primary", "gpt-4o", &primary.base_url(), ""),
        provider("backup", "gpt-4o-mini", &backup.base_url(), ""),
    );
    let served = support::serve(&write_config(&dir, &text));
    let n = "Answered by a backup model.";
    // Chat completions, JSON.
    let a = ask(&served.url, &[]).await;
    assert_eq!(header(&a, "x-ripcord-notice"), n);
    assert_eq!(a.body["ripcord"]["notice"], n);
    assert_eq!(content(&a), format!("{n}\n\nthe backup's answer"));
    // Per intent.
    let b = ask(&served.url, &[("x-ripcord-intent", "billing")]).await;
    assert_eq!(
        b.body["ripcord"]["notice"],
        "Billing answers may be less precise right now."
    );
    // Chat completions, stream: header, the notice as the first text, the field at the end.
    let s = post(
        &served.url,
        "/v1/chat/completions",
        &[],
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(header(&s, "x-ripcord-notice"), n);
    let evs = events(&s.body);
    let text: String = evs
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, format!("{n}\n\nthe backup's answer"));
    assert!(
        evs.iter().any(|e| e["ripcord"]["notice"] == n),
        "{}",
        s.body
    );
    // Anthropic's door, JSON and stream.
    let m = post(
        &served.url,
        "/v1/messages",
        &[],
        json!({"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(header(&m, "x-ripcord-notice"), n);
    assert_eq!(m.body["ripcord"]["notice"], n);
    assert!(
        support::text(&m.body["content"][0]["text"]).starts_with(n),
        "{}",
        m.body
    );
    let ms = post(
        &served.url,
        "/v1/messages",
        &[],
        json!({"model": "m", "max_tokens": 50, "stream": true,
               "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(header(&ms, "x-ripcord-notice"), n);
    let mevs = events(&ms.body);
    assert!(
        mevs.iter().any(|e| e["delta"]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(n))),
        "{}",
        ms.body
    );
    assert!(
        mevs.iter()
            .any(|e| e["ripcord"]["notice"] == n || e["delta"]["ripcord"]["notice"] == n),
        "{}",
        ms.body
    );
    // The Responses door.
    let r = post(
        &served.url,
        "/v1/responses",
        &[],
        json!({"model": "m", "input": "hi"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(header(&r, "x-ripcord-notice"), n);
    assert_eq!(r.body["ripcord"]["notice"], n);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn check_config_shows_every_policy_with_the_librarys_defaults() {
    let dir = tempdir("check");
    let text = format!(
        "[chain]\norder = [\"primary\"]\n{}",
        provider(
            "primary",
            "gpt-4o",
            "http://127.0.0.1:9",
            "data_region = \"eu\"\ndata_use = { train = false, retain_days = 0 }\nprice = { input_per_mtok = 1.5, output_per_mtok = 6.0 }\n[providers.cache]\n[providers.validate]"
        ),
    );
    let path = write_config(&dir, &text);
    let stdout = support::check_config_ok(&path, &[]);
    let cache = ripcord_resilience::CachePolicy::default();
    assert!(
        stdout.contains(&format!(
            "cache: {} entries, ttl {} ms, per tenant",
            cache.capacity(),
            cache.ttl().as_millis()
        )),
        "{stdout}"
    );
    let breaker = ripcord_resilience::BreakerPolicy::default();
    assert!(
        stdout.contains(&format!(
            "breaker: closes after {} probe success(es); no failure-rate rule",
            breaker.success_threshold()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("validate: JSON answers"), "{stdout}");
    assert!(
        stdout.contains("facts: data_region=eu train=false retain_days=0 price=$1.5/$6 per Mtok"),
        "{stdout}"
    );
    // A bad value is refused with the file, line and key.
    let bad = write_config(
        &dir,
        &format!(
            "[chain]\norder = [\"primary\"]\n{}",
            provider(
                "primary",
                "gpt-4o",
                "http://127.0.0.1:9",
                "[providers.hedge]\nwith = \"primary\""
            )
        ),
    );
    let out = support::check_config(&bad, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("key `hedge.with`"), "{stderr}");
    // The admin key must be a key of its own, never a tenant's.
    let shared = write_config(
        &dir,
        &format!(
            "[chain]\norder = [\"primary\"]\n{}\n[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\n[server.admin]\nkey_env = \"ADMIN_KEY\"\n",
            provider("primary", "gpt-4o", "http://127.0.0.1:9", "")
        ),
    );
    let out = support::check_config(
        &shared,
        &[
            ("ACME_KEY", "the-same-key-0123456789"),
            ("ADMIN_KEY", "the-same-key-0123456789"),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("key `server.admin.key_env`"), "{stderr}");
    assert!(!stderr.contains("the-same-key"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The prompts of the chat calls a fake received, in the order they arrived.
fn prompts(f: &FakeVendor) -> Vec<String> {
    f.requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| {
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            v["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_high_priority_request_leaves_the_bulkhead_queue_before_an_earlier_low_one() {
    let primary = fake(
        "ok",
        Script::Sequence(vec![
            Behavior::SlowFirstToken(Duration::from_millis(1500)),
            Behavior::Ok,
            Behavior::Ok,
        ]),
    )
    .await;
    let dir = tempdir("priority");
    let text = format!(
        "[chain]\norder = [\"primary\"]\ndeadline_ms = 8000\n{}",
        provider(
            "primary",
            "gpt-4o",
            &primary.base_url(),
            "[providers.bulkhead]\nmax_in_flight = 1\nmax_queue = 4\nmax_queue_wait_ms = 6000"
        ),
    );
    let served = support::serve(&write_config(&dir, &text));
    let say = |prompt: &'static str, priority: &'static str| {
        let url = served.url.clone();
        tokio::spawn(async move {
            post(
                &url,
                "/v1/chat/completions",
                &[("x-ripcord-priority", priority)],
                json!({"model": "m", "messages": [{"role": "user", "content": prompt}]}),
            )
            .await
            .status
        })
    };
    let first = say("first", "normal");
    // The slot is taken once the first call has reached the vendor.
    while chats(&primary) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let low = say("low", "low");
    // The low call is queued well before the first call's answer (1.5 s) frees the slot.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let high = say("high", "high");
    for h in [first, low, high] {
        assert_eq!(h.await.unwrap(), 200);
    }
    assert_eq!(prompts(&primary), ["first", "high", "low"]);
    let _ = std::fs::remove_dir_all(dir);
}
