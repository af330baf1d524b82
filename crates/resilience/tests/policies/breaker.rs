//! Circuit breaker: half-open permits, one outcome per call, timeouts inside, sub-second and fresh open durations.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use ripcord_core::testing::{StreamItem, text_stream};
use ripcord_core::{ChatModel, Context, Error, ErrorKind, StreamEvent};
use ripcord_resilience::{
    Breaker, BreakerListener, BreakerPolicy, BreakerState, ChatModelExt, KindAction, OpenBackoff,
    RetryPolicy, Transition,
};
use tokio::time::Instant;

use crate::support::{
    breaker, cancel_after, chat_err, chat_ok, chat_within, last_err_kind, ms, open_stream, req,
    scripted, secs, spawn_chat, stream_all, tripping,
};

#[tokio::test(start_paused = true)]
async fn trips_after_consecutive_failures_and_refuses_without_calling() {
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .with_breaker(breaker(3, ms(250)));
    for _ in 0..3 {
        assert_eq!(chat_err(&m).await.kind(), ErrorKind::ServerError);
    }
    let refused = chat_err(&m).await;
    assert_eq!(refused.kind(), ErrorKind::CircuitOpen);
    assert_eq!(refused.provider(), Some("a"));
    assert_eq!(refused.retry_after(), Some(ms(250)));
    assert_eq!(m.get_ref().calls(), 3);
    tokio::time::sleep(ms(100)).await;
    let later = chat_err(&m).await;
    assert_eq!(
        later.retry_after(),
        Some(ms(150)),
        "retry-after counts down on the breaker's clock"
    );
}

#[tokio::test(start_paused = true)]
async fn fifty_concurrent_callers_in_half_open_put_exactly_one_probe_on_the_wire() {
    let m = Arc::new(
        scripted("a")
            .fail(ErrorKind::ServerError)
            .reply_after("recovered", secs(1))
            .with_breaker(breaker(1, ms(100))),
    );
    assert!(m.chat(&req(), &Context::new()).await.is_err());
    assert_eq!(m.snapshot().state, BreakerState::Open);
    tokio::time::sleep(ms(100)).await;

    let calls: Vec<_> = (0..50).map(|_| spawn_chat(&m, Context::new())).collect();
    let results: Vec<_> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();

    assert_eq!(
        m.get_ref().calls(),
        2,
        "one failure, then exactly one probe"
    );
    assert_eq!(m.get_ref().peak_concurrency(), 1);
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    let refused: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(refused.len(), 49);
    assert!(
        refused
            .iter()
            .all(|e| e.kind() == ErrorKind::CircuitOpen && e.retry_after().is_some())
    );
    assert_eq!(m.snapshot().state, BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_probe_releases_its_permit_at_probe_timeout_and_reopens() {
    let breaker = tripping(1, ms(100)).probe_timeout(secs(2)).build().unwrap();
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .hang()
        .with_breaker(breaker);
    let _ = m.chat(&req(), &Context::new()).await;
    tokio::time::sleep(ms(100)).await;
    let start = Instant::now();
    let probe = chat_err(&m).await;
    assert_eq!(start.elapsed(), secs(2));
    assert_eq!(probe.kind(), ErrorKind::Timeout);
    let snap = m.snapshot();
    assert_eq!(snap.state, BreakerState::Open);
    assert_eq!(snap.probes_in_flight, 0);
    assert_eq!(snap.trips, 2);
}

#[tokio::test(start_paused = true)]
async fn breaker_counts_one_failure_per_logical_call_after_retries() {
    let retry = RetryPolicy::builder()
        .max_attempts(3)
        .base_delay(ms(10))
        .seed(1)
        .build()
        .unwrap();
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .with_retry(retry)
        .with_breaker(breaker(2, ms(1000)));
    let first = chat_err(&m).await;
    assert_eq!(first.attempts().len(), 3);
    let snap = m.snapshot();
    assert_eq!(
        (snap.failures, snap.state),
        (1, BreakerState::Closed),
        "3 attempts, one failure"
    );
    let _ = m.chat(&req(), &Context::new()).await;
    assert_eq!(m.snapshot().state, BreakerState::Open);
    assert_eq!(m.get_ref().get_ref().calls(), 6);
}

#[tokio::test(start_paused = true)]
async fn every_re_trip_sets_a_fresh_growing_open_until() {
    let breaker = BreakerPolicy::builder()
        .consecutive_failures(1)
        .open(OpenBackoff::Exponential {
            base: ms(100),
            max: ms(300),
        })
        .build()
        .unwrap();
    let m = scripted("a")
        .fail(ErrorKind::Overloaded)
        .with_breaker(breaker);
    let _ = m.chat(&req(), &Context::new()).await;
    let mut opens = Vec::new();
    for _ in 0..4 {
        let refused = chat_err(&m).await;
        opens.push(refused.retry_after().unwrap());
        tokio::time::sleep(refused.retry_after().unwrap()).await;
        // The probe fails and re-trips: the new open-until starts now.
        assert_eq!(chat_err(&m).await.kind(), ErrorKind::Overloaded);
    }
    assert_eq!(opens, vec![ms(100), ms(200), ms(300), ms(300)]);
    let history = m.snapshot().history;
    let trips: Vec<_> = history
        .iter()
        .filter(|t| t.to == BreakerState::Open)
        .collect();
    assert_eq!(trips.len(), 5);
    for pair in trips.windows(2) {
        assert!(pair[1].at > pair[0].at, "each trip has its own timestamp");
    }
}

#[tokio::test(start_paused = true)]
async fn success_threshold_needs_that_many_probes() {
    let breaker = tripping(1, ms(50)).success_threshold(2).build().unwrap();
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .with_breaker(breaker);
    let _ = m.chat(&req(), &Context::new()).await;
    tokio::time::sleep(ms(50)).await;
    chat_ok(&m).await;
    assert_eq!(m.snapshot().state, BreakerState::HalfOpen);
    chat_ok(&m).await;
    assert_eq!(m.snapshot().state, BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn caller_side_kinds_never_count_and_auth_trips_at_once_for_longer() {
    let m = scripted("a")
        .fail(ErrorKind::InvalidRequest)
        .fail(ErrorKind::ContentFiltered)
        .fail(ErrorKind::ContextLengthExceeded)
        .fail(ErrorKind::InvalidRequest)
        .fail(ErrorKind::ContentFiltered)
        .fail(ErrorKind::Auth)
        .with_breaker(breaker(2, secs(10)));
    for _ in 0..5 {
        assert!(m.chat(&req(), &Context::new()).await.is_err());
    }
    let snap = m.snapshot();
    assert_eq!(
        (snap.state, snap.failures, snap.ignored),
        (BreakerState::Closed, 0, 5)
    );
    let _ = m.chat(&req(), &Context::new()).await;
    let refused = chat_err(&m).await;
    assert_eq!(refused.kind(), ErrorKind::CircuitOpen);
    assert!(
        refused.retry_after().unwrap() >= secs(300),
        "auth opens for longer than the 10 s default"
    );
    assert_eq!(m.snapshot().last_failure, Some(ErrorKind::Auth));
}

#[tokio::test(start_paused = true)]
async fn kind_overrides_apply() {
    let breaker = BreakerPolicy::builder()
        .consecutive_failures(10)
        .kind(ErrorKind::QuotaExhausted, KindAction::TripFor(secs(60)))
        .kind(ErrorKind::ServerError, KindAction::Ignore)
        .build()
        .unwrap();
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::QuotaExhausted)
        .with_breaker(breaker);
    let _ = m.chat(&req(), &Context::new()).await;
    assert_eq!(m.snapshot().state, BreakerState::Closed);
    let _ = m.chat(&req(), &Context::new()).await;
    assert_eq!(m.snapshot().state, BreakerState::Open);
}

/// Calls `m`, whose link hangs, with 2 s to go: the call ends at the deadline, and the breaker
/// records the link's timeout and opens. Returns the call's error.
async fn cut_at_the_deadline<M: ChatModel>(m: &Breaker<M>) -> Error {
    let start = Instant::now();
    let err = chat_within(m, secs(2)).await.unwrap_err();
    assert_eq!(start.elapsed(), secs(2));
    let snap = m.snapshot();
    assert_eq!(
        (snap.state, snap.failures, snap.last_failure),
        (BreakerState::Open, 1, Some(ErrorKind::Timeout))
    );
    err
}

#[tokio::test(start_paused = true)]
async fn a_timeout_inside_the_call_is_a_failure_but_cancellation_records_nothing() {
    let m = Arc::new(scripted("a").hang().with_breaker(breaker(1, ms(1000))));
    // The caller cancels: nothing is recorded.
    assert_eq!(cancel_after(&m, ms(500)).await, ErrorKind::Cancelled);
    // Dropping the call's future records nothing either.
    let dropped = tokio::time::timeout(ms(300), m.chat(&req(), &Context::new())).await;
    assert!(dropped.is_err());
    let snap = m.snapshot();
    assert_eq!((snap.state, snap.failures), (BreakerState::Closed, 0));

    // The deadline passes while the link hangs: that is the link's failure.
    let err = cut_at_the_deadline(&m).await;
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded);
}

#[tokio::test(start_paused = true)]
async fn a_model_that_bounds_itself_is_not_raced_and_its_timeout_still_trips_the_breaker() {
    // One timer for the whole stack (the model's own), and still the timeout ends
    // the call inside the breaker, which records it; cancellation records nothing.
    let m = Arc::new(
        scripted("a")
            .hang()
            .bounding_itself()
            .with_retry(RetryPolicy::default())
            .with_breaker(breaker(1, ms(1000))),
    );
    assert!(m.bounds_itself(), "retry and breaker pass the claim on");

    assert_eq!(cancel_after(&m, ms(500)).await, ErrorKind::Cancelled);
    assert_eq!(m.snapshot().failures, 0);

    let err = cut_at_the_deadline(&m).await;
    // The model's own error, not a layer's: it says which limit ran out.
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert_eq!(err.timeout_phase(), Some(ripcord_core::TimeoutPhase::Total));
}

/// A breaker that trips when half the calls of `window` fail, once there are `min_calls`, and
/// stays open for `open`.
fn half_failing(min_calls: u32, window: Duration, open: Duration) -> BreakerPolicy {
    BreakerPolicy::builder()
        .failure_rate(0.5, window, min_calls)
        .open_for(open)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn failure_rate_policy_trips_on_the_rate() {
    let breaker = half_failing(4, secs(10), ms(500));
    let m = scripted("a")
        .reply("ok")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .with_breaker(breaker);
    for _ in 0..3 {
        let _ = m.chat(&req(), &Context::new()).await;
        assert_eq!(m.snapshot().state, BreakerState::Closed);
    }
    let _ = m.chat(&req(), &Context::new()).await; // 2 failures of 4 calls
    assert_eq!(m.snapshot().state, BreakerState::Open);
}

#[derive(Debug, Default)]
struct Log(Mutex<Vec<(BreakerState, BreakerState)>>, Mutex<u32>);

impl BreakerListener for Log {
    fn on_transition(&self, t: &Transition) {
        self.0.lock().unwrap().push((t.from, t.to));
    }
    fn on_rejected(&self, _link: &str, _state: BreakerState, _after: std::time::Duration) {
        *self.1.lock().unwrap() += 1;
    }
}

#[tokio::test(start_paused = true)]
async fn listener_history_and_snapshot() {
    let log = Arc::new(Log::default());
    let breaker = tripping(1, ms(100))
        .history(2)
        .listener(log.clone())
        .build()
        .unwrap();
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .with_breaker(breaker);
    let handle = m.handle();
    let _ = m.chat(&req(), &Context::new()).await;
    let _ = m.chat(&req(), &Context::new()).await;
    tokio::time::sleep(ms(100)).await;
    chat_ok(&m).await;
    assert_eq!(
        *log.0.lock().unwrap(),
        vec![
            (BreakerState::Closed, BreakerState::Open),
            (BreakerState::Open, BreakerState::HalfOpen),
            (BreakerState::HalfOpen, BreakerState::Closed),
        ]
    );
    assert_eq!(*log.1.lock().unwrap(), 1);
    let snap = handle.snapshot();
    assert_eq!(snap.history.len(), 2, "history is bounded");
    assert_eq!(snap.history[1].to, BreakerState::Closed);
    assert_eq!(snap.history[1].at_ms, 100.0);
    assert_eq!((snap.trips, snap.rejected, snap.successes), (1, 1, 1));
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["state"], "closed");
    assert_eq!(json["history"][0]["to"], "half_open");
}

#[tokio::test(start_paused = true)]
async fn a_stream_counts_once_when_it_ends() {
    let truncated = vec![(ms(0), StreamItem::Event(StreamEvent::text("half an ans")))];
    let m = scripted("a")
        .stream_items(truncated.clone())
        .stream_items(truncated)
        .stream_items(text_stream(&["fine"], ms(1)))
        .with_breaker(breaker(2, ms(100)));
    for _ in 0..2 {
        let items = stream_all(&m).await;
        assert_eq!(last_err_kind(&items), ErrorKind::InvalidResponse);
    }
    let snap = m.snapshot();
    assert_eq!(
        (snap.failures, snap.state),
        (2, BreakerState::Open),
        "a truncated stream is a failure"
    );
    tokio::time::sleep(ms(100)).await;
    let s = open_stream(&m).await;
    let resp = ripcord_core::stream::collect(s).await.unwrap();
    assert_eq!(resp.text(), "fine");
    assert_eq!(m.snapshot().state, BreakerState::Closed);
    // A stream the consumer drops records nothing.
    let mut s = open_stream(&m).await;
    let _ = s.next().await;
    drop(s);
    assert_eq!(m.snapshot().failures, 2);
}

#[tokio::test(start_paused = true)]
async fn reset_closes_by_hand() {
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .with_breaker(breaker(1, ms(60_000)));
    let _ = m.chat(&req(), &Context::new()).await;
    assert_eq!(m.handle().state(), BreakerState::Open);
    m.handle().reset();
    assert_eq!(m.handle().state(), BreakerState::Closed);
    assert_eq!(chat_err(&m).await.kind(), ErrorKind::ServerError);
}

#[test]
fn invalid_settings_are_named() {
    let e = BreakerPolicy::builder()
        .consecutive_failures(0)
        .build()
        .unwrap_err();
    assert_eq!(e.setting(), "consecutive_failures");
    let e = BreakerPolicy::builder()
        .failure_rate(1.5, secs(1), 1)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("(0, 1]"), "{e}");
    let e = BreakerPolicy::builder().max_probes(0).build().unwrap_err();
    assert_eq!(e.setting(), "max_probes");
    let _: Error = e.into();
}

#[tokio::test(start_paused = true)]
async fn refusal_answers_up_front_only_while_a_call_would_be_refused() {
    let log = Arc::new(Log::default());
    let breaker = tripping(1, ms(100)).listener(log.clone()).build().unwrap();
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .reply_after("probe answered", ms(50))
        .with_breaker(breaker);
    let ctx = Context::new();
    assert!(m.refusal(&ctx).is_none(), "closed: a call would go ahead");
    let _ = m.chat(&req(), &ctx).await;

    // Open: the same refusal a call meets, counted and reported as a rejected call.
    let e = m.refusal(&ctx).expect("open refuses");
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(e.provider(), Some("a"));
    assert_eq!(e.retry_after(), Some(ms(100)));
    assert_eq!((m.snapshot().rejected, *log.1.lock().unwrap()), (1, 1));
    assert_eq!(m.get_ref().calls(), 1);

    // Cooled down: the probe is the call's to take, so nothing is refused up front, no
    // permit is taken and no transition happens.
    tokio::time::sleep(ms(100)).await;
    assert!(m.refusal(&ctx).is_none());
    assert_eq!(m.snapshot().probes_in_flight, 0);
    assert_eq!(log.0.lock().unwrap().len(), 1, "only closed -> open so far");
    let m = Arc::new(m);
    let probe = tokio::spawn({
        let m = m.clone();
        async move { m.chat(&req(), &Context::new()).await }
    });
    tokio::task::yield_now().await;
    assert_eq!(m.snapshot().probes_in_flight, 1);
    // Half-open with the only probe permit out: refused with the short retry hint.
    let e = m
        .refusal(&ctx)
        .expect("half-open with the permit out refuses");
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(m.snapshot().rejected, 2);
    assert_eq!(probe.await.unwrap().unwrap().text(), "probe answered");
    assert_eq!(m.snapshot().state, BreakerState::Closed);
    assert!(m.refusal(&ctx).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_success_between_failures_resets_the_consecutive_count() {
    // Successes while closed take no lock once the count is zero; one after a failure must
    // still reach the policy and reset it.
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .reply("ok")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::ServerError)
        .with_breaker(breaker(2, ms(100)));
    let mut states = Vec::new();
    for _ in 0..7 {
        let _ = m.chat(&req(), &Context::new()).await;
        states.push(m.snapshot().state);
    }
    let open = states.iter().position(|s| *s == BreakerState::Open);
    assert_eq!(open, Some(6), "{states:?}");
    let snap = m.snapshot();
    assert_eq!((snap.successes, snap.failures, snap.trips), (3, 4, 1));
}

#[tokio::test(start_paused = true)]
async fn with_a_failure_rate_every_success_counts_in_the_window() {
    // Rate policy: 50 % of at least 4 calls. Three successes then three failures is 50 %.
    let breaker = half_failing(4, secs(30), ms(100));
    let m = scripted("a")
        .reply("ok")
        .reply("ok")
        .reply("ok")
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::ServerError)
        .with_breaker(breaker);
    for _ in 0..3 {
        chat_ok(&m).await;
    }
    let _ = m.chat(&req(), &Context::new()).await;
    assert_eq!(
        m.snapshot().state,
        BreakerState::Closed,
        "1 failure in 4 calls is 25 %"
    );
    let _ = m.chat(&req(), &Context::new()).await;
    let _ = m.chat(&req(), &Context::new()).await;
    assert_eq!(m.snapshot().state, BreakerState::Open, "3 in 6 is 50 %");
}
