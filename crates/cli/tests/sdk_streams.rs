//! Streams that misbehave, seen through `ripcord serve` by the official `openai` Python SDK:
//! a cut inside the hold-back falls over unseen (only the backup's text, and `model` names the
//! backup), and a cut after commit reaches the SDK's exception with its reason.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)] // test helpers fail the test by panicking

mod support;

use std::path::{Path, PathBuf};

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, Wire};

const SDK_SCRIPT: &str = r#"
import json, sys
from openai import OpenAI, APIError
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="not-checked-on-loopback", max_retries=0)
out = {}
raw = client.chat.completions.with_raw_response.create(
    model="ripcord", messages=[{"role": "user", "content": "Say hi"}], stream=True)
text, models, error = "", set(), None
try:
    for chunk in raw.parse():
        models.add(chunk.model)
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
except APIError as e:
    error = e.message
out["stream"] = {"content": text, "models": sorted(models), "error": error,
                 "served_by": raw.headers.get("x-ripcord-served-by"),
                 "requested": raw.headers.get("x-ripcord-requested-model")}
try:
    c = client.chat.completions.create(model="ripcord", messages=[{"role": "user", "content": "Say hi"}])
    out["plain"] = {"content": c.choices[0].message.content, "model": c.model}
except APIError as e:
    out["plain"] = {"error": e.message}
print(json.dumps(out))
"#;

fn config(
    dir: &Path,
    primary: &FakeVendor,
    backup: &FakeVendor,
    holdback_ms: u64,
    expose: bool,
) -> PathBuf {
    let path = dir.join(format!("ripcord-{holdback_ms}-{expose}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[server]
expose_errors = {expose}   # the full reason reaches the client (hidden by default)

[chain]
order = ["primary", "backup"]
deadline_ms = 10000
stream_holdback_ms = {holdback_ms}
{}"#,
            support::openai_then_anthropic_links(&primary.base_url(), &backup.base_url()),
        ),
    )
    .unwrap();
    path
}

async fn run_sdk(python: PathBuf, config: &Path) -> serde_json::Value {
    let served = support::serve(config);
    let url = served.url.clone();
    support::python_json(python, SDK_SCRIPT, vec![url]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_sdk_sees_only_the_backup_after_a_cut_in_the_holdback_and_the_reason_after_commit() {
    let Some(python) = support::python() else {
        return;
    };
    let primary = support::fake(
        Wire::OpenAi,
        Reply::text("Primary half that must never show").with_chunks(4),
    )
    .await;
    primary.set_script(Script::Always(Behavior::ResetMidStream { after_chunks: 1 }));
    let backup = support::fake(
        Wire::Anthropic,
        Reply::text("Hello from the backup!").with_chunks(3),
    )
    .await;
    let dir = support::temp_dir("sdk-streams");

    // The cut comes right after the first chunk: inside a 2 s hold-back.
    let v = run_sdk(
        python.clone(),
        &config(&dir, &primary, &backup, 2000, false),
    )
    .await;
    let s = &v["stream"];
    assert_eq!(s["content"], "Hello from the backup!", "{v}");
    assert!(s["error"].is_null(), "{v}");
    assert_eq!(s["models"], serde_json::json!(["claude-sonnet-4-5"]), "{v}");
    assert_eq!(s["served_by"], "backup", "{v}");
    assert_eq!(s["requested"], "ripcord", "{v}");
    // A non-streamed answer names who served too.
    assert_eq!(v["plain"]["content"], "Hello from the backup!", "{v}");
    assert_eq!(v["plain"]["model"], "claude-sonnet-4-5", "{v}");

    // Without a hold-back the first chunk is committed: the cut ends the stream, and the SDK's
    // exception carries the reason, not a generic message.
    let v = run_sdk(python.clone(), &config(&dir, &primary, &backup, 0, true)).await;
    let s = &v["stream"];
    assert_eq!(s["models"], serde_json::json!(["gpt-4o"]), "{v}");
    assert_eq!(s["served_by"], "primary", "{v}");
    let error = s["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("primary") && error.contains("network"),
        "the SDK should show the reason: {v}"
    );
    assert!(!error.contains("An error occurred during streaming"), "{v}");
    assert!(!String::from_utf8_lossy(v.to_string().as_bytes()).contains("upstream-key"));

    // With the detail hidden (the default), the SDK's exception still says what happened, in
    // general words with the request id, and names no link.
    let v = run_sdk(python, &config(&dir, &primary, &backup, 0, false)).await;
    let error = v["stream"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("request id"), "{v}");
    assert!(error.contains("AI service"), "{v}");
    assert!(
        !error.contains("primary") && !error.contains("gpt-4o"),
        "{v}"
    );
    assert!(!error.contains("An error occurred during streaming"), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}
