//! The return half of reasoning (issue 33, item 7) through the real `ripcord serve` and the
//! chaos fakes: a model's thinking reaches the client on every door whose wire can carry it —
//! Messages `thinking` / `redacted_thinking` blocks with signatures (JSON and the exact stream
//! events), Chat Completions `reasoning_content` (message and deltas) — and a signed thinking
//! block sent back in history reaches Claude intact, which checks the signature it issued.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)] // test helpers fail the test by panicking

mod support;

use ripcord_chaos::{Reply, Wire, signature_for};
use serde_json::{Value, json};
use support::post;

const CLAUDE_THINKING: &str = "The user wants 2+2. That is 4.";
const DEEPSEEK_THINKING: &str = "Compare 9.11 and 9.8 digit by digit.";

/// `ripcord serve` of two routes over a reasoning DeepSeek (`gpt`) and a thinking Claude.
async fn start(name: &str) -> support::TwoRoutes {
    let gpt = support::fake(
        Wire::OpenAi,
        Reply::text("9.8 is larger.")
            .with_chunks(3)
            .with_reasoning(DEEPSEEK_THINKING),
    )
    .await;
    let claude = support::fake(
        Wire::Anthropic,
        Reply::text("4")
            .with_chunks(3)
            .with_reasoning(CLAUDE_THINKING)
            .with_redacted_reasoning("EmwKAhgBEgy3va3pzix/LafPsn4a"),
    )
    .await;
    support::TwoRoutes::serve(
        &format!("reasoning-ret-{name}"),
        gpt,
        claude,
        "deepseek-reasoner",
    )
}

/// The `data:` payloads of an SSE body, with their `event:` names (`""` when none).
fn sse(body: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut name = String::new();
    for line in body.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_owned();
        } else if let Some(d) = line.strip_prefix("data: ")
            && d != "[DONE]"
        {
            out.push((std::mem::take(&mut name), serde_json::from_str(d).unwrap()));
        }
    }
    out
}

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 2048, "stream": stream,
        "messages": [{"role": "user", "content": "What is 2+2?"}]})
}

#[tokio::test(flavor = "multi_thread")]
async fn messages_door_returns_signed_thinking_in_json_and_in_anthropics_stream_events() {
    let f = start("messages").await;
    let url = f.url("/v1/messages");
    let v = support::post_ok_json(&url, ask("claude", false)).await;
    assert_eq!(
        v["content"],
        json!([
            {"type": "thinking", "thinking": CLAUDE_THINKING, "signature": signature_for(CLAUDE_THINKING)},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "text", "text": "4"}
        ]),
        "{v}"
    );

    let body = support::post_ok(&url, ask("claude", true)).await;
    let events = sse(&body);
    for (name, data) in &events {
        assert_eq!(
            name,
            data["type"].as_str().unwrap(),
            "event names match types"
        );
    }
    let starts: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        starts[0],
        &json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
    );
    assert_eq!(
        starts[1],
        &json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}})
    );
    assert_eq!(starts[2]["content_block"]["type"], "text");
    let thinking: String = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "thinking_delta")
        .map(|(_, d)| {
            assert_eq!(d["index"], 0);
            d["delta"]["thinking"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(thinking, CLAUDE_THINKING);
    let signatures: Vec<&Value> = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "signature_delta")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        signatures,
        [&json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": signature_for(CLAUDE_THINKING)}})]
    );
    // The signature comes after every thinking delta, and block 0 stops right after it.
    let at = |pred: &dyn Fn(&Value) -> bool| events.iter().position(|(_, d)| pred(d)).unwrap();
    let sig = at(&|d| d["delta"]["type"] == "signature_delta");
    let last_thinking = events
        .iter()
        .rposition(|(_, d)| d["delta"]["type"] == "thinking_delta")
        .unwrap();
    assert!(last_thinking < sig);
    assert_eq!(
        events[sig + 1].1,
        json!({"type": "content_block_stop", "index": 0})
    );

    // From an OpenAI-wire link, DeepSeek's reasoning is an unsigned thinking block.
    let v: Value = support::post_ok_json(&url, ask("gpt", false)).await;
    assert_eq!(
        v["content"][0],
        json!({"type": "thinking", "thinking": DEEPSEEK_THINKING, "signature": ""}),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thinking_block_sent_back_in_history_reaches_claude_intact_and_a_forged_one_is_refused() {
    let f = start("history").await;
    let url = f.url("/v1/messages");
    let first = support::post_ok_json(&url, ask("claude", false)).await;
    let turn = |content: Value| {
        json!({"model": "claude", "max_tokens": 2048, "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "And 3+3?"}]})
    };
    let (s, body) = post(&url, turn(first["content"].clone())).await;
    assert_eq!(s, 200, "the fake accepted its own signature: {body}");
    let sent = support::last_sent(&f.claude);
    assert_eq!(
        sent["messages"][1]["content"], first["content"],
        "the assistant turn went back block for block: {sent}"
    );
    // An altered thinking text no longer matches its signature: Claude refuses it (the
    // fake's check is the real API's), and the client hears a 400 of its own wire (the
    // gateway does not repeat the vendor's words).
    let mut forged = first["content"].clone();
    forged[0]["thinking"] = json!("The user wants 2+2. That is 5.");
    let hits = f.claude.hits();
    let (s, body) = post(&url, turn(forged)).await;
    assert_eq!(s, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(f.claude.hits(), hits + 1, "Claude itself judged the block");
    let sent = support::last_sent(&f.claude);
    assert_eq!(
        sent["messages"][1]["content"][0]["thinking"], "The user wants 2+2. That is 5.",
        "the block reached Claude as the client sent it: {sent}"
    );
    // The same history to an OpenAI-wire link: the reasoning is left out on purpose.
    let mut to_gpt = turn(first["content"].clone());
    to_gpt["model"] = json!("gpt");
    support::post_ok(&url, to_gpt).await;
    let sent = support::last_sent(&f.gpt);
    assert_eq!(
        sent["messages"][1],
        json!({"role": "assistant", "content": "4"}),
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_door_returns_reasoning_content_on_the_message_and_in_deltas() {
    let f = start("chat").await;
    let url = f.url("/v1/chat/completions");
    for (model, thinking, answer) in [
        ("gpt", DEEPSEEK_THINKING, "9.8 is larger."),
        ("claude", CLAUDE_THINKING, "4"),
    ] {
        let body = support::post_ok(&url, ask(model, false)).await;
        let v: Value = serde_json::from_str(&body).unwrap();
        let m = &v["choices"][0]["message"];
        assert_eq!(m["reasoning_content"], thinking, "{body}");
        assert_eq!(m["content"], answer, "{body}");

        let body = support::post_ok(&url, ask(model, true)).await;
        let events = sse(&body);
        let deltas: Vec<&Value> = events
            .iter()
            .map(|(_, d)| &d["choices"][0]["delta"])
            .collect();
        let reasoning: String = deltas
            .iter()
            .filter_map(|d| d["reasoning_content"].as_str())
            .collect();
        assert_eq!(reasoning, thinking, "{body}");
        let first_text = deltas
            .iter()
            .position(|d| d["content"].as_str().is_some_and(|c| !c.is_empty()))
            .unwrap();
        let last_reasoning = deltas
            .iter()
            .rposition(|d| d["reasoning_content"].is_string())
            .unwrap();
        assert!(
            last_reasoning < first_text,
            "reasoning streams before the answer"
        );
        let text: String = deltas
            .iter()
            .filter_map(|d| d["content"].as_str())
            .collect();
        assert_eq!(text, answer);
        assert!(
            !body.contains("signature"),
            "the chat wire has no place for it"
        );
    }
    // `reasoning_content` in history (a `model_dump()` of the message) parses and stays off
    // both vendors' wires.
    let history = |model: &str| {
        json!({"model": model, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "reasoning_content": "thought", "tool_calls": null},
            {"role": "user", "content": "more"}]})
    };
    support::post_ok(&url, history("gpt")).await;
    let sent = support::last_sent(&f.gpt);
    assert!(
        sent["messages"][1].get("reasoning_content").is_none(),
        "{sent}"
    );
    support::post_ok(&url, history("claude")).await;
    let sent = support::last_sent(&f.claude);
    assert_eq!(
        sent["messages"][1]["content"],
        json!([{"type": "text", "text": "a"}]),
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn responses_door_returns_reasoning_items_in_json_and_summary_events_in_streams() {
    let f = start("responses").await;
    let url = f.url("/v1/responses");
    let body = |stream: bool| json!({"model": "claude", "input": "What is 2+2?", "stream": stream});
    let text = support::post_ok(&url, body(false)).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    let item = &v["output"][0];
    assert_eq!(item["type"], "reasoning", "{text}");
    assert_eq!(
        item["summary"],
        json!([{"type": "summary_text", "text": CLAUDE_THINKING}]),
        "{text}"
    );
    assert_eq!(v["output"][1]["type"], "message", "{text}");
    assert_eq!(v["output_text"], "4", "{text}");
    assert!(
        !text.contains("EmwKAhgB"),
        "no place for redacted data: {text}"
    );

    let text = support::post_ok(&url, body(true)).await;
    let events = sse(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let pos = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(
        pos("response.reasoning_summary_part.added") < pos("response.reasoning_summary_text.delta")
    );
    assert!(pos("response.reasoning_summary_text.done") < pos("response.output_text.delta"));
    let summary: String = events
        .iter()
        .filter(|(n, _)| n == "response.reasoning_summary_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(summary, CLAUDE_THINKING);
    let done = &events
        .iter()
        .find(|(n, _)| n == "response.completed")
        .unwrap()
        .1;
    assert_eq!(done["response"]["output"][0]["type"], "reasoning", "{done}");
    assert_eq!(
        done["response"]["output"][0]["summary"][0]["text"],
        CLAUDE_THINKING
    );
    let seqs: Vec<u64> = events
        .iter()
        .map(|(_, d)| d["sequence_number"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

const SDK_SCRIPT: &str = r#"
import json, sys
import anthropic, openai
base, key = sys.argv[1], sys.argv[2]
out = {}
claude = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
ask = [{"role": "user", "content": "What is 2+2?"}]
m = claude.messages.create(model="claude", max_tokens=2048, messages=ask)
out["create"] = [b.model_dump() for b in m.content]
types = []
with claude.messages.stream(model="claude", max_tokens=2048, messages=ask) as s:
    thinking = ""
    for event in s:
        types.append(event.type)
        if event.type == "thinking":
            thinking += event.thinking
    final = s.get_final_message()
out["stream"] = {"types": sorted(set(types)), "thinking": thinking,
                 "final": [b.model_dump() for b in final.content]}
again = claude.messages.create(model="claude", max_tokens=2048, messages=ask + [
    {"role": "assistant", "content": [b.model_dump() for b in final.content]},
    {"role": "user", "content": "And 3+3?"}])
out["round_trip"] = again.content[-1].text
gpt = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
r = gpt.chat.completions.create(model="gpt", messages=ask)
msg = r.choices[0].message
out["chat"] = {"reasoning_content": getattr(msg, "reasoning_content", None), "content": msg.content}
pieces = []
for chunk in gpt.chat.completions.create(model="gpt", messages=ask, stream=True):
    if chunk.choices:
        piece = getattr(chunk.choices[0].delta, "reasoning_content", None)
        if piece:
            pieces.append(piece)
out["chat_stream"] = "".join(pieces)
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_and_openai_sdks_read_the_reasoning() {
    let Some(python) = support::python() else {
        return;
    };
    let f = start("sdk").await;
    let v = support::python_json(
        python,
        SDK_SCRIPT,
        vec![f.served.url.clone(), "sk-unused".to_owned()],
    )
    .await;
    println!("{v:#}");
    let signed = json!({"type": "thinking", "thinking": CLAUDE_THINKING,
        "signature": signature_for(CLAUDE_THINKING)});
    let redacted = json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"});
    assert_eq!(v["create"][0], signed, "{v}");
    assert_eq!(v["create"][1], redacted, "{v}");
    assert_eq!(v["create"][2]["text"], "4", "{v}");
    let types = v["stream"]["types"].as_array().unwrap();
    for t in ["thinking", "signature", "text"] {
        assert!(types.contains(&json!(t)), "the SDK saw {t} events: {v}");
    }
    assert_eq!(v["stream"]["thinking"], CLAUDE_THINKING, "{v}");
    assert_eq!(v["stream"]["final"][0], signed, "{v}");
    assert_eq!(v["stream"]["final"][1], redacted, "{v}");
    assert_eq!(
        v["round_trip"], "4",
        "the fake accepted the SDK's history: {v}"
    );
    let sent = support::last_sent(&f.claude);
    assert_eq!(sent["messages"][1]["content"][0], signed, "{sent}");
    assert_eq!(v["chat"]["reasoning_content"], DEEPSEEK_THINKING, "{v}");
    assert_eq!(v["chat"]["content"], "9.8 is larger.", "{v}");
    assert_eq!(v["chat_stream"], DEEPSEEK_THINKING, "{v}");
}
