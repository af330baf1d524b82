//! The span and attribute mapping, checked in the SDK's in-memory exporter: chains of
//! scripted models, each link wrapped in `TracedModel`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

mod support;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, Status};
use ripcord_core::telemetry::{self, TracedModel};
use ripcord_core::testing::{ScriptedModel, text_stream};
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, Context, ErrorKind, Locality, StreamPolicy,
    ToolSpec, stream,
};
use support::*;

fn traced(m: ScriptedModel) -> Arc<dyn ChatModel> {
    Arc::new(TracedModel::new(m, telemetry::provider::OPENAI).with_server_address("api.openai.com"))
}

fn ask() -> ChatRequest {
    ChatRequest::user("Why is the sky blue?")
}

#[tokio::test]
async fn a_fallback_gives_a_chain_span_two_attempt_spans_and_a_fallback_event() {
    let cap = capture(|b| b);
    let chain = Chain::builder()
        .name("support")
        .link_arc(traced(
            ScriptedModel::new("primary").fail(ErrorKind::Overloaded),
        ))
        .link_arc(traced(
            ScriptedModel::new("backup").reply("Rayleigh scattering."),
        ))
        .build()
        .unwrap();
    let reply = chain.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(reply.served_by(), "backup");

    let spans = cap.spans();
    let chain_span = named_n(&spans, "chain support", 1);
    let chain_span = chain_span[0];
    assert_eq!(chain_span.span_kind, SpanKind::Internal);
    assert_eq!(
        attr_str(chain_span, "gen_ai.operation.name").as_deref(),
        Some("chat")
    );
    assert_eq!(
        attr(chain_span, "ripcord.chain.links"),
        Some(&Value::I64(2))
    );
    assert_eq!(
        attr_str(chain_span, "ripcord.served_by").as_deref(),
        Some("backup")
    );
    assert_values(
        chain_span,
        &[
            ("ripcord.degraded", Some(Value::Bool(true))),
            ("ripcord.static_reply", Some(Value::Bool(false))),
            ("ripcord.attempts", Some(Value::I64(2))),
            ("error.type", None),
        ],
    );
    assert_eq!(chain_span.status, Status::Unset);

    let fallback = event_attrs(chain_span, "ripcord.fallback");
    assert_eq!(fallback.len(), 1);
    assert_eq!(fallback[0]["ripcord.fallback.from"], "primary");
    assert_eq!(fallback[0]["ripcord.fallback.to"], "backup");
    assert_eq!(fallback[0]["error.type"], "overloaded");
    let failed = event_attrs(chain_span, "ripcord.link_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["ripcord.link"], "primary");
    assert_eq!(failed[0]["ripcord.attempt"], "1");

    let first = named(&spans, "chat primary-model");
    let second = named(&spans, "chat backup-model");
    assert_eq!((first.len(), second.len()), (1, 1));
    let (first, second) = (first[0], second[0]);
    for (s, model, n) in [(first, "primary-model", 1), (second, "backup-model", 2)] {
        assert_eq!(s.span_kind, SpanKind::Client);
        assert_eq!(
            s.parent_span_id,
            chain_span.span_context.span_id(),
            "attempts are children of the call"
        );
        assert_eq!(
            s.span_context.trace_id(),
            chain_span.span_context.trace_id()
        );
        assert_attrs(
            s,
            &[
                ("gen_ai.operation.name", "chat"),
                ("gen_ai.provider.name", "openai"),
                ("gen_ai.request.model", model),
            ],
        );
        assert_eq!(attr(s, "gen_ai.request.stream"), Some(&Value::Bool(false)));
        assert_eq!(
            attr_str(s, "server.address").as_deref(),
            Some("api.openai.com")
        );
        assert_eq!(attr(s, "ripcord.attempt"), Some(&Value::I64(n)));
        assert_eq!(
            attr(s, "gen_ai.system"),
            None,
            "the deprecated attribute is never written"
        );
    }
    assert_eq!(attr_str(first, "error.type").as_deref(), Some("overloaded"));
    assert!(
        matches!(&first.status, Status::Error { description } if description.contains("overloaded"))
    );
    assert_eq!(attr_str(first, "ripcord.link").as_deref(), Some("primary"));

    assert_eq!(attr(second, "error.type"), None);
    assert_eq!(second.status, Status::Unset);
    assert_eq!(
        attr_str(second, "gen_ai.response.model").as_deref(),
        Some("backup-model")
    );
    assert_eq!(
        attr(second, "gen_ai.response.finish_reasons"),
        Some(&Value::Array(
            vec![opentelemetry::StringValue::from("stop")].into()
        ))
    );
    assert!(matches!(attr(second, "gen_ai.usage.input_tokens"), Some(Value::I64(n)) if *n > 0));
    assert_eq!(
        attr(second, "gen_ai.usage.output_tokens"),
        Some(&Value::I64(1))
    );
    assert_eq!(
        attr(second, "gen_ai.input.messages"),
        None,
        "prompts are not recorded unless opted in"
    );
    assert_eq!(attr(second, "gen_ai.output.messages"), None);

    let resource = chain_span.instrumentation_scope.name();
    assert_eq!(resource, "ripcord");
}

#[tokio::test]
async fn the_static_reply_is_marked_on_the_chain_span_and_announced_by_an_event() {
    let cap = capture(|b| b);
    let chain = Chain::builder()
        .name("faq")
        .link_arc(traced(
            ScriptedModel::new("only").fail(ErrorKind::RateLimited),
        ))
        .static_reply("The assistant is busy.")
        .build()
        .unwrap();
    let reply = chain.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(reply.served_by(), "static");

    let spans = cap.spans();
    let chain_span = named(&spans, "chain faq")[0];
    assert_eq!(
        attr_str(chain_span, "ripcord.served_by").as_deref(),
        Some("static")
    );
    assert_values(
        chain_span,
        &[
            ("ripcord.static_reply", Some(Value::Bool(true))),
            ("ripcord.degraded", Some(Value::Bool(true))),
        ],
    );
    let ev = event_attrs(chain_span, "ripcord.static_reply");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["error.type"], "rate_limited");
    assert!(
        event_attrs(chain_span, "ripcord.fallback").is_empty(),
        "no link was tried after the failure"
    );
}

#[tokio::test]
async fn a_failed_call_sets_error_type_and_status_on_the_chain_span() {
    let cap = capture(|b| b);
    let chain = Chain::builder()
        .name("strict")
        .link_arc(traced(
            ScriptedModel::new("a").fail(ErrorKind::ContentFiltered),
        ))
        .link_arc(traced(ScriptedModel::new("b").reply("never")))
        .build()
        .unwrap();
    let e = chain.chat(&ask(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContentFiltered);

    let spans = cap.spans();
    let chain_span = named(&spans, "chain strict")[0];
    assert_eq!(
        attr_str(chain_span, "error.type").as_deref(),
        Some("content_filtered")
    );
    assert!(matches!(chain_span.status, Status::Error { .. }));
    assert_eq!(attr(chain_span, "ripcord.attempts"), Some(&Value::I64(1)));
    assert!(
        named(&spans, "chat b-model").is_empty(),
        "fail-fast: b is never called"
    );
}

#[tokio::test]
async fn a_stream_that_fails_after_commit_records_every_attempt_on_the_chain_span() {
    use ripcord_core::testing::StreamItem;
    use ripcord_core::{Error, StreamEvent};
    let cap = capture(|b| b);
    let chain = Chain::builder()
        .name("cut")
        .link_arc(traced(ScriptedModel::new("a").fail(ErrorKind::Overloaded)))
        .link_arc(traced(ScriptedModel::new("b").stream_items(vec![
            (
                Duration::from_millis(1),
                StreamItem::Event(StreamEvent::text("Once")),
            ),
            (
                Duration::from_millis(1),
                StreamItem::Error(Error::new(ErrorKind::Network, "stream truncated")),
            ),
        ])))
        .build()
        .unwrap();
    let s = chain.stream(&ask(), &Context::new()).await.unwrap();
    let e = stream::collect(s).await.unwrap_err();
    assert_eq!(e.attempts().len(), 2);

    let spans = cap.spans();
    let chain_span = named(&spans, "chain cut")[0];
    assert_eq!(
        attr_str(chain_span, "error.type").as_deref(),
        Some("network")
    );
    assert!(matches!(chain_span.status, Status::Error { .. }));
    // The same record the CLI prints and the gateway's headers carry.
    assert_values(
        chain_span,
        &[
            ("ripcord.attempts", Some(Value::I64(2))),
            ("ripcord.degraded", Some(Value::Bool(true))),
        ],
    );
}

#[tokio::test]
async fn skipped_links_are_events_with_the_reason() {
    let cap = capture(|b| b);
    let no_tools = ScriptedModel::new("small")
        .with_caps(Capabilities::new(8_000, 1_000).with_locality(Locality::Local));
    let chain = Chain::builder()
        .name("tools")
        .link_arc(traced(no_tools))
        .link_arc(traced(ScriptedModel::new("big").reply("called")))
        .build()
        .unwrap();
    let req = ChatRequest::user("weather?").with_tool(ToolSpec::new(
        "get_weather",
        "Current weather",
        serde_json::json!({"type": "object"}),
    ));
    chain.chat(&req, &Context::new()).await.unwrap();
    let spans = cap.spans();
    let chain_span = named(&spans, "chain tools")[0];
    let skipped = event_attrs(chain_span, "ripcord.link_skipped");
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["ripcord.link"], "small");
    assert_eq!(skipped[0]["ripcord.skip.reason"], "no_tools");
    assert!(named(&spans, "chat small-model").is_empty());
}

#[tokio::test]
async fn a_local_model_gets_an_internal_span() {
    let cap = capture(|b| b);
    let local = ScriptedModel::new("local")
        .with_caps(Capabilities::new(8_000, 1_000).with_locality(Locality::Local))
        .reply("hi");
    let m = TracedModel::new(local, telemetry::provider::LOCAL_ONNX);
    m.chat(&ask(), &Context::new()).await.unwrap();
    let spans = cap.spans();
    let s = named(&spans, "chat local-model")[0];
    assert_eq!(s.span_kind, SpanKind::Internal);
    assert_eq!(
        attr_str(s, "gen_ai.provider.name").as_deref(),
        Some("ripcord.local_onnx")
    );
    assert_eq!(attr(s, "server.address"), None);
}

#[tokio::test]
async fn streams_record_time_to_first_chunk_usage_and_a_restart() {
    let cap = capture(|b| b);
    let flaky = ScriptedModel::new("flaky").stream_items(vec![
        (
            Duration::from_millis(5),
            ripcord_core::testing::StreamItem::Event(ripcord_core::StreamEvent::text("Ray")),
        ),
        (
            Duration::ZERO,
            ripcord_core::testing::StreamItem::Error(ripcord_core::Error::new(
                ErrorKind::ServerError,
                "dropped",
            )),
        ),
    ]);
    let steady = ScriptedModel::new("steady").stream_items(text_stream(
        &["Rayleigh ", "scattering."],
        Duration::from_millis(2),
    ));
    let chain = Chain::builder()
        .name("streaming")
        .link_arc(traced(flaky))
        .link_arc(traced(steady))
        .stream_policy(StreamPolicy::Restart)
        .build()
        .unwrap();
    let s = chain.stream(&ask(), &Context::new()).await.unwrap();
    let reply = stream::collect(s).await.unwrap();
    assert_eq!(reply.text(), "Rayleigh scattering.");

    let spans = cap.spans();
    let chain_span = named(&spans, "chain streaming")[0];
    assert_eq!(
        attr(chain_span, "gen_ai.request.stream"),
        Some(&Value::Bool(true))
    );
    assert_eq!(
        attr_str(chain_span, "ripcord.served_by").as_deref(),
        Some("steady")
    );
    let restarted = event_attrs(chain_span, "ripcord.stream_restarted");
    assert_eq!(restarted.len(), 1);
    assert_eq!(restarted[0]["ripcord.fallback.from"], "flaky");
    assert_eq!(restarted[0]["ripcord.fallback.to"], "steady");
    assert_eq!(restarted[0]["error.type"], "server_error");

    let flaky_span = named(&spans, "chat flaky-model")[0];
    assert_eq!(
        attr(flaky_span, "gen_ai.request.stream"),
        Some(&Value::Bool(true))
    );
    assert_eq!(
        attr_str(flaky_span, "error.type").as_deref(),
        Some("server_error")
    );
    let steady_span = named(&spans, "chat steady-model")[0];
    assert_eq!(
        steady_span.parent_span_id,
        chain_span.span_context.span_id()
    );
    assert!(
        matches!(attr(steady_span, "gen_ai.response.time_to_first_chunk"), Some(Value::F64(t)) if *t > 0.0),
        "{:?}",
        steady_span.attributes
    );
    assert_eq!(
        attr(steady_span, "gen_ai.usage.output_tokens"),
        Some(&Value::I64(2))
    );
    assert_eq!(
        attr(steady_span, "gen_ai.response.finish_reasons"),
        Some(&Value::Array(
            vec![opentelemetry::StringValue::from("stop")].into()
        ))
    );
    assert!(steady_span.end_time >= flaky_span.end_time);
}

#[tokio::test]
async fn a_sampling_ratio_of_zero_exports_no_spans() {
    let cap = capture(|b| b.sampling_ratio(0.0));
    let chain = Chain::builder()
        .link_arc(traced(ScriptedModel::new("a").reply("hi")))
        .build()
        .unwrap();
    chain.chat(&ask(), &Context::new()).await.unwrap();
    assert!(cap.spans().is_empty());
    let m = cap.metrics();
    assert_eq!(
        points(&m, "ripcord.chain.calls").len(),
        1,
        "metrics see every call whatever the sampling"
    );
}

#[tokio::test]
async fn the_filter_decides_what_is_exported() {
    let cap = capture(|b| b.filter("warn"));
    let chain = Chain::builder()
        .link_arc(traced(ScriptedModel::new("a").reply("hi")))
        .build()
        .unwrap();
    chain.chat(&ask(), &Context::new()).await.unwrap();
    assert!(cap.spans().is_empty(), "ripcord's spans are at INFO");
}

#[tokio::test]
async fn keys_that_reach_a_span_by_mistake_are_redacted_on_export() {
    let cap = capture(|b| b.redact("collector-token-0042"));
    let span = tracing::info_span!(
        "user code",
        otel.name = "user sk-user-0123456789abcdef0123",
        leaked = "Authorization: Bearer sk-live-0123456789abcdef0123",
        token = "collector-token-0042",
        harmless = "chat gpt-4o",
    );
    span.in_scope(|| {
        tracing::info!(
            detail = "api_key=ABCDEFGH12345678",
            "vendor said sk-proj-abcdefghijklmnopqrstuvwx"
        );
    });
    drop(span);
    let spans = cap.spans();
    assert_eq!(spans.len(), 1);
    let dump = format!("{:?}", spans[0]);
    for secret in [
        "sk-user-0123456789abcdef0123",
        "sk-live-0123456789abcdef0123",
        "collector-token-0042",
        "ABCDEFGH12345678",
        "sk-proj-abcdefghijklmnopqrstuvwx",
    ] {
        assert!(!dump.contains(secret), "{secret} leaked: {dump}");
    }
    assert_eq!(
        attr_str(&spans[0], "harmless").as_deref(),
        Some("chat gpt-4o")
    );
    assert_eq!(spans[0].name, "user [REDACTED]");
}
