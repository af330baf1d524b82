//! The OpenAI adapter against the chaos fake: exact wire JSON and headers, responses and streams
//! assembled, every error row, timeouts by phase, resets, truncation, cancellation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use ripcord_core::{
    ChatModel, ChatRequest, Context, EmbeddingModel, EmbeddingRequest, ErrorKind, FinishReason,
    ImageSource, Message, ResponseFormat, StreamEvent, TimeoutPhase, ToolCall, ToolChoice, stream,
};
use ripcord_providers::{OpenAi, Timeouts};
use serde_json::json;
use support::*;

fn representative() -> ChatRequest {
    let mut req = ChatRequest::new(vec![
        Message::system("You are terse."),
        Message::user("What is in this image?").with_image(ImageSource::Url {
            url: "https://example.invalid/sky.png".into(),
        }),
        Message::assistant("A blue sky."),
        Message::user("Why is it blue? Check the weather too."),
        weather_call("call_7", "Oslo"),
        Message::tool_result("call_7", "sunny"),
    ])
    .with_tool(weather_tool(
        "Current weather for a city",
        json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}),
    ))
    .with_tool_choice(ToolChoice::Auto)
    .with_response_format(ResponseFormat::JsonSchema {
        name: "answer".into(),
        schema: json!({"type":"object","properties":{"why":{"type":"string"}}}),
        strict: true,
    })
    .with_max_tokens(200)
    .with_temperature(0.5)
    .with_seed(42);
    req.user = Some("user-1234".into());
    req
}

#[tokio::test]
async fn sends_the_exact_openai_json_and_headers() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    chat_ok(&m, &representative()).await;

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.json().unwrap(),
        json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in this image?"},
                    {"type": "image_url", "image_url": {"url": "https://example.invalid/sky.png"}}
                ]},
                {"role": "assistant", "content": "A blue sky."},
                {"role": "user", "content": "Why is it blue? Check the weather too."},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_7", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}
                ]},
                {"role": "tool", "content": "sunny", "tool_call_id": "call_7"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "weather", "description": "Current weather for a city",
                "parameters": {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}
            }}],
            "tool_choice": "auto",
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "answer", "schema": {"type":"object","properties":{"why":{"type":"string"}}}, "strict": true
            }},
            "temperature": 0.5,
            "max_completion_tokens": 200,
            "seed": 42,
            "user": "user-1234"
        })
    );
}

#[tokio::test]
async fn organization_and_project_headers() {
    let fake = openai_fake().await;
    let m = OpenAi::new(
        openai_cfg(&fake, "gpt-4o")
            .with_organization("org-1")
            .with_project("proj-2"),
    )
    .unwrap();
    chat_ok(&m, &ChatRequest::user("hi")).await;
    let r = &fake.requests()[0];
    assert_eq!(r.header("openai-organization"), Some("org-1"));
    assert_eq!(r.header("openai-project"), Some("proj-2"));
}

#[tokio::test]
async fn assembles_a_plain_response_with_usage_cost_and_provenance() {
    // The reply's model is a server option in the fake (per-behaviour replies echo the request).
    let reply = Reply::text("Rayleigh scattering.")
        .with_usage(1_000, 500)
        .with_model("gpt-4o-2024-08-06");
    let fake = FakeVendor::start_with(Wire::OpenAi, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let m = openai(&fake).named("primary");
    let r = chat_ok(&m, &ChatRequest::user("Why is the sky blue?")).await;
    assert_eq!(r.text(), "Rayleigh scattering.");
    assert_eq!(r.finish_reason, FinishReason::Stop);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (1_000, 500));
    // gpt-4o: $2.50 in, $10 out per Mtok.
    assert!((r.usage.cost_usd.unwrap() - 0.0075).abs() < 1e-9);
    assert_eq!(r.model, "gpt-4o-2024-08-06");
    assert_eq!(r.served_by(), "primary");
    assert_eq!(r.provenance.attempts.len(), 1);
}

#[tokio::test]
async fn assembles_tool_calls_from_json_and_from_a_stream() {
    let fake = openai_fake().await;
    let reply = Reply::text("")
        .with_tool_call("call_a", "weather", r#"{"city":"Paris"}"#)
        .with_tool_call("call_b", "time", r#"{"tz":"CET"}"#)
        .with_chunks(3);
    fake.set_script(Script::Always(Behavior::Reply(reply)));
    let m = openai(&fake);
    let want = vec![
        ToolCall::new("call_a", "weather", r#"{"city":"Paris"}"#),
        ToolCall::new("call_b", "time", r#"{"tz":"CET"}"#),
    ];
    let r = chat_ok(&m, &ChatRequest::user("weather and time")).await;
    assert_eq!(r.tool_calls, want);
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);

    let (events, err) = drain_stream(&m, &ChatRequest::user("weather and time")).await;
    assert!(err.is_none(), "{err:?}");
    let deltas = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallDelta { .. }))
        .count();
    assert!(deltas > 2, "arguments arrive in pieces: {events:?}");
    let r = stream::collect(Box::pin(futures::stream::iter(events.into_iter().map(Ok))))
        .await
        .unwrap();
    assert_eq!(r.tool_calls, want);
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn streams_text_usage_and_exactly_one_final_finish() {
    let fake = openai_fake().await;
    fake.set_script(Script::Always(Behavior::Reply(
        Reply::text("The sky is blue because of Rayleigh scattering.")
            .with_chunks(6)
            .with_usage(20, 11),
    )));
    let m = openai(&fake);
    let (events, err) = drain_stream(&m, &ChatRequest::user("why blue")).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        text_of(&events),
        "The sky is blue because of Rayleigh scattering."
    );
    assert!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::TextDelta { .. }))
            .count()
            >= 6
    );
    let finishes = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Finish { .. }))
        .count();
    assert_eq!(finishes, 1);
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Finish {
            reason: FinishReason::Stop,
            ..
        })
    ));
    let usage = events.iter().find_map(|e| match e {
        StreamEvent::Usage { usage } => Some(*usage),
        _ => None,
    });
    assert_eq!(
        usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((20, 11))
    );
    // The adapter asked for the usage chunk.
    let body = fake.requests()[0].json().unwrap();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        fake.requests()[0].header("accept"),
        Some("text/event-stream")
    );
}

/// Every error row of the table, over real HTTP: kind, status, and the wait the vendor asked for.
#[tokio::test]
async fn every_http_error_row_is_classified() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    // A stream request fails the same way, before any event.
    let keeps_status = keeps_status(Wire::OpenAi);
    check_error_rows(&fake, &m, "openai", true, |ve, e| {
        keeps_status(ve, e);
        assert_eq!(e.model(), Some("gpt-4o"));
    })
    .await;
}

#[tokio::test]
async fn rate_limit_waits_come_from_the_headers() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    fake.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: Some(Duration::from_millis(1_500)),
    })));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert_eq!(e.retry_after(), Some(Duration::from_millis(1_500)));
    assert_eq!(e.vendor_code(), Some("rate_limit_exceeded"));

    fake.set_script(Script::Always(Behavior::Status {
        status: 429,
        body: r#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#
            .into(),
        headers: vec![("retry-after".into(), "Wed, 21 Oct 2099 07:28:00 GMT".into())],
    }));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    // A far-away HTTP date is honoured but capped.
    assert_eq!(
        e.retry_after(),
        Some(ripcord_providers::retry_after::MAX_RETRY_AFTER)
    );

    fake.set_script(Script::Always(Behavior::Error(VendorError::QuotaExhausted)));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::QuotaExhausted);
    assert_eq!(e.disposition(), ripcord_core::Disposition::Fallback);
}

/// In-band errors, as the first event and after content, and in a 200 JSON body.
#[tokio::test]
async fn in_band_errors_are_classified_like_http_errors() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    assert_in_band_errors(&fake, &m, |_, events, e| {
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, StreamEvent::Finish { .. }))
        );
        assert_eq!(e.provider(), Some("openai"));
    })
    .await;
}

#[tokio::test]
async fn truncated_streams_and_bodies_are_errors_not_short_answers() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    // The connection ended early: a network failure after the vendor had the request.
    assert_truncated_stream(&fake, &m, "truncated").await;

    // A non-streaming body cut short.
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::Network, "{e}");
    assert!(e.request_delivered(), "{e:?}");
    assert!(e.message().contains("truncated"), "{e}");
}

#[tokio::test]
async fn malformed_json_is_an_invalid_response() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    // One unparseable chunk in a healthy stream is skipped; the answer completes.
    assert_malformed_json(&fake, &m).await;
}

#[tokio::test]
async fn timeouts_by_phase() {
    let fake = openai_fake().await;
    let short = Timeouts::default()
        .with_connect(Duration::from_secs(2))
        .with_first_token(Duration::from_millis(300))
        .with_stream_idle(Duration::from_millis(300));
    let m = OpenAi::new(openai_cfg(&fake, "gpt-4o").with_timeouts(short)).unwrap();

    // No headers at all: a silent vendor, under the first-token limit.
    fake.set_script(Script::Always(Behavior::HangBeforeHeaders));
    let t0 = Instant::now();
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::FirstByte), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));

    // Headers at once, first event too late: still the first-token limit.
    fake.set_script(Script::Always(Behavior::SlowFirstToken(
        Duration::from_secs(3),
    )));
    let e = match m.stream(&ChatRequest::user("hi"), &Context::new()).await {
        Ok(s) => drain(s).await.1.expect("first-token timeout"),
        Err(e) => e,
    };
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::FirstToken), "{e}");

    // Non-streaming: headers at once, body too late.
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::FirstToken), "{e}");

    // Content, then silence: the idle limit.
    fake.set_script(Script::Always(Behavior::StallMidStream { after_chunks: 2 }));
    let (events, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
    assert!(!text_of(&events).is_empty());
    let e = err.expect("idle timeout");
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::StreamIdle), "{e}");

    // The caller's deadline comes first: total.
    let m = OpenAi::new(openai_cfg(&fake, "gpt-4o")).unwrap();
    fake.set_script(Script::Always(Behavior::HangBeforeHeaders));
    let ctx = Context::new().with_timeout(Duration::from_millis(300));
    let e = m.chat(&ChatRequest::user("hi"), &ctx).await.unwrap_err();
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Total), "{e}");
}

#[tokio::test]
async fn a_slow_but_timely_first_token_is_fine() {
    let fake = openai_fake().await;
    fake.set_script(Script::Always(Behavior::Stream {
        first_token: Duration::from_millis(150),
        between: Duration::from_millis(20),
    }));
    let m = openai(&fake);
    let (events, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(text_of(&events), "Hello! How can I help you today?");
}

#[tokio::test]
async fn resets_are_network_errors() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    fake.set_script(Script::Always(Behavior::ResetBeforeResponse));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::Network, "{e}");
    assert_error_clean(&e);

    fake.set_script(Script::Always(Behavior::ResetMidStream { after_chunks: 2 }));
    let (events, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
    assert!(!text_of(&events).is_empty());
    let e = err.expect("reset");
    assert_eq!(e.kind(), ErrorKind::Network, "{e}");
}

/// A listener whose accept queue is full drops new SYNs, so connecting hangs: the connect
/// limit fires (loopback only, no traffic leaves the machine).
#[tokio::test]
async fn cancellation_stops_the_call() {
    let fake = openai_fake().await;
    fake.set_script(Script::Always(Behavior::HangBeforeHeaders));
    let m = openai(&fake);
    let ctx = Context::new();
    let token = ctx.cancellation().clone();
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel();
    };
    let req = ChatRequest::user("hi");
    let (r, ()) = tokio::join!(m.chat(&req, &ctx), canceller);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Cancelled);
    // An already cancelled context sends nothing.
    let before = fake.hits();
    let e = m.chat(&ChatRequest::user("hi"), &ctx).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert_eq!(fake.hits(), before);
}

/// Dropping a stream drops the connection: the vendor sees EOF. A tiny raw server plays the
/// vendor here because it must observe its socket.
#[tokio::test]
async fn embeddings_round_trip() {
    let fake = openai_fake().await;
    let m = OpenAi::new(openai_cfg(&fake, "text-embedding-3-small")).unwrap();
    let mut req = EmbeddingRequest::new(vec!["alpha".into(), "beta".into(), "gamma".into()]);
    req.dimensions = Some(16);
    let r = m.embed(&req, &Context::new()).await.unwrap();
    assert_eq!(r.vectors.len(), 3);
    assert!(r.vectors.iter().all(|v| v.len() == 16));
    assert_ne!(r.vectors[0], r.vectors[1]);
    assert_eq!(r.served_by.as_deref(), Some("openai"));
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(
        sent.json().unwrap(),
        json!({"model":"text-embedding-3-small","input":["alpha","beta","gamma"],"encoding_format":"float","dimensions":16})
    );
    fake.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    assert_eq!(
        m.embed(&req, &Context::new()).await.unwrap_err().kind(),
        ErrorKind::Overloaded
    );
}

#[tokio::test]
async fn keys_never_show_in_debug_or_errors() {
    let fake = openai_fake().await;
    let m = build_keeping_the_key(openai_cfg(&fake, "gpt-4o"), OpenAi::new);
    // A vendor (or proxy) that echoes the key back in its error message.
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
    );
    let json = vec![("content-type".into(), "application/json".into())];
    let e = assert_status_error_clean(&fake, &m, (401, body, json), ErrorKind::Auth).await;
    assert!(e.message().contains("[redacted]"), "{e}");
    let body = format!("<html>upstream rejected Authorization: Bearer {KEY}</html>");
    assert_status_error_clean(&fake, &m, (502, body, vec![]), ErrorKind::ServerError).await;
}

#[tokio::test]
async fn a_chain_falls_back_across_real_adapters() {
    let down = openai_fake().await;
    down.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let up = anthropic_fake().await;
    let chain = ripcord_core::Chain::builder()
        .link(openai(&down).named("primary"))
        .link(anthropic(&up).named("backup"))
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ChatRequest::user("hi")).await;
    assert_eq!(r.served_by(), "backup");
    assert!(r.degraded());
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::Overloaded)
    );
    assert_eq!((down.hits(), up.hits()), (1, 1));
}

/// A stream request answered with JSON: an error object is classified, a whole completion
/// (a server that ignored `stream: true`) is replayed as a well-formed stream.
#[tokio::test]
async fn stream_requests_answered_with_json() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    let json_ct = vec![("content-type".to_owned(), "application/json".to_owned())];
    fake.set_script(Script::Always(Behavior::Status {
        status: 200,
        body: r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#.into(),
        headers: json_ct.clone(),
    }));
    let e = m
        .stream(&ChatRequest::user("hi"), &Context::new())
        .await
        .err()
        .expect("error");
    assert_eq!(e.kind(), ErrorKind::QuotaExhausted);

    fake.set_script(Script::Always(Behavior::Status {
        status: 200,
        body: r#"{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#.into(),
        headers: json_ct,
    }));
    let events = stream_ok(&m, &ChatRequest::user("hi")).await;
    assert_eq!(text_of(&events), "whole answer");
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Finish {
            reason: FinishReason::Stop,
            ..
        })
    ));
}

/// A stream read to its end hands its connection back to the pool: two streams in a row use
/// one TCP connection. (A raw loopback server plays the vendor so it can count connections.)
/// A 429 sent as the first SSE event is the attempt's error: the chain falls back before the
/// caller sees anything (rule 1 of docs/pitfalls.md).
#[tokio::test]
async fn a_chain_stream_falls_back_on_a_first_event_error() {
    let primary = openai_fake().await;
    primary.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 0,
        error: VendorError::RateLimited { retry_after: None },
    }));
    let backup = anthropic_fake().await;
    let chain = ripcord_core::Chain::builder()
        .link(openai(&primary).named("primary"))
        .link(anthropic(&backup).named("backup"))
        .build()
        .unwrap();
    let s = chain
        .stream(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    let r = stream::collect(s).await.unwrap();
    assert_eq!(r.text(), "Hello! How can I help you today?");
    assert_eq!(r.served_by(), "backup");
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::RateLimited)
    );
}

/// Custom headers reach the vendor on both wires (a gateway key behind Helicone or Portkey),
/// never show in `Debug`, and a header ripcord sets itself is refused by name at build time.
#[tokio::test]
async fn custom_headers_reach_the_vendor_and_stay_secret() {
    const SECRET: &str = "Bearer pk-helicone-7d1e93";
    let fake = openai_fake().await;
    let cfg = openai_cfg(&fake, "gpt-4o")
        .with_header("Helicone-Auth", SECRET)
        .with_header("x-team", "search");
    assert!(!format!("{cfg:?}").contains("pk-helicone"), "{cfg:?}");
    let m = OpenAi::new(cfg).unwrap();
    chat_ok(&m, &ChatRequest::user("hi")).await;
    let afake = anthropic_fake().await;
    let a = ripcord_providers::Anthropic::new(
        anthropic_cfg(&afake, "claude-sonnet-4-5").with_header("Helicone-Auth", SECRET),
    )
    .unwrap();
    chat_ok(&a, &ChatRequest::user("hi")).await;
    for f in [&fake, &afake] {
        let req = &f.requests()[0];
        let got = |n: &str| {
            req.headers
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(got("helicone-auth").as_deref(), Some(SECRET));
    }
    assert_eq!(
        fake.requests()[0]
            .headers
            .iter()
            .find(|(k, _)| k == "x-team")
            .map(|(_, v)| v.as_str()),
        Some("search")
    );
    for (name, value) in [
        ("Authorization", "Bearer other"),
        ("bad name", "v"),
        ("x-ok", "line\nbreak"),
    ] {
        let e = OpenAi::new(openai_cfg(&fake, "gpt-4o").with_header(name, value)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest, "{e}");
        assert!(!e.to_string().contains("line\nbreak"), "{e}");
    }
}
