//! The Google provider kinds in `ripcord.toml`: `gemini`, `vertex` and `vertex-anthropic`
//! resolve (project from the key file, default location, credentials from a key file or a token
//! variable), bad combinations are refused naming the key, and chains built from them fall
//! back from a failing OpenAI link to Gemini and from a failing Anthropic link to Claude on
//! Vertex — JSON and stream — with the access token minted by the fake token endpoint.
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use ripcord_chaos::google_token::{GoogleTokenServer, TEST_PRIVATE_KEY_PEM};
use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_cli::{build, config};
use ripcord_core::{ChatModel, ChatRequest, Context, StreamEvent};

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

/// Writes `text` to a fresh file under the temp dir.
fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ripcord-google-config-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("key.json");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn the_google_kinds_resolve_and_describe_themselves_without_secrets() {
    let tokens = GoogleTokenServer::start(Duration::from_secs(60))
        .await
        .unwrap();
    let key = temp_file("resolve", &tokens.key_file_json());
    let text = format!(
        r#"
[chain]
order = ["studio", "vertex", "claude", "claude-token"]

[[providers]]
name = "studio"
kind = "gemini"
model = "gemini-2.5-flash"
api_key_env = "GEMINI_API_KEY"
thinking_budget = 1024

[[providers]]
name = "vertex"
kind = "vertex"
model = "gemini-2.5-pro"
location = "europe-west4"
credentials_file = "{}"

[[providers]]
name = "claude"
kind = "vertex-anthropic"
model = "claude-sonnet-4-5@20250929"
location = "us-east5"

[[providers]]
name = "claude-token"
kind = "vertex-anthropic"
model = "claude-sonnet-4-5@20250929"
project = "other-project"
token_env = "VERTEX_TOKEN"
"#,
        key.display()
    );
    let key_path: &'static str = Box::leak(key.display().to_string().into_boxed_str());
    let env_pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
        ("GEMINI_API_KEY", "AIza-secret-gemini-key"),
        ("GOOGLE_APPLICATION_CREDENTIALS", key_path),
        ("VERTEX_TOKEN", "ya29.secret-access-token"),
    ]));
    let cfg = config::parse("google.toml", &text, &env_of(env_pairs)).unwrap();
    let shown: Vec<String> = cfg.chain.iter().map(|p| p.redacted()).collect();
    let all = shown.join("\n");
    assert!(
        shown[1].contains("project=ripcord-fake location=europe-west4"),
        "{all}"
    );
    // The project comes from the key file GOOGLE_APPLICATION_CREDENTIALS names.
    assert!(
        shown[2].contains("project=ripcord-fake location=us-east5"),
        "{all}"
    );
    // The default location.
    assert!(
        shown[3].contains("project=other-project location=us-central1"),
        "{all}"
    );
    assert!(shown[3].contains("access token [redacted]"), "{all}");
    for secret in [
        "AIza-secret-gemini-key",
        "ya29.secret-access-token",
        TEST_PRIVATE_KEY_PEM.lines().nth(2).unwrap(),
    ] {
        assert!(!all.contains(secret), "{all}");
        assert!(!format!("{cfg:?}").contains(secret));
    }
    // Every kind builds into a chain.
    let built = build::build(&cfg).unwrap();
    assert!(built.notes.is_empty(), "{:?}", built.notes);
}

#[test]
fn bad_google_settings_are_refused_naming_the_key() {
    let no_env = |_: &str| None;
    let cases = [
        (
            "[[providers]]\nname = \"v\"\nkind = \"vertex\"\nmodel = \"gemini-2.5-pro\"\napi_key = \"k\"\nproject = \"p\"\ntoken_env = \"T\"\n",
            "api_key",
        ),
        (
            "[[providers]]\nname = \"o\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key = \"k\"\nproject = \"p\"\n",
            "project",
        ),
        (
            "[[providers]]\nname = \"v\"\nkind = \"vertex\"\nmodel = \"gemini-2.5-pro\"\nproject = \"p\"\n",
            "credentials_file",
        ),
        (
            "[[providers]]\nname = \"v\"\nkind = \"vertex\"\nmodel = \"gemini-2.5-pro\"\nproject = \"p\"\ncredentials_file = \"/nonexistent/key.json\"\n",
            "/nonexistent/key.json",
        ),
        (
            "[[providers]]\nname = \"a\"\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\napi_key = \"k\"\nthinking_budget = 10\n",
            "thinking_budget",
        ),
    ];
    for (providers, want) in cases {
        let text = format!(
            "[chain]\norder = [\"{}\"]\n{providers}",
            if providers.contains("\"v\"") {
                "v"
            } else if providers.contains("\"o\"") {
                "o"
            } else {
                "a"
            }
        );
        let e = config::parse("bad.toml", &text, &no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
}

async fn stream_text(chain: &dyn ChatModel) -> String {
    let mut s = chain
        .stream(&ChatRequest::user("Why is the sky blue?"), &Context::new())
        .await
        .unwrap();
    let mut text = String::new();
    while let Some(ev) = s.next().await {
        if let StreamEvent::TextDelta { text: t } = ev.unwrap() {
            text.push_str(&t);
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn chains_fall_back_to_gemini_and_to_claude_on_vertex() {
    let openai = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let anthropic = FakeVendor::start(Wire::Anthropic).await.unwrap();
    let gemini = FakeVendor::start(Wire::Gemini).await.unwrap();
    let vertex = FakeVendor::start(Wire::Anthropic).await.unwrap();
    let tokens = GoogleTokenServer::start(Duration::from_secs(3600))
        .await
        .unwrap();
    vertex.require_tokens(tokens.registry());
    openai.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    anthropic.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let key = temp_file("chain", &tokens.key_file_json());
    let text = format!(
        r#"
[[routes]]
name = "gpt"
order = ["openai", "gemini"]

[[routes]]
name = "claude"
order = ["anthropic", "claude-vertex"]

[[providers]]
name = "openai"
kind = "openai"
model = "gpt-4o"
base_url = "{openai}/v1"
api_key = "sk-x"
[providers.retry]
max_attempts = 1

[[providers]]
name = "gemini"
kind = "gemini"
model = "gemini-2.5-flash"
base_url = "{gemini}/v1beta"
api_key = "AIza-x"

[[providers]]
name = "anthropic"
kind = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{anthropic}"
api_key = "sk-ant-x"
[providers.retry]
max_attempts = 1

[[providers]]
name = "claude-vertex"
kind = "vertex-anthropic"
model = "claude-sonnet-4-5@20250929"
location = "us-east5"
base_url = "{vertex}/v1"
credentials_file = "{key}"
"#,
        openai = openai.base_url(),
        gemini = gemini.base_url(),
        anthropic = anthropic.base_url(),
        vertex = vertex.base_url(),
        key = key.display(),
    );
    let cfg = config::parse("fallback.toml", &text, &|_: &str| None).unwrap();
    let built = build::build(&cfg).unwrap();
    assert!(built.notes.is_empty(), "{:?}", built.notes);
    let route = |name: &str| &built.routes.iter().find(|r| r.name == name).unwrap().chain;
    let gpt = route("gpt");
    let claude = route("claude");

    let r = gpt
        .chat(&ChatRequest::user("Why is the sky blue?"), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.served_by(), "gemini");
    assert_eq!(stream_text(gpt).await, "Hello! How can I help you today?");
    assert!(gemini.hits() >= 2);

    let r = claude
        .chat(&ChatRequest::user("Why is the sky blue?"), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.served_by(), "claude-vertex");
    assert_eq!(
        stream_text(claude).await,
        "Hello! How can I help you today?"
    );
    let sent = vertex.requests();
    assert!(
        sent[0]
            .path
            .ends_with("/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict")
    );
    assert_eq!(
        sent[0].json().unwrap()["anthropic_version"],
        "vertex-2023-10-16"
    );
    assert_eq!(tokens.exchanges(), 1);
}
