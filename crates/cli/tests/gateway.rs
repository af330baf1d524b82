//! The gateway over in-memory chains, driven with real HTTP on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail the test by panicking

mod support;

use std::sync::Arc;

use ripcord_cli::gateway::{self, GatewayState};
use ripcord_core::testing::{ScriptedModel, text_stream};
use ripcord_core::{Chain, ChatModel, ErrorKind};
use serde_json::{Value, json};
use support::Fetch;
use tokio::sync::oneshot;

struct Running {
    url: String,
    _stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// `POST /v1/chat/completions` with `body`.
    async fn chat(&self, body: &Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", self.url))
            .json(body)
            .send()
            .await
            .unwrap()
    }
}

async fn start(state: GatewayState) -> Running {
    let g = support::start_gateway(state).await;
    Running {
        url: g.url,
        _stop: g.stop,
        task: g.task,
    }
}

fn chain(links: Vec<ScriptedModel>) -> Arc<dyn ChatModel> {
    let b = links.into_iter().fold(Chain::builder(), |b, l| b.link(l));
    Arc::new(
        b.static_reply("The assistant is unavailable.")
            .build()
            .unwrap(),
    )
}

fn body(stream: bool) -> Value {
    json!({
        "model": "ripcord",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}],
        "stream": stream,
        "stream_options": {"include_usage": true},
    })
}

#[tokio::test]
async fn chat_completion_json_with_provenance_headers() {
    let g = start(GatewayState::new(chain(vec![
        ScriptedModel::new("primary").fail(ErrorKind::Overloaded),
        ScriptedModel::new("backup").reply("Hi there!"),
    ])))
    .await;
    let resp = g.chat(&body(false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-ripcord-served-by"], "backup");
    assert_eq!(resp.headers()["x-ripcord-degraded"], "true");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "Hi there!");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn streaming_sends_openai_chunks_usage_and_done() {
    let g = start(GatewayState::new(chain(vec![
        ScriptedModel::new("primary").stream_items(text_stream(
            &["Hel", "lo"],
            std::time::Duration::from_millis(5),
        )),
    ])))
    .await;
    let resp = g.chat(&body(true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["x-ripcord-served-by"], "primary");
    let text = resp.text().await.unwrap();
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(*events.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "Hello");
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "stop")
    );
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 2);
}

#[tokio::test]
async fn fail_fast_errors_use_openai_error_shapes() {
    let g = start(GatewayState::new(chain(vec![
        ScriptedModel::new("primary").fail(ErrorKind::ContentFiltered),
    ])))
    .await;
    let resp = g.chat(&body(false)).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "content_filtered");
    assert_eq!(v["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn malformed_requests_are_400_naming_the_problem() {
    let g = start(GatewayState::new(chain(vec![ScriptedModel::new(
        "primary",
    )])))
    .await;
    let c = reqwest::Client::new();
    let resp = c
        .post(format!("{}/v1/chat/completions", g.url))
        .body("{not json")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let resp = c
        .post(format!("{}/v1/chat/completions", g.url))
        .json(&json!({"messages": [{"role": "wizard", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert!(
        support::error_message(&v).contains("messages[0].role"),
        "{v}"
    );
}

#[tokio::test]
async fn gateway_keys_are_required_when_configured() {
    let mut state = GatewayState::new(chain(vec![ScriptedModel::new("primary")]));
    state.add_key(
        &support::gateway_key("gw-key-1-0123456789", Some("acme")),
        None,
    );
    let g = start(state).await;
    let c = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", g.url);
    // No key, a wrong one, the key; the scheme is case-insensitive; a key's prefix, a longer
    // key or another scheme is not it.
    for (auth, status) in [
        (None, 401),
        (Some("Bearer wrong"), 401),
        (Some("Bearer gw-key-1-0123456789"), 200),
        (Some("bearer gw-key-1-0123456789"), 200),
        (Some("BEARER gw-key-1-0123456789"), 200),
        (Some("Bearer gw-key-1-012345678"), 401),
        (Some("Bearer gw-key-1-01234567890"), 401),
        (Some("Basic gw-key-1-0123456789"), 401),
        (Some("gw-key-1-0123456789"), 401),
    ] {
        let mut req = c.post(&url).json(&body(false));
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        let got = req.send().await.unwrap().status();
        assert_eq!(got, status, "{auth:?}");
    }
    let debug = format!(
        "{:?}",
        GatewayState::new(chain(vec![ScriptedModel::new("x")]))
    );
    assert!(!debug.contains("gw-key-1"));
}

#[tokio::test]
async fn oversized_bodies_are_rejected() {
    let mut state = GatewayState::new(chain(vec![ScriptedModel::new("primary")]));
    state.max_body_bytes = 1024;
    let g = start(state).await;
    let big = json!({"messages": [{"role": "user", "content": "x".repeat(4096)}]});
    let resp = g.chat(&big).await;
    assert_eq!(resp.status(), 413);
}

#[tokio::test]
async fn health_ready_and_models() {
    let mut state = GatewayState::new(chain(vec![ScriptedModel::new("primary")]));
    state.readiness = Arc::new(|| json!({"providers": {"primary": {"breaker": "closed"}}}));
    let g = start(state).await;
    let c = reqwest::Client::new();
    assert_eq!(c.get(format!("{}/healthz", g.url)).text_body().await, "ok");
    let v: Value = c.get(format!("{}/readyz", g.url)).json_body().await;
    assert_eq!(v["providers"]["primary"]["breaker"], "closed");
    let v: Value = c.get(format!("{}/v1/models", g.url)).json_body().await;
    assert_eq!(v["data"][0]["id"], "chain");
}

#[tokio::test]
async fn graceful_shutdown_drains_in_flight_requests() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let slow =
        chain(vec![ScriptedModel::new("primary").reply_after(
            "finally",
            std::time::Duration::from_millis(300),
        )]);
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(gateway::serve(
        listener,
        Arc::new(GatewayState::new(slow)),
        async move {
            let _ = rx.await;
        },
    ));
    let req = tokio::spawn(
        reqwest::Client::new()
            .post(format!("http://{addr}/v1/chat/completions"))
            .json(&body(false))
            .send(),
    );
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    tx.send(()).unwrap();
    let resp = req.await.unwrap().unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "finally");
    server.await.unwrap().unwrap();
}

#[test]
fn refuses_to_listen_beyond_loopback_without_keys() {
    assert!(gateway::check_bind("127.0.0.1:8080".parse().unwrap(), false).is_ok());
    assert!(gateway::check_bind("[::1]:8080".parse().unwrap(), false).is_ok());
    let e = gateway::check_bind("0.0.0.0:8080".parse().unwrap(), false).unwrap_err();
    assert!(e.contains("without gateway keys"), "{e}");
    assert!(gateway::check_bind("0.0.0.0:8080".parse().unwrap(), true).is_ok());
}

#[tokio::test]
async fn running_server_task_is_alive() {
    let g = start(GatewayState::new(chain(vec![ScriptedModel::new(
        "primary",
    )])))
    .await;
    assert!(!g.task.is_finished());
}
