//! What client libraries send and read, through the real `ripcord serve` (issue 33): an
//! explicit `null` is the same as an absent field on every door, parse errors name the field
//! by its path and carry the request id, an exhausted chain tells SDKs not to retry it (the
//! vendors are called once per call even with the SDKs' default retries), and the `model` of
//! an answer follows one rule in JSON and streams on every door.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)] // test helpers fail the test by panicking

mod support;

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::{Value, json};
use support::post_full as post;

/// A link's breaker that stays closed through a test, without the background probe.
const BREAKER_STAYS_CLOSED: &str =
    "[providers.breaker]\nfailure_threshold = 100\nbackground_probe_ms = 0\n";

/// An OpenAI-wire `primary` (`gpt-4o`) then an OpenAI-wire `backup` (`gpt-4o-mini`), one attempt
/// each, breakers that stay closed through the test; `extra` goes under `[chain]`.
fn chain_config(
    dir: &std::path::Path,
    primary: &str,
    backup: &str,
    extra: &str,
) -> std::path::PathBuf {
    support::write_config(
        dir,
        &format!(
            "[chain]\norder = [\"primary\", \"backup\"]\ndeadline_ms = 5000\n{extra}\n{}{}",
            support::steady_link("primary", "gpt-4o", primary, 100),
            support::steady_link("backup", "gpt-4o-mini", backup, 100),
        ),
    )
}

/// `[embeddings]` over the link `primary` (OpenAI-wire `gpt-4o` at `vendor`, upstream key
/// `sk-a`), with that link's section.
fn embeddings_of_primary(vendor: &str) -> String {
    format!(
        "\n[embeddings]\nproviders = [\"primary\"]\nmodel = \"text-embedding-3-small\"\n{}",
        support::openai_link("primary", "gpt-4o", vendor, "sk-a")
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_explicit_null_is_an_absent_field_on_every_door() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = support::temp_dir("clients-null");
    let config = chain_config(&dir, &vendor.base_url(), &vendor.base_url(), "");
    let served = support::serve(&config);
    // Chat Completions: every optional field null, and the history an SDK's `model_dump()`
    // writes (`tool_calls: null`, `function_call: null`, `refusal: null`, `audio: null`).
    let chat = json!({
        "model": "ripcord",
        "messages": [
            {"role": "system", "content": "Be brief.", "name": null},
            {"role": "user", "content": "Hi", "name": null},
            {"role": "assistant", "content": "Hello!", "tool_calls": null, "function_call": null,
             "refusal": null, "audio": null, "annotations": null, "name": null, "tool_call_id": null},
            {"role": "user", "content": "Again"}
        ],
        "tools": null, "tool_choice": null, "stream": null, "stream_options": null,
        "response_format": null, "temperature": null, "top_p": null, "max_tokens": null,
        "max_completion_tokens": null, "stop": null, "seed": null, "user": null, "n": null,
        "presence_penalty": null, "frequency_penalty": null, "logprobs": null,
        "parallel_tool_calls": null,
    });
    let (status, _, body) = post(&format!("{}/v1/chat/completions", served.url), chat).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "chat.completion", "{body}");
    // A tool call whose arguments are null, and nulls inside a tool.
    let tool_turn = json!({
        "model": "ripcord",
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": null}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "description": null, "parameters": null, "strict": null}}],
        "stream": true, "stream_options": {"include_usage": null},
    });
    let (status, _, body) = post(&format!("{}/v1/chat/completions", served.url), tool_turn).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("data: [DONE]"), "{body}");
    // Anthropic Messages: `tools`, `stop_sequences`, `stream`, `system`, `tool_choice`,
    // `metadata` and a tool result's `is_error` as null.
    let messages = json!({
        "model": "ripcord", "max_tokens": 64,
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": null}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": null, "is_error": null}]}
        ],
        "tools": null, "stop_sequences": null, "stream": null, "system": null,
        "tool_choice": null, "metadata": null, "temperature": null, "top_p": null, "top_k": null,
    });
    let (status, _, body) = post(&format!("{}/v1/messages", served.url), messages).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["type"], "message", "{body}");
    // What reached the vendor: no tools, no stream (each null was absent, not an empty value).
    let sent: Vec<Value> = vendor.requests().iter().filter_map(|r| r.json()).collect();
    assert_eq!(sent.len(), 3);
    assert!(sent[0].get("tools").is_none(), "{}", sent[0]);
    assert_ne!(sent[0]["stream"], true, "{}", sent[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

const HISTORY_SCRIPT: &str = r#"
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="not-checked-on-loopback", max_retries=0)
tools = [{"type": "function", "function": {"name": "weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
messages = [{"role": "user", "content": "Weather in Oslo?"}]
first = client.chat.completions.create(model="ripcord", messages=messages, tools=tools)
messages.append(first.choices[0].message.model_dump())
call = first.choices[0].message.tool_calls[0]
messages.append({"role": "tool", "tool_call_id": call.id, "content": "-3C"})
second = client.chat.completions.create(model="ripcord", messages=messages, tools=tools)
messages.append(second.choices[0].message.model_dump())
messages.append({"role": "user", "content": "Thanks"})
third = client.chat.completions.create(model="ripcord", messages=messages, tools=None, stream=None)
print(json.dumps({"dumped": messages[1], "call": call.id, "second": second.choices[0].message.content,
                  "third": third.choices[0].message.content}))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn openai_sdk_history_from_model_dump_is_accepted() {
    let Some(python) = support::python() else {
        return;
    };
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    vendor.set_script(Script::Sequence(vec![
        Behavior::Reply(Reply::text("").with_tool_call("call_w1", "weather", r#"{"city":"Oslo"}"#)),
        Behavior::Reply(Reply::text("It is -3C in Oslo.")),
        Behavior::Reply(Reply::text("You are welcome.")),
    ]));
    let dir = support::temp_dir("clients-history");
    let config = chain_config(&dir, &vendor.base_url(), &vendor.base_url(), "");
    let served = support::serve(&config);
    let v = support::python_json(python, HISTORY_SCRIPT, vec![served.url.clone()]).await;
    // The SDK's dump carries the nulls that used to be refused.
    assert!(v["dumped"]["function_call"].is_null(), "{v}");
    assert!(v["dumped"].get("refusal").is_some(), "{v}");
    assert_eq!(v["call"], "call_w1", "{v}");
    assert_eq!(v["second"], "It is -3C in Oslo.", "{v}");
    assert_eq!(v["third"], "You are welcome.", "{v}");
    // The third turn's history reached the vendor whole: the assistant's tool call, the
    // tool's result, the assistant's answer (its `tool_calls: null` as no calls).
    let sent = vendor.requests()[2].json().unwrap();
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "user"],
        "{sent}"
    );
    assert!(sent["messages"][3].get("tool_calls").is_none(), "{sent}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn error_of(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap();
    v["error"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn parse_errors_name_the_field_by_its_path_and_carry_the_request_id() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = support::temp_dir("clients-parse");
    let config = support::write_config(
        &dir,
        &format!(
            "[chain]\norder = [\"primary\"]\n{}",
            embeddings_of_primary(&vendor.base_url())
        ),
    );
    let served = support::serve(&config);
    let chat = format!("{}/v1/chat/completions", served.url);
    let cases = [
        (
            json!({"model": "ripcord", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}),
            "temperature",
        ),
        (
            json!({"model": "ripcord", "messages": [{"role": "user", "content": "x", "tool_calls": [{"id": 1}]}]}),
            "messages[0].tool_calls[0].id",
        ),
        (
            json!({"model": "ripcord", "messages": [{"role": "robot", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "ripcord", "messages": [{"role": "user", "content": [{"type": "video"}]}]}),
            "messages[0].content[0].type",
        ),
        (json!({"model": "ripcord", "messages": []}), "messages"),
        (
            json!({"model": "ripcord", "messages": [{"role": "user", "content": "x"}], "stop": 5}),
            "stop",
        ),
    ];
    for (body, path) in cases {
        let (status, headers, text) = post(&chat, body).await;
        assert_eq!(status, 400, "{text}");
        let e = error_of(&text);
        assert_eq!(e["param"], path, "{text}");
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{path}: ")), "{text}");
        assert!(!message.contains("column"), "{text}");
        assert!(!message.contains("invalid_request:"), "{text}");
        let id = headers["x-request-id"].to_str().unwrap();
        assert!(message.ends_with(&format!("(request id: {id})")), "{text}");
    }
    // The Messages door names its fields the same way, in Anthropic's envelope.
    let (status, headers, text) = post(
        &format!("{}/v1/messages", served.url),
        json!({"model": "ripcord", "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["type"], "error", "{text}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("max_tokens: Field required"), "{text}");
    let id = headers["x-request-id"].to_str().unwrap();
    assert!(message.ends_with(&format!("(request id: {id})")), "{text}");
    // Embeddings: a bad input names `input` and carries the request id too.
    let (status, headers, text) = post(
        &format!("{}/v1/embeddings", served.url),
        json!({"model": "text-embedding-3-small", "input": {"text": "x"}}),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let e = error_of(&text);
    assert_eq!(e["param"], "input", "{text}");
    let id = headers["x-request-id"].to_str().unwrap();
    assert!(
        support::text(&e["message"]).ends_with(&format!("(request id: {id})")),
        "{text}"
    );
    // Not JSON at all: said so, with the position (there is no field to name).
    let resp = reqwest::Client::new()
        .post(&chat)
        .header("content-type", "application/json")
        .body("{\"model\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let text = resp.text().await.unwrap();
    assert!(
        support::text(&error_of(&text)["message"]).contains("not valid JSON"),
        "{text}"
    );
    assert_eq!(vendor.hits(), 0, "no bad request reached the vendor");
    let _ = std::fs::remove_dir_all(&dir);
}

const RETRY_SCRIPT: &str = r#"
import json, sys
import openai, anthropic
out = {}
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="not-checked-on-loopback")
try:
    client.chat.completions.create(model="ripcord", messages=[{"role": "user", "content": "hi"}])
    out["openai"] = "answered"
except openai.APIStatusError as e:
    out["openai"] = {"class": type(e).__name__, "status": e.status_code,
                     "should_retry": e.response.headers.get("x-should-retry")}
try:
    s = client.chat.completions.create(model="ripcord", messages=[{"role": "user", "content": "hi"}], stream=True)
    list(s)
    out["openai_stream"] = "answered"
except openai.APIStatusError as e:
    out["openai_stream"] = {"class": type(e).__name__, "status": e.status_code}
claude = anthropic.Anthropic(base_url=sys.argv[1], api_key="not-checked-on-loopback")
try:
    claude.messages.create(model="ripcord", max_tokens=32, messages=[{"role": "user", "content": "hi"}])
    out["anthropic"] = "answered"
except anthropic.APIStatusError as e:
    out["anthropic"] = {"class": type(e).__name__, "status": e.status_code,
                        "should_retry": e.response.headers.get("x-should-retry")}
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_exhausted_chain_is_called_once_under_the_sdks_default_retries() {
    let Some(python) = support::python() else {
        return;
    };
    let primary = support::fake_failing(Wire::OpenAi, VendorError::ServerError).await;
    let backup = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let dir = support::temp_dir("clients-retries");
    let config = chain_config(&dir, &primary.base_url(), &backup.base_url(), "");
    let served = support::serve(&config);
    // The SDKs keep their default retries (2 each): a call the gateway says not to retry is
    // sent once, so each vendor sees one request per SDK call.
    let v = support::python_json(python, RETRY_SCRIPT, vec![served.url.clone()]).await;
    println!("{v:#}");
    assert_eq!(v["openai"]["class"], "InternalServerError", "{v}");
    assert_eq!(v["openai"]["should_retry"], "false", "{v}");
    assert_eq!(v["openai_stream"]["class"], "InternalServerError", "{v}");
    assert_eq!(v["anthropic"]["should_retry"], "false", "{v}");
    assert_eq!(primary.hits(), 3, "one vendor call per SDK call");
    assert_eq!(backup.hits(), 3, "one vendor call per SDK call");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_chain_says_when_a_link_is_readmitted() {
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    primary.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: Some(std::time::Duration::from_secs(30)),
    })));
    let backup = support::fake_failing(Wire::OpenAi, VendorError::ServerError).await;
    let dir = support::temp_dir("clients-readmit");
    let config = chain_config(&dir, &primary.base_url(), &backup.base_url(), "");
    let served = support::serve(&config);
    let (status, headers, text) = post(
        &format!("{}/v1/chat/completions", served.url),
        json!({"model": "ripcord", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 502, "{text}");
    assert_eq!(headers["x-should-retry"], "false");
    assert_eq!(headers["retry-after"], "30", "{headers:?}");
    assert_eq!(headers["retry-after-ms"], "30000", "{headers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `model` a stream's `data:` line names, if it names one.
type StreamModel = fn(&str) -> Option<String>;

/// The `model` of a chat stream's `data:` line (every chunk names it).
fn chat_chunk_model(line: &str) -> Option<String> {
    if line == "[DONE]" {
        return None;
    }
    let v: Value = serde_json::from_str(line).unwrap();
    Some(v["model"].as_str().unwrap().to_owned())
}

/// The `model` of a Messages stream's `data:` line (named by `message_start`).
fn messages_event_model(line: &str) -> Option<String> {
    let v: Value = serde_json::from_str(line).unwrap();
    (v["type"] == "message_start").then(|| v["message"]["model"].as_str().unwrap().to_owned())
}

/// The `model` of a Responses stream's `data:` line (where it carries the response).
fn responses_event_model(line: &str) -> Option<String> {
    let v: Value = serde_json::from_str(line).unwrap();
    v.pointer("/response/model")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The `model` of every shape an answer takes: Chat Completions JSON and stream, Messages JSON
/// and stream, Responses JSON and stream.
async fn models_of_every_door(url: &str) -> Vec<(String, String)> {
    let hi = json!([{"role": "user", "content": "hi"}]);
    let doors: [(&str, &str, Value, StreamModel); 3] = [
        (
            "chat",
            "/v1/chat/completions",
            json!({"model": "ripcord", "messages": hi}),
            chat_chunk_model,
        ),
        (
            "messages",
            "/v1/messages",
            json!({"model": "ripcord", "max_tokens": 32, "messages": hi}),
            messages_event_model,
        ),
        (
            "responses",
            "/v1/responses",
            json!({"model": "ripcord", "input": "hi", "store": false}),
            responses_event_model,
        ),
    ];
    let mut out = Vec::new();
    for (door, path, body, stream_model) in doors {
        let mut streamed = body.clone();
        let (s, _, text) = post(&format!("{url}{path}"), body).await;
        assert_eq!(s, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        out.push((door.to_owned(), v["model"].as_str().unwrap().to_owned()));
        streamed["stream"] = json!(true);
        let (s, _, text) = post(&format!("{url}{path}"), streamed).await;
        assert_eq!(s, 200, "{text}");
        for line in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            if let Some(model) = stream_model(line) {
                out.push((format!("{door} stream"), model));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_follows_one_rule_in_json_and_streams_on_every_door() {
    let primary = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    // The vendor names a dated snapshot; the answer names the link's model either way.
    backup.set_script(Script::Always(Behavior::Reply(
        Reply::text("Hello from the backup").with_model("gpt-4o-mini-2024-07-18"),
    )));
    let dir = support::temp_dir("clients-model");
    let config = chain_config(
        &dir,
        &primary.base_url(),
        &backup.base_url(),
        "static_reply = \"busy\"",
    );
    let served = support::serve(&config);
    let seen = models_of_every_door(&served.url).await;
    assert!(seen.len() >= 6, "{seen:?}");
    for (door, model) in &seen {
        assert_eq!(model, "gpt-4o-mini", "{door}: {seen:?}");
    }
    // Every link down: the static reply is named `static` in every shape.
    backup.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let seen = models_of_every_door(&served.url).await;
    for (door, model) in &seen {
        assert_eq!(model, "static", "{door}: {seen:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[path = "clients/endpoints.rs"]
mod endpoints;
