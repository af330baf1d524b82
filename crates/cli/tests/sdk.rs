//! `ripcord serve` against chaos vendor servers, driven by the official `openai` Python SDK,
//! through a primary outage: the SDK sees answers and the headers show the fallback.

mod support;

use std::process::Command;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};

const SDK_SCRIPT: &str = r#"
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="not-checked-on-loopback", max_retries=0)
out = {}
raw = client.chat.completions.with_raw_response.create(
    model="ripcord", messages=[{"role": "user", "content": "Say hi"}])
c = raw.parse()
out["plain"] = {"content": c.choices[0].message.content, "served_by": raw.headers.get("x-ripcord-served-by"),
                "degraded": raw.headers.get("x-ripcord-degraded"), "finish": c.choices[0].finish_reason}
raw = client.chat.completions.with_raw_response.create(
    model="ripcord", messages=[{"role": "user", "content": "Say hi"}], stream=True,
    stream_options={"include_usage": True})
text, usage = "", None
for chunk in raw.parse():
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
    if chunk.usage:
        usage = chunk.usage.completion_tokens
out["stream"] = {"content": text, "served_by": raw.headers.get("x-ripcord-served-by"),
                 "degraded": raw.headers.get("x-ripcord-degraded"), "usage": usage}
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn openai_sdk_through_a_primary_outage() {
    let Some(python) = support::python() else {
        return;
    };
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    primary.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let backup = FakeVendor::start_with(
        Wire::Anthropic,
        FakeOptions {
            reply: Reply::text("Hello from the backup!").with_chunks(3),
            ..FakeOptions::default()
        },
    )
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("ripcord-sdk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("ripcord.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[chain]
order = ["primary", "backup"]
deadline_ms = 10000

[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
base_url = "{}/v1"
api_key = "sk-primary-upstream-key"
[providers.retry]
max_attempts = 1

[[providers]]
name = "backup"
kind = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{}"
api_key = "sk-ant-backup-upstream-key"
"#,
            primary.base_url(),
            backup.base_url()
        ),
    )
    .unwrap();
    let served = support::serve(&config);
    let url = served.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg("-c")
            .arg(SDK_SCRIPT)
            .arg(url)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "SDK script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for mode in ["plain", "stream"] {
        assert_eq!(v[mode]["content"], "Hello from the backup!", "{mode}: {v}");
        assert_eq!(v[mode]["served_by"], "backup", "{mode}: {v}");
        assert_eq!(v[mode]["degraded"], "true", "{mode}: {v}");
    }
    assert_eq!(v["plain"]["finish"], "stop");
    assert!(v["stream"]["usage"].as_u64().unwrap() > 0, "{v}");
    // The primary was tried on both calls, and the upstream keys went only to their vendors.
    assert_eq!(primary.hits(), 2);
    assert_eq!(backup.hits(), 2);
    let sent = backup.requests();
    assert_eq!(
        sent[0].header("x-api-key"),
        Some("sk-ant-backup-upstream-key")
    );
    assert_eq!(
        primary.requests()[0].header("authorization"),
        Some("Bearer sk-primary-upstream-key")
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("upstream-key"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn embeddings_fall_back_across_endpoints_of_one_model() {
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    primary.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = std::env::temp_dir().join(format!("ripcord-emb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("ripcord.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[chain]
order = ["primary", "backup"]

[embeddings]
providers = ["primary", "backup"]
model = "text-embedding-3-small"

[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
base_url = "{}/v1"
api_key = "sk-a"

[[providers]]
name = "backup"
kind = "openai"
model = "gpt-4o"
base_url = "{}/v1"
api_key = "sk-b"
"#,
            primary.base_url(),
            backup.base_url()
        ),
    )
    .unwrap();
    let served = support::serve(&config);
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/embeddings", served.url))
        .json(&serde_json::json!({"model": "text-embedding-3-small", "input": ["alpha", "beta"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-ripcord-served-by"], "backup");
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert!(!v["data"][0]["embedding"].as_array().unwrap().is_empty());
    assert_eq!(
        backup.requests()[0].json().unwrap()["model"],
        "text-embedding-3-small"
    );
    assert_eq!(primary.hits(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
