//! The success-path cost of the policies, next to the bare model.
//!
//! `cargo bench -p ripcord-resilience` prints ns per call for an instant in-memory model: bare,
//! behind each policy alone, behind the "fully decorated link" (retry + breaker + rate limit +
//! bulkhead), and behind the whole recommended stack. Limits are set so nothing ever waits:
//! what is measured is bookkeeping (locks, atomics, timers, provenance), not policy decisions.
//! The `redaction` group measures [`Redact`] on a cloud link: scanning a request without
//! personal data, and masking + restoring one with three values.

// A benchmark's setup may fail loudly.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ripcord_core::testing::FnModel;
use ripcord_core::{Capabilities, ChatModel, ChatRequest, ChatResponse, Context, ModelId, Usage};
use ripcord_resilience::*;

/// An instant model.
fn bare() -> impl ChatModel {
    FnModel::new(
        ModelId::new("bench", "instant"),
        Capabilities::new(128_000, 4096),
        |_: &ChatRequest, _: &Context| Ok(ChatResponse::new("ok").with_usage(Usage::new(10, 1))),
    )
}

fn roomy_limits() -> RateLimitPolicy {
    RateLimitPolicy::builder()
        .rpm(1_000_000_000)
        .tpm(2_000_000_000)
        .build()
        .expect("valid limits")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let req = ChatRequest::user("Why is the sky blue?").with_max_tokens(64);
    let ctx = Context::new()
        .with_timeout(Duration::from_secs(3600))
        .with_tenant("bench");

    let bare_model = bare();
    let models: Vec<(&str, Arc<dyn ChatModel>)> = vec![
        ("bare model", Arc::new(bare())),
        ("retry", Arc::new(bare().with_retry(RetryPolicy::default()))),
        (
            "breaker",
            Arc::new(bare().with_breaker(BreakerPolicy::default())),
        ),
        (
            "rate limit (rpm + tpm)",
            Arc::new(bare().with_rate_limit(roomy_limits())),
        ),
        (
            "bulkhead",
            Arc::new(bare().with_bulkhead(BulkheadPolicy::default())),
        ),
        (
            "timeout",
            Arc::new(bare().with_timeout(TimeoutPolicy::default())),
        ),
        (
            "decorated: retry + breaker + rate limit + bulkhead",
            Arc::new(
                bare()
                    .with_rate_limit(roomy_limits())
                    .with_retry(RetryPolicy::default())
                    .with_bulkhead(BulkheadPolicy::default())
                    .with_breaker(BreakerPolicy::default()),
            ),
        ),
        (
            "full recommended stack (no cache hits)",
            Arc::new(
                bare()
                    .with_timeout(TimeoutPolicy::default())
                    .with_rate_limit(roomy_limits())
                    .with_retry(RetryPolicy::default())
                    .with_bulkhead(BulkheadPolicy::default())
                    .with_budget(
                        BudgetPolicy::builder()
                            .tokens_per_window(u64::MAX / 2)
                            .build()
                            .expect("valid budget"),
                    )
                    .with_breaker(BreakerPolicy::default())
                    .with_health(HealthPolicy::default()),
            ),
        ),
    ];

    let mut g = c.benchmark_group("success path");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    for (name, model) in &models {
        g.bench_function(*name, |b| {
            b.to_async(&rt)
                .iter(|| async { black_box(model.chat(&req, &ctx).await) })
        });
    }
    g.finish();

    // Redaction: a cloud link (the default locality), without and with personal data.
    let redacted = bare().with_redaction(RedactPolicy::builder().build().expect("valid patterns"));
    let clean = ChatRequest::user(
        "Why is the sky blue? Please answer in two sentences, citing version 1.2.3 of the notes.",
    )
    .with_max_tokens(64);
    let personal = ChatRequest::user(
        "我是王芳，手机13812345678，邮箱wang.fang@example.com，身份证号110101199003074514，请回复。",
    )
    .with_max_tokens(64);
    let mut g = c.benchmark_group("redaction");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    for (name, req) in [
        ("bare model", &clean),
        ("redact: no personal data", &clean),
        ("redact: 3 values masked + restored", &personal),
    ] {
        g.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                if name == "bare model" {
                    black_box(bare_model.chat(req, &ctx).await)
                } else {
                    black_box(redacted.chat(req, &ctx).await)
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
