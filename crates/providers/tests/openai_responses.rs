//! The Responses upstream (`OpenAiWire::Responses`) against the chaos fake: the exact body sent
//! to `/v1/responses`, answers and streams assembled (text, tool calls, usage), every error row
//! over HTTP, in-band `error` events and `response.failed`, truncation, malformed events,
//! mid-stream resets, and Azure's v1 path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};
use ripcord_core::{
    ChatModel, ChatRequest, Context, ErrorKind, FinishReason, ImageSource, Message, ResponseFormat,
    StreamEvent, ToolCall, ToolChoice, stream,
};
use ripcord_providers::{AzureConfig, AzureOpenAi, OpenAi, OpenAiWire};
use serde_json::json;
use support::*;

fn responses(fake: &FakeVendor) -> OpenAi {
    OpenAi::new(openai_cfg(fake, "o3-pro").with_wire(OpenAiWire::Responses)).unwrap()
}

#[tokio::test]
async fn sends_the_responses_body_to_v1_responses() {
    let fake = openai_fake().await;
    let m = responses(&fake);
    assert_eq!(m.wire(), OpenAiWire::Responses);
    let mut req = ChatRequest::new(vec![
        Message::system("You are terse."),
        Message::user("What is in this image?").with_image(ImageSource::Url {
            url: "https://example.invalid/sky.png".into(),
        }),
        Message::assistant("A blue sky."),
        weather_call("call_7", "Oslo"),
        Message::tool_result("call_7", "sunny"),
    ])
    .with_tool(weather_tool(
        "Current weather for a city",
        json!({"type":"object","properties":{"city":{"type":"string"}}}),
    ))
    .with_tool_choice(ToolChoice::Auto)
    .with_response_format(ResponseFormat::JsonSchema {
        name: "answer".into(),
        schema: json!({"type":"object"}),
        strict: true,
    })
    .with_max_tokens(200)
    .with_temperature(0.5);
    req.user = Some("user-1".into());
    let r = chat_ok(&m, &req).await;
    assert_eq!(r.text(), "Hello! How can I help you today?");

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let sent = &reqs[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/responses")
    );
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        sent.json().unwrap(),
        json!({
            "model": "o3-pro",
            "instructions": "You are terse.",
            "input": [
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "What is in this image?"},
                    {"type": "input_image", "image_url": "https://example.invalid/sky.png", "detail": "auto"}
                ]},
                {"type": "message", "role": "assistant", "content": "A blue sky."},
                {"type": "function_call", "call_id": "call_7", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
                {"type": "function_call_output", "call_id": "call_7", "output": "sunny"}
            ],
            "tools": [{"type": "function", "name": "weather", "description": "Current weather for a city",
                       "parameters": {"type":"object","properties":{"city":{"type":"string"}}}, "strict": false}],
            "tool_choice": "auto",
            "text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": true}},
            "max_output_tokens": 200,
            "temperature": 0.5,
            "user": "user-1",
            "store": false
        })
    );
}

#[tokio::test]
async fn json_answers_with_tool_calls_usage_and_provenance() {
    let fake = openai_fake().await;
    let m = responses(&fake).named("primary");
    fake.set_script(Script::Always(Behavior::Reply(
        Reply::text("")
            .with_tool_call("call_1", "weather", r#"{"city":"Oslo"}"#)
            .with_tool_call("call_2", "time", "{}")
            .with_usage(40, 7),
    )));
    let r = chat_ok(&m, &ChatRequest::user("weather?")).await;
    assert_eq!(r.text(), "");
    assert_eq!(
        r.tool_calls,
        [
            ToolCall::new("call_1", "weather", r#"{"city":"Oslo"}"#),
            ToolCall::new("call_2", "time", "{}")
        ]
    );
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (40, 7));
    assert_eq!(r.model, "o3-pro");
    assert_eq!(r.served_by(), "primary");
}

#[tokio::test]
async fn streams_text_tool_calls_usage_and_one_finish() {
    let fake = openai_fake().await;
    let m = responses(&fake);
    fake.set_script(Script::Always(Behavior::Reply(
        Reply::text("Rayleigh scattering.")
            .with_chunks(3)
            .with_tool_call("call_1", "lookup", r#"{"q":"sky"}"#)
            .with_usage(20, 5),
    )));
    let events = stream_ok(&m, &ChatRequest::user("why blue?")).await;
    assert_eq!(text_of(&events), "Rayleigh scattering.");
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::TextDelta { .. }))
            .count(),
        3,
        "the deltas are passed on as they come, `.done` adds nothing"
    );
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Finish { reason: FinishReason::ToolCalls, model: Some(m) }) if m == "o3-pro"
    ));
    let r = stream::collect(Box::pin(futures::stream::iter(events.into_iter().map(Ok))))
        .await
        .unwrap();
    assert_eq!(
        r.tool_calls,
        [ToolCall::new("call_1", "lookup", r#"{"q":"sky"}"#)]
    );
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (20, 5));
    let sent = fake.requests()[0].json().unwrap();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["store"], false);
}

#[tokio::test]
async fn every_http_error_row_is_classified_like_the_chat_adapter() {
    let fake = openai_fake().await;
    let m = responses(&fake);
    check_error_rows(&fake, &m, "openai", true, |ve, e| {
        if let VendorError::RateLimited {
            retry_after: Some(d),
        } = ve
        {
            assert_eq!(e.retry_after(), Some(*d), "{e}");
        }
    })
    .await;
}

/// `error` events and `response.failed`, before any content and after it, and the JSON forms
/// (an error object in a 200, a failed Response in a 200).
#[tokio::test]
async fn in_band_errors_and_failed_responses_are_classified() {
    let fake = openai_fake().await;
    let m = responses(&fake);
    for ve in VendorError::ALL {
        for failed in [false, true] {
            for after in [0, 2] {
                let b = if failed {
                    Behavior::ResponseFailed {
                        after_chunks: after,
                        error: ve.clone(),
                    }
                } else {
                    Behavior::InBandError {
                        after_chunks: after,
                        error: ve.clone(),
                    }
                };
                fake.set_script(Script::Always(b));
                let what = format!("{ve:?} failed={failed} after={after}");
                let e = match m.stream(&ChatRequest::user("hi"), &Context::new()).await {
                    Ok(s) => {
                        let (events, err) = drain(s).await;
                        assert_eq!(text_of(&events).is_empty(), after == 0, "{what}");
                        assert!(
                            !events
                                .iter()
                                .any(|e| matches!(e, StreamEvent::Finish { .. })),
                            "{what}"
                        );
                        err.expect("the stream ends with the error")
                    }
                    Err(e) => e,
                };
                assert_eq!(e.kind(), ve.expected_kind(), "{what}: {e}");
                assert_eq!(e.provider(), Some("openai"), "{what}");
                assert_error_clean(&e);
            }
            let e = chat_err(&m, &ChatRequest::user("hi")).await;
            assert_eq!(
                e.kind(),
                ve.expected_kind(),
                "200 body {ve:?} failed={failed}: {e}"
            );
        }
    }
}

#[tokio::test]
async fn a_stream_without_a_final_event_is_truncated() {
    let fake = openai_fake().await;
    let m = responses(&fake);
    assert_truncated_stream(&fake, &m, "response.completed").await;
    // A stream that stops right after `response.created`: nothing but the preamble.
    fake.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 0,
    }));
    let (events, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(err.unwrap().kind(), ErrorKind::Network);
    // A JSON body cut short.
    fake.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 2,
    }));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::Network, "{e}");
    assert!(e.request_delivered());
}

#[tokio::test]
async fn malformed_events_resets_and_broken_json() {
    let fake = openai_fake().await;
    let m = responses(&fake);
    // Two broken events are skipped (the default allows three); the answer is whole.
    fake.set_script(Script::Always(Behavior::MalformedEvents { count: 2 }));
    let events = stream_ok(&m, &ChatRequest::user("hi")).await;
    assert_eq!(text_of(&events), "Hello! How can I help you today?");
    fake.set_script(Script::Always(Behavior::MalformedEvents { count: 4 }));
    let (_, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
    assert_eq!(err.unwrap().kind(), ErrorKind::InvalidResponse);
    // A 200 whose body is not JSON.
    fake.set_script(Script::Always(Behavior::MalformedJson));
    assert_eq!(
        chat_err(&m, &ChatRequest::user("hi")).await.kind(),
        ErrorKind::InvalidResponse
    );
    // A reset after content: a network error, the text before it delivered.
    fake.set_script(Script::Always(Behavior::ResetMidStream { after_chunks: 2 }));
    let (events, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
    assert!(!text_of(&events).is_empty());
    assert_eq!(err.unwrap().kind(), ErrorKind::Network);
    // A stream request answered with JSON is replayed as a stream.
    fake.set_script(Script::Always(Behavior::Ok));
    let r = chat_ok(&m, &ChatRequest::user("hi")).await;
    assert_eq!(r.finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn azure_calls_the_v1_responses_path_with_the_deployment_as_model() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let m = AzureOpenAi::from_config(
        AzureConfig::new(fake.base_url(), "prod-5", KEY)
            .with_model("gpt-5")
            .with_timeouts(timeouts())
            .with_wire(OpenAiWire::Responses),
    )
    .unwrap();
    let r = chat_ok(&m, &ChatRequest::user("hi")).await;
    assert_eq!(r.text(), "Hello! How can I help you today?");
    let events = stream_ok(&m, &ChatRequest::user("hi")).await;
    assert!(matches!(events.last(), Some(StreamEvent::Finish { .. })));
    let reqs = fake.requests();
    assert_eq!(reqs[0].path, "/openai/v1/responses");
    assert_eq!(reqs[0].header("api-key"), Some(KEY));
    assert_eq!(reqs[0].header("authorization"), None);
    assert_eq!(reqs[0].json().unwrap()["model"], "prod-5");
    fake.set_script(Script::Always(Behavior::Error(
        VendorError::ContentFiltered,
    )));
    assert_eq!(
        chat_err(&m, &ChatRequest::user("hi")).await.kind(),
        ErrorKind::ContentFiltered
    );
}
