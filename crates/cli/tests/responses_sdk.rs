//! `POST /v1/responses` through `ripcord serve`, driven by the clients that speak it: the
//! official `openai` Python SDK (`responses.create`, `responses.stream`), the `openai-agents`
//! SDK's default `Agent`, and the Vercel AI SDK's default OpenAI provider. In every test the
//! primary (OpenAI's wire) is down and an Anthropic backup answers: the Responses client gets
//! the backup's answer as a valid Responses object or event stream, naming the model that served.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)] // test helpers fail the test by panicking

mod support;

use std::path::{Path, PathBuf};

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::Value;

/// A primary that answers 503 and an Anthropic backup answering `replies` in turn.
async fn vendors(replies: Vec<Reply>) -> (FakeVendor, FakeVendor) {
    let primary = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let backup = FakeVendor::start_with(Wire::Anthropic, FakeOptions::default())
        .await
        .unwrap();
    backup.set_script(Script::Sequence(
        replies.into_iter().map(Behavior::Reply).collect(),
    ));
    (primary, backup)
}

fn config(dir: &Path, primary: &FakeVendor, backup: &FakeVendor) -> PathBuf {
    support::openai_then_anthropic(dir, &primary.base_url(), &backup.base_url())
}

fn weather_call() -> Reply {
    Reply::text("")
        .with_tool_call("toolu_weather_1", "get_weather", r#"{"city":"Paris"}"#)
        .with_chunks(2)
}

const OPENAI_SDK: &str = r#"
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="not-checked-on-loopback", max_retries=0)
out = {}
tools = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]

raw = client.responses.with_raw_response.create(model="ripcord", input="Say hi", instructions="Be brief.")
r = raw.parse()
out["plain"] = {"id": r.id, "text": r.output_text, "model": r.model, "status": r.status,
                "served_by": raw.headers.get("x-ripcord-served-by"), "degraded": raw.headers.get("x-ripcord-degraded"),
                "input_tokens": r.usage.input_tokens, "output_tokens": r.usage.output_tokens}

with client.responses.stream(model="ripcord", input="Say hi") as s:
    kinds = [e.type for e in s]
    final = s.get_final_response()
out["stream"] = {"text": final.output_text, "model": final.model, "kinds": kinds, "status": final.status}

# Function calling: the model asks for the tool, the tool result continues by previous_response_id.
r = client.responses.create(model="ripcord", input="Weather in Paris?", tools=tools)
calls = [o for o in r.output if o.type == "function_call"]
out["call"] = {"name": calls[0].name, "arguments": json.loads(calls[0].arguments), "call_id": calls[0].call_id, "response_id": r.id}
r2 = client.responses.create(model="ripcord", previous_response_id=r.id, tools=tools,
                             input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "18C and sunny"}])
out["after_tool"] = {"text": r2.output_text, "previous": r2.previous_response_id}
items = client.responses.input_items.list(r2.id)
out["input_items"] = [i.type for i in items.data]
out["retrieved"] = client.responses.retrieve(r2.id).output_text

# Two turns through the full input.
r3 = client.responses.create(model="ripcord", input=[
    {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": [{"type": "input_text", "text": "And again?"}]}])
out["full_input"] = r3.output_text

# Structured output through text.format json_schema.
r4 = client.responses.create(model="ripcord", input="Sky colour?", text={"format": {
    "type": "json_schema", "name": "answer", "strict": True,
    "schema": {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"], "additionalProperties": False}}})
out["json"] = json.loads(r4.output_text)

# A streamed tool call.
with client.responses.stream(model="ripcord", input="Weather in Paris?", tools=tools) as s:
    kinds = [e.type for e in s]
    final = s.get_final_response()
calls = [o for o in final.output if o.type == "function_call"]
out["stream_call"] = {"kinds": kinds, "name": calls[0].name, "arguments": json.loads(calls[0].arguments)}

# Unknown ids and refused tools are errors in OpenAI's shape.
try:
    client.responses.retrieve("resp_nope")
except Exception as e:
    out["missing"] = {"status": e.status_code, "body": e.body}
try:
    client.responses.create(model="ripcord", input="hi", tools=[{"type": "web_search"}])
except Exception as e:
    out["web_search"] = {"status": e.status_code, "body": e.body}
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_sdk_speaks_responses_through_a_fallback() {
    let Some(python) = support::python() else {
        return;
    };
    let (primary, backup) = vendors(vec![
        Reply::text("Hello from the backup!").with_chunks(3),
        Reply::text("Streamed from the backup.").with_chunks(4),
        weather_call(),
        Reply::text("It is 18C and sunny in Paris."),
        Reply::text("Again, hello."),
        Reply::text(r#"{"colour":"blue"}"#),
        weather_call(),
    ])
    .await;
    let dir = std::env::temp_dir().join(format!("ripcord-responses-sdk-{}", std::process::id()));
    let served = support::serve(&config(&dir, &primary, &backup));
    let v = support::python_json(python, OPENAI_SDK, vec![served.url.clone()]).await;

    let plain = &v["plain"];
    let want = [
        ("text", "Hello from the backup!"),
        ("model", "claude-sonnet-4-5"),
        ("status", "completed"),
        ("served_by", "backup"),
        ("degraded", "true"),
    ];
    support::assert_holds(&v, "plain", &want);
    assert!(plain["id"].as_str().unwrap().starts_with("resp_"), "{v}");
    assert!(plain["output_tokens"].as_u64().unwrap() > 0, "{v}");

    let stream = &v["stream"];
    assert_eq!(stream["text"], "Streamed from the backup.", "{v}");
    assert_eq!(stream["model"], "claude-sonnet-4-5", "{v}");
    let kinds = support::strs(&stream["kinds"]);
    assert_eq!(
        kinds[..2],
        ["response.created", "response.in_progress"],
        "{v}"
    );
    assert_eq!(kinds.last(), Some(&"response.completed"), "{v}");
    for k in [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ] {
        assert!(kinds.contains(&k), "{k} missing: {v}");
    }

    assert_eq!(v["call"]["name"], "get_weather", "{v}");
    assert_eq!(v["call"]["arguments"]["city"], "Paris", "{v}");
    assert_eq!(
        v["after_tool"]["text"], "It is 18C and sunny in Paris.",
        "{v}"
    );
    assert_eq!(v["after_tool"]["previous"], v["call"]["response_id"], "{v}");
    assert_eq!(
        v["input_items"],
        serde_json::json!(["function_call_output"]),
        "{v}"
    );
    assert_eq!(v["retrieved"], "It is 18C and sunny in Paris.", "{v}");
    assert_eq!(v["full_input"], "Again, hello.", "{v}");
    assert_eq!(v["json"]["colour"], "blue", "{v}");
    let kinds = v["stream_call"]["kinds"].as_array().unwrap();
    assert!(
        kinds.contains(&Value::from("response.function_call_arguments.delta")),
        "{v}"
    );
    assert!(
        kinds.contains(&Value::from("response.function_call_arguments.done")),
        "{v}"
    );
    assert_eq!(v["stream_call"]["name"], "get_weather", "{v}");
    assert_eq!(v["stream_call"]["arguments"]["city"], "Paris", "{v}");
    assert_eq!(v["missing"]["status"], 404, "{v}");
    assert_eq!(v["web_search"]["status"], 400, "{v}");
    assert_eq!(v["web_search"]["body"]["param"], "tools[0].type", "{v}");

    // What the backup saw: the continuation carried the tool call and its result, and the
    // instructions went as Anthropic's system prompt.
    let sent = backup.requests();
    assert_eq!(sent.len(), 7);
    let first = sent[0].json().unwrap();
    assert_eq!(first["system"], "Be brief.", "{first}");
    let after_tool = sent[3].json().unwrap();
    let turns = after_tool["messages"].as_array().unwrap();
    let blocks: Vec<String> = turns
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["type"].as_str().map(str::to_owned))
        .collect();
    assert!(blocks.iter().any(|b| b == "tool_use"), "{after_tool}");
    assert!(blocks.iter().any(|b| b == "tool_result"), "{after_tool}");
    assert!(
        after_tool.to_string().contains("18C and sunny"),
        "{after_tool}"
    );
    let full = sent[4].json().unwrap();
    assert_eq!(full["messages"].as_array().unwrap().len(), 3, "{full}");
    let _ = std::fs::remove_dir_all(&dir);
}

const AGENTS_SDK: &str = r#"
import json, sys
from openai import AsyncOpenAI
from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
set_tracing_disabled(True)  # traces would go to OpenAI's servers; this test talks to loopback only
set_default_openai_client(AsyncOpenAI(base_url=sys.argv[1] + "/v1", api_key="not-checked", max_retries=0))
calls = []
@function_tool
def get_weather(city: str) -> str:
    """The weather of a city."""
    calls.append(city)
    return f"18C and sunny in {city}"
agent = Agent(name="Weather", instructions="Answer with the tool.", tools=[get_weather], model="ripcord")
result = Runner.run_sync(agent, "What is the weather in Paris?")
print(json.dumps({"final": result.final_output, "calls": calls}))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_agents_sdk_runs_a_tool_through_a_fallback() {
    let Some(python) = support::python() else {
        return;
    };
    let (primary, backup) = vendors(vec![
        weather_call(),
        Reply::text("It is 18C and sunny in Paris."),
    ])
    .await;
    let dir = std::env::temp_dir().join(format!("ripcord-responses-agents-{}", std::process::id()));
    let served = support::serve(&config(&dir, &primary, &backup));
    let v = support::python_json(python, AGENTS_SDK, vec![served.url.clone()]).await;
    assert_eq!(v["final"], "It is 18C and sunny in Paris.", "{v}");
    assert_eq!(v["calls"], serde_json::json!(["Paris"]), "{v}");
    assert_eq!(backup.hits(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

const AI_SDK: &str = r#"
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
const openai = createOpenAI({ baseURL: process.argv[2] + '/v1', apiKey: 'not-checked' });
const calls = [];
const tools = { get_weather: tool({
  description: 'The weather of a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => { calls.push(city); return `18C and sunny in ${city}`; },
}) };
const out = {};
const plain = await generateText({ model: openai('ripcord'), prompt: 'Say hi' });
out.plain = { text: plain.text, model: plain.response.modelId };
const withTool = await generateText({ model: openai('ripcord'), prompt: 'Weather in Paris?', tools, stopWhen: stepCountIs(3) });
out.tool = { text: withTool.text, steps: withTool.steps.length };
const s = streamText({ model: openai('ripcord'), prompt: 'Weather in Paris?', tools, stopWhen: stepCountIs(3) });
let streamed = '';
for await (const part of s.textStream) streamed += part;
out.stream = { text: streamed, finish: await s.finishReason };
out.calls = calls;
console.log(JSON.stringify(out));
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_vercel_ai_sdk_default_provider_generates_and_streams_with_a_tool() {
    let Some(node_modules) = support::cached(
        "node-sdks/node_modules/ai",
        "the Vercel AI SDK (npm `ai`, installed by cargo xtask test)",
    ) else {
        return;
    };
    let sdks = node_modules
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let (primary, backup) = vendors(vec![
        Reply::text("Hello from the backup!").with_chunks(3),
        weather_call(),
        Reply::text("It is 18C and sunny in Paris."),
        weather_call(),
        Reply::text("Streamed: 18C and sunny.").with_chunks(3),
    ])
    .await;
    let dir = std::env::temp_dir().join(format!("ripcord-responses-ai-sdk-{}", std::process::id()));
    let served = support::serve(&config(&dir, &primary, &backup));
    let v = support::node_json(sdks, AI_SDK, vec![served.url.clone()]).await;

    assert_eq!(v["plain"]["text"], "Hello from the backup!", "{v}");
    assert_eq!(v["plain"]["model"], "claude-sonnet-4-5", "{v}");
    assert_eq!(v["tool"]["text"], "It is 18C and sunny in Paris.", "{v}");
    assert_eq!(v["tool"]["steps"], 2, "{v}");
    assert_eq!(v["stream"]["text"], "Streamed: 18C and sunny.", "{v}");
    assert_eq!(v["stream"]["finish"], "stop", "{v}");
    assert_eq!(v["calls"], serde_json::json!(["Paris", "Paris"]), "{v}");
    assert_eq!(backup.hits(), 5);
    let _ = std::fs::remove_dir_all(&dir);
}
