//! The Anthropic adapter against the chaos fake.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use ripcord_core::{
    ChatModel, ChatRequest, Context, ErrorKind, FinishReason, Message, ResponseFormat, StreamEvent,
    ToolCall, stream,
};
use ripcord_providers::Anthropic;
use serde_json::json;
use support::*;

#[tokio::test]
async fn sends_the_exact_messages_json_and_headers() {
    let fake = anthropic_fake().await;
    let m = anthropic(&fake);
    let mut req = ChatRequest::new(vec![
        Message::system("You are terse."),
        user_with_image("Describe:", "image/png", "iVBORw0KGgo="),
        Message::user("and check the weather."),
        weather_call("toolu_1", "Oslo"),
        Message::tool_result("toolu_1", "sunny"),
        Message::user("Thanks!"),
    ])
    .with_tool(weather_tool(
        "Weather by city",
        json!({"type":"object","properties":{"city":{"type":"string"}}}),
    ))
    .with_tool_choice(force_weather())
    // No seed: Anthropic has none, and a request with one is refused by name (unit-tested in
    // the adapter's request module).
    .with_temperature(0.5);
    req.user = Some("u-9".into());
    chat_ok(&m, &req).await;

    let r = &fake.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(
        r.json().unwrap(),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "system": "You are terse.",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Describe:"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                    {"type": "text", "text": "and check the weather."}
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                    {"type": "text", "text": "Thanks!"}
                ]}
            ],
            "tools": [{"name": "weather", "description": "Weather by city",
                       "input_schema": {"type":"object","properties":{"city":{"type":"string"}}}}],
            "tool_choice": {"type": "tool", "name": "weather"},
            "temperature": 0.5,
            "metadata": {"user_id": "u-9"}
        })
    );
}

#[tokio::test]
async fn json_mode_round_trips_through_the_forced_tool() {
    let reply = Reply::text("")
        .with_tool_call("toolu_j", "json_response", r#"{"answer":42}"#)
        .with_chunks(3);
    let fake = FakeVendor::start_with(Wire::Anthropic, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let m = anthropic(&fake);
    let req = ChatRequest::user("The answer?").with_response_format(ResponseFormat::Json);
    let r = chat_ok(&m, &req).await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&r.content).unwrap(),
        json!({"answer": 42})
    );
    assert!(r.tool_calls.is_empty());
    assert_eq!(r.finish_reason, FinishReason::Stop);
    let sent = fake.requests()[0].json().unwrap();
    assert_eq!(
        sent["tool_choice"],
        json!({"type":"tool","name":"json_response"})
    );

    let events = stream_ok(&m, &req).await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text_of(&events)).unwrap(),
        json!({"answer": 42})
    );
}

#[tokio::test]
async fn assembles_text_tool_calls_and_usage_from_json_and_stream() {
    let reply = Reply::text("Let me check.")
        .with_tool_call("toolu_a", "weather", r#"{"city":"Paris"}"#)
        .with_tool_call("toolu_b", "time", r#"{"tz":"CET"}"#)
        .with_usage(40, 17)
        .with_chunks(4)
        .with_model("claude-sonnet-4-5-20250929");
    let fake = FakeVendor::start_with(Wire::Anthropic, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let m = anthropic(&fake);
    let want = vec![
        ToolCall::new("toolu_a", "weather", r#"{"city":"Paris"}"#),
        ToolCall::new("toolu_b", "time", r#"{"tz":"CET"}"#),
    ];
    let r = chat_ok(&m, &ChatRequest::user("weather?")).await;
    assert_eq!(r.content, "Let me check.");
    assert_eq!(r.tool_calls, want);
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (40, 17));
    assert_eq!(r.model, "claude-sonnet-4-5-20250929");
    assert!(r.usage.cost_usd.is_some());

    let events = stream_ok(&m, &ChatRequest::user("weather?")).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Finish { .. }))
            .count(),
        1
    );
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Finish {
            reason: FinishReason::ToolCalls,
            ..
        })
    ));
    let r = stream::collect(Box::pin(futures::stream::iter(events.into_iter().map(Ok))))
        .await
        .unwrap();
    assert_eq!(r.content, "Let me check.");
    assert_eq!(r.tool_calls, want);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (40, 17));
    assert_eq!(fake.requests()[1].json().unwrap()["stream"], true);
}

#[tokio::test]
async fn every_http_error_row_is_classified() {
    let fake = anthropic_fake().await;
    let m = anthropic(&fake);
    check_error_rows(&fake, &m, "anthropic", true, keeps_status(Wire::Anthropic)).await;
    fake.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: Some(Duration::from_secs(3)),
    })));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
}

#[tokio::test]
async fn in_band_error_events_are_classified() {
    let fake = anthropic_fake().await;
    let m = anthropic(&fake);
    assert_in_band_errors(&fake, &m, |_, _, _| {}).await;
}

#[tokio::test]
async fn truncation_malformed_json_and_resets() {
    let fake = anthropic_fake().await;
    let m = anthropic(&fake);
    assert_truncated_stream(&fake, &m, "message_stop").await;

    // One unparseable event in a healthy stream is skipped; the answer completes.
    assert_malformed_json(&fake, &m).await;
    assert_reset_mid_stream(&fake, &m).await;
}

#[tokio::test]
async fn timeouts_by_phase() {
    let fake = anthropic_fake().await;
    // Limits changed after construction apply to the next call.
    let m = anthropic(&fake).with_timeouts(short_phases()).unwrap();
    assert_phase_timeouts(&fake, &m).await;
}

#[tokio::test]
async fn keys_never_show_in_debug_or_errors() {
    let fake = anthropic_fake().await;
    let m = build_keeping_the_key(anthropic_cfg(&fake, "claude-sonnet-4-5"), Anthropic::new);
    let body = format!(
        r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key {KEY}"}}}}"#
    );
    assert_status_error_clean(&fake, &m, (401, body, vec![]), ErrorKind::Auth).await;
}

/// A base URL in either convention — the host alone (Anthropic's SDKs) or `…/v1` (OpenAI's) —
/// reaches `/v1/messages`, never `/v1/v1/messages`.
#[tokio::test]
async fn base_urls_in_either_convention_reach_v1_messages() {
    let fake = anthropic_fake().await;
    for base in [fake.base_url(), format!("{}/v1", fake.base_url())] {
        let m =
            Anthropic::new(anthropic_cfg(&fake, "claude-sonnet-4-5").with_base_url(&base)).unwrap();
        let r = chat_ok(&m, &ChatRequest::user("hi")).await;
        assert!(!r.text().is_empty(), "{base}");
    }
    let paths: Vec<String> = fake.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/v1/messages", "/v1/messages"]);
}

/// A base URL that is still wrong (a path the vendor does not serve) fails with a 404 that
/// names the URL it was sent to, so the mistake shows in the error instead of reading as a
/// missing model.
#[tokio::test]
async fn a_404_names_the_url_it_was_sent_to() {
    let fake = anthropic_fake().await;
    let base = format!("{}/v1/v1", fake.base_url());
    let wrong =
        Anthropic::new(anthropic_cfg(&fake, "claude-sonnet-4-5").with_base_url(&base)).unwrap();
    let e = wrong
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ModelNotFound, "{e}");
    let url = format!("POST {}/v1/v1/messages", fake.base_url());
    assert!(e.message().contains(&url), "{e} should name {url}");
    assert_no_key("error", &format!("{e:?}"));
}
