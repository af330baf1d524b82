//! The gateway's Anthropic front door (`/v1/messages`) over in-memory chains and over the real
//! Anthropic adapter against the Anthropic chaos vendor, with real HTTP on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::sync::Arc;
use std::time::Duration;

use ripcord_chaos::{FakeVendor, Reply, Wire};
use ripcord_cli::config::GatewayKey;
use ripcord_cli::gateway::{GatewayRoute, GatewayState};
use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{Chain, ChatModel, Error, ErrorKind, FinishReason, StreamEvent, Usage};
use ripcord_providers::{Anthropic, AnthropicConfig};
use serde_json::{Value, json};
use support::Fetch;
use tokio::sync::oneshot;

async fn start(state: GatewayState) -> (String, oneshot::Sender<()>) {
    let g = support::start_gateway(state).await;
    (g.url, g.stop)
}

fn chain(links: Vec<ScriptedModel>) -> Arc<dyn ChatModel> {
    let b = links.into_iter().fold(Chain::builder(), |b, l| b.link(l));
    Arc::new(b.build().unwrap())
}

fn hi(stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
           "messages": [{"role": "user", "content": "Say hi"}]})
}

async fn post(url: &str, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}{path}"))
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "tools-2024-04-04")
        .json(body)
        .send()
        .await
        .unwrap()
}

fn names(evs: &[(String, Value)]) -> Vec<&str> {
    evs.iter().map(|(n, _)| n.as_str()).collect()
}

async fn expect_error(resp: reqwest::Response, status: u16, kind: &str) -> String {
    assert_eq!(resp.status(), status);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], kind, "{v}");
    // Every error names its request (issue 33 item 10); the rest is what the test compares.
    let message = v["error"]["message"].as_str().unwrap();
    let (text, id) = message
        .rsplit_once(" (request id: ")
        .unwrap_or_else(|| panic!("no request id in {message:?}"));
    assert!(id.starts_with("req_") && id.ends_with(')'), "{message}");
    text.to_owned()
}

#[tokio::test]
async fn bad_input_gets_anthropic_errors_naming_the_field() {
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("m").reply("never"),
    ])))
    .await;
    // A 400 in Anthropic's shape for `body` at `path`; its message.
    let invalid = |path: &'static str, body: &Value| {
        let (url, body) = (url.clone(), body.clone());
        async move { expect_error(post(&url, path, &body).await, 400, "invalid_request_error").await }
    };
    let mut no_max = hi(false);
    no_max.as_object_mut().unwrap().remove("max_tokens");
    let m = invalid("/v1/messages", &no_max).await;
    assert_eq!(m, "max_tokens: Field required");
    let mut block = hi(false);
    block["messages"][0]["content"] = json!([{"type": "text", "text": "a"}, {"type": "audio"}]);
    let m = invalid("/v1/messages", &block).await;
    assert!(
        m.starts_with("messages[0].content[1].type: unknown variant `audio`"),
        "{m}"
    );
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/messages"))
        .header("content-type", "application/json")
        .body("{\"model\": \"m\", \"max_tokens\": ")
        .send()
        .await
        .unwrap();
    let m = expect_error(resp, 400, "invalid_request_error").await;
    assert!(m.starts_with("the request body is not valid JSON"), "{m}");
    let mut tools = hi(false);
    tools["tools"] = json!([{"name": "f"}]);
    let m = invalid("/v1/messages", &tools).await;
    assert_eq!(m, "tools[0].input_schema: Field required");
    // count_tokens does not need max_tokens but refuses the same bad blocks.
    let m = invalid("/v1/messages/count_tokens", &block).await;
    assert!(m.starts_with("messages[0].content[1].type"), "{m}");
}

#[tokio::test]
async fn keys_are_read_from_x_api_key_or_bearer() {
    let mut state = GatewayState::new(chain(vec![ScriptedModel::new("m").reply("Hi!")]));
    state.add_key(
        &support::gateway_key("sk-gw-0123456789", Some("acme")),
        None,
    );
    let (url, _stop) = start(state).await;
    let client = reqwest::Client::new();
    let send = |h: &'static str, v: &'static str| {
        client
            .post(format!("{url}/v1/messages"))
            .header(h, v)
            .json(&hi(false))
            .send()
    };
    let ok = send("x-api-key", "sk-gw-0123456789").await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["x-ripcord-tenant"], "acme");
    let ok = send("authorization", "Bearer sk-gw-0123456789")
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let m = expect_error(
        send("x-api-key", "sk-wrong").await.unwrap(),
        401,
        "authentication_error",
    )
    .await;
    assert!(m.contains("x-api-key"), "{m}");
    assert!(!m.contains("sk-wrong"), "{m}");
}

#[tokio::test]
async fn routes_are_refused_in_anthropic_shape() {
    let mut state = GatewayState::new(chain(vec![ScriptedModel::new("m").reply("Hi!")]));
    state.set_routes(vec![GatewayRoute {
        name: "smart".to_owned(),
        aliases: vec!["claude-sonnet-4-5".to_owned()],
        deadline: Duration::from_secs(5),
        stream_max: Duration::from_secs(5),
    }]);
    state.add_key(
        &GatewayKey {
            routes: Some(Vec::new()),
            ..support::gateway_key("sk-globex-0123456789", Some("globex"))
        },
        None,
    );
    state.add_key(
        &support::gateway_key("sk-acme-0123456789", Some("acme")),
        None,
    );
    let (url, _stop) = start(state).await;
    let send = |key: &'static str, body: Value| {
        reqwest::Client::new()
            .post(format!("{url}/v1/messages"))
            .header("x-api-key", key)
            .json(&body)
            .send()
    };
    let ok = send("sk-acme-0123456789", hi(false)).await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["x-ripcord-route"], "smart");
    let mut unknown = hi(false);
    unknown["model"] = json!("gpt-9");
    let m = expect_error(
        send("sk-acme-0123456789", unknown).await.unwrap(),
        404,
        "not_found_error",
    )
    .await;
    assert!(m.contains("`gpt-9`") && m.contains("smart"), "{m}");
    let m = expect_error(
        send("sk-globex-0123456789", hi(false)).await.unwrap(),
        403,
        "permission_error",
    )
    .await;
    assert!(m.contains("route `smart`"), "{m}");
}

#[tokio::test]
async fn chain_failures_use_anthropic_statuses() {
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("a").fail(ErrorKind::Overloaded),
        ScriptedModel::new("b").fail(ErrorKind::Overloaded),
    ])))
    .await;
    let resp = post(&url, "/v1/messages", &hi(false)).await;
    assert_eq!(resp.headers()["x-ripcord-served-by"], "none");
    assert_eq!(resp.headers()["x-ripcord-degraded"], "true");
    expect_error(resp, 529, "overloaded_error").await;
    // Before commit, a stream's failure is a plain error response too.
    let resp = post(&url, "/v1/messages", &hi(true)).await;
    expect_error(resp, 529, "overloaded_error").await;
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("a").fail(ErrorKind::RateLimited),
    ])))
    .await;
    expect_error(
        post(&url, "/v1/messages", &hi(false)).await,
        429,
        "rate_limit_error",
    )
    .await;
}

#[tokio::test]
async fn a_failed_chain_names_no_link_model_or_vendor_text() {
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("vendor-link-alpha").fail_with(
            Error::new(
                ErrorKind::QuotaExhausted,
                "billing: card ending 4242 declined",
            ),
            Duration::ZERO,
        ),
    ])))
    .await;
    for stream in [false, true] {
        let resp = post(&url, "/v1/messages", &hi(stream)).await;
        assert_eq!(resp.headers()["x-should-retry"], "false", "stream={stream}");
        let id = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["type"], "error");
        let message = body["error"]["message"].as_str().unwrap();
        for secret in ["vendor-link-alpha", "billing", "4242", "scripted"] {
            assert!(!message.contains(secret), "{secret:?} leaked: {message}");
        }
        assert!(message.contains(&id), "the request id is in {message}");
    }
}

#[tokio::test]
async fn a_stream_is_anthropics_event_sequence_with_tool_blocks_and_usage() {
    let ms = Duration::from_millis(1);
    let tool = |id: Option<&str>, name: Option<&str>, args: &str| {
        StreamItem::Event(StreamEvent::ToolCallDelta {
            index: 0,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: args.to_owned(),
        })
    };
    let model = ScriptedModel::new("backup").stream_items(vec![
        (ms, StreamItem::Event(StreamEvent::text("Let me "))),
        (ms, StreamItem::Event(StreamEvent::text("check."))),
        (ms, tool(Some("call_1"), Some("weather"), "")),
        (ms, tool(None, None, "{\"city\":")),
        (ms, tool(None, None, "\"Oslo\"}")),
        (
            ms,
            StreamItem::Event(StreamEvent::finish(FinishReason::ToolCalls)),
        ),
        (
            ms,
            StreamItem::Event(StreamEvent::Usage {
                usage: Usage::new(40, 12),
            }),
        ),
    ]);
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("primary").fail(ErrorKind::Overloaded),
        model,
    ])))
    .await;
    let resp = post(&url, "/v1/messages", &hi(true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["x-ripcord-served-by"], "backup");
    assert_eq!(
        resp.headers()["x-ripcord-requested-model"],
        "claude-sonnet-4-5"
    );
    let evs = support::sse_events(&resp.text().await.unwrap());
    assert_eq!(
        names(&evs),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    // The serving link's model, not the one asked for.
    assert_eq!(evs[0].1["message"]["model"], "backup-model");
    assert_eq!(
        evs[6].1,
        json!({"type": "content_block_start", "index": 1,
               "content_block": {"type": "tool_use", "id": "call_1", "name": "weather", "input": {}}})
    );
    assert_eq!(
        evs[8].1["delta"],
        json!({"type": "input_json_delta", "partial_json": "\"Oslo\"}"})
    );
    assert_eq!(evs[10].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(evs[10].1["usage"]["output_tokens"], 12);
    assert_eq!(evs[10].1["usage"]["input_tokens"], 40);
}

#[tokio::test]
async fn a_failure_after_commit_ends_with_an_anthropic_error_event() {
    let ms = Duration::from_millis(2);
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("primary").fail(ErrorKind::Overloaded),
        ScriptedModel::new("backup").stream_items(vec![
            (ms, StreamItem::Event(StreamEvent::text("Hel"))),
            (
                ms,
                StreamItem::Error(Error::new(ErrorKind::Overloaded, "overloaded mid-answer")),
            ),
        ]),
    ])))
    .await;
    let resp = post(&url, "/v1/messages", &hi(true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-ripcord-served-by"], "backup");
    let evs = support::sse_events(&resp.text().await.unwrap());
    assert_eq!(
        names(&evs),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "error"
        ]
    );
    let err = &evs[4].1;
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "overloaded_error");
    // General words and the request id; the vendor's own text stays in the server log.
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.contains("request id"), "{err}");
    assert!(!message.contains("overloaded mid-answer"), "{err}");
    assert_eq!(err["ripcord"]["degraded"], true);
    // A stream that simply stops without its finish is an error too, never a short answer.
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("only")
            .stream_items(vec![(ms, StreamItem::Event(StreamEvent::text("Hel")))]),
    ])))
    .await;
    let evs = support::sse_events(
        &post(&url, "/v1/messages", &hi(true))
            .await
            .text()
            .await
            .unwrap(),
    );
    let (name, err) = evs.last().unwrap();
    assert_eq!(name, "error", "{evs:?}");
    assert_eq!(err["type"], "error", "{err}");
    // A whole answer ends with message_stop.
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("only").stream_items(text_stream(&["Hel", "lo"], ms)),
    ])))
    .await;
    let evs = support::sse_events(
        &post(&url, "/v1/messages", &hi(true))
            .await
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(evs.last().unwrap().0, "message_stop", "{evs:?}");
}

#[tokio::test]
async fn count_tokens_is_the_estimator() {
    let (url, _stop) = start(GatewayState::new(chain(vec![
        ScriptedModel::new("m").reply("never"),
    ])))
    .await;
    let body = json!({"model": "claude-sonnet-4-5", "system": "Be brief.",
        "messages": [{"role": "user", "content": "Why is the sky blue? Explain Rayleigh scattering."}]});
    let resp = post(&url, "/v1/messages/count_tokens", &body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-ripcord-token-count"], "estimate");
    let v: Value = resp.json().await.unwrap();
    let req = ripcord_core::ChatRequest::new(vec![
        ripcord_core::Message::system("Be brief."),
        ripcord_core::Message::user("Why is the sky blue? Explain Rayleigh scattering."),
    ]);
    assert_eq!(
        v,
        json!({"input_tokens": ripcord_core::tokens::estimate_request(&req)})
    );
}

fn claude_link(fake: &FakeVendor) -> Arc<dyn ChatModel> {
    Arc::new(
        Anthropic::new(
            AnthropicConfig::new("claude-sonnet-4-5", "sk-ant-upstream")
                .with_base_url(fake.base_url()),
        )
        .unwrap()
        .named("claude"),
    )
}

/// Gateway in, Anthropic adapter out: a request in the adapter's own canonical form reaches the
/// Anthropic vendor byte-for-byte as the client sent it, and the vendor's answer reaches the
/// client as the vendor wrote it. If the front door and the adapter drift apart, this breaks.
#[tokio::test]
async fn messages_round_trip_through_the_anthropic_adapter() {
    let reply = Reply::text("It is 18C.")
        .with_tool_call("toolu_9", "weather", r#"{"city":"Paris"}"#)
        .with_usage(31, 17)
        .with_chunks(2);
    let fake = FakeVendor::start_with(
        Wire::Anthropic,
        ripcord_chaos::FakeOptions {
            reply: reply.clone(),
            ..ripcord_chaos::FakeOptions::default()
        },
    )
    .await
    .unwrap();
    let (url, _stop) = start(GatewayState::new(claude_link(&fake))).await;
    let sent = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 300,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "text", "text": "Weather there?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {"type": "text", "text": "And now?"}]}
        ],
        "tools": [{"name": "weather", "description": "Current weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "tool_choice": {"type": "any"},
        "temperature": 0.25,
        "top_p": 0.5,
        "stop_sequences": ["END"],
        "metadata": {"user_id": "u-42"}
    });
    let resp = post(&url, "/v1/messages", &sent).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-ripcord-served-by"], "claude");
    let got: Value = resp.json().await.unwrap();
    assert_eq!(fake.requests()[0].json().unwrap(), sent);
    // What the vendor answered, as it would have answered the client directly.
    let direct: Value = reqwest::Client::new()
        .post(format!("{}/v1/messages", fake.base_url()))
        .json(&sent)
        .json_body()
        .await;
    for field in ["type", "role", "model", "content", "stop_reason", "usage"] {
        assert_eq!(got[field], direct[field], "{field}: {got} vs {direct}");
    }
    // Streams: the same events, block for block.
    let mut streamed = sent.clone();
    streamed["stream"] = json!(true);
    let ours = support::sse_events(
        &post(&url, "/v1/messages", &streamed)
            .await
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(fake.requests()[2].json().unwrap(), streamed);
    let theirs = support::sse_events(
        &reqwest::Client::new()
            .post(format!("{}/v1/messages", fake.base_url()))
            .json(&streamed)
            .text_body()
            .await,
    );
    let blocks = |evs: &[(String, Value)]| -> Vec<Value> {
        evs.iter()
            .filter(|(n, _)| n.starts_with("content_block"))
            .map(|(_, v)| v.clone())
            .collect()
    };
    assert_eq!(blocks(&ours), blocks(&theirs));
    let last_delta = |evs: &[(String, Value)]| {
        evs.iter()
            .find(|(n, _)| n == "message_delta")
            .map(|(_, v)| {
                (
                    v["delta"]["stop_reason"].clone(),
                    v["usage"]["output_tokens"].clone(),
                )
            })
            .unwrap()
    };
    assert_eq!(last_delta(&ours), last_delta(&theirs));
    assert_eq!(
        ours[0].1["message"]["model"],
        theirs[0].1["message"]["model"]
    );
    assert_eq!(ours.last().unwrap().0, "message_stop");
}
