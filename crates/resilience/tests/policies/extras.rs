//! Hedging, validation, cache and passive health.

use std::sync::Arc;

use ripcord_core::testing::{ScriptedModel, StreamItem};
use ripcord_core::{
    ChatModel, ChatRequest, Context, ErrorKind, FinishReason, ResponseFormat, StreamEvent,
};
use ripcord_resilience::{
    BreakerPolicy, CachePolicy, ChatModelExt, HealthPolicy, HealthStatus, HedgeDelay, HedgePolicy,
    Jitter, JsonValidator, RetryPolicy, validator_fn,
};
use tokio::time::Instant;

use crate::support::{chat_ok, ms, p95_hedge, req, scripted, secs, stream_all};

fn hedge_after(d: u64) -> HedgePolicy {
    HedgePolicy::builder()
        .delay(HedgeDelay::Fixed(ms(d)))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_first_success_wins_and_the_loser_is_cancelled() {
    let primary = Arc::new(scripted("primary").reply_after("slow", secs(5)));
    let backup = Arc::new(scripted("backup").reply_after("fast", ms(300)));
    let m = primary.clone().with_hedge(backup.clone(), hedge_after(500));
    let start = Instant::now();
    let resp = chat_ok(&m).await;
    assert_eq!((resp.text(), resp.served_by()), ("fast", "backup"));
    assert_eq!(start.elapsed(), ms(800));
    assert_eq!(primary.peak_concurrency(), 1);
    // The primary's call was dropped: nothing is in flight any more.
    tokio::task::yield_now().await;
    let kinds: Vec<_> = resp
        .provenance
        .attempts
        .iter()
        .map(|a| (a.provider.to_string(), a.error_kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("primary".into(), Some(ErrorKind::Cancelled)),
            ("backup".into(), None)
        ]
    );
    assert!(resp.degraded());
    assert_eq!((m.hedges_started(), m.hedges_won()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_fast_primary_is_never_hedged_nor_a_request_that_is_not_retry_safe() {
    let backup = Arc::new(scripted("backup"));
    let m = scripted("primary")
        .reply_after("quick", ms(100))
        .with_hedge(backup.clone(), hedge_after(500));
    assert_eq!(chat_ok(&m).await.text(), "quick");
    let slow = scripted("primary")
        .reply_after("slow", secs(2))
        .with_hedge(backup.clone(), hedge_after(500));
    let resp = slow
        .chat(&req(), &Context::new().with_retry_safe(false))
        .await
        .unwrap();
    assert_eq!(resp.text(), "slow");
    assert_eq!(backup.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failing_side_waits_for_the_other() {
    let primary = ScriptedModel::new("primary").fail_with(
        ripcord_core::Error::new(ErrorKind::ServerError, "boom"),
        secs(1),
    );
    let backup = scripted("backup").reply_after("saved", secs(2));
    let m = primary.with_hedge(backup, hedge_after(500));
    let start = Instant::now();
    let resp = chat_ok(&m).await;
    assert_eq!(resp.text(), "saved");
    assert_eq!(start.elapsed(), ms(2500));
    assert_eq!(
        resp.provenance.attempts[0].error_kind,
        Some(ErrorKind::ServerError)
    );
}

#[tokio::test(start_paused = true)]
async fn the_p95_delay_follows_the_primarys_latency() {
    let policy = p95_hedge(secs(2), 5).build().unwrap();
    let m = scripted("primary")
        .reply_after("ok", ms(120))
        .with_hedge(scripted("backup"), policy);
    assert_eq!(m.current_delay(), secs(2));
    for _ in 0..5 {
        chat_ok(&m).await;
    }
    assert_eq!(m.current_delay(), ms(120));
}

#[tokio::test(start_paused = true)]
async fn hedged_streams_race_to_their_first_content() {
    let m = scripted("primary").reply_after("slow", secs(3)).with_hedge(
        scripted("backup").reply_after("fast", ms(100)),
        hedge_after(200),
    );
    let events = stream_all(&m).await;
    let StreamEvent::Provenance { provenance } = events[0].as_ref().unwrap() else {
        panic!("{events:?}")
    };
    assert_eq!(provenance.served_by.as_deref(), Some("backup"));
    let resp = ripcord_core::stream::collect(Box::pin(futures::stream::iter(events)))
        .await
        .unwrap();
    assert_eq!(resp.text(), "fast");
}

#[tokio::test(start_paused = true)]
async fn a_failed_validation_is_retried_like_any_failure() {
    let retry = RetryPolicy::builder()
        .base_delay(ms(10))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let m = scripted("a")
        .reply("Sure! Here it is: {\"a\": 1}")
        .reply("{\"a\": 1}")
        .with_validation(JsonValidator)
        .with_retry(retry)
        .with_breaker(
            BreakerPolicy::builder()
                .consecutive_failures(1)
                .build()
                .unwrap(),
        );
    let json = ChatRequest::user("JSON please").with_response_format(ResponseFormat::Json);
    let resp = m.chat(&json, &Context::new()).await.unwrap();
    assert_eq!(resp.text(), "{\"a\": 1}");
    assert_eq!(
        resp.provenance.attempts[0].error_kind,
        Some(ErrorKind::InvalidResponse)
    );
    assert_eq!(m.snapshot().failures, 0);
}

#[tokio::test(start_paused = true)]
async fn a_streamed_answer_is_validated_at_its_finish() {
    let m = scripted("a")
        .stream_items(vec![
            (ms(0), StreamItem::Event(StreamEvent::text("not json"))),
            (
                ms(0),
                StreamItem::Event(StreamEvent::finish(FinishReason::Stop)),
            ),
        ])
        .with_validation(validator_fn(|_req, resp| {
            serde_json::from_str::<serde_json::Value>(resp.text())
                .map(|_| ())
                .map_err(|e| e.to_string())
        }));
    let items = stream_all(&m).await;
    assert!(matches!(items[0], Ok(StreamEvent::TextDelta { .. })));
    let err = items[1].as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidResponse);
    assert_eq!(items.len(), 2, "the finish was replaced by the error");
}

#[tokio::test(start_paused = true)]
async fn the_cache_serves_fresh_entries_per_tenant_and_forgets_after_the_ttl() {
    let m = scripted("a")
        .reply("one")
        .reply("two")
        .reply("three")
        .with_cache(CachePolicy::builder().ttl(secs(60)).build().unwrap());
    let acme = Context::new().with_tenant("acme");
    assert_eq!(m.chat(&req(), &acme).await.unwrap().text(), "one");
    let hit = m.chat(&req(), &acme).await.unwrap();
    assert_eq!(hit.text(), "one");
    assert!(hit.provenance.attempts.is_empty());
    assert_eq!(
        m.chat(&req(), &Context::new().with_tenant("globex"))
            .await
            .unwrap()
            .text(),
        "two"
    );
    tokio::time::sleep(secs(61)).await;
    assert_eq!(m.chat(&req(), &acme).await.unwrap().text(), "three");
    let stats = m.stats();
    assert_eq!((stats.hits, stats.misses), (1, 3));
    // Streams replay a cached answer.
    let replay = ripcord_core::stream::collect(m.stream(&req(), &acme).await.unwrap())
        .await
        .unwrap();
    assert_eq!(replay.text(), "three");
    assert_eq!(m.get_ref().calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn degraded_and_static_answers_are_never_cached() {
    let chain = ripcord_core::Chain::builder()
        .link(scripted("primary").fail(ErrorKind::Overloaded))
        .link(scripted("backup").reply("backup answer"))
        .build()
        .unwrap();
    let m = chain.with_cache(CachePolicy::default());
    for _ in 0..3 {
        let resp = chat_ok(&m).await;
        assert!(resp.degraded());
    }
    assert_eq!(m.stats().entries, 0);
    let only_static = ripcord_core::Chain::builder()
        .link(scripted("primary").fail(ErrorKind::Overloaded))
        .static_reply("Busy.")
        .build()
        .unwrap()
        .with_cache(CachePolicy::default());
    chat_ok(&only_static).await;
    assert_eq!(only_static.stats().entries, 0);
}

#[tokio::test(start_paused = true)]
async fn health_tracks_latency_errors_and_the_breaker() {
    let guarded = scripted("a")
        .reply_after("ok", ms(100))
        .reply_after("ok", ms(200))
        .fail(ErrorKind::InvalidRequest)
        .fail(ErrorKind::ServerError)
        .with_breaker(
            BreakerPolicy::builder()
                .consecutive_failures(2)
                .build()
                .unwrap(),
        );
    let policy = HealthPolicy::builder()
        .alpha(0.5)
        .breaker(guarded.handle())
        .build()
        .unwrap();
    let m = guarded.with_health(policy);
    assert_eq!(m.snapshot().status, HealthStatus::Unknown);
    chat_ok(&m).await;
    chat_ok(&m).await;
    let snap = m.snapshot();
    assert_eq!(
        (snap.status, snap.latency_ewma_ms),
        (HealthStatus::Healthy, Some(150.0))
    );
    let _ = m.chat(&req(), &Context::new()).await; // caller-side: not counted
    assert_eq!(m.snapshot().error_rate, 0.0);
    let _ = m.chat(&req(), &Context::new()).await;
    let snap = m.snapshot();
    assert_eq!(
        (snap.error_rate, snap.failures, snap.status),
        (0.5, 1, HealthStatus::Unhealthy)
    );
    let _ = m.chat(&req(), &Context::new()).await;
    let snap = m.snapshot();
    assert_eq!(
        snap.breaker.as_ref().unwrap().state,
        ripcord_resilience::BreakerState::Open
    );
    assert_eq!(snap.status, HealthStatus::Unhealthy);
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["status"], "unhealthy");
    assert_eq!(json["breaker"]["state"], "open");
}
