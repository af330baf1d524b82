//! The Gemini adapter (AI Studio) against the Gemini-wire fake on loopback: the wire it sends,
//! text, streamed text, function calls (streamed, parallel), thinking kept apart, JSON schemas,
//! embeddings, every vendor error and every fault script.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use ripcord_chaos::{Behavior, RawEnd, RawResponse, Reply, Script, VendorError};
use ripcord_core::stream::Collector;
use ripcord_core::{
    ChatModel, ChatRequest, Context, EmbeddingModel, EmbeddingRequest, ErrorKind, FinishReason,
    Message, ResponseFormat, StreamEvent, TimeoutPhase, ToolCall, ToolChoice,
};
use ripcord_providers::google::{Gemini, GeminiConfig, Thinking};
use serde_json::json;
use support::*;

fn collect(events: Vec<StreamEvent>) -> ripcord_core::ChatResponse {
    let mut c = Collector::new();
    events.into_iter().for_each(|e| c.push(e));
    c.finish().unwrap()
}

fn sse(chunks: &[&str]) -> Behavior {
    let body: String = chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect();
    Behavior::Raw(RawResponse::new(
        200,
        vec![("content-type".into(), "text/event-stream".into())],
        body,
        RawEnd::Chunked,
    ))
}

fn json_body(body: &str) -> Behavior {
    Behavior::Raw(RawResponse::new(
        200,
        vec![(
            "content-type".into(),
            "application/json; charset=UTF-8".into(),
        )],
        body.to_owned(),
        RawEnd::Length,
    ))
}

#[tokio::test]
async fn chat_sends_the_gemini_wire_and_reads_the_answer() {
    let fake = gemini_fake().await;
    let g = gemini(&fake);
    let req = ChatRequest::new(vec![Message::system("Be brief."), Message::user("Hi")])
        .with_max_tokens(100)
        .with_temperature(0.2);
    let r = chat_ok(&g, &req).await;
    assert_eq!(r.content, "Hello! How can I help you today?");
    assert_eq!(r.finish_reason, FinishReason::Stop);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (12, 9));
    assert!(r.usage.cost_usd.is_some(), "gemini-2.5-flash has a price");
    assert_eq!(r.model, "gemini-2.5-flash");
    assert_eq!(r.provenance.served_by.as_deref(), Some("gemini"));
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(sent.header("x-goog-api-key"), Some(KEY));
    assert!(sent.header("authorization").is_none());
    let body = sent.json().unwrap();
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}]})
    );
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": "Hi"}]}])
    );
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 100);
    assert!(!format!("{g:?}").contains(KEY));
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_with_usage_and_one_finish() {
    let fake = gemini_fake().await;
    let g = gemini(&fake);
    let events = stream_ok(&g, &ChatRequest::user("Hi")).await;
    let texts = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::TextDelta { .. }))
        .count();
    assert_eq!(texts, 4);
    assert!(matches!(events.last(), Some(StreamEvent::Finish { .. })));
    let finishes = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Finish { .. }))
        .count();
    assert_eq!(finishes, 1);
    assert_eq!(text_of(&events), "Hello! How can I help you today?");
    let r = collect(events);
    assert_eq!(r.usage.output_tokens, 9);
    let sent = &fake.requests()[0];
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(sent.header("accept"), Some("text/event-stream"));
}

#[tokio::test]
async fn streamed_parallel_function_calls_and_tool_config() {
    let fake = gemini_fake().await;
    fake.set_script(Script::Always(Behavior::Reply(
        Reply::text("")
            .with_tool_call("ignored", "weather", r#"{"city":"Paris"}"#)
            .with_tool_call("ignored", "weather", r#"{"city":"Oslo"}"#),
    )));
    let g = gemini(&fake);
    let req = ChatRequest::user("Weather in Paris and Oslo?")
        .with_tool(weather_tool(
            "Current weather",
            json!({"type":"object","properties":{"city":{"type":"string"}}}),
        ))
        .with_tool_choice(ToolChoice::Required);
    let events = stream_ok(&g, &req).await;
    let r = collect(events);
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].name, "weather");
    assert_eq!(r.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
    assert_eq!(r.tool_calls[1].arguments, r#"{"city":"Oslo"}"#);
    assert_ne!(r.tool_calls[0].id, r.tool_calls[1].id);
    let body = fake.requests()[0].json().unwrap();
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0]["name"],
        "weather"
    );
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );

    // The next turn sends the calls and their results back, named by function.
    fake.set_script(Script::Always(Behavior::Ok));
    let calls = r.tool_calls.clone();
    let next = ChatRequest::new(vec![
        Message::user("Weather in Paris and Oslo?"),
        Message::assistant_tool_calls(calls.clone()),
        Message::tool_result(calls[0].id.clone(), "18C"),
        Message::tool_result(calls[1].id.clone(), "9C"),
    ]);
    chat_ok(&g, &next).await;
    let body = fake.requests()[1].json().unwrap();
    assert_eq!(body["contents"][1]["role"], "model");
    assert_eq!(
        body["contents"][1]["parts"][1]["functionCall"],
        json!({"name": "weather", "args": {"city": "Oslo"}})
    );
    assert_eq!(
        body["contents"][2]["parts"],
        json!([
            {"functionResponse": {"name": "weather", "response": {"output": "18C"}}},
            {"functionResponse": {"name": "weather", "response": {"output": "9C"}}}
        ])
    );
}

#[tokio::test]
async fn thinking_is_asked_for_and_kept_apart_from_the_answer() {
    let fake = gemini_fake().await;
    let g = Gemini::new(
        GeminiConfig::new("gemini-2.5-pro", KEY)
            .with_base_url(format!("{}/v1beta", fake.base_url()))
            .with_timeouts(timeouts())
            .with_thinking(Thinking::budget(2048).with_thoughts()),
    )
    .unwrap();
    fake.set_script(Script::Always(sse(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"**Considering Rayleigh scattering**","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":8},"modelVersion":"gemini-2.5-pro"}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"Rayleigh "}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-pro"}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"scattering.","thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":3,"thoughtsTokenCount":120,"cachedContentTokenCount":4,"totalTokenCount":131},"modelVersion":"gemini-2.5-pro"}"#,
    ])));
    let events = stream_ok(&g, &ChatRequest::user("Why is the sky blue?")).await;
    assert_eq!(text_of(&events), "Rayleigh scattering.");
    let r = collect(events);
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.cached_input_tokens,
            r.usage.output_tokens
        ),
        (8, 4, 123),
        "thinking tokens are billed as output"
    );
    let body = fake.requests()[0].json().unwrap();
    assert_eq!(
        body["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 2048, "includeThoughts": true})
    );
    // The JSON answer keeps thoughts out too.
    fake.set_script(Script::Always(json_body(
        r#"{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"Blue."}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":1,"thoughtsTokenCount":7}}"#,
    )));
    let r = chat_ok(&g, &ChatRequest::user("?")).await;
    assert_eq!(r.content, "Blue.");
    assert_eq!(r.usage.output_tokens, 8);
}

#[tokio::test]
async fn json_schema_and_length_stops() {
    let fake = gemini_fake().await;
    let g = gemini(&fake);
    let schema = json!({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]});
    fake.set_script(Script::Always(json_body(
        r#"{"candidates":[{"content":{"parts":[{"text":"{\"n\": 4"}],"role":"model"},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4}}"#,
    )));
    let req = ChatRequest::user("n?").with_response_format(ResponseFormat::JsonSchema {
        name: "n".into(),
        schema: schema.clone(),
        strict: true,
    });
    let r = chat_ok(&g, &req).await;
    assert_eq!(r.finish_reason, FinishReason::Length);
    let body = fake.requests()[0].json().unwrap();
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(body["generationConfig"]["responseJsonSchema"], schema);
}

#[tokio::test]
async fn every_vendor_error_is_classified_json_and_stream() {
    let fake = gemini_fake().await;
    let g = gemini(&fake);
    check_error_rows(&fake, &g, "gemini", true, |ve, e| {
        if let VendorError::RateLimited { retry_after } = ve {
            assert_eq!(e.retry_after(), *retry_after, "RetryInfo is the wait");
        }
        // Google's envelope names its canonical status (proxies' HTML and empty bodies do not).
        let enveloped = !matches!(
            ve,
            VendorError::BadGateway
                | VendorError::GatewayTimeout
                | VendorError::EmptyServiceUnavailable
        );
        if enveloped {
            assert!(e.vendor_code().is_some(), "{ve:?}: {e:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn fault_scripts_over_the_gemini_wire() {
    let fake = gemini_fake().await;
    let g = gemini(&fake);
    let req = ChatRequest::user("hi");

    // A stream cut before its finishReason is truncated, never a short answer.
    assert_truncated_stream(&fake, &g, "truncated").await;

    // A complete stream needs no terminator.
    fake.set_script(Script::Always(Behavior::StopWithoutDone));
    assert_eq!(
        text_of(&stream_ok(&g, &req).await),
        "Hello! How can I help you today?"
    );

    // Broken JSON: an invalid response (JSON), a skipped event (stream).
    fake.set_script(Script::Always(Behavior::MalformedJson));
    assert_eq!(chat_err(&g, &req).await.kind(), ErrorKind::InvalidResponse);
    fake.set_script(Script::Always(Behavior::MalformedEvents { count: 1 }));
    assert_eq!(
        text_of(&stream_ok(&g, &req).await),
        "Hello! How can I help you today?"
    );

    // Google's in-band error after content ends the stream with its kind.
    fake.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 2,
        error: VendorError::Overloaded,
    }));
    let (events, err) = drain_stream(&g, &req).await;
    assert!(!text_of(&events).is_empty());
    assert_eq!(err.unwrap().kind(), ErrorKind::Overloaded);
    // …and as the first event, it is the attempt's error.
    fake.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 0,
        error: VendorError::RateLimited {
            retry_after: Some(Duration::from_secs(3)),
        },
    }));
    let (_, err) = drain_stream(&g, &req).await;
    let e = err.unwrap();
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));

    // A vendor that never sends its first token times out in that phase.
    let slow = g
        .clone()
        .with_timeouts(timeouts().with_first_token(Duration::from_millis(300)))
        .unwrap();
    fake.set_script(Script::Always(Behavior::SlowFirstToken(
        Duration::from_secs(3),
    )));
    let (_, err) = drain(slow.stream(&req, &Context::new()).await.unwrap()).await;
    assert_eq!(err.unwrap().timeout_phase(), Some(TimeoutPhase::FirstToken));

    // A reset before the answer is a network error.
    fake.set_script(Script::Always(Behavior::ResetBeforeResponse));
    assert_eq!(chat_err(&g, &req).await.kind(), ErrorKind::Network);
}

#[tokio::test]
async fn raw_finish_reasons_through_the_adapter() {
    let fake = gemini_fake().await;
    let g = gemini(&fake);
    fake.set_script(Script::Always(sse(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"Once upon"}],"role":"model"},"index":0}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"SAFETY","index":0}]}"#,
    ])));
    let r = collect(stream_ok(&g, &ChatRequest::user("story")).await);
    assert_eq!(r.finish_reason, FinishReason::ContentFilter);
    assert_eq!(r.content, "Once upon");
    fake.set_script(Script::Always(sse(&[
        r#"{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL","finishMessage":"Malformed function call: print(weather())","index":0}]}"#,
    ])));
    let (_, err) = drain_stream(&g, &ChatRequest::user("x")).await;
    let e = err.unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidResponse);
    assert!(e.message().contains("print(weather())"), "{e}");
}

#[tokio::test]
async fn a_thought_signature_round_trips_in_the_call_id() {
    let fake = gemini_fake().await;
    let g = gemini(&fake);
    fake.set_script(Script::Always(json_body(
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"lookup","args":{"q":"sky"}},"thoughtSignature":"U0lHTkFUVVJF"}],"role":"model"},"finishReason":"STOP"}]}"#,
    )));
    let r = chat_ok(&g, &ChatRequest::user("?")).await;
    let call: ToolCall = r.tool_calls[0].clone();
    fake.set_script(Script::Always(Behavior::Ok));
    let next = ChatRequest::new(vec![
        Message::user("?"),
        Message::assistant_tool_calls(vec![call.clone()]),
        Message::tool_result(call.id.clone(), r#"{"answer":"blue"}"#),
    ]);
    chat_ok(&g, &next).await;
    let body = fake.requests()[1].json().unwrap();
    assert_eq!(
        body["contents"][1]["parts"][0]["thoughtSignature"],
        "U0lHTkFUVVJF"
    );
    assert_eq!(
        body["contents"][2]["parts"][0]["functionResponse"],
        json!({"name": "lookup", "response": {"answer": "blue"}})
    );
}

#[tokio::test]
async fn embeddings_one_and_many() {
    let fake = gemini_fake().await;
    let g = Gemini::new(
        GeminiConfig::new("gemini-embedding-001", KEY)
            .with_base_url(format!("{}/v1beta", fake.base_url()))
            .with_timeouts(timeouts()),
    )
    .unwrap();
    let mut req = EmbeddingRequest::new(vec!["sky".into()]);
    req.dimensions = Some(16);
    let one = g.embed(&req, &Context::new()).await.unwrap();
    assert_eq!(one.vectors.len(), 1);
    assert_eq!(one.vectors[0].len(), 16);
    assert_eq!(one.served_by.as_deref(), Some("gemini"));
    let many = g
        .embed(
            &EmbeddingRequest::new(vec!["sky".into(), "sea".into(), "sky".into()]),
            &Context::new(),
        )
        .await
        .unwrap();
    assert_eq!(many.vectors.len(), 3);
    assert_eq!(many.vectors[0], many.vectors[2]);
    assert_ne!(many.vectors[0], many.vectors[1]);
    let paths: Vec<String> = fake.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/v1beta/models/gemini-embedding-001:embedContent",
            "/v1beta/models/gemini-embedding-001:batchEmbedContents"
        ]
    );
    fake.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: None,
    })));
    let e = g.embed(&req, &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert_error_clean(&e);
}

/// A custom header (a gateway key behind Helicone or Portkey) reaches Gemini, stays out of
/// `Debug`, and one ripcord sets itself is refused by name when the adapter is built.
#[tokio::test]
async fn custom_headers_reach_gemini_and_stay_secret() {
    const SECRET: &str = "Bearer pk-helicone-gemini";
    let fake = gemini_fake().await;
    let cfg = GeminiConfig::new("gemini-2.5-flash", KEY)
        .with_base_url(format!("{}/v1beta", fake.base_url()))
        .with_timeouts(timeouts())
        .with_header("Helicone-Auth", SECRET);
    assert!(!format!("{cfg:?}").contains("pk-helicone"), "{cfg:?}");
    let g = Gemini::new(cfg).unwrap();
    assert!(!format!("{g:?}").contains("pk-helicone"), "{g:?}");
    chat_ok(&g, &ChatRequest::user("hi")).await;
    assert_eq!(fake.requests()[0].header("helicone-auth"), Some(SECRET));
    let e = Gemini::new(
        GeminiConfig::new("gemini-2.5-flash", KEY).with_header("x-goog-api-key", "other"),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest, "{e}");
    assert!(e.to_string().contains("x-goog-api-key"), "{e}");
}
