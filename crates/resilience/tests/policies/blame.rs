//! Whose fault a failure is: long streams, starved attempts, probes judged at first content and
//! limits checked on every poll. All on paused time.

use std::sync::Arc;

use futures::StreamExt;
use ripcord_core::testing::{FnModel, ScriptedModel, StreamItem, drain};
use ripcord_core::{
    Chain, ChatModel, ChatStream, Context, Error, ErrorKind, Fault, FinishReason, SkipReason,
    StreamEvent, TimeoutPhase, Usage,
};
use ripcord_resilience::{
    Breaker, BreakerHandle, BreakerPolicy, BreakerState, ChatModelExt, Health, HealthHandle,
    HealthPolicy, Timeout, TimeoutPolicy,
};
use tokio::time::Instant;

use crate::support::{
    breaker, chat_err, chat_ok, chat_within, last_err_kind, ms, open_stream, p95_hedge, req, secs,
    spawn_chat, stream_all,
};

/// `n` text events one second apart, then usage and finish.
fn one_per_second(n: usize) -> Vec<(std::time::Duration, StreamItem)> {
    let mut v: Vec<_> = (0..n)
        .map(|i| {
            (
                secs(1),
                StreamItem::Event(StreamEvent::text(format!("{i} "))),
            )
        })
        .collect();
    v.push((
        ms(0),
        StreamItem::Event(StreamEvent::Usage {
            usage: Usage::new(5, n as u64),
        }),
    ));
    v.push((
        ms(0),
        StreamItem::Event(StreamEvent::finish(FinishReason::Stop)),
    ));
    v
}

fn trip_on_first() -> BreakerPolicy {
    breaker(1, secs(30))
}

fn idle(d: std::time::Duration) -> TimeoutPolicy {
    TimeoutPolicy::builder().idle(d).build().unwrap()
}

fn text_len(events: &[Result<StreamEvent, Error>]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Ok(StreamEvent::TextDelta { .. })))
        .count()
}

/// A 40 s stream of one event a second (its model bounding itself or not) behind an idle
/// limit of 5 s, a breaker that trips on the first failure, and health; with the handles of
/// the breaker and the health record.
fn forty_second_stream(
    bounds_itself: bool,
) -> (
    Health<Breaker<Timeout<ScriptedModel>>>,
    BreakerHandle,
    HealthHandle,
) {
    let mut model = ScriptedModel::new("a").stream_items(one_per_second(40));
    if bounds_itself {
        model = model.bounding_itself();
    }
    let breaker = model
        .with_timeout(idle(secs(5)))
        .with_breaker(trip_on_first());
    let bh = breaker.handle();
    let health = breaker.with_health(HealthPolicy::default());
    let hh = health.handle();
    (health, bh, hh)
}

#[tokio::test(start_paused = true)]
async fn a_stream_of_40_s_under_a_15_s_deadline_completes_and_counts_as_a_success() {
    for bounds_itself in [false, true] {
        let (health, bh, hh) = forty_second_stream(bounds_itself);
        let chain = Chain::builder()
            .link(health)
            .deadline(secs(15))
            .build()
            .unwrap();
        let t0 = Instant::now();
        let events = stream_all(&chain).await;
        assert_eq!(t0.elapsed(), secs(40));
        assert_eq!(text_len(&events), 40, "bounds_itself = {bounds_itself}");
        assert!(events.iter().all(Result::is_ok), "{events:?}");
        let b = bh.snapshot();
        assert_eq!(
            (b.state, b.successes, b.failures),
            (BreakerState::Closed, 1, 0)
        );
        let h = hh.snapshot();
        assert_eq!((h.successes, h.failures), (1, 0));
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_by_the_callers_own_deadline_is_not_the_links_failure() {
    for bounds_itself in [false, true] {
        let (health, bh, hh) = forty_second_stream(bounds_itself);
        let chain = Chain::builder().link(health).build().unwrap();
        let ctx = Context::new().with_timeout(secs(20));
        let events = drain(chain.stream(&req(), &ctx).await.unwrap()).await;
        let last = events.last().unwrap().as_ref().unwrap_err();
        assert!(last.is_deadline_cut(), "{last:?}");
        assert_eq!(text_len(&events), 19);
        let b = bh.snapshot();
        assert_eq!(
            b.state,
            BreakerState::Closed,
            "bounds_itself = {bounds_itself}"
        );
        assert_eq!(b.failures, 0);
        assert_eq!(hh.snapshot().failures, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_consumer_that_stops_reading_is_not_taken_for_a_silent_vendor() {
    let breaker = ScriptedModel::new("a")
        .stream_items(one_per_second(6))
        .with_timeout(idle(secs(2)))
        .with_breaker(trip_on_first());
    let bh = breaker.handle();
    let mut s = open_stream(&breaker).await;
    let mut got = 0;
    while let Some(ev) = s.next().await {
        ev.unwrap();
        got += 1;
        if got == 2 {
            // The consumer looks away for longer than the idle limit.
            tokio::time::sleep(secs(30)).await;
        }
    }
    assert_eq!(got, 8);
    assert_eq!(bh.snapshot().failures, 0);
    assert_eq!(bh.snapshot().successes, 1);
}

#[tokio::test(start_paused = true)]
async fn a_silent_vendor_after_first_content_still_fails_on_its_idle_limit() {
    let breaker = ScriptedModel::new("a")
        .stream_items(vec![
            (ms(10), StreamItem::Event(StreamEvent::text("Once"))),
            (ms(0), StreamItem::Stall),
        ])
        .with_timeout(idle(secs(2)))
        .with_breaker(trip_on_first());
    let bh = breaker.handle();
    let events = stream_all(&breaker).await;
    let e = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::StreamIdle));
    assert_eq!(
        bh.snapshot().state,
        BreakerState::Open,
        "a stalled vendor is its fault"
    );
}

#[tokio::test(start_paused = true)]
async fn a_link_reached_with_less_than_min_attempt_is_skipped_with_reason_deadline() {
    let slow = ScriptedModel::new("slow")
        .fail_with(Error::new(ErrorKind::ServerError, "boom"), ms(14_600));
    let next = Arc::new(ScriptedModel::new("next"));
    let breaker = Arc::clone(&next).with_breaker(trip_on_first());
    let bh = breaker.handle();
    let chain = Chain::builder()
        .link(slow)
        .link(breaker)
        .deadline(secs(15))
        .min_attempt(secs(1))
        .static_reply("unavailable")
        .build()
        .unwrap();
    let resp = chat_ok(&chain).await;
    assert!(resp.provenance.static_reply);
    assert_eq!(next.calls(), 0, "never attempted");
    assert!(
        resp.provenance
            .skipped
            .iter()
            .any(|s| &*s.provider == "next" && s.reason == SkipReason::Deadline),
        "{:?}",
        resp.provenance.skipped
    );
    assert_eq!(bh.snapshot().failures, 0);
}

#[tokio::test(start_paused = true)]
async fn min_attempt_is_capped_by_the_links_first_token_limit_and_half_the_budget() {
    // 600 ms left: under the chain's 1 s, but above the link's own 500 ms first-token limit.
    let slow = ScriptedModel::new("slow")
        .fail_with(Error::new(ErrorKind::ServerError, "boom"), ms(14_400));
    let next = ScriptedModel::new("next");
    let chain = Chain::builder()
        .link(slow)
        .link(next)
        .first_token_limit(ms(500))
        .deadline(secs(15))
        .build()
        .unwrap();
    let resp = chat_ok(&chain).await;
    assert_eq!(resp.served_by(), "next");

    // A call whose whole budget is 400 ms still tries its first link.
    let chain = Chain::builder()
        .link(ScriptedModel::new("only").reply_after("hi", ms(100)))
        .deadline(ms(400))
        .build()
        .unwrap();
    assert_eq!(chat_ok(&chain).await.text(), "hi");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_cut_of_a_starved_attempt_is_not_counted_but_of_a_fed_one_is() {
    let breaker = ScriptedModel::new("a").hang().with_breaker(trip_on_first());
    let bh = breaker.handle();
    let health = breaker.with_health(HealthPolicy::default());
    let hh = health.handle();
    let starved = Context::new()
        .with_timeout(ms(300))
        .with_min_attempt(secs(1));
    let e = health.chat(&req(), &starved).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(e.fault_in(&starved, Some(ms(300)), false), Fault::Local);
    assert_eq!(bh.snapshot().state, BreakerState::Closed);
    assert_eq!(hh.snapshot().failures, 0);

    let fed = Context::new()
        .with_timeout(secs(5))
        .with_min_attempt(secs(1));
    health.chat(&req(), &fed).await.unwrap_err();
    assert_eq!(
        bh.snapshot().state,
        BreakerState::Open,
        "5 s and no answer: a slow vendor"
    );
}

#[tokio::test(start_paused = true)]
async fn a_half_open_stream_probe_is_judged_at_first_content_and_frees_its_permit() {
    let model = ScriptedModel::new("a")
        .fail(ErrorKind::ServerError)
        .stream_items(one_per_second(20));
    let breaker = model.with_breaker(breaker(1, secs(1)));
    chat_err(&breaker).await;
    assert_eq!(breaker.snapshot().state, BreakerState::Open);
    tokio::time::sleep(secs(1)).await;
    let mut probe = open_stream(&breaker).await;
    // Before first content the probe holds the only permit.
    assert!(breaker.refusal(&Context::new()).is_some());
    let first = probe.next().await.unwrap().unwrap();
    assert!(first.is_content());
    let snap = breaker.snapshot();
    assert_eq!(
        snap.state,
        BreakerState::Closed,
        "success recorded at first content"
    );
    assert_eq!(
        snap.probes_in_flight, 0,
        "the permit is free while the consumer reads"
    );
    assert!(breaker.refusal(&Context::new()).is_none());
    drop(probe);
}

#[tokio::test(start_paused = true)]
async fn a_half_open_stream_probe_that_fails_before_content_reopens() {
    let model = ScriptedModel::new("a")
        .fail(ErrorKind::ServerError)
        .stream_items(vec![(
            ms(10),
            StreamItem::Error(Error::new(ErrorKind::Overloaded, "in-band overload")),
        )]);
    let breaker = model.with_breaker(breaker(1, secs(1)));
    chat_err(&breaker).await;
    tokio::time::sleep(secs(1)).await;
    let events = stream_all(&breaker).await;
    assert!(events.last().unwrap().is_err());
    assert_eq!(breaker.snapshot().state, BreakerState::Open);
}

/// An always-ready stream that the test advances time between polls of.
fn always_ready(ev: StreamEvent) -> ChatStream {
    Box::pin(futures::stream::repeat_with(move || Ok(ev.clone())))
}

#[derive(Debug)]
struct Ready(
    ripcord_core::ModelId,
    ripcord_core::Capabilities,
    StreamEvent,
);

#[ripcord_core::async_trait]
impl ChatModel for Ready {
    fn id(&self) -> &ripcord_core::ModelId {
        &self.0
    }
    fn capabilities(&self) -> &ripcord_core::Capabilities {
        &self.1
    }
    async fn chat(
        &self,
        _req: &ripcord_core::ChatRequest,
        _ctx: &Context,
    ) -> ripcord_core::Result<ripcord_core::ChatResponse> {
        Err(Error::new(ErrorKind::InvalidRequest, "stream only"))
    }
    async fn stream(
        &self,
        _req: &ripcord_core::ChatRequest,
        _ctx: &Context,
    ) -> ripcord_core::Result<ChatStream> {
        Ok(always_ready(self.2.clone()))
    }
}

fn ready(ev: StreamEvent) -> Ready {
    Ready(
        ripcord_core::ModelId::new("ready", "ready-1"),
        ripcord_core::Capabilities::new(8192, 512),
        ev,
    )
}

/// Reads `s` with 100 ms of paused time between polls until it yields an error: how many
/// events came before it, and the error.
async fn events_before_error(mut s: ChatStream) -> (usize, Error) {
    let mut n = 0;
    loop {
        match s.next().await.unwrap() {
            Ok(_) => n += 1,
            Err(e) => return (n, e),
        }
        tokio::time::advance(ms(100)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn first_content_limit_fires_even_when_the_inner_stream_is_always_ready() {
    let m = ready(StreamEvent::Usage {
        usage: Usage::new(1, 0),
    })
    .with_timeout(
        TimeoutPolicy::builder()
            .first_token(secs(1))
            .build()
            .unwrap(),
    );
    let (n, err) = events_before_error(open_stream(&m).await).await;
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstToken));
    assert_eq!(n, 10);
}

#[tokio::test(start_paused = true)]
async fn the_stream_bound_fires_even_when_the_inner_stream_is_always_ready() {
    let m = ready(StreamEvent::text("x")).with_timeout(idle(secs(1)));
    let ctx = Context::new()
        .with_timeout(secs(1))
        .with_stream_deadline(Instant::now() + secs(2));
    let (n, err) = events_before_error(m.stream(&req(), &ctx).await.unwrap()).await;
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(err.fault(), Fault::Caller);
    assert_eq!(
        n, 20,
        "ran past the 1 s deadline, stopped at the 2 s stream bound"
    );
}

fn one_slot(wait: std::time::Duration) -> ripcord_resilience::BulkheadPolicy {
    ripcord_resilience::BulkheadPolicy::builder()
        .max_in_flight(1)
        .max_queue(16)
        .max_queue_wait(wait)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_bulkhead_whose_queue_wait_would_pass_the_deadline_refuses_at_once() {
    let m = Arc::new(
        ScriptedModel::new("a")
            .reply_after("ok", secs(5))
            .with_bulkhead(one_slot(secs(30))),
    );
    // One call teaches the bulkhead that a slot is held about 5 s.
    chat_ok(&m).await;
    let busy = spawn_chat(&m, Context::new());
    tokio::time::sleep(ms(1)).await;
    let t0 = Instant::now();
    let e = chat_within(&m, secs(2)).await.unwrap_err();
    assert_eq!(t0.elapsed(), ms(0), "refused at once, not at the deadline");
    assert_eq!(
        (e.kind(), e.fault()),
        (ErrorKind::BudgetExhausted, Fault::Local)
    );
    assert!(e.retry_after().is_some());
    busy.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn bulkhead_refusals_and_rate_limit_waits_never_trip_a_breaker_and_the_chain_falls_past() {
    let guarded = ScriptedModel::new("a")
        .reply_after("from a", secs(3))
        .with_rate_limit(
            ripcord_resilience::RateLimitPolicy::builder()
                .rpm(2)
                .build()
                .unwrap(),
        )
        .with_bulkhead(one_slot(ms(500)))
        .with_breaker(trip_on_first());
    let bh = guarded.handle();
    let health = guarded.with_health(HealthPolicy::default());
    let hh = health.handle();
    let chain = Arc::new(
        Chain::builder()
            .link(health)
            .link(ScriptedModel::new("b").reply("from b"))
            .no_readmission_wait()
            .build()
            .unwrap(),
    );
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let chain = chain.clone();
            tokio::spawn(async move { chain.chat(&req(), &Context::new()).await })
        })
        .collect();
    let mut served = std::collections::BTreeMap::new();
    for c in futures::future::join_all(calls).await {
        let r = c.unwrap().unwrap();
        *served.entry(r.served_by().to_owned()).or_insert(0) += 1;
    }
    assert_eq!(served.get("a"), Some(&1), "{served:?}");
    assert_eq!(served.get("b"), Some(&7), "no request lost: {served:?}");
    // Later calls meet the RPM limit: refused locally, served by b.
    for _ in 0..3 {
        let r = chat_ok(&chain).await;
        assert!(["a", "b"].contains(&r.served_by()));
    }
    let b = bh.snapshot();
    assert_eq!((b.state, b.trips, b.failures), (BreakerState::Closed, 0, 0));
    assert_eq!(hh.snapshot().failures, 0);
}

fn status(kind: ErrorKind, code: u16) -> Error {
    Error::new(kind, "vendor error").with_status(ripcord_core::StatusCode(code))
}

#[tokio::test(start_paused = true)]
async fn a_request_that_is_not_retry_safe_is_retried_only_when_the_vendor_cannot_have_processed_it()
{
    let unsafe_ctx = || Context::new().with_retry_safe(false);
    let retry = || ripcord_resilience::RetryPolicy::default();
    // Possibly processed: a 502, a first-token timeout after the request was written, a
    // truncated answer. Never sent again.
    for e in [
        status(ErrorKind::ServerError, 502),
        Error::timeout(TimeoutPhase::FirstToken, "slow"),
        Error::new(ErrorKind::InvalidResponse, "stream truncated"),
    ] {
        let m = ScriptedModel::new("a")
            .fail_with(e.clone(), ms(10))
            .reply("ok")
            .with_retry(retry());
        assert!(m.chat(&req(), &unsafe_ctx()).await.is_err(), "{e}");
        assert_eq!(m.get_ref().calls(), 1, "{e} was re-sent");
        // A retry-safe request is retried after the same failure.
        let m = ScriptedModel::new("a")
            .fail_with(e.clone(), ms(10))
            .reply("ok")
            .with_retry(retry());
        chat_ok(&m).await;
        assert_eq!(m.get_ref().calls(), 2);
    }
    // Not processed: a refused connection, a plain 500. Retried even when not retry-safe.
    for e in [
        Error::new(ErrorKind::Network, "connection refused").with_maybe_processed(false),
        status(ErrorKind::ServerError, 500),
    ] {
        let m = ScriptedModel::new("a")
            .fail_with(e.clone(), ms(10))
            .reply("ok")
            .with_retry(retry());
        m.chat(&req(), &unsafe_ctx()).await.unwrap();
        assert_eq!(m.get_ref().calls(), 2, "{e}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_chain_never_falls_back_with_a_request_that_is_not_retry_safe_after_an_ambiguous_failure()
{
    let b = Arc::new(ScriptedModel::new("b"));
    let chain = Chain::builder()
        .link(ScriptedModel::new("a").fail_with(status(ErrorKind::ServerError, 504), ms(10)))
        .link(Arc::clone(&b))
        .static_reply("unavailable")
        .build()
        .unwrap();
    let e = chain
        .chat(&req(), &Context::new().with_retry_safe(false))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(ripcord_core::StatusCode(504)));
    assert_eq!(b.calls(), 0, "the request was not sent to a second vendor");
    // The same failure of a retry-safe request falls back.
    assert_eq!(chat_ok(&chain).await.served_by(), "b");
    assert_eq!(b.calls(), 1);
    // And a failure the vendor cannot have processed falls back even when not retry-safe.
    let chain = Chain::builder()
        .link(ScriptedModel::new("a").fail(ErrorKind::Overloaded))
        .link(Arc::clone(&b))
        .build()
        .unwrap();
    let r = chain
        .chat(&req(), &Context::new().with_retry_safe(false))
        .await
        .unwrap();
    assert_eq!(r.served_by(), "b");
}

#[tokio::test(start_paused = true)]
async fn a_stream_restart_never_resends_a_request_that_is_not_retry_safe() {
    let a = || {
        ScriptedModel::new("a").stream_items(vec![
            (ms(10), StreamItem::Event(StreamEvent::text("Once"))),
            (
                ms(10),
                StreamItem::Error(Error::new(ErrorKind::Network, "reset")),
            ),
        ])
    };
    let b = Arc::new(ScriptedModel::new("b"));
    let chain = Chain::builder()
        .link(a())
        .link(Arc::clone(&b))
        .stream_policy(ripcord_core::StreamPolicy::Restart)
        .build()
        .unwrap();
    let events = drain(
        chain
            .stream(&req(), &Context::new().with_retry_safe(false))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(last_err_kind(&events), ErrorKind::Network);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Restarted { .. })))
    );
    assert_eq!(b.calls(), 0);
    // A retry-safe one restarts on b.
    let events = stream_all(&chain).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Restarted { .. })))
    );
    assert_eq!(b.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_context_length_failure_falls_to_the_next_link_whose_window_is_larger() {
    let windowed = |name: &str, w: u32| {
        ScriptedModel::new(name).with_caps(ripcord_core::Capabilities::new(w, 1024))
    };
    let small = Arc::new(windowed("small", 4_000));
    let chain = Chain::builder()
        .link(windowed("mid", 8_000).fail(ErrorKind::ContextLengthExceeded))
        .link(Arc::clone(&small))
        .link(windowed("large", 128_000).reply("fits"))
        .build()
        .unwrap();
    let r = chat_ok(&chain).await;
    assert_eq!(r.served_by(), "large");
    assert_eq!(small.calls(), 0);
    assert!(
        r.provenance
            .skipped
            .iter()
            .any(|s| &*s.provider == "small" && s.reason == SkipReason::ContextWindow)
    );
}

#[tokio::test(start_paused = true)]
async fn model_not_found_trips_at_once_and_a_vendor_429_never_feeds_the_breaker() {
    let five = || breaker(5, secs(1));
    let m = ScriptedModel::new("a")
        .fail(ErrorKind::ModelNotFound)
        .with_breaker(five());
    chat_err(&m).await;
    assert_eq!(m.snapshot().state, BreakerState::Open);

    let m = ScriptedModel::new("b")
        .fail(ErrorKind::RateLimited)
        .with_breaker(five());
    for _ in 0..10 {
        assert_eq!(chat_err(&m).await.kind(), ErrorKind::RateLimited);
    }
    let snap = m.snapshot();
    assert_eq!(
        (snap.state, snap.failures, snap.trips),
        (BreakerState::Closed, 0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_hedge_win_records_a_censored_sample_for_the_slow_primary() {
    let policy = p95_hedge(ms(100), 1)
        .max_extra_percent(100)
        .build()
        .unwrap();
    let hedged = ScriptedModel::new("primary")
        .reply_after("slow", secs(5))
        .with_hedge(
            ScriptedModel::new("backup").reply_after("fast", ms(10)),
            policy,
        );
    let r = chat_ok(&hedged).await;
    assert_eq!(r.served_by(), "backup");
    // The primary ran 110 ms before it was cancelled: its latency is at least that, and the
    // p95 now says so (a p95 of completed calls only would still read nothing).
    assert_eq!(hedged.current_delay(), ms(110));
}

#[tokio::test(start_paused = true)]
async fn hedges_stay_within_their_budget_of_extra_calls() {
    use ripcord_resilience::{HedgeDelay, HedgePolicy};
    let policy = HedgePolicy::builder()
        .delay(HedgeDelay::Fixed(ms(100)))
        .max_extra_percent(10)
        .build()
        .unwrap();
    let hedged = ScriptedModel::new("primary")
        .reply_after("slow", secs(1))
        .with_hedge(
            ScriptedModel::new("backup").reply_after("fast", ms(10)),
            policy,
        );
    for _ in 0..20 {
        chat_ok(&hedged).await;
    }
    // One to start with, then one more per ten calls.
    assert_eq!(hedged.hedges_started(), 3);
    assert_eq!(hedged.hedge_ref().calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn trim_oldest_drops_old_turns_to_fit_the_window_and_says_so() {
    use ripcord_core::{ChatRequest, Message, chain::Trim};
    let mut messages = vec![Message::system("Be brief.")];
    for i in 0..30 {
        messages.push(Message::user(format!(
            "question {i}: {}",
            "blah ".repeat(40)
        )));
        messages.push(Message::assistant(format!(
            "answer {i}: {}",
            "blah ".repeat(40)
        )));
    }
    messages.push(Message::user("So, in one word?"));
    let long = ChatRequest::new(messages).with_max_tokens(100);
    // A model with a small window that records how many messages each request had.
    let small = |trim: Trim| {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let m = FnModel::new(
            ripcord_core::ModelId::new("small", "small-1"),
            ripcord_core::Capabilities::new(1_000, 200),
            move |req: &ChatRequest, _: &Context| {
                log.lock().unwrap().push(req.messages.len());
                Ok(ripcord_core::ChatResponse::new("short answer"))
            },
        );
        let chain = Chain::builder()
            .link(m)
            .static_reply("too long")
            .trim(trim)
            .build()
            .unwrap();
        (seen, chain)
    };
    // Without trimming the link is skipped.
    let (seen, chain) = small(Trim::None);
    let r = chain.chat(&long, &Context::new()).await.unwrap();
    assert!(r.provenance.static_reply);
    assert!(seen.lock().unwrap().is_empty());
    // With it, the link gets the system message, the latest turns and the question.
    let (seen, chain) = small(Trim::Oldest);
    let r = chain.chat(&long, &Context::new()).await.unwrap();
    assert_eq!(r.served_by(), "small");
    let n = r.provenance.trimmed_messages as usize;
    assert!(n > 0 && n.is_multiple_of(2), "{n}");
    assert_eq!(seen.lock().unwrap().as_slice(), [long.messages.len() - n]);
    // Streams the same.
    let events = drain(chain.stream(&long, &Context::new()).await.unwrap()).await;
    let last = events.iter().rev().find_map(|e| match e {
        Ok(StreamEvent::Provenance { provenance }) => Some(provenance.trimmed_messages),
        _ => None,
    });
    assert_eq!(last, Some(n as u32));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_cut_keeps_the_attempts_of_the_link_it_cut() {
    let link = ScriptedModel::new("a")
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::ServerError)
        .hang()
        .with_retry(
            ripcord_resilience::RetryPolicy::builder()
                .max_attempts(5)
                .base_delay(ms(10))
                .max_delay(ms(10))
                .build()
                .unwrap(),
        );
    let chain = Chain::builder()
        .link(link)
        .deadline(secs(2))
        .build()
        .unwrap();
    let e = chat_err(&chain).await;
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded);
    let kinds: Vec<_> = e.attempts().iter().map(|a| a.error_kind).collect();
    assert_eq!(
        kinds,
        [
            Some(ErrorKind::ServerError),
            Some(ErrorKind::ServerError),
            Some(ErrorKind::DeadlineExceeded)
        ]
    );
}
