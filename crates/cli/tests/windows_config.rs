//! Context windows through the built chain and the real adapters, against chaos vendors: a
//! model the tables do not know is tried, the window its vendor states in a context-length
//! error is learned, `context_window` is a per-provider setting, and every window skip shows
//! both numbers. Breaker spells and the background probe are per-provider settings too.
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

use ripcord_chaos::{Behavior, FakeVendor, Script, Wire};
use ripcord_cli::{build, config};
use ripcord_core::{ChatModel, ChatRequest, Context, SkipReason};

fn no_env(_: &str) -> Option<String> {
    None
}

/// OpenAI's 400 for a prompt beyond the model's window (from the vendor error table).
fn too_long_8192() -> Behavior {
    Behavior::Status {
        status: 400,
        body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#.to_owned(),
        headers: vec![("content-type".into(), "application/json".into())],
    }
}

fn two_links(primary: &FakeVendor, backup: &FakeVendor, extra: &str) -> String {
    format!(
        "[chain]\norder = [\"primary\", \"backup\"]\n\
         [[providers]]\nname = \"primary\"\nkind = \"openai\"\nmodel = \"acme-finetune-2031\"\nbase_url = \"{}/v1\"\napi_key = \"sk-x\"\n{extra}\n\
         [[providers]]\nname = \"backup\"\nkind = \"vllm\"\nmodel = \"our/llama-ft\"\nbase_url = \"{}/v1\"\n",
        primary.base_url(),
        backup.base_url()
    )
}

fn words(n: usize) -> ChatRequest {
    ChatRequest::user("word ".repeat(n))
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_models_are_tried_and_the_stated_window_is_learned() {
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    primary.set_script(Script::Always(too_long_8192()));
    let cfg = config::parse("w.toml", &two_links(&primary, &backup, ""), &no_env).unwrap();
    let built = build::build(&cfg).unwrap();
    let chain = &built.chain;
    assert_eq!(chain.link_window("primary"), None);
    assert_eq!(chain.link_window("backup"), None);

    let r = chain.chat(&words(9_000), &Context::new()).await.unwrap();
    assert_eq!(r.served_by(), "backup");
    assert!(r.provenance.skipped.is_empty());
    assert_eq!(chain.link_window("primary"), Some(8_192));
    assert_eq!(primary.requests().len(), 1);

    // Later calls are judged by it: no second refused request, and the skip says why.
    let r = chain.chat(&words(12_000), &Context::new()).await.unwrap();
    assert_eq!(r.served_by(), "backup");
    assert_eq!(primary.requests().len(), 1);
    let s = &r.provenance.skipped[0];
    assert_eq!(
        (s.reason, s.window),
        (SkipReason::ContextWindow, Some(8_192))
    );
    assert!(s.prompt_tokens.unwrap() > 8_192);
    // Short prompts still go to the primary.
    primary.set_script(Script::Always(Behavior::Ok));
    let r = chain.chat(&words(10), &Context::new()).await.unwrap();
    assert_eq!(r.served_by(), "primary");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configured_window_is_judged_before_any_call() {
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let text = two_links(
        &primary,
        &backup,
        "context_window = 4096\nmax_output_tokens = 1024",
    );
    let cfg = config::parse("w.toml", &text, &no_env).unwrap();
    assert_eq!(cfg.provider("primary").unwrap().context_window, Some(4_096));
    let built = build::build(&cfg).unwrap();
    let caps = built.chain.links().next().unwrap().capabilities().clone();
    assert!(caps.context_window_known);
    assert_eq!(
        (caps.context_window, caps.max_output_tokens),
        (4_096, 1_024)
    );
    let r = built
        .chain
        .chat(&words(6_000), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.served_by(), "backup");
    assert_eq!(primary.requests().len(), 0);
    assert_eq!(r.provenance.skipped[0].window, Some(4_096));
    assert!(cfg.describe().contains("window: 4096 tokens"));
}

#[test]
fn window_and_spell_settings_are_checked() {
    let base = "[chain]\norder = [\"p\"]\n[[providers]]\nname = \"p\"\nkind = \"vllm\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n";
    for (bad, names) in [
        ("context_window = 0\n", "context_window"),
        (
            "[providers.breaker]\nopen_ms = 10000\nopen_max_ms = 5000\n",
            "open_max_ms",
        ),
    ] {
        let e = config::parse("w.toml", &format!("{base}{bad}"), &no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(names), "{bad:?}: {e}");
    }
    let c = config::parse(
        "w.toml",
        &format!("{base}[providers.breaker]\nopen_ms = 2000\nopen_max_ms = 30000\nbackground_probe_ms = 0\n"),
        &no_env,
    )
    .unwrap();
    let b = c.provider("p").unwrap().breaker;
    assert_eq!(
        (b.open_ms, b.open_max_ms, b.background_probe_ms),
        (2_000, 30_000, None)
    );
    // Defaults: 5 s doubling to 60 s, the model list checked every 5 s while open.
    let d = config::parse("w.toml", base, &no_env).unwrap();
    let b = d.provider("p").unwrap().breaker;
    assert_eq!(
        (b.open_ms, b.open_max_ms, b.background_probe_ms),
        (5_000, 60_000, Some(5_000))
    );
}
