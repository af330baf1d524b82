//! More of the real `ripcord serve` under abuse (issue 42, item 7 and item 6): what a tenant
//! key may read on `/metrics` and `/status`, what `expose_errors = false` keeps from clients,
//! numbers that do not fit, and the process-wide bound on buffered vendor answers. The helpers
//! are `abuse_support`'s, shared with `gateway_abuse.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod abuse_support;
mod support;

use abuse_support::*;
#[cfg(feature = "redis")]
use support::Fetch;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Two providers (`link-alpha` serving `model-alpha`, `link-beta` serving `model-beta`) over
/// their own fakes.
fn two_links(a: &FakeVendor, b: &FakeVendor) -> String {
    let one = |name: &str, model: &str, v: &FakeVendor| {
        format!(
            "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nmodel = \"{model}\"\nbase_url = \"{}/v1\"\napi_key = \"sk-{name}-upstream\"\n[providers.retry]\nmax_attempts = 1\n",
            v.base_url()
        )
    };
    format!(
        "{}\n{}",
        one("link-alpha", "model-alpha", a),
        one("link-beta", "model-beta", b)
    )
}

const ACME_KEY: &str = "acme-key-0123456789abcdef0123456789";
const GLOBEX_KEY: &str = "globex-key-0123456789abcdef01234567";

async fn call_route(url: &str, key: &str, model: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}))
        .send()
        .await
        .unwrap()
}

async fn get_text(url: &str, key: &str) -> (u16, String) {
    let r = support::get_keyed(url, key).await;
    (r.status().as_u16(), r.text().await.unwrap())
}

fn tenant_lines(metrics: &str) -> Vec<&str> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("ripcord_tenant=\""))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_key_reads_only_its_own_usage_on_metrics_and_only_its_routes_on_status() {
    let a = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let b = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = support::serve_with_env(
        &config(
            "tenant-views",
            &format!(
                "{}\n[[routes]]\nname = \"route-alpha\"\norder = [\"link-alpha\"]\n[[routes]]\nname = \"route-beta\"\norder = [\"link-beta\"]\n\n[server]\napi_keys_env = \"GW_KEYS\"\n[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\nroutes = [\"route-alpha\"]\n[[server.keys]]\ntenant = \"globex\"\nkey_env = \"GLOBEX_KEY\"\n",
                two_links(&a, &b)
            ),
        ),
        &[
            ("GW_KEYS", GW_KEY),
            ("ACME_KEY", ACME_KEY),
            ("GLOBEX_KEY", GLOBEX_KEY),
        ],
    );
    assert_eq!(
        call_route(&served.url, ACME_KEY, "route-alpha")
            .await
            .status(),
        200
    );
    assert_eq!(
        call_route(&served.url, GLOBEX_KEY, "route-beta")
            .await
            .status(),
        200
    );
    let metrics = format!("{}/metrics", served.url);
    // The operator's key (no tenant) sees both tenants' usage.
    let (status, all) = get_text(&metrics, GW_KEY).await;
    assert_eq!(status, 200);
    let all_lines = tenant_lines(&all);
    assert!(
        all_lines
            .iter()
            .any(|l| l.contains("ripcord_tenant=\"acme\"")),
        "{all}"
    );
    assert!(
        all_lines
            .iter()
            .any(|l| l.contains("ripcord_tenant=\"globex\"")),
        "{all}"
    );
    // acme sees its own and nothing of globex's; the process-wide series stay.
    let (status, mine) = get_text(&metrics, ACME_KEY).await;
    assert_eq!(status, 200);
    let mine_lines = tenant_lines(&mine);
    assert!(!mine_lines.is_empty(), "{mine}");
    assert!(
        mine_lines
            .iter()
            .all(|l| l.contains("ripcord_tenant=\"acme\"")),
        "another tenant's series: {mine_lines:#?}"
    );
    assert!(!mine.contains("globex"), "{mine}");
    assert!(mine.contains("# TYPE"), "{mine}");

    // /status: acme may use route-alpha only, and sees only it and its link.
    let status_url = format!("{}/status", served.url);
    let (status, page) = get_text(&status_url, ACME_KEY).await;
    assert_eq!(status, 200);
    assert!(page.contains("route-alpha"), "{page}");
    assert!(!page.contains("route-beta"), "{page}");
    assert!(!page.contains("link-beta"), "{page}");
    let (_, page) = get_text(&status_url, GLOBEX_KEY).await;
    assert!(
        page.contains("route-alpha") && page.contains("route-beta"),
        "{page}"
    );
}

/// `link-alpha` fails with a 500, `link-beta` serves; then `link-beta` cuts a stream.
async fn expose_case(expose: bool) -> (String, String) {
    let a = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let b = FakeVendor::start(Wire::OpenAi).await.unwrap();
    a.set_script(Script::Always(Behavior::Error(VendorError::ServerError)));
    let served = serve(
        &format!("expose-{expose}"),
        &format!(
            "[chain]\norder = [\"link-alpha\", \"link-beta\"]\n{}\n[server]\napi_keys_env = \"GW_KEYS\"\nexpose_errors = {expose}\n",
            two_links(&a, &b)
        ),
    );
    let client = reqwest::Client::new();
    let r = chat(&client, &served.url).await;
    assert_eq!(r.status(), 200);
    let attempts = support::header(&r, "x-ripcord-attempts");
    // A stream both links cut after its first content: the error is in the stream.
    a.set_script(Script::Always(Behavior::ResetMidStream { after_chunks: 2 }));
    b.set_script(Script::Always(Behavior::ResetMidStream { after_chunks: 2 }));
    let r = client
        .post(format!("{}/v1/chat/completions", served.url))
        .bearer_auth(GW_KEY)
        .json(&json!({"model": "ripcord", "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let error_event = support::sse_data(&text)
        .into_iter()
        .find(|v| v.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event in {text}"));
    (attempts, error_event.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn with_expose_errors_off_attempts_and_stream_error_events_name_no_link_or_model() {
    let (attempts, event) = expose_case(false).await;
    assert!(
        attempts.starts_with("link1=server_error(500):") && attempts.contains(", link2=ok:"),
        "{attempts}"
    );
    for name in ["link-alpha", "link-beta", "model-alpha", "model-beta"] {
        assert!(!attempts.contains(name), "{attempts}");
        assert!(!event.contains(name), "{event}");
    }
    assert!(event.contains("link1="), "{event}");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_expose_errors_on_attempts_and_stream_error_events_name_links_and_models_as_before() {
    let (attempts, event) = expose_case(true).await;
    assert!(
        attempts.starts_with("link-alpha/model-alpha=server_error(500):")
            && attempts.contains(", link-beta/model-beta=ok:"),
        "{attempts}"
    );
    assert!(event.contains("link-alpha/model-alpha="), "{event}");
}

#[tokio::test(flavor = "multi_thread")]
async fn numbers_that_do_not_fit_are_refused_with_a_400_naming_the_field_on_every_door() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve_keyed("numbers", &vendor, "");
    let client = reqwest::Client::new();
    let msg = json!([{"role": "user", "content": "hi"}]);
    // Each door with its body up to the number; each case adds a field whose number does not
    // fit.
    let chat = (
        "/v1/chat/completions",
        r#""model":"ripcord","messages":MSG"#,
    );
    let messages = (
        "/v1/messages",
        r#""model":"ripcord","max_tokens":20,"messages":MSG"#,
    );
    let responses = ("/v1/responses", r#""model":"ripcord","input":"hi""#);
    let cases = [
        (chat, "temperature", "1e39"),
        (chat, "top_p", "-1e39"),
        (chat, "presence_penalty", "3.5e38"),
        (chat, "frequency_penalty", "1e300"),
        (messages, "temperature", "1e39"),
        (messages, "top_p", "1e39"),
        (responses, "temperature", "1e39"),
    ];
    for ((path, head), field, number) in cases {
        let body = format!("{{{head},\"{field}\":{number}}}").replace("MSG", &msg.to_string());
        let r = client
            .post(format!("{}{path}", served.url))
            .bearer_auth(GW_KEY)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{path} {body}");
        let err: Value = r.json().await.unwrap();
        let text = err.to_string();
        assert!(text.contains(field), "{path}: {text}");
    }
    // Nothing reached the vendor; a number in range still does.
    assert_eq!(vendor.hits(), 0);
    let r = client
        .post(format!("{}/v1/chat/completions", served.url))
        .bearer_auth(GW_KEY)
        .json(&json!({"model": "ripcord", "messages": msg, "temperature": 0.7, "max_tokens": 20}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let sent: Value = serde_json::from_slice(&vendor.requests().last().unwrap().body).unwrap();
    assert!(
        (sent["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6,
        "{sent}"
    );
}

/// `/readyz`'s view of Redis, as `state.degraded`.
#[cfg(feature = "redis")]
async fn redis_degraded(client: &reqwest::Client, url: &str) -> bool {
    let v: Value = client.get(format!("{url}/readyz")).json_body().await;
    v["state"]["degraded"]
        .as_bool()
        .unwrap_or_else(|| panic!("no state.degraded in {v}"))
}

/// Polls `/readyz` (no chat call) until Redis shows `degraded == want`; how long it took.
#[cfg(feature = "redis")]
async fn until_degraded_is(client: &reqwest::Client, url: &str, want: bool) -> Duration {
    let start = Instant::now();
    while redis_degraded(client, url).await != want {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "/readyz never said degraded = {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread")]
async fn after_redis_returns_readyz_reports_ready_again_without_waiting_for_a_call() {
    let Some(mut redis) = support::redis("the Redis re-probe test").await else {
        return;
    };
    let port = redis.port();
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve(
        "reprobe",
        &keyed(
            &vendor,
            &format!(
                "\n[state]\nbackend = \"redis\"\nurl = \"{}\"\nop_timeout_ms = 200\nretry_interval_ms = 300\n",
                redis.url()
            ),
        ),
    );
    let client = reqwest::Client::new();
    assert_eq!(chat(&client, &served.url).await.status(), 200);
    assert!(!redis_degraded(&client, &served.url).await);
    // Redis goes: the re-probe notices without a call.
    redis.kill();
    until_degraded_is(&client, &served.url, true).await;
    // Redis returns on the same port: ready again within a few probe intervals, and still
    // not one call made since it went.
    let _back = ripcord_redis::server::RedisServer::start_on(port)
        .await
        .unwrap();
    let took = until_degraded_is(&client, &served.url, false).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(vendor.hits(), 1);
    assert_ready(&client, &served.url).await;
}

/// Sends `raw` on a fresh connection and reads the whole answer (the gateway closes after it).
async fn raw_answer(to: std::net::SocketAddr, raw: &[u8]) -> (String, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(to).await.unwrap();
    // The gateway may answer (and close) before it has read all of an oversized head.
    let _ = s.write_all(raw).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer))
        .await
        .expect("the answer did not end");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {text:?}"));
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap_or_else(|| panic!("no content-length in {head}"))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(length, body.len(), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let v = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    (head.to_owned(), v)
}

#[tokio::test(flavor = "multi_thread")]
async fn hypers_own_431_414_and_bad_request_line_answers_carry_a_json_error_body() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve_keyed("hyper-json", &vendor, "");
    let to = addr(&served.url);
    let big_header = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(500_000)
    );
    let many_headers = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{}\r\n",
        (0..200)
            .map(|i| format!("X-H{i}: v\r\n"))
            .collect::<String>()
    );
    let long_uri = format!(
        "GET /{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "a".repeat(70_000)
    );
    let cases: [(&[u8], &str, &str); 5] = [
        (
            big_header.as_bytes(),
            "431",
            "request_header_fields_too_large",
        ),
        (
            many_headers.as_bytes(),
            "431",
            "request_header_fields_too_large",
        ),
        (long_uri.as_bytes(), "414", "uri_too_long"),
        (b"GARBAGE\r\n\r\n", "400", "invalid_request"),
        (
            b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
            "400",
            "invalid_request",
        ),
    ];
    for (raw, status, code) in cases {
        let (head, v) = raw_answer(to, raw).await;
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
        assert_eq!(v["error"]["code"], code, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().len() > 10, "{v}");
    }
    // After a good request on a kept-alive connection, a bad one is answered in JSON too.
    {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(to).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGARBAGE\r\n\r\n")
            .await
            .unwrap();
        let answer = support::read_to_close(&mut s, Duration::from_secs(5), "the answer").await;
        let text = String::from_utf8_lossy(&answer);
        let second = text
            .find("HTTP/1.1 400")
            .unwrap_or_else(|| panic!("{text}"));
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        let (_, body) = text[second..].split_once("\r\n\r\n").unwrap();
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(v["error"]["code"], "invalid_request");
    }
    // The router's own errors are unchanged: a 404 keeps its body and request id.
    let r = support::get_keyed(&format!("{}/nowhere", served.url), GW_KEY).await;
    assert_eq!(r.status(), 404);
    assert!(r.headers().contains_key("x-request-id"));
    let body: Value = r.json().await.unwrap();
    assert!(body["error"]["message"].is_string(), "{body}");
}

/// Opens a stream on `path` and returns it once its headers have arrived (the gateway sends
/// them at the commit point, after the first content).
async fn open_stream(url: &str, path: &str, body: Value) -> reqwest::Response {
    let r = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .bearer_auth(GW_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r
}

/// The rest of a stream (what came after the headers), read to its end within 10 s.
async fn rest_of(mut r: reqwest::Response) -> String {
    let mut all = Vec::new();
    let read = async {
        while let Ok(Some(chunk)) = r.chunk().await {
            all.extend_from_slice(&chunk);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the stream did not end");
    String::from_utf8_lossy(&all).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn streams_cut_at_the_end_of_the_sigterm_grace_period_end_with_each_doors_error_event() {
    // An answer of 60 chunks, one every 200 ms: 12 s, far past the grace period.
    let vendor = FakeVendor::start_with(
        Wire::OpenAi,
        ripcord_chaos::FakeOptions::default()
            .with_reply(ripcord_chaos::Reply::text("word ".repeat(60)).with_chunks(60))
            .with_script(Script::Always(Behavior::Stream {
                first_token: Duration::from_millis(10),
                between: Duration::from_millis(200),
            })),
    )
    .await
    .unwrap();
    let served = serve_keyed("sigterm-cut", &vendor, "shutdown_grace_ms = 500\n");
    let msgs = json!([{"role": "user", "content": "hi"}]);
    let chat = open_stream(
        &served.url,
        "/v1/chat/completions",
        json!({"model": "ripcord", "stream": true, "messages": msgs}),
    )
    .await;
    let messages = open_stream(
        &served.url,
        "/v1/messages",
        json!({"model": "ripcord", "stream": true, "max_tokens": 100, "messages": msgs}),
    )
    .await;
    let responses = open_stream(
        &served.url,
        "/v1/responses",
        json!({"model": "ripcord", "stream": true, "input": "hi"}),
    )
    .await;
    let readers = [
        tokio::spawn(rest_of(chat)),
        tokio::spawn(rest_of(messages)),
        tokio::spawn(rest_of(responses)),
    ];
    // Let some content flow, then SIGTERM.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let term = Instant::now();
    served.signal("TERM");
    let mut texts = Vec::new();
    for r in readers {
        texts.push(r.await.unwrap());
    }
    let ended = term.elapsed();
    assert!(
        ended < Duration::from_secs(3),
        "the streams ended {ended:?} after SIGTERM"
    );
    let [chat, messages, responses] = [&texts[0], &texts[1], &texts[2]];
    // Chat Completions: an `{"error": …}` chunk and no `[DONE]`.
    let chat_error = support::sse_data(chat)
        .into_iter()
        .find(|v| v.get("error").is_some())
        .unwrap_or_else(|| panic!("no error chunk: {chat}"));
    assert!(
        chat_error["error"]["message"].as_str().unwrap().len() > 5,
        "{chat_error}"
    );
    assert!(chat.contains("word"), "no content before the cut: {chat}");
    assert!(!chat.contains("[DONE]"), "{chat}");
    // Messages: `event: error` and no `message_stop`.
    assert!(messages.contains("event: error\n"), "{messages}");
    assert!(!messages.contains("message_stop"), "{messages}");
    // Responses: `response.failed`, and not `response.completed`.
    assert!(
        responses.contains("event: response.failed\n"),
        "{responses}"
    );
    assert!(!responses.contains("response.completed"), "{responses}");
}

// 6. Large upstream bodies: the process-wide bound on buffered vendor answers.

const MIB: usize = 1024 * 1024;

/// A gateway whose buffered-answer bound is 12 MiB, over a vendor answering `answer` bytes of
/// text (not streamed), with a deadline (and a read-idle timeout) long enough for a debug
/// build on a busy machine.
async fn big_answers(tag: &str, answer: usize) -> (FakeVendor, support::Served) {
    let vendor = FakeVendor::start_with(
        Wire::OpenAi,
        ripcord_chaos::FakeOptions::default()
            .with_reply(ripcord_chaos::Reply::text("x".repeat(answer))),
    )
    .await
    .unwrap();
    let served = serve(
        tag,
        &format!(
            "{}\n[server]\napi_keys_env = \"GW_KEYS\"\nmax_buffered_response_bytes = {}\n",
            provider(&vendor).replace("deadline_ms = 10000", "deadline_ms = 120000")
                + "[providers.timeouts]\nidle_ms = 120000\n",
            12 * MIB
        ),
    );
    (vendor, served)
}

#[tokio::test(flavor = "multi_thread")]
async fn one_vendor_answer_larger_than_the_buffered_bytes_bound_is_shed_locally_and_opens_no_breaker()
 {
    let (vendor, served) = big_answers("big-one", 1).await;
    // A 64 MiB answer, its bytes made once (the fake sends them as they are).
    let body =
        json!({"id": "chatcmpl-big", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x".repeat(64 * MIB)},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
        .to_string();
    vendor.set_script(Script::Always(Behavior::Status {
        status: 200,
        body,
        headers: vec![("content-type".into(), "application/json".into())],
    }));
    let pid = served.child.id();
    let client = reqwest::Client::new();
    let warm = probe(&client, &served.url, "/healthz").await;
    assert_eq!(warm.status(), 200);
    let before = rss_kib(pid);
    for i in 1..=2 {
        let r = chat(&client, &served.url).await;
        assert_eq!(r.status(), 503, "call {i}");
        assert!(r.headers().contains_key("retry-after"), "call {i}");
        let attempts = support::header(&r, "x-ripcord-attempts");
        // The link was tried both times: the refusal is local, its breaker (threshold 1)
        // never counted it.
        assert!(
            attempts.starts_with("link1=overloaded"),
            "call {i}: {attempts}"
        );
        assert_eq!(vendor.hits(), i);
    }
    let grew = rss_kib(pid).saturating_sub(before) / 1024;
    // Loosely: the bound and the reads' own buffers (and the allocator's slack, 52 and 70 MiB
    // in two runs), not the 64 MiB answer: gathered whole and parsed it would cost at least
    // twice its size, 128 MiB.
    eprintln!("RSS grew {grew} MiB refusing two 64 MiB answers against a 12 MiB bound");
    assert!(grew < 100, "RSS grew {grew} MiB");
    let log = wait_for_line(&served, "call failed", Duration::from_secs(5));
    assert!(log.contains("overloaded"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_large_answers_over_the_buffered_bytes_bound_are_shed_locally_and_no_breaker_opens()
 {
    let (vendor, served) = big_answers("big-many", 8 * MIB).await;
    let pid = served.child.id();
    let client = reqwest::Client::new();
    let warm = probe(&client, &served.url, "/healthz").await;
    assert_eq!(warm.status(), 200);
    let before = rss_kib(pid);
    // One 8 MiB answer fits the bound and is served whole.
    let r = chat(&client, &served.url).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(content.len(), 8 * MIB);
    let one = rss_kib(pid).saturating_sub(before) / 1024;
    // Two calls whose answers stop half way (4 MiB each, held while the gateway waits for the
    // rest), then whole answers: once the two halves are held, the next answer passes the
    // bound and is shed by the gateway.
    vendor.set_script(Script::Sequence(vec![
        Behavior::StallMidStream { after_chunks: 0 },
        Behavior::StallMidStream { after_chunks: 0 },
        Behavior::Ok,
    ]));
    let held: Vec<_> = (0..2)
        .map(|_| {
            let url = served.url.clone();
            tokio::spawn(async move {
                let _ = reqwest::Client::new()
                    .post(format!("{url}/v1/chat/completions"))
                    .bearer_auth(GW_KEY)
                    .json(&chat_body())
                    .send()
                    .await;
            })
        })
        .collect();
    // Both held calls reached the vendor before any other does.
    let start = Instant::now();
    while vendor.hits() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the held calls never reached the vendor"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut served_meanwhile = 0;
    loop {
        let r = chat(&client, &served.url).await;
        match r.status().as_u16() {
            // The halves were not all gathered yet.
            200 => served_meanwhile += 1,
            503 => {
                assert!(r.headers().contains_key("retry-after"));
                let attempts = support::header(&r, "x-ripcord-attempts");
                assert!(attempts.starts_with("link1=overloaded"), "{attempts}");
                break;
            }
            s => panic!("status {s}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "nothing shed with two 4 MiB halves held and a 12 MiB bound"
        );
    }
    let after = rss_kib(pid).saturating_sub(before) / 1024;
    // Shed again and again: each time the link was tried (`overloaded`, never
    // `circuit_open`) and the vendor reached — its breaker (threshold 1) counted none of it.
    for _ in 0..3 {
        let hits = vendor.hits();
        let r = chat(&client, &served.url).await;
        assert_eq!(r.status(), 503);
        assert!(r.headers().contains_key("retry-after"));
        let attempts = support::header(&r, "x-ripcord-attempts");
        assert!(attempts.starts_with("link1=overloaded"), "{attempts}");
        assert_eq!(vendor.hits(), hits + 1);
    }
    assert_ready(&client, &served.url).await;
    // Memory, loosely: a small multiple of one answer (gathered, parsed, written out), not a
    // copy per call beyond the bound.
    eprintln!(
        "RSS grew {one} MiB after one 8 MiB answer, {after} MiB with two halves held and {served_meanwhile} more served"
    );
    assert!(one <= 8 * 8, "one answer: RSS grew {one} MiB");
    assert!(
        after <= 12 * 8,
        "with the bound reached: RSS grew {after} MiB"
    );
    // The held calls' clients go.
    for h in held {
        h.abort();
    }
}
