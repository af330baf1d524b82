//! The remaining wire gaps of issue 33 through the real `ripcord serve` and the chaos fakes:
//! a request parameter is forwarded to each link that supports it, mapped where an equivalent
//! exists, or refused with a 400 naming it — never dropped in silence.

#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use ripcord_chaos::{FakeVendor, Wire};
use serde_json::{Value, json};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("ripcord-reasoning-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Two routes: `gpt` (an OpenAI-wire link) and `claude` (an Anthropic link).
fn two_routes(dir: &std::path::Path, openai: &str, anthropic: &str) -> std::path::PathBuf {
    let path = dir.join("ripcord.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[[routes]]
name = "gpt"
order = ["gpt"]

[[routes]]
name = "claude"
order = ["claude"]

[[providers]]
name = "gpt"
kind = "openai"
model = "gpt-4o"
base_url = "{openai}/v1"
api_key = "sk-test"

[[providers]]
name = "claude"
kind = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{anthropic}"
api_key = "sk-ant-test"
"#
        ),
    )
    .unwrap();
    path
}

async fn post(url: &str, body: Value) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

fn error_message(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap();
    v["error"]["message"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_seed_goes_to_openai_and_is_refused_by_name_for_claude() {
    let gpt = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let claude = FakeVendor::start(Wire::Anthropic).await.unwrap();
    let dir = temp_dir("seed");
    let served = support::serve(&two_routes(&dir, &gpt.base_url(), &claude.base_url()));
    let chat = format!("{}/v1/chat/completions", served.url);
    let hi = json!([{"role": "user", "content": "hi"}]);
    let (s, body) = post(&chat, json!({"model": "gpt", "messages": hi, "seed": 7})).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(gpt.requests().last().unwrap().json().unwrap()["seed"], 7);
    let (s, body) = post(&chat, json!({"model": "claude", "messages": hi, "seed": 7})).await;
    assert_eq!(s, 400, "{body}");
    assert!(error_message(&body).starts_with("seed: "), "{body}");
    assert_eq!(claude.hits(), 0, "Claude was not called with a seed it would ignore");
    let _ = std::fs::remove_dir_all(&dir);
}
