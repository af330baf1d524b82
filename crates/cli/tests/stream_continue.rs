//! `stream_policy = "continue"` through `ripcord serve`, seen by the official `openai` Python
//! SDK: a stream cut after 40 tokens, with no hold-back, reaches the client as one stream —
//! the primary's 40 tokens, then only the backup's continuation — that ends with
//! `finish_reason: "stop"`, and its first token comes when the primary sends it.

#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, Wire};

const SDK_SCRIPT: &str = r#"
import json, sys, time
from openai import OpenAI, APIError
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="not-checked-on-loopback", max_retries=0)
t0 = time.monotonic()
raw = client.chat.completions.with_raw_response.create(
    model="ripcord", messages=[{"role": "user", "content": "Tell me a story"}], stream=True)
text, first, finishes, error, chunks, record = "", None, [], None, 0, None
try:
    for chunk in raw.parse():
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        if c.delta.content:
            chunks += 1
            if first is None:
                first = {"ms": (time.monotonic() - t0) * 1000, "text": c.delta.content}
            text += c.delta.content
        if c.finish_reason:
            finishes.append(c.finish_reason)
            record = (chunk.model_extra or {}).get("ripcord")
except APIError as e:
    error = e.message
print(json.dumps({"content": text, "first": first, "finishes": finishes, "error": error,
                  "chunks": chunks, "total_ms": (time.monotonic() - t0) * 1000,
                  "served_by": raw.headers.get("x-ripcord-served-by"), "record": record}))
"#;

fn config(dir: &Path, primary: &FakeVendor, backup: &FakeVendor) -> PathBuf {
    let path = dir.join("ripcord-continue.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[chain]
order = ["primary", "backup"]
deadline_ms = 10000
stream_policy = "continue"   # no hold-back: the primary's tokens go out as they come
{}"#,
            support::openai_then_anthropic_links(&primary.base_url(), &backup.base_url()),
        ),
    )
    .unwrap();
    path
}

/// The primary's answer: 60 one-word tokens, of which the stream delivers 40.
fn primary_words() -> Vec<String> {
    (0..60).map(|i| format!("p{i} ")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cut_after_40_tokens_reaches_the_sdk_as_one_answer_ending_in_stop() {
    let Some(python) = support::python() else {
        return;
    };
    let words = primary_words();
    let primary = support::fake(
        Wire::OpenAi,
        Reply::text(words.concat()).with_chunks(words.len()),
    )
    .await;
    // 40 deltas, then the response ends cleanly without a finish reason or [DONE].
    primary.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 40,
    }));
    let backup = support::fake(
        Wire::Anthropic,
        Reply::text("and they lived happily ever after.").with_chunks(4),
    )
    .await;
    // The backup is slow to start: a client that waited for it would see its first token late.
    let backup_first = Duration::from_millis(700);
    backup.set_script(Script::Always(Behavior::SlowFirstToken(backup_first)));
    let dir = support::temp_dir("continue");
    let served = support::serve(&config(&dir, &primary, &backup));
    let v = support::python_json(python, SDK_SCRIPT, vec![served.url.clone()]).await;

    assert!(v["error"].is_null(), "{v}");
    // The primary's part (its 40 deltas, as the fake cut its text), then only the backup's.
    let content = v["content"].as_str().unwrap();
    let delivered = content
        .strip_suffix("and they lived happily ever after.")
        .unwrap_or_else(|| panic!("the continuation is not at the end: {v}"));
    assert!(words.concat().starts_with(delivered), "{v}");
    assert!(delivered.contains("p38 "), "40 tokens were delivered: {v}");
    assert!(!delivered.contains("p50"), "{v}");
    assert_eq!(v["finishes"], serde_json::json!(["stop"]), "{v}");
    // The first token is the primary's, at the primary's time: well before the backup's
    // first token could have arrived.
    assert_eq!(v["first"]["text"], words[0].as_str(), "{v}");
    let first_ms = v["first"]["ms"].as_f64().unwrap();
    let total_ms = v["total_ms"].as_f64().unwrap();
    assert!(
        first_ms < backup_first.as_millis() as f64 / 2.0,
        "time to first token {first_ms} ms"
    );
    assert!(total_ms >= backup_first.as_millis() as f64, "{v}");
    assert_eq!(v["served_by"], "primary", "{v}");
    // The headers went out with the primary's first token; the last chunk says who finished.
    let record = &v["record"];
    assert_eq!(record["continued_by"], "backup", "{v}");
    assert_eq!(record["continuations"][0]["from"], "primary", "{v}");
    assert_eq!(record["continuations"][0]["by"], "backup", "{v}");
    assert_eq!(
        record["continuations"][0]["offset"].as_u64(),
        Some(delivered.len() as u64),
        "{v}"
    );
    // The backup was asked to continue: the delivered text is its prefill.
    let asked = backup.requests();
    assert_eq!(asked.len(), 1);
    let body = asked[0].json().unwrap();
    let messages = body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "assistant", "{body}");
    assert!(last.to_string().contains(delivered.trim_end()), "{body}");
}

#[test]
fn serve_runs_continue_and_check_config_says_what_it_does() {
    let text = "[chain]\norder = [\"p\"]\nstream_policy = \"continue\"\n[[providers]]\nname = \"p\"\nkind = \"vllm\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n";
    let c = ripcord_cli::config::parse("c.toml", text, &|_: &str| None).unwrap();
    assert!(c.serve_refusal().is_none());
    assert!(c.describe().contains("continue on the next link"));
    let bad = text.replace("\"continue\"", "\"splice\"");
    let e = ripcord_cli::config::parse("c.toml", &bad, &|_: &str| None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"continue\""), "{e}");
}
