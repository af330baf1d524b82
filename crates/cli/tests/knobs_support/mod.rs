//! Helpers of the knob tests (`knobs.rs`, `admin.rs`): fake vendors, configs, requests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use ripcord_chaos::{FakeOptions, FakeVendor, Reply, Script, Wire};
use serde_json::{Value, json};

pub(crate) fn tempdir(name: &str) -> PathBuf {
    crate::support::temp_dir(&format!("knobs-{name}"))
}

pub(crate) use crate::support::write_config;

/// An OpenAI-wire fake answering `text`, on the script `script`.
pub(crate) async fn fake(text: &str, script: Script) -> FakeVendor {
    FakeVendor::start_with(
        Wire::OpenAi,
        FakeOptions {
            reply: Reply::text(text),
            script,
            ..FakeOptions::default()
        },
    )
    .await
    .unwrap()
}

/// An OpenAI-wire fake that fails every call with `error` (its reply `text` is never sent).
pub(crate) async fn failing(text: &str, error: ripcord_chaos::VendorError) -> FakeVendor {
    fake(text, Script::Always(ripcord_chaos::Behavior::Error(error))).await
}

/// Chat calls the fake received (not model-list probes).
pub(crate) fn chats(f: &FakeVendor) -> usize {
    f.requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count()
}

/// One OpenAI provider section named `name` at `url`, one attempt, no background probe, and
/// `extra` lines after it.
pub(crate) fn provider(name: &str, model: &str, url: &str, extra: &str) -> String {
    format!(
        r#"
[[providers]]
name = "{name}"
kind = "openai"
model = "{model}"
base_url = "{url}/v1"
api_key = "sk-test"
{extra}
[providers.retry]
max_attempts = 1
[providers.breaker]
background_probe_ms = 0
"#
    )
}

pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: Value,
}

pub(crate) async fn post(url: &str, path: &str, headers: &[(&str, &str)], body: Value) -> Answer {
    let mut req = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        headers,
        body,
    }
}

pub(crate) async fn ask(url: &str, headers: &[(&str, &str)]) -> Answer {
    post(
        url,
        "/v1/chat/completions",
        headers,
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await
}

pub(crate) fn header<'a>(a: &'a Answer, name: &str) -> &'a str {
    a.headers.get(name).map_or("", |v| v.to_str().unwrap_or(""))
}

pub(crate) fn content(a: &Answer) -> &str {
    a.body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content in {}", a.body))
}
