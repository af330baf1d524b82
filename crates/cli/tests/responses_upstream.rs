//! `ripcord serve` with a `wire = "responses"` primary: a Chat Completions client is answered
//! through the primary's `/v1/responses` upstream (JSON and stream), a `response.failed` from
//! it falls back to the backup, and `wire` on a provider that has no such choice is a config
//! error naming the key.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::path::PathBuf;
use support::Fetch;

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::{Value, json};

fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ripcord-responses-upstream-{tag}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `primary` (Responses wire) on one fake, `backup` (Chat Completions) on another.
fn config(tag: &str, primary: &FakeVendor, backup: &FakeVendor) -> PathBuf {
    let path = tempdir(tag).join("ripcord.toml");
    let text = format!(
        r#"
[chain]
order = ["primary", "backup"]
deadline_ms = 10000

[[providers]]
name = "primary"
kind = "openai"
model = "o3-pro"
base_url = "{}/v1"
api_key = "sk-test"
wire = "responses"
[providers.retry]
max_attempts = 1

[[providers]]
name = "backup"
kind = "openai"
model = "gpt-4o-mini"
base_url = "{}/v1"
api_key = "sk-test"

# The attempts are read by link and model.
[server]
expose_errors = true
"#,
        primary.base_url(),
        backup.base_url()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn chat_body(stream: bool) -> Value {
    json!({
        "model": "ripcord",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky blue?"}],
        "stream": stream,
    })
}

/// One chat call at `url` (the gateway's Chat Completions door).
async fn ask(client: &reqwest::Client, url: &str, stream: bool) -> reqwest::Response {
    client
        .post(url)
        .json(&chat_body(stream))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_chat_completions_client_is_answered_through_the_responses_upstream() {
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    primary.set_script(Script::Always(Behavior::Reply(
        Reply::text("Rayleigh scattering.").with_usage(21, 4),
    )));
    let served = support::serve(&config("ok", &primary, &backup));
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", served.url);

    let resp = ask(&client, &url, false).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(support::served_by(&resp), "primary");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Rayleigh scattering."
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 21);

    let sse = client.post(&url).json(&chat_body(true)).text_body().await;
    let text: String = sse
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, "Rayleigh scattering.");
    assert!(sse.trim_end().ends_with("data: [DONE]"), "{sse}");

    // Both calls went to the primary's Responses endpoint, none to the backup.
    let reqs = primary.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.path, "/v1/responses");
        let b = r.json().unwrap();
        assert_eq!(b["model"], "o3-pro");
        assert_eq!(b["instructions"], "Be brief.");
        assert_eq!(b["store"], false);
        assert_eq!(b["input"][0]["content"], "Why is the sky blue?");
    }
    assert_eq!(reqs[1].json().unwrap()["stream"], true);
    assert_eq!(backup.hits(), 0);
}

#[tokio::test]
async fn a_failed_response_falls_back_to_the_backup() {
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    primary.set_script(Script::Always(Behavior::ResponseFailed {
        after_chunks: 0,
        error: VendorError::ServerError,
    }));
    let served = support::serve(&config("failed", &primary, &backup));
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", served.url);
    for stream in [false, true] {
        let resp = ask(&client, &url, stream).await;
        assert_eq!(resp.status(), 200, "stream={stream}");
        assert_eq!(support::served_by(&resp), "backup", "stream={stream}");
        let attempts = support::header(&resp, "x-ripcord-attempts");
        assert!(attempts.contains("primary"), "{attempts}");
        assert!(attempts.contains("server_error"), "{attempts}");
        let body = resp.text().await.unwrap();
        assert!(body.contains("Hello"), "{body}");
    }
    assert_eq!(primary.hits(), 2);
    assert_eq!(backup.hits(), 2);
    assert_eq!(backup.requests()[0].path, "/v1/chat/completions");
}

#[test]
fn wire_is_checked_where_it_is_written() {
    let dir = tempdir("bad");
    for (kind, wire, want) in [
        (
            "anthropic",
            "responses",
            "`wire` is an openai / azure-openai setting; provider \"p\" is anthropic",
        ),
        (
            "openai",
            "realtime",
            "expected \"chat\" or \"responses\", got \"realtime\"",
        ),
    ] {
        let path = dir.join(format!("{kind}.toml"));
        std::fs::write(
            &path,
            format!(
                "[chain]\norder = [\"p\"]\n[[providers]]\nname = \"p\"\nkind = \"{kind}\"\nmodel = \"m\"\napi_key = \"k\"\nwire = \"{wire}\"\n"
            ),
        )
        .unwrap();
        let out = support::check_config(&path, &[]);
        assert_eq!(out.status.code(), Some(2), "{kind}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{}:8: key `wire`", path.display())),
            "{stderr}"
        );
        assert!(stderr.contains(want), "{stderr}");
    }
    // Accepted, and shown, on an openai provider.
    let path = dir.join("ok.toml");
    std::fs::write(
        &path,
        "[chain]\norder = [\"p\"]\n[[providers]]\nname = \"p\"\nkind = \"openai\"\nmodel = \"o3-pro\"\napi_key = \"k\"\nwire = \"responses\"\n",
    )
    .unwrap();
    assert!(support::check_config_ok(&path, &[]).contains("wire=responses"));
}
