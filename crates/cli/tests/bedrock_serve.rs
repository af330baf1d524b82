//! "Claude on Bedrock" as the fallback of a failing Anthropic link, through `ripcord serve`'s
//! Messages front door: JSON and stream, tool use included, the Bedrock link signing every
//! request with SigV4 (the fake Bedrock checks each signature), plus `kind = "bedrock"` in the
//! config and `check-config`.

#![allow(clippy::unwrap_used)] // test helpers fail the test by panicking

mod support;

use ripcord_chaos::bedrock::{TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY};
use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};
use ripcord_cli::config;
use serde_json::{Value, json};

const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

/// `ripcord serve` of the route `claude-sonnet-4-5`: the Anthropic link `claude` (one attempt),
/// then `claude-bedrock` signing with the test keys, its config in the temp dir `name`.
fn serve(
    name: &str,
    claude: &FakeVendor,
    bedrock: &FakeVendor,
) -> (std::path::PathBuf, support::Served) {
    let dir = support::temp_dir(name);
    let config = support::write_config(
        &dir,
        &format!(
            r#"
[[routes]]
name = "claude-sonnet-4-5"
order = ["claude", "claude-bedrock"]
deadline_ms = 10000
{}{}
[[providers]]
name = "claude-bedrock"
kind = "bedrock"
model = "{MODEL}"
region = "us-east-1"
base_url = "{}"
access_key_id_env = "TEST_BEDROCK_ACCESS_KEY_ID"
secret_access_key_env = "TEST_BEDROCK_SECRET_ACCESS_KEY"
"#,
            support::anthropic_link(
                "claude",
                "claude-sonnet-4-5",
                &claude.base_url(),
                "sk-ant-upstream-key"
            ),
            support::ONE_ATTEMPT,
            bedrock.base_url()
        ),
    );
    let served = support::serve_with_env(
        &config,
        &[
            ("TEST_BEDROCK_ACCESS_KEY_ID", TEST_ACCESS_KEY_ID),
            ("TEST_BEDROCK_SECRET_ACCESS_KEY", TEST_SECRET_ACCESS_KEY),
        ],
    );
    (dir, served)
}

fn tools_request(stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5", "max_tokens": 256, "stream": stream,
        "tools": [{"name": "get_weather", "description": "Current weather in a city",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
        "messages": [{"role": "user", "content": "Weather in Oslo?"}]
    })
}

async fn post(url: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_messages_client_falls_from_anthropic_to_claude_on_bedrock() {
    let claude = support::fake_failing(Wire::Anthropic, VendorError::Overloaded).await;
    let bedrock = FakeVendor::start(Wire::Bedrock).await.unwrap();
    let answer = Reply::text("Let me check the weather.")
        .with_chunks(3)
        .with_tool_call("tooluse_oslo1", "get_weather", r#"{"city":"Oslo"}"#)
        .with_usage(42, 18);
    bedrock.set_script(Script::Always(Behavior::Reply(answer)));
    let (dir, served) = serve("bedrock-serve", &claude, &bedrock);

    // JSON: the tool call comes back as a Claude tool_use block.
    let resp = post(&served.url, &tools_request(false)).await;
    assert_eq!(resp.status(), 200);
    let served_by = resp
        .headers()
        .get("x-ripcord-served-by")
        .map(|v| v.to_str().unwrap().to_owned());
    let v: Value = resp.json().await.unwrap();
    println!("{v}");
    assert_eq!(v["type"], "message");
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(
        v["content"][0],
        json!({"type": "text", "text": "Let me check the weather."})
    );
    assert_eq!(v["content"][1]["type"], "tool_use");
    assert_eq!(v["content"][1]["id"], "tooluse_oslo1");
    assert_eq!(v["content"][1]["name"], "get_weather");
    assert_eq!(v["content"][1]["input"], json!({"city": "Oslo"}));
    assert_eq!(v["usage"]["output_tokens"], 18);
    assert_eq!(served_by.as_deref(), Some("claude-bedrock"));
    assert!(claude.hits() >= 1, "the Anthropic link was tried first");

    // What Bedrock received: a signed Converse request with the tool as a toolSpec.
    let sent = bedrock.requests().pop().unwrap();
    assert_eq!(
        sent.path,
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    );
    assert!(sent.header("authorization").unwrap().starts_with(&format!(
        "AWS4-HMAC-SHA256 Credential={TEST_ACCESS_KEY_ID}/"
    )));
    let body = sent.json().unwrap();
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"]["name"],
        "get_weather"
    );
    assert_eq!(
        body["messages"][0],
        json!({"role": "user", "content": [{"text": "Weather in Oslo?"}]})
    );

    // The answer to the tool call goes back through Bedrock as toolUse / toolResult blocks.
    let mut follow_up = tools_request(false);
    follow_up["messages"] = json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check the weather."},
            {"type": "tool_use", "id": "tooluse_oslo1", "name": "get_weather", "input": {"city": "Oslo"}}
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tooluse_oslo1", "content": "-3C and snowing"}]}
    ]);
    bedrock.set_script(Script::Always(Behavior::Reply(Reply::text(
        "It is -3C and snowing in Oslo.",
    ))));
    let v: Value = post(&served.url, &follow_up).await.json().await.unwrap();
    assert_eq!(v["content"][0]["text"], "It is -3C and snowing in Oslo.");
    assert_eq!(v["stop_reason"], "end_turn");
    let body = bedrock.requests().pop().unwrap().json().unwrap();
    assert_eq!(
        body["messages"][1]["content"][1]["toolUse"],
        json!({"toolUseId": "tooluse_oslo1", "name": "get_weather", "input": {"city": "Oslo"}})
    );
    assert_eq!(
        body["messages"][2]["content"][0]["toolResult"]["toolUseId"],
        "tooluse_oslo1"
    );

    // Stream: ConverseStream's event-stream frames become Messages SSE, tool use included.
    bedrock.set_script(Script::Always(Behavior::Reply(
        Reply::text("Checking.")
            .with_chunks(2)
            .with_tool_call("tooluse_oslo2", "get_weather", r#"{"city":"Oslo"}"#)
            .with_usage(42, 18),
    )));
    let resp = post(&served.url, &tools_request(true)).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let evs = support::sse_events(&text);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{text}");
    assert_eq!(names.last(), Some(&"message_stop"), "{text}");
    let streamed: String = evs
        .iter()
        .filter(|(n, d)| n == "content_block_delta" && d["delta"]["type"] == "text_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(streamed, "Checking.");
    let tool_start = evs
        .iter()
        .find(|(n, d)| n == "content_block_start" && d["content_block"]["type"] == "tool_use")
        .expect("a tool_use block");
    assert_eq!(tool_start.1["content_block"]["id"], "tooluse_oslo2");
    assert_eq!(tool_start.1["content_block"]["name"], "get_weather");
    let args: String = evs
        .iter()
        .filter(|(n, d)| n == "content_block_delta" && d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"city": "Oslo"})
    );
    let delta = evs.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
    let sent = bedrock.requests().pop().unwrap();
    assert!(sent.path.ends_with("/converse-stream"), "{}", sent.path);
    assert_eq!(
        sent.header("accept"),
        Some("application/vnd.amazon.eventstream")
    );

    // Bedrock throttled too: the gateway answers with an error instead of a spliced answer.
    bedrock.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: None,
    })));
    let resp = post(&served.url, &tools_request(false)).await;
    assert!(resp.status().as_u16() >= 400, "{}", resp.status());
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bedrock_config_resolves_region_credentials_and_says_where_they_came_from() {
    let text = format!(
        r#"
[chain]
order = ["keys", "profile", "apikey", "arn"]

[[providers]]
name = "keys"
kind = "bedrock"
model = "{MODEL}"
region = "eu-west-1"
access_key_id_env = "MY_KEY_ID"
secret_access_key_env = "MY_SECRET"
session_token_env = "MY_TOKEN"

[[providers]]
name = "profile"
kind = "bedrock"
model = "anthropic.claude-3-5-haiku-20241022-v1:0"
profile = "prod"

[[providers]]
name = "apikey"
kind = "bedrock"
model = "amazon.nova-pro-v1:0"
api_key_env = "MY_BEDROCK_API_KEY"

[[providers]]
name = "arn"
kind = "bedrock"
model = "arn:aws:bedrock:ap-northeast-1:123456789012:inference-profile/apac.anthropic.claude-3-5-sonnet-20240620-v1:0"
api_key = "ABSK-literal-key-in-config"
"#
    );
    let dir = support::temp_dir("bedrock-config");
    let creds = dir.join("credentials");
    std::fs::write(
        &creds,
        "[prod]\naws_access_key_id = AKIAPRODEXAMPLE\naws_secret_access_key = prod-secret-value\n",
    )
    .unwrap();
    let creds_path = creds.to_str().unwrap().to_owned();
    let env = move |name: &str| {
        match name {
            "MY_KEY_ID" => Some("ASIAEXAMPLEKEY"),
            "MY_SECRET" => Some("very-secret-value"),
            "MY_TOKEN" => Some("session-token-value"),
            "MY_BEDROCK_API_KEY" => Some("ABSK-bedrock-api-key"),
            "AWS_REGION" => Some("us-west-2"),
            "AWS_SHARED_CREDENTIALS_FILE" => Some(creds_path.as_str()),
            _ => None,
        }
        .map(str::to_owned)
    };
    let c = config::parse("ripcord.toml", &text, &env).unwrap();
    let d = c.describe();
    println!("{d}");
    for want in [
        "keys (bedrock) model=us.anthropic.claude-sonnet-4-5-20250929-v1:0 region=eu-west-1 access_key_id=ASIAEXAMPLEKEY key=[redacted] from env MY_KEY_ID / MY_SECRET",
        "profile (bedrock) model=anthropic.claude-3-5-haiku-20241022-v1:0 region=us-west-2 access_key_id=AKIAPRODEXAMPLE key=[redacted] from profile prod in",
        "apikey (bedrock) model=amazon.nova-pro-v1:0 region=us-west-2 key=[redacted] from Bedrock API key from env MY_BEDROCK_API_KEY",
        "region=ap-northeast-1",
    ] {
        assert!(d.contains(want), "missing {want:?} in:\n{d}");
    }
    for secret in [
        "very-secret-value",
        "session-token-value",
        "prod-secret-value",
        "ABSK-bedrock-api-key",
        "ABSK-literal-key-in-config",
    ] {
        assert!(!d.contains(secret), "{secret} leaked:\n{d}");
        assert!(
            !format!("{c:?}").contains(secret),
            "{secret} leaked in Debug"
        );
    }

    // Errors name the provider and the setting.
    let no_region = format!(
        "[chain]\norder = [\"b\"]\n[[providers]]\nname = \"b\"\nkind = \"bedrock\"\nmodel = \"{MODEL}\"\napi_key = \"k\"\n"
    );
    let e = config::parse("ripcord.toml", &no_region, &|_: &str| None).unwrap_err();
    assert!(e.to_string().contains("needs a `region`"), "{e}");
    let not_bedrock = "[chain]\norder = [\"o\"]\n[[providers]]\nname = \"o\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key = \"k\"\nregion = \"us-east-1\"\n";
    let e = config::parse("ripcord.toml", not_bedrock, &|_: &str| None).unwrap_err();
    assert!(
        e.to_string().contains("`region` is a bedrock setting"),
        "{e}"
    );
    let missing_profile = format!(
        "[chain]\norder = [\"b\"]\n[[providers]]\nname = \"b\"\nkind = \"bedrock\"\nmodel = \"{MODEL}\"\nregion = \"us-east-1\"\nprofile = \"nope\"\n"
    );
    let env2 = |name: &str| {
        (name == "AWS_SHARED_CREDENTIALS_FILE").then(|| creds.to_str().unwrap().to_owned())
    };
    let e = config::parse("ripcord.toml", &missing_profile, &env2).unwrap_err();
    assert!(e.to_string().contains("profile \"nope\" is not in"), "{e}");
    let bad_region = format!(
        "[chain]\norder = [\"b\"]\n[[providers]]\nname = \"b\"\nkind = \"bedrock\"\nmodel = \"{MODEL}\"\nregion = \"Frankfurt\"\napi_key = \"k\"\n"
    );
    let e = config::parse("ripcord.toml", &bad_region, &|_: &str| None).unwrap_err();
    assert!(e.to_string().contains("not an AWS region name"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

const SDK_SCRIPT: &str = r#"
import json, sys
import anthropic
client = anthropic.Anthropic(base_url=sys.argv[1], api_key="sk-unused-on-loopback", max_retries=0)
tools = [{"name": "get_weather", "description": "Current weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
ask = [{"role": "user", "content": "Weather in Oslo?"}]
out = {}
raw = client.messages.with_raw_response.create(model="claude-sonnet-4-5", max_tokens=256, tools=tools, messages=ask)
m = raw.parse()
use = next(b for b in m.content if b.type == "tool_use")
out["json"] = {"stop_reason": m.stop_reason, "text": m.content[0].text, "id": use.id, "name": use.name,
               "input": use.input, "served_by": raw.headers.get("x-ripcord-served-by")}
with client.messages.stream(model="claude-sonnet-4-5", max_tokens=256, tools=tools, messages=ask) as s:
    deltas = list(s.text_stream)
    final = s.get_final_message()
streamed = next(b for b in final.content if b.type == "tool_use")
out["stream"] = {"deltas": deltas, "stop_reason": final.stop_reason, "id": streamed.id, "input": streamed.input}
print(json.dumps(out))
"#;

/// The official `anthropic` Python SDK through the same fallback: it sees Claude-shaped answers
/// (tool use included, JSON and streamed) served by Claude on Bedrock.
#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_sdk_gets_tool_use_from_claude_on_bedrock() {
    let Some(python) = support::python() else {
        return;
    };
    let claude = support::fake_failing(Wire::Anthropic, VendorError::Overloaded).await;
    let bedrock = FakeVendor::start(Wire::Bedrock).await.unwrap();
    bedrock.set_script(Script::Always(Behavior::Reply(
        Reply::text("Checking.").with_chunks(2).with_tool_call(
            "tooluse_sdk1",
            "get_weather",
            r#"{"city":"Oslo"}"#,
        ),
    )));
    let (dir, served) = serve("bedrock-sdk", &claude, &bedrock);
    let v = support::python_json(python, SDK_SCRIPT, vec![served.url.clone()]).await;
    println!("{v:#}");
    assert_eq!(
        v["json"],
        json!({"stop_reason": "tool_use", "text": "Checking.", "id": "tooluse_sdk1",
               "name": "get_weather", "input": {"city": "Oslo"}, "served_by": "claude-bedrock"})
    );
    assert_eq!(
        v["stream"],
        json!({"deltas": ["Chec", "king."], "stop_reason": "tool_use", "id": "tooluse_sdk1",
               "input": {"city": "Oslo"}})
    );
    // Both reached Bedrock signed: the fake refuses anything else.
    let paths: Vec<String> = bedrock.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(paths[0].ends_with("/converse") && paths[1].ends_with("/converse-stream"));
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}
