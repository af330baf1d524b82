//! `ripcord serve`'s Anthropic front door (`/v1/messages`) driven by the official `anthropic`
//! Python SDK, through a Claude outage: the primary is an Anthropic-wire vendor answering 529,
//! the backup an OpenAI-wire vendor. The SDK sees Claude-shaped answers from the backup.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)] // test helpers fail the test by panicking

mod support;

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};

const SDK_SCRIPT: &str = r#"
import json, sys
import anthropic
client = anthropic.Anthropic(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
model = "claude-sonnet-4-5"
hi = [{"role": "user", "content": "Say hi"}]
out = {}
raw = client.messages.with_raw_response.create(model=model, max_tokens=64, messages=hi)
m = raw.parse()
out["plain"] = {"type": m.type, "text": m.content[0].text, "stop_reason": m.stop_reason, "model": m.model,
                "output_tokens": m.usage.output_tokens, "served_by": raw.headers.get("x-ripcord-served-by"),
                "degraded": raw.headers.get("x-ripcord-degraded")}
with client.messages.stream(model=model, max_tokens=64, messages=hi) as s:
    deltas = list(s.text_stream)
    final = s.get_final_message()
    served_by = s.response.headers.get("x-ripcord-served-by")
out["stream"] = {"deltas": deltas, "text": final.content[0].text, "stop_reason": final.stop_reason,
                 "model": final.model, "input_tokens": final.usage.input_tokens,
                 "output_tokens": final.usage.output_tokens, "served_by": served_by}
tools = [{"name": "weather", "description": "Current weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
ask = [{"role": "user", "content": "Weather in Oslo?"}]
first = client.messages.create(model=model, max_tokens=64, tools=tools, messages=ask)
use = next(b for b in first.content if b.type == "tool_use")
out["tool_use"] = {"stop_reason": first.stop_reason, "id": use.id, "name": use.name, "input": use.input}
second = client.messages.create(model=model, max_tokens=64, tools=tools, messages=ask + [
    {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "-3C and snowing"}]},
])
out["after_tool"] = {"text": second.content[0].text, "stop_reason": second.stop_reason}
try:
    client.messages.create(model=model, max_tokens=64,
                           messages=[{"role": "user", "content": [{"type": "video", "url": "x"}]}])
    out["bad_block"] = "accepted"
except anthropic.BadRequestError as e:
    out["bad_block"] = {"status": e.status_code, "type": e.body["error"]["type"], "message": e.body["error"]["message"]}
with client.messages.stream(model=model, max_tokens=64, tools=tools, messages=ask) as s:
    final = s.get_final_message()
streamed_use = next(b for b in final.content if b.type == "tool_use")
out["stream_tool_use"] = {"stop_reason": final.stop_reason, "id": streamed_use.id, "input": streamed_use.input}
count = client.messages.count_tokens(model=model, messages=ask)
out["count_tokens"] = count.input_tokens
print(json.dumps(out))
"#;

/// The links `claude` (Anthropic, one attempt, key `claude_key`) and `backup` (OpenAI-wire
/// `gpt-4o`, key `backup_key`).
fn claude_then_gpt(
    claude: &FakeVendor,
    backup: &FakeVendor,
    claude_key: &str,
    backup_key: &str,
) -> String {
    format!(
        "{}{}{}",
        support::anthropic_link(
            "claude",
            "claude-sonnet-4-5",
            &claude.base_url(),
            claude_key
        ),
        support::ONE_ATTEMPT,
        support::openai_link("backup", "gpt-4o", &backup.base_url(), backup_key),
    )
}

/// Claude down (every call overloaded), and a GPT-4o backup answering on `script`.
async fn claude_outage(script: Script) -> (FakeVendor, FakeVendor) {
    let claude = support::fake_failing(Wire::Anthropic, VendorError::Overloaded).await;
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    backup.set_script(script);
    (claude, backup)
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_sdk_through_a_claude_outage() {
    let Some(python) = support::python() else {
        return;
    };
    let hello = Reply::text("Hello from the backup!").with_chunks(3);
    let (claude, backup) = claude_outage(Script::Sequence(vec![
        Behavior::Reply(hello.clone()),
        Behavior::Reply(hello),
        Behavior::Reply(Reply::text("").with_tool_call("call_w1", "weather", r#"{"city":"Oslo"}"#)),
        Behavior::Reply(Reply::text("It is -3C and snowing in Oslo.")),
        Behavior::Reply(
            Reply::text("")
                .with_tool_call("call_w2", "weather", r#"{"city":"Bergen"}"#)
                .with_chunks(3),
        ),
    ]))
    .await;
    let dir = support::temp_dir("anthropic-sdk");
    let config = support::write_config(
        &dir,
        &format!(
            "{}deadline_ms = 10000\n{}{}",
            support::route("claude-sonnet-4-5", &["claude", "backup"]),
            claude_then_gpt(
                &claude,
                &backup,
                "sk-ant-upstream-key",
                "sk-backup-upstream-key"
            ),
            support::tenant_key("acme", "SDK_ACME_KEY"),
        ),
    );
    let key = "sk-acme-gateway-0123456789";
    let served = support::serve_with_env(&config, &[("SDK_ACME_KEY", key)]);
    let url = served.url.clone();
    let v = support::python_json(python, SDK_SCRIPT, vec![url, key.to_owned()]).await;
    println!("{v:#}");
    // A Message with the backup's text, its stop reason, and the serving model's name.
    let from_backup = [
        ("text", "Hello from the backup!"),
        ("stop_reason", "end_turn"),
        ("model", "gpt-4o"),
        ("served_by", "backup"),
    ];
    support::assert_holds(&v, "plain", &from_backup);
    support::assert_holds(&v, "plain", &[("type", "message"), ("degraded", "true")]);
    assert!(v["plain"]["output_tokens"].as_u64().unwrap() > 0, "{v}");
    // The stream yields the text deltas and a final message with usage.
    let stream = &v["stream"];
    let deltas = support::strs(&stream["deltas"]);
    assert_eq!(deltas.len(), 3, "{v}");
    assert_eq!(deltas.concat(), "Hello from the backup!", "{v}");
    support::assert_holds(&v, "stream", &from_backup);
    assert!(stream["input_tokens"].as_u64().unwrap() > 0, "{v}");
    assert!(stream["output_tokens"].as_u64().unwrap() > 0, "{v}");
    // A tool call round-trips: tool_use out, tool_result back.
    assert_eq!(
        v["tool_use"],
        serde_json::json!({"stop_reason": "tool_use", "id": "call_w1", "name": "weather", "input": {"city": "Oslo"}})
    );
    assert_eq!(
        v["after_tool"],
        serde_json::json!({"text": "It is -3C and snowing in Oslo.", "stop_reason": "end_turn"})
    );
    let sent = backup.requests()[3].json().unwrap();
    let msgs = sent["messages"].as_array().unwrap();
    assert_eq!(
        msgs[1]["tool_calls"][0]["function"],
        serde_json::json!({"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}),
        "{sent}"
    );
    assert_eq!(msgs[2]["role"], "tool", "{sent}");
    assert_eq!(msgs[2]["tool_call_id"], "call_w1", "{sent}");
    assert_eq!(msgs[2]["content"], "-3C and snowing", "{sent}");
    assert_eq!(sent["tools"][0]["function"]["name"], "weather", "{sent}");
    // Bad input: Anthropic's error shape, naming where.
    assert_eq!(v["bad_block"]["status"], 400, "{v}");
    assert_eq!(v["bad_block"]["type"], "invalid_request_error", "{v}");
    assert!(
        support::text(&v["bad_block"]["message"])
            .starts_with("messages[0].content[0].type: unknown variant `video`"),
        "{v}"
    );
    // A streamed tool call: the SDK assembles the input from the input_json_delta pieces.
    assert_eq!(
        v["stream_tool_use"],
        serde_json::json!({"stop_reason": "tool_use", "id": "call_w2", "input": {"city": "Bergen"}})
    );
    assert!(v["count_tokens"].as_u64().unwrap() > 0, "{v}");
    // Claude was asked on every call (its 529s are what the backup covered), the refused
    // request and count_tokens reached no vendor, and the upstream keys stayed upstream.
    assert_eq!((claude.hits(), backup.hits()), (5, 5));
    assert_eq!(
        claude.requests()[0].header("x-api-key"),
        Some("sk-ant-upstream-key")
    );
    assert!(!v.to_string().contains("upstream-key"));
    let _ = std::fs::remove_dir_all(&dir);
}

const MIDSTREAM_SCRIPT: &str = r#"
import json, sys
import anthropic
client = anthropic.Anthropic(base_url=sys.argv[1], max_retries=0, api_key="not-checked-on-loopback")
got = []
try:
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=64,
                                messages=[{"role": "user", "content": "Say hi"}]) as s:
        served_by = s.response.headers.get("x-ripcord-served-by")
        for t in s.text_stream:
            got.append(t)
    out = {"outcome": "completed", "got": got}
except anthropic.APIStatusError as e:
    out = {"outcome": type(e).__name__, "got": got, "served_by": served_by, "body": e.body}
print(json.dumps(out))
"#;

/// The backup fails after it has streamed text: the SDK raises on Anthropic's `event: error`
/// instead of returning a short answer as if it were whole.
#[tokio::test(flavor = "multi_thread")]
async fn anthropic_sdk_sees_a_failure_after_commit_as_an_error() {
    let Some(python) = support::python() else {
        return;
    };
    let (claude, backup) = claude_outage(Script::Always(Behavior::InBandError {
        after_chunks: 2,
        error: VendorError::ServerError,
    }))
    .await;
    let dir = support::temp_dir("anthropic-mid");
    let config = support::write_config(
        &dir,
        &format!(
            "[chain]\norder = [\"claude\", \"backup\"]\ndeadline_ms = 10000\n{}",
            claude_then_gpt(&claude, &backup, "sk-ant-a", "sk-b")
        ),
    );
    let served = support::serve(&config);
    let url = served.url.clone();
    let v = support::python_json(python, MIDSTREAM_SCRIPT, vec![url]).await;
    println!("{v:#}");
    assert_eq!(v["outcome"], "APIStatusError", "{v}");
    assert_eq!(v["served_by"], "backup", "{v}");
    assert!(
        !v["got"].as_array().unwrap().is_empty(),
        "text came first: {v}"
    );
    assert_eq!(v["body"]["type"], "error", "{v}");
    assert_eq!(v["body"]["error"]["type"], "api_error", "{v}");
    assert_eq!(backup.hits(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
