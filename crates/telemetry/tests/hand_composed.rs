//! A library user who composes a link by hand — an adapter inside a retry decorator, no chain,
//! no CLI — gets one attempt span per attempt: the HTTP adapters record their own spans, so no
//! `TracedModel` is needed around them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

mod support;

use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status};
use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_core::{ChatModel, ChatRequest, Context, stream};
use ripcord_providers::{Anthropic, AnthropicConfig, OpenAi, OpenAiConfig};
use ripcord_resilience::{ChatModelExt, RetryPolicy};
use support::*;

fn retry() -> RetryPolicy {
    // Real time (HTTP): a short backoff keeps the retry quick.
    RetryPolicy::builder()
        .max_attempts(3)
        .base_delay(Duration::from_millis(1))
        .max_delay(Duration::from_millis(5))
        .build()
        .unwrap()
}

fn one_error_then_ok() -> Script {
    Script::Sequence(vec![
        Behavior::Error(VendorError::ServerError),
        Behavior::Ok,
    ])
}

#[tokio::test]
async fn an_openai_adapter_inside_a_retry_records_one_attempt_span_per_attempt() {
    let cap = capture(|b| b);
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    vendor.set_script(one_error_then_ok());
    let cfg = OpenAiConfig::new("gpt-4o", "sk-test".to_owned())
        .with_base_url(format!("{}/v1", vendor.base_url()));
    let link = OpenAi::new(cfg)
        .unwrap()
        .named("primary")
        .with_retry(retry());

    let reply = link
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert!(!reply.text().is_empty());

    let spans = cap.spans();
    let attempts = named_n(&spans, "chat gpt-4o", 2);
    for s in &attempts {
        assert_eq!(s.span_kind, SpanKind::Client);
        assert_attrs(
            s,
            &[
                ("gen_ai.provider.name", "openai"),
                ("server.address", "127.0.0.1"),
                ("ripcord.link", "primary"),
            ],
        );
    }
    // The spans end in the order the attempts did: the failed one first.
    assert!(matches!(attempts[0].status, Status::Error { .. }));
    assert_eq!(
        attr_str(attempts[0], "error.type").as_deref(),
        Some("server_error")
    );
    assert_eq!(attr(attempts[1], "error.type"), None);
    assert!(attr(attempts[1], "gen_ai.usage.output_tokens").is_some());
}

#[tokio::test]
async fn an_anthropic_stream_composed_by_hand_records_its_attempt_span_until_it_ends() {
    let cap = capture(|b| b);
    let vendor = FakeVendor::start(Wire::Anthropic).await.unwrap();
    vendor.set_script(one_error_then_ok());
    let cfg = AnthropicConfig::new("claude-sonnet-4", "sk-ant-test".to_owned())
        .with_base_url(vendor.base_url());
    let link = Anthropic::new(cfg)
        .unwrap()
        .named("claude")
        .with_retry(retry());

    let s = link
        .stream(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    let reply = stream::collect(s).await.unwrap();
    assert!(!reply.text().is_empty());

    let spans = cap.spans();
    let attempts = named_n(&spans, "chat claude-sonnet-4", 2);
    for s in &attempts {
        assert_attrs(
            s,
            &[
                ("gen_ai.provider.name", "anthropic"),
                ("gen_ai.request.stream", "true"),
            ],
        );
    }
    assert!(matches!(attempts[0].status, Status::Error { .. }));
    // The served stream's span stayed open while it was read: it saw the first chunk.
    assert!(attr(attempts[1], "gen_ai.response.time_to_first_chunk").is_some());
}
