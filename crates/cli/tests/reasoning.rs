//! The remaining wire gaps of issue 33 through the real `ripcord serve` and the chaos fakes:
//! a request parameter is forwarded to each link that supports it, mapped where an equivalent
//! exists, or refused with a 400 naming it — never dropped in silence.

#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use ripcord_chaos::{FakeVendor, Wire};
use serde_json::{Value, json};
use support::post;

fn error_message(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap();
    v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The `gpt` route (gpt-4o on a fake OpenAI) and the `claude` route (a fake Anthropic),
/// served under `tag`.
async fn gpt_and_claude(tag: &str) -> support::TwoRoutes {
    support::TwoRoutes::serve(
        tag,
        FakeVendor::start(Wire::OpenAi).await.unwrap(),
        FakeVendor::start(Wire::Anthropic).await.unwrap(),
        "gpt-4o",
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_seed_goes_to_openai_and_is_refused_by_name_for_claude() {
    let t = gpt_and_claude("reasoning-seed").await;
    let chat = t.url("/v1/chat/completions");
    let hi = json!([{"role": "user", "content": "hi"}]);
    support::post_ok(&chat, json!({"model": "gpt", "messages": hi, "seed": 7})).await;
    assert_eq!(support::last_sent(&t.gpt)["seed"], 7);
    let (s, body) = post(&chat, json!({"model": "claude", "messages": hi, "seed": 7})).await;
    assert_eq!(s, 400, "{body}");
    assert!(error_message(&body).starts_with("seed: "), "{body}");
    assert_eq!(
        t.claude.hits(),
        0,
        "Claude was not called with a seed it would ignore"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn file_and_audio_parts_go_to_openai_a_pdf_maps_to_claude_and_audio_is_refused_there() {
    let t = gpt_and_claude("reasoning-parts").await;
    let chat = t.url("/v1/chat/completions");
    let pdf = json!({"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQ=", "filename": "a.pdf"}});
    let audio =
        json!({"type": "input_audio", "input_audio": {"data": "UklGRiQ=", "format": "wav"}});
    let with = |model: &str, parts: Value| json!({"model": model, "messages": [{"role": "user", "content": parts}]});
    // Forwarded to the OpenAI-wire link as the chat wire has them.
    let (s, body) = post(
        &chat,
        with(
            "gpt",
            json!([{"type": "text", "text": "Read and hear"}, pdf, audio]),
        ),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let sent = support::last_sent(&t.gpt);
    let content = &sent["messages"][0]["content"];
    assert_eq!(content[1], pdf, "{sent}");
    assert_eq!(content[2], audio, "{sent}");
    // A PDF goes to Claude as a `document` block.
    let (s, body) = post(
        &chat,
        with("claude", json!([{"type": "text", "text": "Read"}, pdf])),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let sent = support::last_sent(&t.claude);
    assert_eq!(
        sent["messages"][0]["content"][1],
        json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}}),
        "{sent}"
    );
    // Audio, another file type and a file id are refused for Claude, naming the part.
    let hits = t.claude.hits();
    let text_file = json!({"type": "file", "file": {"file_data": "data:text/csv;base64,YSxi"}});
    let by_id = json!({"type": "file", "file": {"file_id": "file-abc"}});
    for part in [audio, text_file, by_id] {
        let (s, body) = post(
            &chat,
            with("claude", json!([{"type": "text", "text": "x"}, part])),
        )
        .await;
        assert_eq!(s, 400, "{body}");
        assert!(
            error_message(&body).starts_with("messages[0].content[1]: "),
            "{body}"
        );
    }
    assert_eq!(t.claude.hits(), hits, "refused before Claude was called");
    // A malformed part is a 400 at the door naming its field.
    let (s, body) = post(
        &chat,
        with(
            "gpt",
            json!([{"type": "file", "file": {"file_data": "not a data url"}}]),
        ),
    )
    .await;
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("messages[0].content[0].file.file_data"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_defined_client_tools_go_to_claude_and_are_refused_by_name_elsewhere() {
    let t = gpt_and_claude("reasoning-tools").await;
    let messages = t.url("/v1/messages");
    let tools = json!([
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        {"name": "weather", "input_schema": {"type": "object"}}
    ]);
    let body = |model: &str| {
        json!({"model": model, "max_tokens": 64, "tools": tools,
            "messages": [{"role": "user", "content": "List the files"}]})
    };
    support::post_ok(&messages, body("claude")).await;
    let sent = support::last_sent(&t.claude);
    assert_eq!(
        sent["tools"][0],
        json!({"type": "bash_20250124", "name": "bash"}),
        "{sent}"
    );
    assert_eq!(
        sent["tools"][1],
        json!({"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}),
        "{sent}"
    );
    assert_eq!(
        sent["tools"][2]["input_schema"],
        json!({"type": "object"}),
        "{sent}"
    );
    let (s, text) = post(&messages, body("gpt")).await;
    assert_eq!(s, 400, "{text}");
    let message = error_message(&text);
    assert!(message.starts_with("tools[0]: "), "{text}");
    assert!(message.contains("bash_20250124"), "{text}");
    assert_eq!(
        t.gpt.hits(),
        0,
        "the OpenAI link was not called with a tool it cannot run"
    );
    // Server tools (Anthropic runs them) stay refused at the door.
    let (s, text) = post(
        &messages,
        json!({"model": "claude", "max_tokens": 64,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(s, 400, "{text}");
}
