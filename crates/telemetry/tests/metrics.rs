//! Metrics recorded from ripcord's spans and events, read back from the SDK's in-memory
//! metric exporter.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use ripcord_core::telemetry::{self, TracedModel};
use ripcord_core::testing::{ScriptedModel, text_stream};
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, Context, ErrorKind, Price, stream,
};
use ripcord_telemetry::MetricsLayer;
use support::*;
use tracing_subscriber::layer::SubscriberExt;

fn traced(m: ScriptedModel) -> Arc<dyn ChatModel> {
    Arc::new(
        TracedModel::new(m, telemetry::provider::ANTHROPIC)
            .with_server_address("api.anthropic.com"),
    )
}

fn ask() -> ChatRequest {
    ChatRequest::user("Why is the sky blue?")
}

#[tokio::test]
async fn genai_client_metrics_follow_the_conventions() {
    let cap = capture(|b| b);
    let priced = ScriptedModel::new("claude")
        .with_caps(Capabilities::new(200_000, 8_000).with_price(Price::per_million(3.0, 15.0)))
        .reply("Rayleigh scattering.");
    let chain = Chain::builder()
        .name("main")
        .link_arc(traced(
            ScriptedModel::new("primary").fail(ErrorKind::Overloaded),
        ))
        .link_arc(traced(priced))
        .build()
        .unwrap();
    let reply = chain.chat(&ask(), &Context::new()).await.unwrap();
    let input = reply.usage.input_tokens;
    assert!(input > 0);
    let m = cap.metrics();

    let durations = points(&m, "gen_ai.client.operation.duration");
    assert_eq!(
        unit(&m, "gen_ai.client.operation.duration").as_deref(),
        Some("s")
    );
    let failed = point_with(
        &durations,
        &[
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.provider.name", "anthropic"),
            ("gen_ai.request.model", "primary-model"),
            ("server.address", "api.anthropic.com"),
            ("error.type", "overloaded"),
        ],
    )
    .expect("the failed attempt's duration");
    assert_eq!(failed.value, 1.0);
    let ok = point_with(
        &durations,
        &[
            ("gen_ai.request.model", "claude-model"),
            ("gen_ai.response.model", "claude-model"),
        ],
    )
    .expect("the served attempt's duration");
    assert_eq!(ok.value, 1.0);
    assert!(!ok.attrs.contains_key("error.type"));

    let tokens = points(&m, "gen_ai.client.token.usage");
    assert_eq!(
        unit(&m, "gen_ai.client.token.usage").as_deref(),
        Some("{token}")
    );
    let inp = point_with(
        &tokens,
        &[
            ("gen_ai.token.type", "input"),
            ("gen_ai.request.model", "claude-model"),
        ],
    )
    .unwrap();
    assert_eq!(inp.sum, input as f64);
    let out = point_with(&tokens, &[("gen_ai.token.type", "output")]).unwrap();
    assert_eq!(out.sum, 1.0);
    assert!(
        point_with(&tokens, &[("gen_ai.request.model", "primary-model")]).is_none(),
        "a failed attempt has no usage"
    );

    let requests = points(&m, "ripcord.requests");
    assert_eq!(requests.iter().map(|p| p.value).sum::<f64>(), 2.0);
    let errors = points(&m, "ripcord.errors");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].attrs["error.type"], "overloaded");
    assert_eq!(errors[0].attrs["gen_ai.provider.name"], "anthropic");
    assert_eq!(errors[0].attrs["ripcord.link"], "primary");

    let fallbacks = points(&m, "ripcord.fallbacks");
    let f = point_with(
        &fallbacks,
        &[
            ("ripcord.chain", "main"),
            ("ripcord.fallback.from", "primary"),
            ("ripcord.fallback.to", "claude"),
            ("error.type", "overloaded"),
        ],
    )
    .expect("fallback primary -> claude");
    assert_eq!(f.value, 1.0);

    let calls = points(&m, "ripcord.chain.calls");
    let c = point_with(
        &calls,
        &[
            ("ripcord.chain", "main"),
            ("ripcord.served_by", "claude"),
            ("ripcord.degraded", "true"),
        ],
    )
    .expect("chain call");
    assert_eq!(c.value, 1.0);

    let cost = points(&m, "ripcord.cost");
    assert_eq!(unit(&m, "ripcord.cost").as_deref(), Some("USD"));
    let want = Price::per_million(3.0, 15.0).cost(&reply.usage);
    assert!(
        (cost[0].sum - want).abs() < 1e-12,
        "{} vs {want}",
        cost[0].sum
    );

    let retries = points(&m, "ripcord.retries");
    assert_eq!(retries[0].value, 1.0, "one chain call observed");
    assert_eq!(retries[0].sum, 0.0, "no retries in it");
}

#[tokio::test]
async fn time_to_first_chunk_is_recorded_for_streams() {
    let cap = capture(|b| b);
    let chain = Chain::builder()
        .link_arc(traced(
            ScriptedModel::new("s")
                .stream_items(text_stream(&["a", "b"], Duration::from_millis(3))),
        ))
        .build()
        .unwrap();
    stream::collect(chain.stream(&ask(), &Context::new()).await.unwrap())
        .await
        .unwrap();
    let m = cap.metrics();
    let ttfc = points(&m, "gen_ai.client.operation.time_to_first_chunk");
    assert_eq!(ttfc.len(), 1);
    assert_eq!(ttfc[0].value, 1.0);
    assert!(ttfc[0].sum >= 0.003, "{}", ttfc[0].sum);
    assert_eq!(ttfc[0].attrs["gen_ai.request.model"], "s-model");
}

#[tokio::test]
async fn static_replies_and_skips_are_counted() {
    let cap = capture(|b| b);
    let small = ScriptedModel::new("small").with_caps(Capabilities::new(64, 16));
    let chain = Chain::builder()
        .name("faq")
        .link_arc(traced(small))
        .link_arc(traced(
            ScriptedModel::new("down").fail(ErrorKind::QuotaExhausted),
        ))
        .static_reply("busy")
        .build()
        .unwrap();
    let long = ChatRequest::user("word ".repeat(400));
    chain.chat(&long, &Context::new()).await.unwrap();
    chain.chat(&long, &Context::new()).await.unwrap();
    let m = cap.metrics();
    let statics = points(&m, "ripcord.static_replies");
    assert_eq!(
        point_with(&statics, &[("ripcord.chain", "faq")])
            .unwrap()
            .value,
        2.0
    );
    let skipped = points(&m, "ripcord.links.skipped");
    let s = point_with(
        &skipped,
        &[
            ("ripcord.chain", "faq"),
            ("ripcord.link", "small"),
            ("ripcord.skip.reason", "context_window"),
        ],
    )
    .unwrap();
    assert_eq!(s.value, 2.0);
    let calls = points(&m, "ripcord.chain.calls");
    assert_eq!(
        point_with(
            &calls,
            &[
                ("ripcord.served_by", "static"),
                ("ripcord.degraded", "true")
            ]
        )
        .unwrap()
        .value,
        2.0
    );
}

/// A model that behaves like a retry decorator around a flaky vendor: it announces a retry
/// the way `ripcord-resilience` does, then answers.
#[derive(Debug)]
struct RetriesOnce {
    inner: ScriptedModel,
}

#[ripcord_core::async_trait]
impl ripcord_core::Decorator for RetriesOnce {
    type Inner = ScriptedModel;
    fn inner(&self) -> &ScriptedModel {
        &self.inner
    }
    async fn decorated_chat(
        &self,
        req: &ChatRequest,
        ctx: &Context,
    ) -> ripcord_core::Result<ripcord_core::ChatResponse> {
        tracing::info!(
            target: "ripcord_resilience::retry",
            link = "retrying",
            attempt = 1u64,
            delay_ms = 10u64,
            error.type = "rate_limited",
            "ripcord.retry_scheduled"
        );
        tracing::info!(
            target: "ripcord_resilience::retry",
            link = "retrying",
            attempt = 2u64,
            delay_ms = 20u64,
            error.type = "rate_limited",
            "ripcord.retry_scheduled"
        );
        self.inner.chat(req, ctx).await
    }
}

#[tokio::test]
async fn retries_per_call_come_from_retry_events_inside_the_call() {
    let cap = capture(|b| b);
    let chain = Chain::builder()
        .name("r")
        .link(RetriesOnce {
            inner: ScriptedModel::new("retrying").reply("ok"),
        })
        .build()
        .unwrap();
    chain.chat(&ask(), &Context::new()).await.unwrap();
    let m = cap.metrics();
    let per_call = points(&m, "ripcord.retries");
    let p = point_with(&per_call, &[("ripcord.chain", "r")]).unwrap();
    assert_eq!((p.value, p.sum), (1.0, 2.0), "one call with two retries");
    let scheduled = points(&m, "ripcord.retries.scheduled");
    let s = point_with(
        &scheduled,
        &[("ripcord.link", "retrying"), ("error.type", "rate_limited")],
    )
    .unwrap();
    assert_eq!(s.value, 2.0);
}

#[test]
fn breaker_state_and_time_open_come_from_transition_events() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let now = Arc::new(Mutex::new(Instant::now()));
    let clock_now = now.clone();
    let layer = MetricsLayer::with_clock(
        &provider.meter("ripcord"),
        Arc::new(move || *clock_now.lock().unwrap()),
    );
    let advance = |d: Duration| {
        let mut t = now.lock().unwrap();
        *t += d;
    };
    let transition = |from: &str, to: &str| {
        tracing::info!(target: "ripcord_resilience::breaker", link = "openai", from, to, "ripcord.breaker_transition");
    };
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        transition("closed", "open");
        advance(Duration::from_secs(30));
        transition("open", "half_open");
        transition("half_open", "open");
        advance(Duration::from_millis(1500));
        transition("open", "half_open");
        transition("half_open", "closed");
        // Not ripcord's: ignored.
        tracing::info!(target: "someone_else", link = "openai", from = "closed", to = "open", "ripcord.breaker_transition");
    });
    provider.force_flush().unwrap();
    let m = exporter.get_finished_metrics().unwrap().pop().unwrap();
    let state = points(&m, "ripcord.breaker.state");
    assert_eq!(
        point_with(&state, &[("ripcord.link", "openai")])
            .unwrap()
            .value,
        0.0,
        "closed again"
    );
    let open_time = points(&m, "ripcord.breaker.open_time");
    let t = point_with(&open_time, &[("ripcord.link", "openai")]).unwrap();
    assert!((t.sum - 31.5).abs() < 1e-9, "{}", t.sum);
    let transitions = points(&m, "ripcord.breaker.transitions");
    assert_eq!(transitions.iter().map(|p| p.value).sum::<f64>(), 5.0);
    assert_eq!(
        point_with(&transitions, &[("from", "half_open"), ("to", "open")])
            .unwrap()
            .value,
        1.0
    );
}

#[test]
fn an_outage_of_shared_state_is_counted_once_and_the_gauge_follows_it() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let layer = MetricsLayer::new(&provider.meter("ripcord"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        // What ripcord-redis says when Redis goes away and comes back.
        tracing::warn!(target: "ripcord_redis::state", backend = "redis", reason = "timed out", "ripcord.state_degraded");
        tracing::info!(target: "ripcord_redis::state", backend = "redis", "ripcord.state_restored");
        tracing::warn!(target: "ripcord_redis::state", backend = "redis", reason = "refused", "ripcord.state_degraded");
    });
    provider.force_flush().unwrap();
    let m = exporter.get_finished_metrics().unwrap().pop().unwrap();
    let outages = points(&m, "ripcord.state.degradations");
    assert_eq!(
        point_with(&outages, &[("ripcord.state.backend", "redis")])
            .unwrap()
            .value,
        2.0
    );
    let degraded = points(&m, "ripcord.state.degraded");
    assert_eq!(
        point_with(&degraded, &[("ripcord.state.backend", "redis")])
            .unwrap()
            .value,
        1.0,
        "degraded again after the second outage"
    );
}

/// A revoked key fails every call: the chain announces it once per link and kind per
/// interval, never once per request, and the next interval alerts again (fake time).
#[tokio::test(start_paused = true)]
async fn alert_kinds_raise_one_alert_per_link_and_kind_per_interval() {
    use ripcord_core::alert::AlertGate;
    let cap = capture(|b| b);
    let mut revoked = ScriptedModel::new("primary");
    let mut broke = ScriptedModel::new("backup");
    for _ in 0..40 {
        revoked = revoked.fail(ErrorKind::Auth);
        broke = broke.fail(ErrorKind::QuotaExhausted);
    }
    let chain = Chain::builder()
        .name("alerting")
        .link_arc(traced(revoked))
        .link_arc(traced(broke))
        .link_arc(traced(
            ScriptedModel::new("overloaded").fail(ErrorKind::Overloaded),
        ))
        .static_reply("busy")
        .alert_gate(Arc::new(AlertGate::new(Duration::from_secs(60))))
        .build()
        .unwrap();
    for _ in 0..20 {
        let reply = chain.chat(&ask(), &Context::new()).await.unwrap();
        assert_eq!(reply.served_by(), "static");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let alerts = |cap: &support::Captured, link: &str, kind: &str| {
        let m = cap.metrics();
        let pts = points(&m, "ripcord.alerts");
        point_with(&pts, &[("ripcord.link", link), ("error.type", kind)]).map(|p| p.value)
    };
    assert_eq!(alerts(&cap, "primary", "auth"), Some(1.0));
    assert_eq!(alerts(&cap, "backup", "quota_exhausted"), Some(1.0));
    // Overloaded is weather, not an alert.
    let m = cap.metrics();
    assert!(
        points(&m, "ripcord.alerts")
            .iter()
            .all(|p| p.attrs.get("error.type").map(String::as_str) != Some("overloaded")),
        "overloaded must not alert"
    );
    // 20 calls so far at 1 s apart; the window opens again 60 s after the first alert.
    tokio::time::sleep(Duration::from_secs(41)).await;
    for _ in 0..20 {
        chain.chat(&ask(), &Context::new()).await.unwrap();
    }
    assert_eq!(alerts(&cap, "primary", "auth"), Some(2.0));
    assert_eq!(alerts(&cap, "backup", "quota_exhausted"), Some(2.0));
}

#[tokio::test]
async fn skipped_stream_events_are_counted_per_link() {
    use ripcord_chaos::{Behavior, FakeVendor, Script, Wire};
    use ripcord_providers::{OpenAi, OpenAiConfig};
    let cap = capture(|b| b);
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    vendor.set_script(Script::Always(Behavior::MalformedEvents { count: 2 }));
    let cfg = OpenAiConfig::new("gpt-4o", "sk-test-metrics".to_owned())
        .with_base_url(format!("{}/v1", vendor.base_url()));
    let chain = Chain::builder()
        .name("s")
        .link(OpenAi::new(cfg).unwrap().named("bumpy"))
        .build()
        .unwrap();
    let reply = stream::collect(chain.stream(&ask(), &Context::new()).await.unwrap())
        .await
        .unwrap();
    assert!(!reply.text().is_empty());
    let m = cap.metrics();
    let skipped = points(&m, "ripcord.stream.events_skipped");
    let p = point_with(&skipped, &[("ripcord.link", "bumpy")]).unwrap();
    assert_eq!(p.value, 2.0);
}

#[tokio::test]
async fn consecutive_failures_count_up_per_link_and_reset_on_a_success() {
    let cap = capture(|b| b);
    let flaky = ScriptedModel::new("flaky")
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::Timeout)
        .fail(ErrorKind::ServerError)
        .reply("ok");
    let chain = Chain::builder()
        .name("streak")
        .link_arc(traced(flaky))
        .static_reply("busy")
        .build()
        .unwrap();
    for _ in 0..3 {
        chain.chat(&ask(), &Context::new()).await.unwrap();
    }
    let gauge = |m: &_| {
        point_with(
            &points(m, "ripcord.link.consecutive_failures"),
            &[("ripcord.link", "flaky")],
        )
        .unwrap()
        .value
    };
    assert_eq!(gauge(&cap.metrics()), 3.0);
    chain.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(gauge(&cap.metrics()), 0.0);
}

#[tokio::test]
async fn a_call_every_link_failed_without_a_static_reply_is_counted_apart() {
    let cap = capture(|b| b);
    let down = Chain::builder()
        .name("bare")
        .link_arc(traced(ScriptedModel::new("a").fail(ErrorKind::ServerError)))
        .link_arc(traced(ScriptedModel::new("b").fail(ErrorKind::Overloaded)))
        .build()
        .unwrap();
    down.chat(&ask(), &Context::new()).await.unwrap_err();
    // A request the first link refuses as invalid stops the chain: not an outage.
    let refused = Chain::builder()
        .name("refused")
        .link_arc(traced(
            ScriptedModel::new("c").fail(ErrorKind::InvalidRequest),
        ))
        .link_arc(traced(ScriptedModel::new("d").reply("never")))
        .build()
        .unwrap();
    refused.chat(&ask(), &Context::new()).await.unwrap_err();
    // A static reply is its own series.
    let covered = Chain::builder()
        .name("covered")
        .link_arc(traced(ScriptedModel::new("e").fail(ErrorKind::ServerError)))
        .static_reply("busy")
        .build()
        .unwrap();
    covered.chat(&ask(), &Context::new()).await.unwrap();
    let m = cap.metrics();
    let exhausted = points(&m, "ripcord.chain.exhausted");
    assert_eq!(exhausted.len(), 1, "{exhausted:?}");
    let p = point_with(
        &exhausted,
        &[("ripcord.chain", "bare"), ("error.type", "overloaded")],
    )
    .unwrap();
    assert_eq!(p.value, 1.0);
}
