//! One breaker, two stores: the same policy tests against the in-process store and against
//! the Redis store (a REAL `redis-server` child on loopback), then what only a shared store
//! has: failures counted across replicas, the staleness bound of the cached view, and an
//! active probe on one replica re-admitting the link for all.
//!
//! Without `redis-server` the Redis runs skip loudly (an error under `CI`).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{both, breaker_on, stream_to_end};
use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{ChatModel, ChatRequest, Context, Error, ErrorKind, StreamEvent};
use ripcord_redis::server::RedisServer as Server;
use ripcord_redis::{RedisBreakerStore, SharedBreakerConfig};
use ripcord_resilience::{Breaker, BreakerListener, BreakerState, Transition};

#[derive(Debug, Default)]
struct Log(Mutex<Vec<(BreakerState, BreakerState)>>);

impl BreakerListener for Log {
    fn on_transition(&self, t: &Transition) {
        self.0.lock().unwrap().push((t.from, t.to));
    }
}

impl Log {
    fn seen(&self) -> Vec<(BreakerState, BreakerState)> {
        self.0.lock().unwrap().clone()
    }
}

/// A breaker under test and, on Redis, its store (synced after every step so that one
/// replica's semantics are observed without the cache's lag).
struct Subject {
    breaker: Breaker<Arc<ScriptedModel>>,
    store: Option<Arc<RedisBreakerStore>>,
    log: Arc<Log>,
}

impl Subject {
    async fn settle(&self) {
        if let Some(s) = &self.store {
            assert!(s.sync().await, "redis did not answer");
        }
    }

    async fn chat(&self) -> Result<(), Error> {
        self.settle().await;
        let r = self
            .breaker
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .map(|_| ());
        self.settle().await;
        r
    }

    /// Streams to the end; the stream's first error, if any.
    async fn stream(&self) -> Result<(), Error> {
        self.settle().await;
        let r = stream_to_end(&self.breaker, &ChatRequest::user("hi"), &Context::new()).await;
        self.settle().await;
        r
    }
}

fn config() -> SharedBreakerConfig {
    SharedBreakerConfig::default()
        .consecutive_failures(3)
        .open_for(Duration::from_millis(300))
        .probe_timeout(Duration::from_secs(5))
}

/// A subject on the local store, or on Redis (`None` when Redis is skipped).
async fn subject(
    model: ScriptedModel,
    redis: Option<&Server>,
    config: SharedBreakerConfig,
) -> Subject {
    let log = Arc::new(Log::default());
    let config = config.listener(log.clone());
    let (breaker, store) = breaker_on(model, redis, &config).await;
    Subject {
        breaker,
        store,
        log,
    }
}

fn failing_stream_after_first_delta() -> Vec<(Duration, StreamItem)> {
    vec![
        (Duration::ZERO, StreamItem::Event(StreamEvent::text("par"))),
        (
            Duration::ZERO,
            StreamItem::Error(Error::new(
                ErrorKind::Overloaded,
                "overloaded_error in band",
            )),
        ),
    ]
}

fn truncated_stream() -> Vec<(Duration, StreamItem)> {
    vec![(Duration::ZERO, StreamItem::Event(StreamEvent::text("par")))]
}

/// A scripted model `name` whose first `n` calls fail with `kind`.
fn failing_first(name: &str, kind: ErrorKind, n: usize) -> ScriptedModel {
    (0..n).fold(ScriptedModel::new(name), |m, _| m.fail(kind))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_counted_failures_trip_and_an_open_breaker_refuses_with_a_wait_hint() {
    both(|redis| async move {
        let model = ScriptedModel::new("trips")
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError);
        let s = subject(model, redis.as_deref(), config()).await;
        for _ in 0..3 {
            assert_eq!(s.chat().await.unwrap_err().kind(), ErrorKind::ServerError);
        }
        let e = s.chat().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
        let after = e.retry_after().unwrap();
        assert!(
            after > Duration::ZERO && after <= Duration::from_millis(300),
            "{after:?}"
        );
        assert_eq!(s.breaker.get_ref().calls(), 3);
        assert_eq!(s.breaker.handle().state(), BreakerState::Open);
        assert_eq!(
            s.log.seen(),
            vec![(BreakerState::Closed, BreakerState::Open)]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_a_stream_failing_after_its_first_delta_or_truncated_counts() {
    both(|redis| async move {
        let model = ScriptedModel::new("streams")
            .stream_items(failing_stream_after_first_delta())
            .stream_items(truncated_stream())
            .stream_items(failing_stream_after_first_delta());
        let s = subject(model, redis.as_deref(), config()).await;
        assert_eq!(s.stream().await.unwrap_err().kind(), ErrorKind::Overloaded);
        assert_eq!(
            s.stream().await.unwrap_err().kind(),
            ErrorKind::InvalidResponse
        );
        assert_eq!(s.breaker.handle().state(), BreakerState::Closed);
        assert_eq!(s.stream().await.unwrap_err().kind(), ErrorKind::Overloaded);
        assert_eq!(s.chat().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
        assert_eq!(s.breaker.snapshot().failures, 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_caller_errors_never_count_and_a_success_resets_the_count() {
    both(|redis| async move {
        let model = failing_first("caller", ErrorKind::InvalidRequest, 3)
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .reply("ok")
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .reply("ok");
        let s = subject(model, redis.as_deref(), config()).await;
        for _ in 0..5 {
            s.chat().await.unwrap_err();
        }
        s.chat().await.unwrap();
        for _ in 0..2 {
            assert_eq!(s.chat().await.unwrap_err().kind(), ErrorKind::ServerError);
        }
        s.chat().await.unwrap();
        assert_eq!(s.breaker.handle().state(), BreakerState::Closed);
        assert!(s.log.seen().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_a_half_open_stream_probe_is_judged_at_first_content_and_closes() {
    both(|redis| async move {
        let model = failing_first("probe", ErrorKind::ServerError, 3)
            .stream_items(text_stream(&["a", "b"], Duration::ZERO));
        let s = subject(model, redis.as_deref(), config()).await;
        for _ in 0..3 {
            s.chat().await.unwrap_err();
        }
        tokio::time::sleep(Duration::from_millis(350)).await;
        s.stream().await.unwrap();
        assert_eq!(s.breaker.handle().state(), BreakerState::Closed);
        assert_eq!(
            s.log.seen(),
            vec![
                (BreakerState::Closed, BreakerState::Open),
                (BreakerState::Open, BreakerState::HalfOpen),
                (BreakerState::HalfOpen, BreakerState::Closed),
            ]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_an_active_probe_half_opens_an_open_breaker_and_a_reset_closes_it() {
    both(|redis| async move {
        let mut model = ScriptedModel::new("active");
        for _ in 0..6 {
            model = model.fail(ErrorKind::ServerError);
        }
        let s = subject(
            model,
            redis.as_deref(),
            config().open_for(Duration::from_secs(60)),
        )
        .await;
        for _ in 0..3 {
            s.chat().await.unwrap_err();
        }
        let handle = s.breaker.handle();
        assert!(handle.probe_succeeded());
        s.settle().await;
        assert_eq!(handle.state(), BreakerState::HalfOpen);
        // The next call is the probe; it fails and re-opens.
        assert_eq!(s.chat().await.unwrap_err().kind(), ErrorKind::ServerError);
        assert_eq!(handle.state(), BreakerState::Open);
        handle.reset();
        s.settle().await;
        assert_eq!(handle.state(), BreakerState::Closed);
        s.chat().await.unwrap_err();
    })
    .await;
}

// ---- What only a shared store has -------------------------------------------------------

/// The shared link `vendor`, failing `n` times with a server error, then answering.
fn failing_vendor(n: usize) -> ScriptedModel {
    (0..n).fold(ScriptedModel::new("vendor"), |m, _| {
        m.fail(ErrorKind::ServerError)
    })
}

/// Replicas A (over a vendor that fails three times) and B on `cfg`: B reads the shared state
/// (closed), then A's three failures trip the breaker.
async fn a_trips_after_b_reads(server: &Server, cfg: SharedBreakerConfig) -> (Subject, Subject) {
    let a = subject(failing_vendor(3), Some(server), cfg.clone()).await;
    let b = subject(ScriptedModel::new("vendor"), Some(server), cfg).await;
    b.settle().await;
    for _ in 0..3 {
        a.chat().await.unwrap_err();
    }
    (a, b)
}

async fn redis() -> Option<Server> {
    common::start("the shared breaker tests").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_failing_after_its_first_delta_on_one_replica_counts_for_all() {
    let Some(server) = redis().await else { return };
    let mut model = ScriptedModel::new("vendor");
    for _ in 0..3 {
        model = model.stream_items(failing_stream_after_first_delta());
    }
    let a = subject(model, Some(&server), config()).await;
    let b = subject(ScriptedModel::new("vendor"), Some(&server), config()).await;
    for _ in 0..3 {
        assert_eq!(a.stream().await.unwrap_err().kind(), ErrorKind::Overloaded);
    }
    b.settle().await;
    assert_eq!(b.chat().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
    assert_eq!(b.breaker.get_ref().calls(), 0);
    assert_eq!(b.breaker.handle().state(), BreakerState::Open);
    assert_eq!(
        b.log.seen(),
        vec![(BreakerState::Closed, BreakerState::Open)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_another_replica_trips_a_replica_admits_at_most_lease_calls() {
    let Some(server) = redis().await else { return };
    let lease = 4;
    let cfg = config()
        .open_for(Duration::from_secs(60))
        .lease_calls(lease)
        .lease_ttl(Duration::from_secs(30));
    // B reads the shared state (closed): its lease starts now.
    let (a, b) = a_trips_after_b_reads(&server, cfg).await;
    assert_eq!(a.breaker.handle().state(), BreakerState::Open);
    // B has not synced since the trip: it admits from its cache at most `lease` calls.
    let mut admitted = 0;
    for _ in 0..20 {
        match b
            .breaker
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await
        {
            Ok(_) => admitted += 1,
            Err(e) => assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}"),
        }
    }
    assert!(admitted <= lease, "{admitted} calls after the trip");
    assert_eq!(b.breaker.get_ref().calls(), admitted as usize);
    assert_eq!(b.breaker.handle().state(), BreakerState::Open);
}

/// Callers that find the lease spent at once share one admission script: the ones waiting
/// are admitted from the lease its reply renewed (still at most `lease_calls` per read), not
/// each by a script of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_find_the_lease_spent_share_one_admission_script() {
    let Some(server) = redis().await else { return };
    let cfg = config().lease_calls(4).lease_ttl(Duration::from_secs(30));
    let a = Arc::new(subject(ScriptedModel::new("vendor"), Some(&server), cfg).await);
    a.settle().await;
    let before = server.script_calls().await.unwrap();
    let callers = 64;
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..callers {
        let a = Arc::clone(&a);
        set.spawn(async move {
            a.breaker
                .chat(&ChatRequest::user("hi"), &Context::new())
                .await
                .map(|_| ())
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap().unwrap();
    }
    a.settle().await;
    let sent = server.script_calls().await.unwrap() - before;
    // About one admission per 4 callers, as many renewals sent at half a lease, and the final
    // sync (34 when written); without sharing, every caller past the first lease sent its own
    // admission script besides the renewals (about 120 then).
    assert!(
        sent <= callers * 3 / 4,
        "{sent} scripts for {callers} callers: they did not share admissions"
    );
    assert_eq!(a.breaker.get_ref().calls(), callers as usize);
    assert_eq!(a.breaker.handle().state(), BreakerState::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_another_replica_trips_a_replica_admits_nothing_past_lease_ttl() {
    let Some(server) = redis().await else { return };
    let cfg = config()
        .open_for(Duration::from_secs(60))
        .lease_calls(1_000_000)
        .lease_ttl(Duration::from_millis(50));
    let (_a, b) = a_trips_after_b_reads(&server, cfg).await;
    // The lease's time runs out: B's next call asks Redis and is refused.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let e = b
        .breaker
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
    assert_eq!(b.breaker.get_ref().calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_probe_on_one_replica_lets_another_probe_and_close_it_for_all() {
    let Some(server) = redis().await else { return };
    let cfg = config().open_for(Duration::from_secs(60));
    let failing = failing_vendor(3);
    let a = subject(failing, Some(&server), cfg.clone()).await;
    let b = subject(ScriptedModel::new("vendor"), Some(&server), cfg.clone()).await;
    let c = subject(ScriptedModel::new("vendor"), Some(&server), cfg).await;
    for _ in 0..3 {
        a.chat().await.unwrap_err();
    }
    c.settle().await;
    assert_eq!(c.chat().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
    // A's active prober reached the vendor: the shared breaker is half-open for everyone.
    a.breaker.handle().probe_succeeded();
    a.settle().await;
    // B's call is the one probe; it succeeds and closes the breaker for all.
    b.chat().await.unwrap();
    assert_eq!(b.breaker.handle().state(), BreakerState::Closed);
    c.chat().await.unwrap();
    a.settle().await;
    assert_eq!(a.breaker.handle().state(), BreakerState::Closed);
    // C's listener saw the shared breaker close (from whatever state it last read).
    assert_eq!(c.log.seen().last().map(|t| t.1), Some(BreakerState::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_admits_exactly_one_probe_across_three_replicas() {
    let Some(server) = redis().await else { return };
    // Each replica's vendor answers slowly once the outage is over, so the probe is still out
    // while the others ask.
    let slow = || ScriptedModel::new("vendor").reply_after("ok", Duration::from_millis(400));
    let a = subject(
        failing_vendor(3).reply_after("ok", Duration::from_millis(400)),
        Some(&server),
        config(),
    )
    .await;
    let b = subject(slow(), Some(&server), config()).await;
    let c = subject(slow(), Some(&server), config()).await;
    for _ in 0..3 {
        a.chat().await.unwrap_err();
    }
    b.settle().await;
    c.settle().await;
    assert_eq!(b.breaker.handle().state(), BreakerState::Open);
    // The open spell (300 ms) passes: every replica asks for the probe at once.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let (ra, rb, rc) = tokio::join!(a.chat(), b.chat(), c.chat());
    let results = [ra, rb, rc];
    let probes = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(probes, 1, "{results:?}");
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
    }
    let calls =
        a.breaker.get_ref().calls() - 3 + b.breaker.get_ref().calls() + c.breaker.get_ref().calls();
    assert_eq!(calls, 1, "one probe reached the vendor across all replicas");
    // The probe closed the shared breaker for all.
    b.settle().await;
    c.settle().await;
    assert_eq!(b.breaker.handle().state(), BreakerState::Closed);
    assert_eq!(c.breaker.handle().state(), BreakerState::Closed);
}
