//! Opt-in recording of prompt and completion text. In its own test binary: the switch is
//! process-wide, and the other binaries check that it is off by default.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

mod support;

use std::time::Duration;

use ripcord_core::telemetry::{self, TracedModel};
use ripcord_core::testing::{ScriptedModel, text_stream};
use ripcord_core::{ChatModel, ChatRequest, Context, stream};
use support::*;

#[tokio::test]
async fn opted_in_content_is_recorded_in_the_genai_message_shape() {
    let cap = capture(|b| b.record_content(true));
    assert!(telemetry::content_recording());
    let m = TracedModel::new(
        ScriptedModel::new("a").reply("Rayleigh scattering."),
        telemetry::provider::OPENAI,
    );
    m.chat(&ChatRequest::user("Why is the sky blue?"), &Context::new())
        .await
        .unwrap();
    let s = TracedModel::new(
        ScriptedModel::new("b").stream_items(text_stream(&["Blue ", "light."], Duration::ZERO)),
        telemetry::provider::OPENAI,
    );
    stream::collect(
        s.stream(&ChatRequest::user("Again?"), &Context::new())
            .await
            .unwrap(),
    )
    .await
    .unwrap();

    let spans = cap.spans();
    let chat = named(&spans, "chat a-model")[0];
    let input: serde_json::Value =
        serde_json::from_str(&attr_str(chat, "gen_ai.input.messages").unwrap()).unwrap();
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[0]["parts"][0]["content"], "Why is the sky blue?");
    let output: serde_json::Value =
        serde_json::from_str(&attr_str(chat, "gen_ai.output.messages").unwrap()).unwrap();
    assert_eq!(output[0]["parts"][0]["content"], "Rayleigh scattering.");
    assert_eq!(output[0]["finish_reason"], "stop");

    let streamed = named(&spans, "chat b-model")[0];
    let output: serde_json::Value =
        serde_json::from_str(&attr_str(streamed, "gen_ai.output.messages").unwrap()).unwrap();
    assert_eq!(output[0]["parts"][0]["content"], "Blue light.");

    drop(cap);
    let cap = capture(|b| b);
    assert!(
        !telemetry::content_recording(),
        "building without the option turns it off again"
    );
    m.chat(&ChatRequest::user("secret prompt"), &Context::new())
        .await
        .unwrap();
    let spans = cap.spans();
    assert!(attr(named(&spans, "chat a-model")[0], "gen_ai.input.messages").is_none());
}
