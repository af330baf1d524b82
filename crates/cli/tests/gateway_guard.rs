//! The real `ripcord serve` over loopback under abuse and overload: slow and hostile clients,
//! bursts beyond its limits, operators' `/metrics` and `/readyz`, and errors that tell clients
//! what happened without naming the links behind the gateway.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::time::{Duration, Instant};

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const GW_KEY: &str = "gw-key-0123456789abcdef0123456789";

fn provider(name: &str, model: &str, vendor: &FakeVendor) -> String {
    format!(
        "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nmodel = \"{model}\"\nbase_url = \"{}/v1\"\napi_key = \"sk-{name}-upstream\"\n[providers.retry]\nmax_attempts = 1\n[providers.breaker]\nfailure_threshold = 1\nopen_ms = 60000\n",
        vendor.base_url()
    )
}

/// A chain of the one link `link` on `vendor`, with `chain` added to `[chain]` and `server` as
/// the `[server]` section.
fn one_link(link: &str, vendor: &FakeVendor, chain: &str, server: &str) -> String {
    format!(
        "[chain]\norder = [\"{link}\"]\n{chain}{}\n[server]\n{server}\n",
        provider(link, "m", vendor)
    )
}

/// Writes `text` as a config file and starts `ripcord serve` on it.
fn serve(tag: &str, text: &str, env: &[(&str, &str)]) -> support::Served {
    let dir = support::temp_dir(&format!("guard-{tag}"));
    let path = dir.join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    support::serve_with_env(&path, env)
}

fn host_port(url: &str) -> String {
    url.trim_start_matches("http://").to_owned()
}

fn chat_body() -> Value {
    json!({"model": "ripcord", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20})
}

async fn chat(url: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&chat_body())
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_sending_half_a_header_block_is_disconnected_within_the_timeout() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve(
        "half-header",
        &one_link("main", &vendor, "", "header_timeout_ms = 300"),
        &[],
    );
    let mut tcp = tokio::net::TcpStream::connect(host_port(&served.url))
        .await
        .unwrap();
    tcp.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
        .await
        .unwrap();
    let start = Instant::now();
    let mut buf = Vec::new();
    // The gateway closes the connection: read returns (EOF or reset) instead of hanging.
    let r = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut buf)).await;
    assert!(
        r.is_ok(),
        "the half-header connection was still open after 5 s"
    );
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "closed after {waited:?}"
    );
    assert_eq!(vendor.hits(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_beyond_concurrency_and_queue_is_shed_at_once_with_retry_after() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    vendor.set_script(Script::Always(Behavior::SlowFirstToken(
        Duration::from_millis(1200),
    )));
    let served = serve(
        "burst",
        &one_link(
            "slow",
            &vendor,
            "deadline_ms = 20000\n",
            "max_concurrency = 2\nmax_queue = 2",
        ),
        &[],
    );
    let client = reqwest::Client::new();
    let calls = (0..20).map(|_| {
        let client = client.clone();
        let url = served.url.clone();
        async move {
            let start = Instant::now();
            let r = client
                .post(format!("{url}/v1/chat/completions"))
                .json(&chat_body())
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let retry_after = r.headers().get("retry-after").cloned();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            (status, retry_after, body, start.elapsed())
        }
    });
    let results = futures::future::join_all(calls).await;
    let ok = results.iter().filter(|r| r.0 == 200).count();
    let shed: Vec<_> = results.iter().filter(|r| r.0 == 503).collect();
    assert_eq!(ok, 4, "2 served at once and 2 from the queue: {results:?}");
    assert_eq!(shed.len(), 16, "{results:?}");
    for (_, retry_after, body, took) in &shed {
        assert!(retry_after.is_some(), "a shed call says when to retry");
        assert_eq!(body["error"]["code"], "server_overloaded", "{body}");
        assert!(
            *took < Duration::from_millis(1000),
            "shed at once, not after waiting: {took:?}"
        );
    }
    // Shed calls never reached the vendor, and never counted against its breaker (threshold
    // 1 would have opened it).
    assert_eq!(vendor.hits(), 4);
    let ready: Value = reqwest::get(format!("{}/readyz", served.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(
        ready["routes"][0]["links"][0]["breaker"], "closed",
        "{ready}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_key_is_checked_before_the_body_and_json_is_required() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve(
        "key-first",
        &one_link(
            "main",
            &vendor,
            "",
            "api_keys_env = \"GW_KEYS\"\nmax_body_bytes = 8388608",
        ),
        &[("GW_KEYS", GW_KEY)],
    );
    // A 2 MiB body announced with a wrong key: the 401 arrives although not a byte of the
    // body was sent (so it was not read).
    let mut tcp = tokio::net::TcpStream::connect(host_port(&served.url))
        .await
        .unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong-key-0000000000000000000\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        2 * 1024 * 1024
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    // The answer closes the connection: read to its end (its head and body may come in
    // separate segments).
    let buf = support::read_to_close(
        &mut tcp,
        Duration::from_secs(5),
        "an answer without the body",
    )
    .await;
    let answer = String::from_utf8_lossy(&buf);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(answer.contains("invalid_api_key"), "{answer}");
    assert!(answer.contains("x-request-id"), "{answer}");

    // `text/plain` (what a web page can post without a preflight) is a 415.
    let r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", served.url))
        .bearer_auth(GW_KEY)
        .header("content-type", "text/plain")
        .body(chat_body().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsupported_media_type", "{body}");
    // Unknown paths and methods answer in OpenAI's error shape too.
    let r = support::get_keyed(&format!("{}/v1/nowhere", served.url), GW_KEY).await;
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let r = reqwest::Client::new()
        .get(format!("{}/v1/chat/completions", served.url))
        .bearer_auth(GW_KEY)
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["x-request-id"], "trace-me-42");
    let body: Value = r.json().await.unwrap();
    assert!(
        support::error_message(&body).contains("trace-me-42"),
        "{body}"
    );
    assert_eq!(vendor.hits(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_keyless_gateway_refuses_hosts_that_are_not_loopback() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve("host", &one_link("main", &vendor, "", ""), &[]);
    let r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", served.url))
        .header("host", "attacker.example:8080")
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(vendor.hits(), 0);
    assert_eq!(chat(&served.url).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_show_a_fallback_and_the_attempts_error_kind() {
    let primary = support::fake_failing(Wire::OpenAi, VendorError::ServerError).await;
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve(
        "metrics",
        &format!(
            "[chain]\norder = [\"primary\", \"backup\"]\n{}{}",
            provider("primary", "m1", &primary),
            provider("backup", "m2", &backup)
        ),
        &[],
    );
    let r = chat(&served.url).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-ripcord-served-by"], "backup");
    let text = support::get_page(
        &format!("{}/metrics", served.url),
        "text/plain; version=0.0.4",
    )
    .await;
    // Each series has a sample line (not a comment) holding all of its needles.
    for needles in [
        &[
            "ripcord_fallbacks_total{",
            "ripcord_fallback_from=\"primary\"",
            "ripcord_fallback_to=\"backup\"",
        ][..],
        &[
            "ripcord_errors_total{",
            "ripcord_link=\"primary\"",
            "error_type=\"server_error\"",
        ],
        &["gen_ai_client_operation_duration_seconds_bucket{"],
        &["ripcord_breaker_state{", "ripcord_link=\"primary\"", "} 2"],
    ] {
        assert!(
            text.lines()
                .any(|l| !l.starts_with('#') && needles.iter().all(|n| l.contains(n))),
            "no line with {needles:?} in:\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_request_writes_one_access_line_and_usage_stays_out_of_the_log() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve("access", &one_link("only", &vendor, "", ""), &[]);
    let r = chat(&served.url).await;
    assert_eq!(r.status(), 200);
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    // The access line is written after the answer is built; wait for it (bounded).
    let mut seen = Vec::new();
    let access = loop {
        let line = served
            .log
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no access line ({e}); the log so far: {seen:#?}"));
        if line.contains("ripcord::access") && line.contains(&id) {
            break line;
        }
        seen.push(line);
    };
    for field in [
        "method=\"POST\"",
        "path=\"/v1/chat/completions\"",
        "status=200",
        "served_by=\"only\"",
        "attempts=1",
        "latency_ms=",
        "tenant=\"-\"",
    ] {
        assert!(access.contains(field), "{field} missing from {access}");
    }
    // Plain text to a pipe (no colour codes), and the tenant-usage event, emitted before the
    // access line, fed the metrics without becoming a log line.
    assert!(!access.contains('\u{1b}'), "{access:?}");
    assert!(
        seen.iter().all(|l| !l.contains("tenant_usage")),
        "{seen:#?}"
    );
    let text = reqwest::get(format!("{}/metrics", served.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("ripcord_tenant_tokens_total{") && l.contains("anonymous")),
        "{text}"
    );
}

/// Two failing links with recognisable names; `extra` is added to `[server]`.
fn failing_gateway(tag: &str, a: &FakeVendor, b: &FakeVendor, extra: &str) -> support::Served {
    serve(
        tag,
        &format!(
            "[chain]\norder = [\"alpha-link\", \"beta-link\"]\n{}{}\n[server]\n{extra}\n",
            provider("alpha-link", "model-alpha-x", a),
            provider("beta-link", "model-beta-x", b)
        ),
        &[],
    )
}

async fn failing_vendors() -> (FakeVendor, FakeVendor) {
    let a = support::fake_failing(Wire::OpenAi, VendorError::ServerError).await;
    let b = support::fake_failing(Wire::OpenAi, VendorError::QuotaExhausted).await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_chain_errors_name_no_link_and_readyz_flips_when_every_breaker_is_open() {
    let (a, b) = failing_vendors().await;
    let served = failing_gateway("redacted", &a, &b, "");
    let ready = reqwest::get(format!("{}/readyz", served.url))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let r = chat(&served.url).await;
    assert!(!r.status().is_success());
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let text = r.text().await.unwrap();
    for secret in [
        "alpha",
        "beta",
        "model-",
        "billing",
        "exceeded your current",
        "sk-",
    ] {
        assert!(
            !text.to_lowercase().contains(secret),
            "the client error names `{secret}`: {text}"
        );
    }
    let body: Value = serde_json::from_str(&text).unwrap();
    assert!(
        body["error"]["message"].as_str().unwrap().contains(&id),
        "{body}"
    );
    // Both breakers (threshold 1) are open now: nothing would be tried.
    let ready = reqwest::get(format!("{}/readyz", served.url))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let view: Value = ready.json().await.unwrap();
    assert_eq!(view["status"], "unavailable", "{view}");
}

#[tokio::test(flavor = "multi_thread")]
async fn expose_errors_puts_the_detail_back() {
    let (a, b) = failing_vendors().await;
    let served = failing_gateway("exposed", &a, &b, "expose_errors = true");
    let r = chat(&served.url).await;
    assert!(!r.status().is_success());
    let body: Value = r.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("alpha-link"), "{message}");
}
