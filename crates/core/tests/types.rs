//! Serde round-trips and small behaviours of the public types.

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::stream::{self, Collector};
use ripcord_core::{
    Attempt, Capabilities, ChatModel, ChatRequest, ChatResponse, EmbeddingModel, ErrorKind,
    FinishReason, ImageSource, Locality, LocalityRequirement, Message, Price, Provenance,
    ResponseFormat, StreamEvent, ToolCall, ToolChoice, ToolSpec, Usage,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

#[allow(clippy::unwrap_used)] // a test helper: a failure is the test failing
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    let json = serde_json::to_string(v).unwrap();
    let back: T = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, v, "{json}");
}

#[test]
fn chat_request_round_trips_with_every_field() {
    let req = ChatRequest::new(vec![
        Message::system("Be brief."),
        Message::user("What is in this picture?").with_image(ImageSource::Url {
            url: "https://example.com/a.png".into(),
        }),
        Message::assistant_tool_calls(vec![ToolCall::new(
            "call_1",
            "weather",
            r#"{"city":"Paris"}"#,
        )]),
        Message::tool_result("call_1", "sunny"),
        Message::assistant("It is sunny."),
        Message::user("Thanks").with_image(ImageSource::Base64 {
            media_type: "image/png".into(),
            data: "iVBORw0K".into(),
        }),
    ])
    .with_tool(ToolSpec::new(
        "weather",
        "Weather by city",
        serde_json::json!({"type":"object","properties":{"city":{"type":"string"}}}),
    ))
    .with_tool_choice(ToolChoice::Tool {
        name: "weather".into(),
    })
    .with_response_format(ResponseFormat::JsonSchema {
        name: "w".into(),
        schema: serde_json::json!({"type":"object"}),
        strict: true,
    })
    .with_temperature(0.3)
    .with_max_tokens(99)
    .with_stop("\n\n")
    .with_seed(7);
    round_trip(&req);
    let needs = req.needs();
    assert!(needs.tools && needs.vision && needs.json);
    assert!(!ChatRequest::user("hi").needs().tools);
}

#[test]
fn chat_response_with_provenance_round_trips() {
    let mut r = ChatResponse::new("Paris")
        .with_model("gpt-4o-2024-08-06")
        .with_finish_reason(FinishReason::Other("weird_vendor_value".into()))
        .with_tool_calls(vec![ToolCall::new("c", "f", "{}")])
        .with_usage(
            Usage::new(10, 2)
                .with_cached_input(4)
                .priced(Some(&Price::per_million(2.5, 10.0).with_cached_input(1.25))),
        );
    let mut p = Provenance::default();
    p.served_by = Some(Arc::from("backup"));
    p.attempts = vec![
        Attempt::failure(
            "primary".into(),
            "gpt-4o".into(),
            &ripcord_core::Error::new(ErrorKind::Overloaded, "x")
                .with_status(ripcord_core::StatusCode(503)),
            Duration::from_millis(12),
        ),
        Attempt::success(
            "backup".into(),
            "claude".into(),
            Duration::from_micros(1500),
        ),
    ];
    p.degraded = true;
    p.notice = Some("served by a backup".into());
    r.provenance = p;
    round_trip(&r);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["provenance"]["attempts"][0]["error_kind"], "overloaded");
    assert_eq!(v["provenance"]["attempts"][0]["status"], 503);
    assert_eq!(v["provenance"]["attempts"][1]["latency_ms"], 1.5);
    assert_eq!(r.served_by(), "backup");
}

#[test]
fn latency_ms_rejects_negative_numbers() {
    let bad = r#"{"provider":"a","model":"m","error_kind":null,"status":null,"latency_ms":-1}"#;
    let e = serde_json::from_str::<Attempt>(bad).unwrap_err();
    assert!(e.to_string().contains("latency_ms"), "{e}");
}

#[test]
fn stream_events_and_capabilities_round_trip() {
    for ev in [
        StreamEvent::text("hi"),
        StreamEvent::ToolCallDelta {
            index: 1,
            id: Some("c".into()),
            name: Some("f".into()),
            arguments: "{\"a\"".into(),
        },
        StreamEvent::Usage {
            usage: Usage::new(1, 2),
        },
        StreamEvent::finish(FinishReason::Length),
        StreamEvent::Restarted {
            reason: ErrorKind::Timeout,
            message: "stalled".into(),
        },
        StreamEvent::Provenance {
            provenance: Box::default(),
        },
    ] {
        round_trip(&ev);
    }
    let caps = Capabilities::new(200_000, 8192)
        .with_tools(true)
        .with_price(Price::per_million(3.0, 15.0))
        .with_locality(Locality::cloud_in("anthropic", "us"));
    round_trip(&caps);
    round_trip(
        &Capabilities::new(8192, 512)
            .with_locality(Locality::Local)
            .with_price(Price::FREE),
    );
}

#[test]
fn cost_estimate_uses_the_cached_price_for_cached_tokens() {
    let price = Price::per_million(2.0, 8.0).with_cached_input(0.5);
    let u = Usage::new(1_000_000, 500_000)
        .with_cached_input(400_000)
        .priced(Some(&price));
    // 600k fresh * 2 + 400k cached * 0.5 + 500k out * 8 = 1.2 + 0.2 + 4.0
    assert!((u.cost_usd.unwrap() - 5.4).abs() < 1e-9);
    assert_eq!(Usage::new(5, 5).priced(None).cost_usd, None);
    assert_eq!(Price::FREE.estimate(1000, 1000), 0.0);
}

#[test]
fn locality_requirements() {
    let us = Locality::cloud_in("openai", "us");
    let cn = Locality::cloud_in("zhipu", "cn");
    let unknown = Locality::cloud("x");
    assert!(LocalityRequirement::Any.allows(&us));
    assert!(!LocalityRequirement::LocalOnly.allows(&us));
    assert!(LocalityRequirement::LocalOnly.allows(&Locality::Local));
    let eu_or_cn = LocalityRequirement::Regions(vec!["EU".into(), "cn".into()]);
    assert!(eu_or_cn.allows(&cn));
    assert!(!eu_or_cn.allows(&us));
    assert!(
        !eu_or_cn.allows(&unknown),
        "a cloud model of unknown region is not in any allowed region"
    );
    assert!(eu_or_cn.allows(&Locality::Local));
}

#[test]
fn collector_assembles_tool_calls_by_index_and_resets_on_restart() {
    let mut c = Collector::new();
    c.push(StreamEvent::text("discard me"));
    c.push(StreamEvent::Restarted {
        reason: ErrorKind::Network,
        message: "reset".into(),
    });
    c.push(StreamEvent::ToolCallDelta {
        index: 0,
        id: Some("a".into()),
        name: Some("f".into()),
        arguments: "{\"x\":".into(),
    });
    c.push(StreamEvent::ToolCallDelta {
        index: 1,
        id: Some("b".into()),
        name: Some("g".into()),
        arguments: "{}".into(),
    });
    c.push(StreamEvent::ToolCallDelta {
        index: 0,
        id: None,
        name: None,
        arguments: "1}".into(),
    });
    c.push(StreamEvent::text("kept"));
    c.push(StreamEvent::finish(FinishReason::ToolCalls));
    let r = c.finish().unwrap();
    assert_eq!(r.text(), "kept");
    assert_eq!(
        r.tool_calls,
        vec![
            ToolCall::new("a", "f", "{\"x\":1}"),
            ToolCall::new("b", "g", "{}")
        ]
    );
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn a_stream_without_its_finish_event_is_an_error_not_a_short_answer() {
    let s: ripcord_core::ChatStream = Box::pin(futures::stream::iter(vec![Ok(StreamEvent::text(
        "half an ans",
    ))]));
    let e = stream::collect(s).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidResponse);
    assert!(e.message().contains("truncated"));
}

#[test]
fn the_traits_are_object_safe() {
    fn _chat(_: Box<dyn ChatModel>, _: Arc<dyn ChatModel>) {}
    fn _embed(_: Box<dyn EmbeddingModel>, _: Arc<dyn EmbeddingModel>) {}
    fn _send_sync<T: Send + Sync>() {}
    _send_sync::<Box<dyn ChatModel>>();
    _send_sync::<ripcord_core::Chain>();
    _send_sync::<ripcord_core::Error>();
}

#[test]
fn error_is_small() {
    // One boxed pointer: a Result<ChatResponse> is no bigger because of the error.
    assert_eq!(
        std::mem::size_of::<ripcord_core::Error>(),
        std::mem::size_of::<usize>()
    );
}
