//! Google's kinds as fallbacks through the real `ripcord serve` binary: a Chat Completions
//! client falls from a failing OpenAI link to Gemini (`kind = "gemini"`, AI Studio's
//! `x-goog-api-key`), and a Messages client from a failing Anthropic link to Claude on Vertex
//! (`kind = "vertex-anthropic"`, a service-account key exchanged at the fake token endpoint,
//! which verifies the RS256 signature; the fake Vertex refuses any token it did not mint) —
//! JSON and stream, over raw HTTP and through the official `openai` / `anthropic` Python SDKs.

#![allow(clippy::unwrap_used)] // test helpers fail the test by panicking

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use ripcord_chaos::google_token::GoogleTokenServer;
use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::{Value, json};

const GEMINI_MODEL: &str = "gemini-2.5-flash";
const VERTEX_CLAUDE: &str = "claude-sonnet-4-5@20250929";

/// The five fakes one gateway falls across, the two primaries failing.
struct Vendors {
    openai: FakeVendor,
    anthropic: FakeVendor,
    gemini: FakeVendor,
    vertex: FakeVendor,
    tokens: GoogleTokenServer,
}

async fn vendors(gemini_reply: Reply, vertex_reply: Reply) -> Vendors {
    let openai = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let anthropic = support::fake_failing(Wire::Anthropic, VendorError::Overloaded).await;
    let gemini = FakeVendor::start(Wire::Gemini).await.unwrap();
    gemini.set_script(Script::Always(Behavior::Reply(gemini_reply)));
    // Claude on Vertex speaks Anthropic's wire on Vertex's paths, behind OAuth tokens.
    let vertex = FakeVendor::start(Wire::Anthropic).await.unwrap();
    vertex.set_script(Script::Always(Behavior::Reply(vertex_reply)));
    let tokens = GoogleTokenServer::start(Duration::from_secs(3600))
        .await
        .unwrap();
    vertex.require_tokens(tokens.registry());
    Vendors {
        openai,
        anthropic,
        gemini,
        vertex,
        tokens,
    }
}

/// A primary's `link` section, trying once.
fn primary_link(link: String) -> String {
    link + support::ONE_ATTEMPT
}

/// Writes the key file and `ripcord.toml` under `dir`: route `gpt-4o` (OpenAI → Gemini) and
/// route `claude-sonnet-4-5` (Anthropic → Claude on Vertex); each primary tries once.
fn write_config(dir: &Path, v: &Vendors) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let key = dir.join("service-account.json");
    std::fs::write(&key, v.tokens.key_file_json()).unwrap();
    support::write_config(
        dir,
        &format!(
            r#"
[[routes]]
name = "gpt-4o"
order = ["openai", "gemini"]
deadline_ms = 10000

[[routes]]
name = "claude-sonnet-4-5"
order = ["anthropic", "claude-vertex"]
deadline_ms = 10000

{}
[[providers]]
name = "gemini"
kind = "gemini"
model = "{GEMINI_MODEL}"
base_url = "{gemini}/v1beta"
api_key_env = "TEST_GEMINI_API_KEY"
{}
[[providers]]
name = "claude-vertex"
kind = "vertex-anthropic"
model = "{VERTEX_CLAUDE}"
location = "us-east5"
base_url = "{vertex}/v1"
credentials_file = "{key}"
"#,
            primary_link(support::openai_link(
                "openai",
                "gpt-4o",
                &v.openai.base_url(),
                "sk-openai-upstream-key"
            )),
            primary_link(support::anthropic_link(
                "anthropic",
                "claude-sonnet-4-5",
                &v.anthropic.base_url(),
                "sk-ant-upstream-key"
            )),
            gemini = v.gemini.base_url(),
            vertex = v.vertex.base_url(),
            key = key.display(),
        ),
    )
}

const GEMINI_KEY: &str = "AIza-test-gemini-upstream-key";

fn serve(config: &Path) -> support::Served {
    support::serve_with_env(config, &[("TEST_GEMINI_API_KEY", GEMINI_KEY)])
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_completions_fall_to_gemini_and_messages_to_claude_on_vertex() {
    let v = vendors(
        Reply::text("Rayleigh scattering.")
            .with_chunks(3)
            .with_usage(11, 4),
        Reply::text("Shorter wavelengths scatter more.")
            .with_chunks(4)
            .with_usage(13, 6),
    )
    .await;
    let dir = support::temp_dir("google-serve-http");
    let config = write_config(&dir, &v);
    let served = serve(&config);
    let client = reqwest::Client::new();
    let chat = |stream: bool| {
        client
            .post(format!("{}/v1/chat/completions", served.url))
            .json(&json!({
                "model": "gpt-4o", "stream": stream,
                "messages": [{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "Why is the sky blue?"}]
            }))
    };

    // Chat Completions, JSON: Gemini answers, and the body names Gemini's model.
    let r = chat(false).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ripcord-served-by").as_deref(), Some("gemini"));
    let body: Value = r.json().await.unwrap();
    println!("{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Rayleigh scattering."
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["model"], GEMINI_MODEL);
    assert_eq!(body["usage"]["completion_tokens"], 4);
    assert_eq!(v.openai.hits(), 1, "the OpenAI link was tried first");
    // What Gemini received: AI Studio's path and key header, the system turn apart.
    let sent = v.gemini.requests().pop().unwrap();
    assert_eq!(
        sent.path,
        format!("/v1beta/models/{GEMINI_MODEL}:generateContent")
    );
    assert_eq!(sent.header("x-goog-api-key"), Some(GEMINI_KEY));
    assert_eq!(sent.header("authorization"), None);
    let b = sent.json().unwrap();
    assert_eq!(
        b["systemInstruction"]["parts"][0]["text"], "Be brief.",
        "{b}"
    );
    assert_eq!(
        b["contents"],
        json!([{"role": "user", "parts": [{"text": "Why is the sky blue?"}]}])
    );

    // Chat Completions, stream: Gemini's SSE chunks become chat.completion.chunk events.
    let r = chat(true).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ripcord-served-by").as_deref(), Some("gemini"));
    let text = r.text().await.unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    let chunks = support::sse_data(&text);
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(streamed, "Rayleigh scattering.", "{text}");
    assert!(
        chunks.iter().all(|c| c["model"] == GEMINI_MODEL),
        "every chunk names the model that served: {text}"
    );
    let finish = chunks
        .iter()
        .find_map(|c| c["choices"][0]["finish_reason"].as_str());
    assert_eq!(finish, Some("stop"), "{text}");
    let sent = v.gemini.requests().pop().unwrap();
    assert_eq!(
        sent.path,
        format!("/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse")
    );

    let messages = |stream: bool| {
        client
            .post(format!("{}/v1/messages", served.url))
            .header("anthropic-version", "2023-06-01")
            .json(&json!({
                "model": "claude-sonnet-4-5", "max_tokens": 256, "stream": stream,
                "messages": [{"role": "user", "content": "Why is the sky blue?"}]
            }))
    };

    // Messages, JSON: Claude on Vertex answers with a minted access token.
    let r = messages(false).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "x-ripcord-served-by").as_deref(),
        Some("claude-vertex")
    );
    let body: Value = r.json().await.unwrap();
    println!("{body}");
    assert_eq!(body["type"], "message");
    assert_eq!(
        body["content"],
        json!([{"type": "text", "text": "Shorter wavelengths scatter more."}])
    );
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["model"], VERTEX_CLAUDE);
    assert_eq!(body["usage"]["output_tokens"], 6);
    assert_eq!(v.anthropic.hits(), 1, "the Anthropic link was tried first");
    let sent = v.vertex.requests().pop().unwrap();
    assert_eq!(
        sent.path,
        format!(
            "/v1/projects/ripcord-fake/locations/us-east5/publishers/anthropic/models/{VERTEX_CLAUDE}:rawPredict"
        )
    );
    assert_eq!(
        sent.header("authorization"),
        Some("Bearer ya29.ripcord-fake-000001"),
        "the token the fake endpoint minted for the signed assertion"
    );
    let b = sent.json().unwrap();
    assert_eq!(b["anthropic_version"], "vertex-2023-10-16");
    assert!(
        b.get("model").is_none(),
        "Vertex takes the model from the URL: {b}"
    );

    // Messages, stream: Vertex's streamRawPredict SSE comes back as Messages events.
    let r = messages(true).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "x-ripcord-served-by").as_deref(),
        Some("claude-vertex")
    );
    let text = r.text().await.unwrap();
    let events = support::sse_data(&text);
    assert_eq!(events.first().unwrap()["type"], "message_start", "{text}");
    assert_eq!(
        events.first().unwrap()["message"]["model"],
        VERTEX_CLAUDE,
        "{text}"
    );
    assert_eq!(events.last().unwrap()["type"], "message_stop", "{text}");
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "content_block_delta")
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(streamed, "Shorter wavelengths scatter more.");
    let sent = v.vertex.requests().pop().unwrap();
    assert!(sent.path.ends_with(":streamRawPredict"), "{}", sent.path);
    // One exchange served both calls: the token is cached, not minted per request.
    assert_eq!(v.tokens.exchanges(), 1);
    assert_eq!(v.tokens.minted(), 1);
    assert!(v.tokens.log()[0].verified);

    // Both fallbacks down too: an error, never a spliced or invented answer.
    v.gemini
        .set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let r = chat(false).send().await.unwrap();
    assert!(r.status().as_u16() >= 500, "{}", r.status());
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

const SDK_SCRIPT: &str = r#"
import json, sys
import anthropic, openai
base = sys.argv[1]
oa = openai.OpenAI(base_url=base + "/v1", api_key="sk-unused-on-loopback", max_retries=0)
an = anthropic.Anthropic(base_url=base, api_key="sk-unused-on-loopback", max_retries=0)
ask = [{"role": "user", "content": "Why is the sky blue?"}]
out = {}
raw = oa.chat.completions.with_raw_response.create(model="gpt-4o", messages=ask)
c = raw.parse()
out["chat_json"] = {"text": c.choices[0].message.content, "model": c.model,
                    "served_by": raw.headers.get("x-ripcord-served-by")}
raw = oa.chat.completions.with_raw_response.create(model="gpt-4o", messages=ask, stream=True)
deltas, models = [], set()
for chunk in raw.parse():
    models.add(chunk.model)
    if chunk.choices and chunk.choices[0].delta.content:
        deltas.append(chunk.choices[0].delta.content)
out["chat_stream"] = {"deltas": deltas, "models": sorted(models),
                      "served_by": raw.headers.get("x-ripcord-served-by")}
raw = an.messages.with_raw_response.create(model="claude-sonnet-4-5", max_tokens=256, messages=ask)
m = raw.parse()
out["messages_json"] = {"text": m.content[0].text, "model": m.model, "stop_reason": m.stop_reason,
                        "served_by": raw.headers.get("x-ripcord-served-by")}
with an.messages.stream(model="claude-sonnet-4-5", max_tokens=256, messages=ask) as s:
    deltas = list(s.text_stream)
    final = s.get_final_message()
out["messages_stream"] = {"deltas": deltas, "model": final.model, "stop_reason": final.stop_reason}
print(json.dumps(out))
"#;

/// The official SDKs see ordinary OpenAI- and Anthropic-shaped answers, JSON and streamed,
/// served by Gemini and by Claude on Vertex, and named after them.
#[tokio::test(flavor = "multi_thread")]
async fn the_openai_and_anthropic_sdks_get_answers_from_google() {
    let Some(python) = support::python() else {
        return;
    };
    let v = vendors(
        Reply::text("From Gemini.").with_chunks(2),
        Reply::text("From Claude on Vertex.").with_chunks(2),
    )
    .await;
    let dir = support::temp_dir("google-serve-sdk");
    let config = write_config(&dir, &v);
    let served = serve(&config);
    let out = support::python_json(python, SDK_SCRIPT, vec![served.url.clone()]).await;
    println!("{out:#}");
    assert_eq!(
        out["chat_json"],
        json!({"text": "From Gemini.", "model": GEMINI_MODEL, "served_by": "gemini"})
    );
    assert_eq!(
        out["chat_stream"],
        json!({"deltas": ["From G", "emini."], "models": [GEMINI_MODEL], "served_by": "gemini"})
    );
    assert_eq!(
        out["messages_json"],
        json!({"text": "From Claude on Vertex.", "model": VERTEX_CLAUDE,
               "stop_reason": "end_turn", "served_by": "claude-vertex"})
    );
    assert_eq!(
        out["messages_stream"],
        json!({"deltas": ["From Claude", " on Vertex."], "model": VERTEX_CLAUDE,
               "stop_reason": "end_turn"})
    );
    // Each primary was tried on each of its two calls; each Google link served two.
    assert_eq!(v.openai.hits(), 2);
    assert_eq!(v.anthropic.hits(), 2);
    assert_eq!(v.gemini.hits(), 2);
    assert_eq!(v.vertex.hits(), 2);
    assert_eq!(v.tokens.minted(), 1);
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `/v1/embeddings` falls from a failing OpenAI link to Vertex AI's text-embedding wire
/// (`kind = "vertex"` in `[embeddings]`, `:predict` with a minted token).
#[tokio::test(flavor = "multi_thread")]
async fn embeddings_fall_from_openai_to_vertex_predict() {
    let openai = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let vertex = FakeVendor::start(Wire::Gemini).await.unwrap();
    let tokens = GoogleTokenServer::start(Duration::from_secs(3600))
        .await
        .unwrap();
    vertex.require_tokens(tokens.registry());
    let dir = support::temp_dir("google-serve-embeddings");
    let key = dir.join("service-account.json");
    std::fs::write(&key, tokens.key_file_json()).unwrap();
    let config = support::write_config(
        &dir,
        &format!(
            r#"
[chain]
order = ["openai", "vertex"]

[embeddings]
providers = ["openai", "vertex"]
model = "text-embedding-005"
{}
[[providers]]
name = "vertex"
kind = "vertex"
model = "gemini-2.5-pro"
location = "europe-west4"
base_url = "{}/v1"
credentials_file = "{}"
"#,
            support::openai_link(
                "openai",
                "gpt-4o",
                &openai.base_url(),
                "sk-openai-upstream-key"
            ),
            vertex.base_url(),
            key.display()
        ),
    );
    let served = serve(&config);
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/embeddings", served.url))
        .json(&json!({"model": "text-embedding-005", "input": ["alpha", "beta gamma"], "dimensions": 12}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-ripcord-served-by").as_deref(),
        Some("vertex")
    );
    let v: Value = resp.json().await.unwrap();
    println!("{v}");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert!(
        data.iter()
            .all(|d| d["embedding"].as_array().unwrap().len() == 12)
    );
    assert_eq!(data[1]["index"], 1);
    assert_eq!(v["usage"]["prompt_tokens"], 3, "{v}");
    assert!(openai.hits() >= 1, "the OpenAI link was tried first");
    let sent = vertex.requests().pop().unwrap();
    assert_eq!(
        sent.path,
        "/v1/projects/ripcord-fake/locations/europe-west4/publishers/google/models/text-embedding-005:predict"
    );
    assert_eq!(
        sent.json().unwrap(),
        json!({"instances": [{"content": "alpha"}, {"content": "beta gamma"}],
               "parameters": {"outputDimensionality": 12}})
    );
    assert_eq!(tokens.minted(), 1);
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}
