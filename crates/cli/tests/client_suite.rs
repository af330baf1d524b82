//! The client-compatibility suite (issue 33): popular client libraries, at the versions
//! `cargo xtask test` pins and installs (`xtask/src/test.rs`), driven against the real
//! `ripcord serve` and the chaos fakes, one feature at a time, and a client × feature matrix
//! printed at the end (the README shows it).
//!
//! For each feature the fakes are scripted, the client runs one small program, and the cell
//! is ✓ only when the client got what it should *and* the vendors saw what they should (the
//! tool result in the second turn, a JSON schema, one vendor call per link when the chain is
//! exhausted under the client's default retries, the same `model` in JSON and stream after a
//! fallback). The matrix is compared with [`EXPECTED`]: a ✗ there is a known limit of the
//! client library, said in the README, and a cell that changes either way fails the test.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)] // test helpers fail the test by panicking

mod support;

use std::path::PathBuf;
use std::process::Command;

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::Value;

/// The features, in matrix order.
const FEATURES: &[&str] = &[
    "chat",
    "stream",
    "tools",
    "structured",
    "embeddings",
    "retries",
    "fallback",
];

/// The clients, in matrix order: (name, runtime).
const CLIENTS: &[(&str, Runtime)] = &[
    ("openai-python", Runtime::Python),
    ("openai-python async", Runtime::Python),
    ("anthropic-python", Runtime::Python),
    ("openai-node", Runtime::Node),
    ("@ai-sdk/openai", Runtime::Node),
    ("@ai-sdk/anthropic", Runtime::Node),
    ("langchain-openai", Runtime::Libraries),
    ("langchain-anthropic", Runtime::Libraries),
    ("litellm", Runtime::Libraries),
    ("instructor", Runtime::Libraries),
    ("llama-index", Runtime::Libraries),
];

/// The higher-level Python libraries' program (run in the separate venv `venv-clients`, one
/// process per library that runs every feature; see [`Libraries`]).
const LIBRARIES_PY: &str = include_str!("client_suite/libraries.py");

/// What each cell must be: `✓`, `✗` (a known limit of the library, explained beside it) or
/// `—` (the library has no such feature).
const EXPECTED: &[(&str, &str, &str)] = &[
    ("anthropic-python", "embeddings", "—"),
    ("@ai-sdk/anthropic", "embeddings", "—"),
    // The AI SDK retries every 5xx by status (its `isRetryable`) and does not read
    // `x-should-retry`, so an exhausted chain is called once per its attempt (3 by default).
    ("@ai-sdk/openai", "retries", "✗"),
    ("@ai-sdk/anthropic", "retries", "✗"),
    ("langchain-anthropic", "embeddings", "—"),
    // instructor is structured output only: it has no plain chat, stream or tool calls of its
    // own and no embeddings.
    ("instructor", "chat", "—"),
    ("instructor", "stream", "—"),
    ("instructor", "tools", "—"),
    ("instructor", "embeddings", "—"),
    // llama-index's `stream_chat` surfaced no usage in its chunks (usage 0).
    ("llama-index", "stream", "✗"),
    // llama-index retries 5xx with its own retry decorator, which does not read
    // `x-should-retry`: an exhausted chain was called 3 times per link.
    ("llama-index", "retries", "✗"),
    // litellm's stream wrapper names every chunk after the model it was called with, not the
    // answer's `model` (BerriAI/litellm#10572: "not propagating `model` during streaming"), so
    // JSON and stream differ on the client side although the gateway sends the same name.
    ("litellm", "fallback", "✗"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runtime {
    Python,
    Node,
    /// The libraries in `client_suite/libraries.py`, run by the `venv-clients` Python.
    Libraries,
}

const PYTHON: &str = r#"
import json, sys, asyncio
import openai, anthropic
url, client, feature = sys.argv[1], sys.argv[2], sys.argv[3]
hi = [{"role": "user", "content": "Say hi"}]
tools = [{"type": "function", "function": {"name": "weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}
def done(ok, **kw):
    print(json.dumps({"ok": None if ok is None else bool(ok), **kw}))
    sys.exit(0)

async def run_openai(c, aio):
    async def call(f):
        return (await f) if aio else f
    if feature == "chat":
        r = await call(c.chat.completions.create(model="ripcord", messages=hi))
        done(r.choices[0].message.content == "Hello from ripcord", text=r.choices[0].message.content)
    if feature == "stream":
        s = await call(c.chat.completions.create(model="ripcord", messages=hi, stream=True, stream_options={"include_usage": True}))
        text, usage = "", 0
        chunks = []
        if aio:
            async for ch in s: chunks.append(ch)
        else:
            chunks = list(s)
        for ch in chunks:
            if ch.choices and ch.choices[0].delta.content: text += ch.choices[0].delta.content
            if ch.usage: usage = ch.usage.completion_tokens
        done(text == "Hello from ripcord" and usage > 0, text=text, usage=usage)
    if feature == "tools":
        msgs = [{"role": "user", "content": "Weather in Oslo?"}]
        s = await call(c.chat.completions.create(model="ripcord", messages=msgs, tools=tools, stream=True))
        chunks = []
        if aio:
            async for ch in s: chunks.append(ch)
        else:
            chunks = list(s)
        args, name = "", None
        for ch in chunks:
            for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
                name = tc.function.name or name
                args += tc.function.arguments or ""
        first = await call(c.chat.completions.create(model="ripcord", messages=msgs, tools=tools))
        msgs.append(first.choices[0].message.model_dump())
        call_id = first.choices[0].message.tool_calls[0].id
        msgs.append({"role": "tool", "tool_call_id": call_id, "content": "-3C"})
        second = await call(c.chat.completions.create(model="ripcord", messages=msgs, tools=tools))
        done(name == "weather" and json.loads(args) == {"city": "Oslo"} and second.choices[0].message.content == "It is sunny",
             streamed=[name, args], second=second.choices[0].message.content)
    if feature == "structured":
        r = await call(c.chat.completions.create(model="ripcord", messages=hi,
            response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": True}}))
        done(json.loads(r.choices[0].message.content) == {"city": "Oslo"}, text=r.choices[0].message.content)
    if feature == "embeddings":
        d = await call(c.embeddings.create(model="text-embedding-3-small", input=["alpha", "beta"]))
        f = await call(c.embeddings.create(model="text-embedding-3-small", input=["alpha", "beta"], encoding_format="float"))
        a, b = list(d.data[0].embedding), list(f.data[0].embedding)
        done(len(a) > 1 and a == b, base64=a[:3], float=b[:3])
    if feature == "retries":
        try:
            await call(c.chat.completions.create(model="ripcord", messages=hi))
            done(False, error="answered")
        except openai.InternalServerError as e:
            done(True, error=type(e).__name__)
    if feature == "fallback":
        r = await call(c.chat.completions.create(model="ripcord", messages=hi))
        s = await call(c.chat.completions.create(model="ripcord", messages=hi, stream=True))
        chunks = []
        if aio:
            async for ch in s: chunks.append(ch)
        else:
            chunks = list(s)
        models = [r.model] + [ch.model for ch in chunks]
        done(set(models) == {"gpt-4o-mini"}, models=sorted(set(models)))
    done(False, error="no such feature")

def run_anthropic():
    c = anthropic.Anthropic(base_url=url, api_key="k")
    if feature == "chat":
        m = c.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=hi)
        done(m.content[0].text == "Hello from ripcord", text=m.content[0].text)
    if feature == "stream":
        with c.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=hi) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
        done(text == "Hello from ripcord" and final.usage.output_tokens > 0, text=text)
    if feature == "tools":
        at = [{"name": "weather", "description": "Weather in a city", "input_schema": tools[0]["function"]["parameters"]}]
        ask = [{"role": "user", "content": "Weather in Oslo?"}]
        with c.messages.stream(model="claude-sonnet-4-5", max_tokens=64, tools=at, messages=ask) as s:
            first = s.get_final_message()
        use = next(b for b in first.content if b.type == "tool_use")
        second = c.messages.create(model="claude-sonnet-4-5", max_tokens=64, tools=at, messages=ask + [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "-3C"}]}])
        done(use.input == {"city": "Oslo"} and second.content[0].text == "It is sunny", input=use.input)
    if feature == "structured":
        m = c.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=hi,
            extra_body={"output_config": {"format": {"type": "json_schema", "schema": schema}}})
        done(json.loads(m.content[0].text) == {"city": "Oslo"}, text=m.content[0].text)
    if feature == "retries":
        try:
            c.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=hi)
            done(False, error="answered")
        except anthropic.InternalServerError as e:
            done(True, error=type(e).__name__)
    if feature == "fallback":
        m = c.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=hi)
        with c.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=hi) as s:
            final = s.get_final_message()
        done(m.model == final.model == "gpt-4o-mini", models=[m.model, final.model])
    done(None, error="not a feature of this library")

if client == "openai-python":
    asyncio.run(run_openai(openai.OpenAI(base_url=url + "/v1", api_key="k"), False))
elif client == "openai-python async":
    asyncio.run(run_openai(openai.AsyncOpenAI(base_url=url + "/v1", api_key="k"), True))
else:
    run_anthropic()
"#;

const NODE: &str = r#"
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { generateText, streamText, generateObject, embed, tool, stepCountIs } from 'ai';
import { z } from 'zod';
const [url, client, feature] = process.argv.slice(2);
const done = (ok, extra = {}) => { console.log(JSON.stringify({ ok, ...extra })); process.exit(0); };
const hi = [{ role: 'user', content: 'Say hi' }];
const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
try {
if (client === 'openai-node') {
  const c = new OpenAI({ baseURL: url + '/v1', apiKey: 'k' });
  if (feature === 'chat') {
    const r = await c.chat.completions.create({ model: 'ripcord', messages: hi });
    done(r.choices[0].message.content === 'Hello from ripcord', { text: r.choices[0].message.content });
  }
  if (feature === 'stream') {
    const s = await c.chat.completions.create({ model: 'ripcord', messages: hi, stream: true, stream_options: { include_usage: true } });
    let text = '', usage = 0;
    for await (const ch of s) { if (ch.choices[0]?.delta?.content) text += ch.choices[0].delta.content; if (ch.usage) usage = ch.usage.completion_tokens; }
    done(text === 'Hello from ripcord' && usage > 0, { text, usage });
  }
  if (feature === 'tools') {
    const tools = [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const msgs = [{ role: 'user', content: 'Weather in Oslo?' }];
    const s = await c.chat.completions.create({ model: 'ripcord', messages: msgs, tools, stream: true });
    let id = null, name = null, args = '';
    for await (const ch of s) for (const tc of ch.choices[0]?.delta?.tool_calls ?? []) { id = tc.id ?? id; name = tc.function?.name ?? name; args += tc.function?.arguments ?? ''; }
    msgs.push({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name, arguments: args } }] });
    msgs.push({ role: 'tool', tool_call_id: id, content: '-3C' });
    const second = await c.chat.completions.create({ model: 'ripcord', messages: msgs, tools });
    done(name === 'weather' && JSON.parse(args).city === 'Oslo' && second.choices[0].message.content === 'It is sunny', { args });
  }
  if (feature === 'structured') {
    const r = await c.chat.completions.create({ model: 'ripcord', messages: hi, response_format: { type: 'json_schema', json_schema: { name: 'place', schema, strict: true } } });
    done(JSON.parse(r.choices[0].message.content).city === 'Oslo', { text: r.choices[0].message.content });
  }
  if (feature === 'embeddings') {
    const d = await c.embeddings.create({ model: 'text-embedding-3-small', input: ['alpha', 'beta'] });
    const f = await c.embeddings.create({ model: 'text-embedding-3-small', input: ['alpha', 'beta'], encoding_format: 'float' });
    const a = Array.from(d.data[0].embedding), b = Array.from(f.data[0].embedding);
    done(a.length > 1 && JSON.stringify(a) === JSON.stringify(b), { base64: a.slice(0, 3), float: b.slice(0, 3) });
  }
  if (feature === 'retries') {
    try { await c.chat.completions.create({ model: 'ripcord', messages: hi }); done(false, { error: 'answered' }); }
    catch (e) { done(e instanceof OpenAI.InternalServerError, { error: e.constructor.name }); }
  }
  if (feature === 'fallback') {
    const r = await c.chat.completions.create({ model: 'ripcord', messages: hi });
    const s = await c.chat.completions.create({ model: 'ripcord', messages: hi, stream: true });
    const models = new Set([r.model]);
    for await (const ch of s) models.add(ch.model);
    done(models.size === 1 && models.has('gpt-4o-mini'), { models: [...models] });
  }
} else {
  const anthropicSdk = client === '@ai-sdk/anthropic';
  const model = anthropicSdk
    ? createAnthropic({ baseURL: url + '/v1', apiKey: 'k' })('claude-sonnet-4-5')
    : createOpenAI({ baseURL: url + '/v1', apiKey: 'k' }).chat('ripcord');
  if (feature === 'chat') {
    const r = await generateText({ model, prompt: 'Say hi' });
    done(r.text === 'Hello from ripcord', { text: r.text });
  }
  if (feature === 'stream') {
    const s = streamText({ model, prompt: 'Say hi' });
    let text = '';
    for await (const t of s.textStream) text += t;
    const usage = await s.usage;
    done(text === 'Hello from ripcord' && usage.outputTokens > 0, { text, usage });
  }
  if (feature === 'tools') {
    const seen = [];
    const tools = { weather: tool({ description: 'Weather in a city', inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => { seen.push(city); return '-3C'; } }) };
    const s = streamText({ model, prompt: 'Weather in Oslo?', tools, stopWhen: stepCountIs(3) });
    let text = '';
    for await (const t of s.textStream) text += t;
    done(text === 'It is sunny' && seen.join() === 'Oslo', { text, seen });
  }
  if (feature === 'structured') {
    const r = await generateObject({ model, schema: z.object({ city: z.string() }), prompt: 'Where?' });
    done(r.object.city === 'Oslo', { object: r.object });
  }
  if (feature === 'embeddings') {
    if (anthropicSdk) done(null, { error: 'not a feature of this library' });
    const p = createOpenAI({ baseURL: url + '/v1', apiKey: 'k' });
    const r = await embed({ model: p.embeddingModel('text-embedding-3-small'), value: 'alpha' });
    done(r.embedding.length > 1, { head: r.embedding.slice(0, 3) });
  }
  if (feature === 'retries') {
    try { await generateText({ model, prompt: 'Say hi' }); done(false, { error: 'answered' }); }
    catch (e) { done(true, { error: e.constructor.name }); }
  }
  if (feature === 'fallback') {
    const r = await generateText({ model, prompt: 'Say hi' });
    const s = streamText({ model, prompt: 'Say hi' });
    for await (const _ of s.textStream) {}
    const models = [r.response.modelId, (await s.response).modelId];
    done(models.every((m) => m === 'gpt-4o-mini'), { models });
  }
}
done(null, { error: 'not a feature of this library' });
} catch (e) { done(false, { error: String(e && e.stack || e).slice(0, 600) }); }
"#;

fn config(dir: &std::path::Path, primary: &str, backup: &str) -> PathBuf {
    support::write_config(
        dir,
        &format!(
            r#"{}aliases = ["claude-sonnet-4-5", "gpt-4o"]
deadline_ms = 10000

[embeddings]
providers = ["primary"]
model = "text-embedding-3-small"
{}{}"#,
            support::route("ripcord", &["primary", "backup"]),
            support::steady_link("primary", "gpt-4o", primary, 1000),
            support::steady_link("backup", "gpt-4o-mini", backup, 1000),
        ),
    )
}

/// Scripts the fakes for `feature` as `client` will call them.
fn script(feature: &str, client: &str, primary: &FakeVendor, backup: &FakeVendor) {
    primary.clear();
    backup.clear();
    let hello = Reply::text("Hello from ripcord").with_chunks(3);
    let always = |v: &FakeVendor, b: Behavior| v.set_script(Script::Always(b));
    always(backup, Behavior::Reply(hello.clone()));
    match feature {
        "tools" => {
            let call = Behavior::Reply(
                Reply::text("")
                    .with_tool_call("call_w1", "weather", r#"{"city":"Oslo"}"#)
                    .with_chunks(3),
            );
            let answer = Behavior::Reply(Reply::text("It is sunny"));
            // openai-python also asks once more without a stream, for `model_dump()`.
            let steps = if client.starts_with("openai-python") {
                vec![call.clone(), call, answer]
            } else {
                vec![call, answer]
            };
            primary.set_script(Script::Sequence(steps));
        }
        // instructor asks for structured output as a forced tool call.
        "structured" if tool_mode(client) => always(primary, Behavior::Reply(place())),
        "structured" => always(primary, Behavior::Reply(Reply::text(r#"{"city":"Oslo"}"#))),
        "retries" => {
            always(primary, Behavior::Error(VendorError::ServerError));
            always(backup, Behavior::Error(VendorError::ServerError));
        }
        "fallback" if tool_mode(client) => {
            always(primary, Behavior::Error(VendorError::Overloaded));
            always(
                backup,
                Behavior::Reply(place().with_model("gpt-4o-mini-2024-07-18")),
            );
        }
        "fallback" => {
            always(primary, Behavior::Error(VendorError::Overloaded));
            always(
                backup,
                Behavior::Reply(hello.with_model("gpt-4o-mini-2024-07-18")),
            );
        }
        _ => always(primary, Behavior::Reply(hello)),
    }
}

/// Whether `client` asks for structured output as a forced tool call (named after the model);
/// llama-index's `structured_predict` asks with `response_format` instead.
fn tool_mode(client: &str) -> bool {
    client == "instructor"
}

/// The forced tool call a tool-mode library expects for `Place { city }`.
fn place() -> Reply {
    Reply::text("").with_tool_call("call_p1", "Place", r#"{"city":"Oslo"}"#)
}

/// What the vendors must have seen for the cell to be ✓, beside what the client says.
fn vendors_agree(
    feature: &str,
    client: &str,
    primary: &FakeVendor,
    backup: &FakeVendor,
) -> Result<(), String> {
    let last = || primary.requests().last().and_then(|r| r.json());
    match feature {
        "tools" => {
            let sent = last().ok_or("no request")?;
            let has_result = sent["messages"].as_array().is_some_and(|m| {
                m.iter()
                    .any(|m| m["role"] == "tool" && m["content"] == "-3C")
            });
            has_result
                .then_some(())
                .ok_or_else(|| format!("the tool result did not reach the vendor: {sent}"))
        }
        "structured" if tool_mode(client) => {
            let sent = last().ok_or("no request")?;
            let named = sent["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "Place"));
            named
                .then_some(())
                .ok_or_else(|| format!("no Place tool reached the vendor: {sent}"))
        }
        "structured" => {
            let sent = last().ok_or("no request")?;
            (sent["response_format"]["type"] == "json_schema")
                .then_some(())
                .ok_or_else(|| format!("no json_schema reached the vendor: {sent}"))
        }
        "retries" => (primary.hits() == 1 && backup.hits() == 1)
            .then_some(())
            .ok_or_else(|| {
                format!(
                    "an exhausted chain was called {} / {} times",
                    primary.hits(),
                    backup.hits()
                )
            }),
        _ => Ok(()),
    }
}

fn run_client(runtime: Runtime, url: &str, client: &str, feature: &str) -> Value {
    let args = [url, client, feature];
    let out = match runtime {
        Runtime::Python => {
            let python = support::cache_dir().join("venv/bin/python");
            Command::new(python)
                .arg("-c")
                .arg(PYTHON)
                .args(args)
                .output()
        }
        Runtime::Libraries => panic!("{client} runs in its own process (Libraries)"),
        Runtime::Node => {
            let dir = support::cache_dir().join("node-sdks");
            let file = dir.join(format!("ripcord-suite-{}.mjs", std::process::id()));
            std::fs::write(&file, NODE).unwrap();
            let out = Command::new("node")
                .arg(&file)
                .args(args)
                .current_dir(&dir)
                .output();
            let _ = std::fs::remove_file(&file);
            out
        }
    }
    .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        serde_json::json!({"ok": false, "error": String::from_utf8_lossy(&out.stderr).chars().take(800).collect::<String>()})
    })
}

/// One library's process from `client_suite/libraries.py`: it imports the library once, then
/// runs one feature per line written to it (after the fakes are scripted for that feature), so
/// a library costs one interpreter start, not one per feature. Killed on drop.
struct Libraries {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Libraries {
    fn start(python: &std::path::Path, dir: &std::path::Path, url: &str, client: &str) -> Self {
        use std::process::Stdio;
        let program = dir.join("libraries.py");
        std::fs::write(&program, LIBRARIES_PY).unwrap();
        let mut child = Command::new(python)
            .arg(&program)
            .args([url, client])
            // litellm reads its model price table from the internet unless told not to; the
            // tests talk to loopback only.
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_TELEMETRY", "False")
            .env("ANONYMIZED_TELEMETRY", "False")
            .env("NO_PROXY", "127.0.0.1")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut this = Self {
            child,
            stdin,
            stdout,
        };
        let ready = this.line();
        assert_eq!(ready["ready"], true, "{client} did not start: {ready}");
        this
    }

    fn line(&mut self) -> Value {
        use std::io::BufRead;
        let mut line = String::new();
        // Skip what the library itself prints; the program marks its own lines.
        loop {
            line.clear();
            if self.stdout.read_line(&mut line).unwrap() == 0 || line.starts_with("RIPCORD-SUITE ")
            {
                break;
            }
        }
        let line = line.trim_start_matches("RIPCORD-SUITE ");
        serde_json::from_str(line).unwrap_or_else(
            |_| serde_json::json!({"ok": false, "error": format!("no answer: {line:?}")}),
        )
    }

    fn run(&mut self, feature: &str) -> Value {
        use std::io::Write;
        writeln!(self.stdin, "{feature}").unwrap();
        self.stdin.flush().unwrap();
        self.line()
    }
}

impl Drop for Libraries {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_client_library_through_the_gateway() {
    let node_sdks = support::cache_dir().join("node-sdks/node_modules");
    let (Some(_), Some(_)) = (
        support::python(),
        support::require(node_sdks.join("@ai-sdk/anthropic"), "the pinned npm SDKs"),
    ) else {
        return;
    };
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = support::temp_dir("suite");
    let cfg = config(&dir, &primary.base_url(), &backup.base_url());
    let served = support::serve(&cfg);
    // The higher-level libraries live in their own venv, so that their dependencies cannot
    // replace the pinned SDKs of the project venv.
    let libraries = support::cached(
        "venv-clients/bin/python",
        "the client-libraries Python venv (langchain, litellm, instructor, llama-index)",
    );
    let clients: Vec<(&str, Runtime)> = CLIENTS
        .iter()
        .copied()
        .filter(|(_, r)| *r != Runtime::Libraries || libraries.is_some())
        .collect();
    let mut matrix: Vec<(&str, &str, &str, String)> = Vec::new();
    for (client, runtime) in &clients {
        let mut process = libraries
            .as_ref()
            .filter(|_| *runtime == Runtime::Libraries)
            .map(|python| Libraries::start(python, &dir, &served.url, client));
        for feature in FEATURES {
            script(feature, client, &primary, &backup);
            let url = served.url.clone();
            let (c, f, r) = (client.to_string(), feature.to_string(), *runtime);
            let v = match process.as_mut() {
                // The fakes run on the runtime's workers; this (the test's own) thread waits.
                Some(p) => p.run(feature),
                None => tokio::task::spawn_blocking(move || run_client(r, &url, &c, &f))
                    .await
                    .unwrap(),
            };
            let cell = match v["ok"].as_bool() {
                None => ("—", String::new()),
                Some(false) => ("✗", v.to_string()),
                Some(true) => match vendors_agree(feature, client, &primary, &backup) {
                    Ok(()) => ("✓", String::new()),
                    Err(why) => ("✗", why),
                },
            };
            matrix.push((client, feature, cell.0, cell.1));
        }
    }
    // The matrix, as the README shows it.
    let mut table = format!(
        "| client | {} |\n|---|{}\n",
        FEATURES.join(" | "),
        "---|".repeat(FEATURES.len())
    );
    for (client, _) in &clients {
        let cells: Vec<&str> = matrix
            .iter()
            .filter(|(c, ..)| c == client)
            .map(|(_, _, cell, _)| *cell)
            .collect();
        table.push_str(&format!("| {client} | {} |\n", cells.join(" | ")));
    }
    println!("\n{table}");
    let mut wrong = Vec::new();
    for (client, feature, cell, why) in &matrix {
        let expected = EXPECTED
            .iter()
            .find(|(c, f, _)| c == client && f == feature)
            .map_or("✓", |(_, _, e)| *e);
        if *cell != expected {
            wrong.push(format!(
                "{client} × {feature}: {cell} (expected {expected}) {why}"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "{table}\n{}", wrong.join("\n"));
}
