//! Integration tests against a REAL `redis-server`: three replicas (each its own decorators and
//! its own connection, in separate tasks) share one Redis in front of one fake vendor.
//!
//! Each test starts its own `redis-server` child on a free loopback port. Without the binary
//! the tests skip loudly, unless `CI` is set, where they fail.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{Vendor, connect, on_replicas, req, states};
use ripcord_core::{ChatModel, ChatRequest, ChatResponse, Context, ErrorKind, Result};
use ripcord_redis::server::{RedisServer as Server, StartError};
use ripcord_redis::{
    RedisBreakerStore, RedisState, SharedBreaker, SharedBreakerConfig, SharedBudget,
    SharedBudgetConfig, SharedRateLimit, SharedRateLimitConfig, StateOptions, shared_breaker,
    shared_budget, shared_rate_limit,
};
use ripcord_resilience::Breaker;

/// This file's tests: a real `redis-server` on loopback, or a loud skip without the binary
/// (an error under CI).
/// One replica's shared breaker whose every call refreshes the cached view before and waits
/// for its outcome to reach Redis after: these tests pin the shared semantics; the staleness
/// bound of unsynced views is pinned in `tests/breaker_store.rs`.
#[derive(Debug)]
struct Replica<M> {
    breaker: Breaker<M>,
    store: Arc<RedisBreakerStore>,
}

impl<M: ChatModel> Replica<M> {
    fn new(inner: M, state: RedisState, config: SharedBreakerConfig) -> Result<Self> {
        let policy = config.policy()?;
        let store = RedisBreakerStore::new(&inner.id().name, state, &config, &policy)?;
        Ok(Replica {
            breaker: Breaker::with_store(inner, policy, store.clone()),
            store,
        })
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        self.store.sync().await;
        let r = self.breaker.chat(req, ctx).await;
        self.store.sync().await;
        r
    }
}

fn breaker_config() -> SharedBreakerConfig {
    SharedBreakerConfig::default()
        .consecutive_failures(3)
        .open_for(Duration::from_secs(1))
        .probe_timeout(Duration::from_secs(10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_seen_by_one_replica_opens_the_breaker_for_all_and_one_probe_crosses() {
    let Some(server) = common::start("the shared-state tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::from_secs(1));
    let replicas: Vec<Arc<Replica<Arc<Vendor>>>> = states(&server)
        .await
        .into_iter()
        .map(|s| Arc::new(Replica::new(vendor.clone(), s, breaker_config()).unwrap()))
        .collect();

    // Replica 0 alone sees the outage and trips the shared breaker.
    vendor.down.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        let e = replicas[0].chat(&req(), &Context::new()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ServerError);
    }
    assert_eq!(vendor.hits(), 3);

    // The other replicas never saw a failure, yet refuse at once with a retry-after.
    let refused = on_replicas(&replicas[1..], |r| async move {
        r.chat(&req(), &Context::new()).await.unwrap_err()
    })
    .await;
    for e in &refused {
        assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
        let after = e.retry_after().unwrap();
        assert!(
            after > Duration::ZERO && after <= Duration::from_secs(1),
            "{after:?}"
        );
    }
    assert_eq!(vendor.hits(), 3, "open breaker let a call through");

    // Once open-until passes, the vendor is back; every replica fires five calls at once
    // (15 in all) while the probe holds the link for 1 s: exactly one half-open probe
    // crosses the wire in total, every other call is refused as half-open.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    vendor.down.store(false, Ordering::SeqCst);
    let outcomes = on_replicas(&replicas, |r| async move {
        let calls: Vec<_> = (0..5)
            .map(|_| {
                let r = r.clone();
                tokio::spawn(async move { r.chat(&req(), &Context::new()).await.map(|_| ()) })
            })
            .collect();
        let mut v = Vec::new();
        for c in calls {
            v.push(c.await.unwrap());
        }
        v
    })
    .await;
    let all: Vec<_> = outcomes.into_iter().flatten().collect();
    let ok = all.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 1, "more than one half-open probe crossed the wire");
    assert_eq!(vendor.hits(), 4);
    for e in all.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
        // A short hint (1 s by default), not the probe permit's lifetime (10 s here): a chain
        // must not wait out its deadline for a link that is being probed.
        assert!(e.retry_after().unwrap() <= Duration::from_secs(1), "{e}");
    }

    // Closed again for everyone.
    let after = on_replicas(&replicas, |r| async move {
        r.chat(&req(), &Context::new()).await
    })
    .await;
    assert!(after.iter().all(|r| r.is_ok()));
    assert_eq!(vendor.hits(), 3 + 1 + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_probe_reopens_for_all_and_a_dead_probers_permit_expires() {
    let Some(server) = common::start("the shared-state tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    let config = breaker_config().probe_timeout(Duration::from_secs(1));
    let replicas: Vec<Replica<Arc<Vendor>>> = states(&server)
        .await
        .into_iter()
        .map(|s| Replica::new(vendor.clone(), s, config.clone()).unwrap())
        .collect();
    vendor.down.store(true, Ordering::SeqCst);
    for r in &replicas {
        // Failures from different replicas count together: 3 in total trip it.
        let e = r.chat(&req(), &Context::new()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ServerError);
    }
    let e = replicas[0].chat(&req(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(vendor.hits(), 3);

    // Half-open: replica 1 probes, the vendor still fails, the breaker re-opens for all.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let e = replicas[1].chat(&req(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ServerError);
    assert_eq!(vendor.hits(), 4);
    for r in &replicas {
        let e = r.chat(&req(), &Context::new()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    }
    assert_eq!(vendor.hits(), 4);

    // A prober whose call is dropped mid-flight gives its permit back at once (as the local
    // breaker's does); a prober whose *process* died cannot, and its permit expires after
    // probe_timeout, so half-open cannot wedge.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let hang = Vendor::new(Duration::from_secs(3600));
    let prober = Replica::new(
        // Same link name as the vendor: the same shared state.
        hang.clone(),
        connect(&server).await,
        config.clone(),
    )
    .unwrap();
    let dropped = tokio::time::timeout(
        Duration::from_millis(50),
        prober.breaker.chat(&req(), &Context::new()),
    )
    .await;
    assert!(
        dropped.is_err(),
        "the hanging probe should still be running"
    );
    assert_eq!(hang.hits(), 1);
    assert!(prober.store.sync().await);
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let probe_key = "ripcord:v1:{vendor}:breaker:probe";
    let held: Option<String> = redis::cmd("GET")
        .arg(probe_key)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(held, None, "a dropped probe kept its permit");
    // A dead replica's permit: taken, never given back.
    let _: () = redis::cmd("SET")
        .arg(&[probe_key, "dead-replica", "PX", "1000"])
        .query_async(&mut con)
        .await
        .unwrap();
    let e = replicas[2].chat(&req(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    vendor.down.store(false, Ordering::SeqCst);
    replicas[2].chat(&req(), &Context::new()).await.unwrap();
    assert_eq!(vendor.hits(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_test_replicas_keep_answering_on_local_state_and_reconnect() {
    let Some(mut server) = common::start("the shared-state tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    let states = states(&server).await;
    type Stack = SharedBudget<SharedRateLimit<SharedBreaker<Arc<Vendor>>>>;
    let replicas: Vec<Arc<Stack>> = states
        .iter()
        .map(|s| {
            let b = shared_breaker(vendor.clone(), s.clone(), breaker_config()).unwrap();
            let rl = shared_rate_limit(
                b,
                s.clone(),
                SharedRateLimitConfig::default().rpm(6000).replicas(3),
            )
            .unwrap();
            Arc::new(
                shared_budget(
                    rl,
                    s.clone(),
                    SharedBudgetConfig::default().tokens_per_window(1_000_000),
                )
                .unwrap(),
            )
        })
        .collect();
    let acme = || Context::new().with_tenant("acme");
    let first = on_replicas(&replicas, |r| async move { r.chat(&req(), &acme()).await }).await;
    assert!(first.iter().all(|r| r.is_ok()));
    assert!(
        states
            .iter()
            .all(|s| !s.is_degraded() && s.local_calls() == 0)
    );

    server.kill();
    let outcomes = on_replicas(&replicas, |r| async move {
        let mut v = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let res = r.chat(&req(), &acme()).await.map(|_| ());
            v.push((res, started.elapsed()));
        }
        v
    })
    .await;
    for (res, took) in outcomes.into_iter().flatten() {
        res.unwrap();
        // Three bounded Redis attempts (one per decorator, 1 s each here) at most, never a hang.
        assert!(
            took < Duration::from_secs(5),
            "a call took {took:?} with Redis down"
        );
    }
    for s in &states {
        assert!(s.is_degraded());
        assert_eq!(
            s.degradations(),
            1,
            "the outage must be reported once, not per request"
        );
        assert!(s.local_calls() >= 5);
    }
    assert_eq!(vendor.hits(), 3 + 15);

    // Redis comes back on the same port: the replicas return to shared state.
    let _server = Server::start_on(server.port()).await.unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let r = on_replicas(&replicas, |r| async move { r.chat(&req(), &acme()).await }).await;
        assert!(r.iter().all(|r| r.is_ok()));
        if states.iter().all(|s| !s.is_degraded()) {
            break;
        }
        assert!(Instant::now() < until, "the replicas did not reconnect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(states.iter().all(|s| s.degradations() == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_is_namespaced_versioned_and_expires() {
    let Some(server) = common::start("the shared-state tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    let s = connect(&server).await;
    let policy = breaker_config().policy().unwrap();
    let breaker_store =
        RedisBreakerStore::new("vendor", s.clone(), &breaker_config(), &policy).unwrap();
    let stack = shared_budget(
        shared_rate_limit(
            Breaker::with_store(vendor.clone(), policy, breaker_store.clone()),
            s.clone(),
            SharedRateLimitConfig::default().rpm(10).tpm(1000),
        )
        .unwrap(),
        s.clone(),
        SharedBudgetConfig::default(),
    )
    .unwrap();
    let ctx = Context::new().with_tenant("acme");
    stack.chat(&req(), &ctx).await.unwrap();
    // Trip the breaker so its open-until, trips, streak and (after a probe) permit keys exist
    // too.
    vendor.down.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        stack.chat(&req(), &ctx).await.unwrap_err();
    }
    // The failures are reported without making the calls wait: let the trip land.
    assert!(breaker_store.sync().await);
    vendor.down.store(false, Ordering::SeqCst);
    stack.chat(&req(), &ctx).await.unwrap_err();

    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut con)
        .await
        .unwrap();
    for long_lived in [
        "breaker:open",
        "breaker:trips",
        "breaker:streak",
        "budget:acme",
        "rl:rpm",
    ] {
        assert!(
            keys.contains(&format!("ripcord:v1:{{vendor}}:{long_lived}")),
            "{long_lived} missing from {keys:?}"
        );
    }
    for k in &keys {
        assert!(k.starts_with("ripcord:v1:{vendor}:"), "{k}");
        let ttl: i64 = redis::cmd("PTTL")
            .arg(k)
            .query_async(&mut con)
            .await
            .unwrap();
        // -1: a key without a TTL; -2: it expired since KEYS, which is fine.
        assert!(ttl > 0 || ttl == -2, "{k} has no TTL ({ttl})");
    }
}

#[tokio::test]
async fn connecting_to_nothing_fails_with_a_clear_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let e = RedisState::connect(&format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert!(e.to_string().starts_with("redis state: "), "{e}");
    let e = RedisState::connect("not a url").await.unwrap_err();
    assert!(e.to_string().contains("invalid redis URL"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_on_any_replica_resets_the_shared_failure_count() {
    let Some(server) = common::start("the shared-state tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    let replicas: Vec<Replica<Arc<Vendor>>> = states(&server)
        .await
        .into_iter()
        .map(|s| Replica::new(vendor.clone(), s, breaker_config()).unwrap())
        .collect();
    vendor.down.store(true, Ordering::SeqCst);
    for _ in 0..2 {
        replicas[0].chat(&req(), &Context::new()).await.unwrap_err();
    }
    vendor.down.store(false, Ordering::SeqCst);
    replicas[1].chat(&req(), &Context::new()).await.unwrap();
    vendor.down.store(true, Ordering::SeqCst);
    for _ in 0..2 {
        let e = replicas[2].chat(&req(), &Context::new()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ServerError);
    }
    // 2 + 2 failures with a success between: still closed, the vendor is still asked.
    let e = replicas[0].chat(&req(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ServerError, "{e}");
    // That was the third in a row: now open for all.
    let e = replicas[1].chat(&req(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
    assert_eq!(vendor.hits(), 2 + 1 + 2 + 1);
    // Caller-side failures never count.
    let s = connect(&server).await;
    let picky_breaker = Replica::new(
        Arc::new(
            ripcord_core::testing::ScriptedModel::new("picky")
                .fail(ErrorKind::InvalidRequest)
                .fail(ErrorKind::InvalidRequest)
                .fail(ErrorKind::InvalidRequest)
                .fail(ErrorKind::InvalidRequest)
                .reply("ok"),
        ),
        s,
        breaker_config(),
    )
    .unwrap();
    for _ in 0..4 {
        let e = picky_breaker
            .chat(&req(), &Context::new())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
    }
    picky_breaker.chat(&req(), &Context::new()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_url_never_shows_in_errors_or_debug() {
    let Some(server) = common::start("the shared-state tests").await else {
        return;
    };
    let url = format!("redis://:hunter2-secret@127.0.0.1:{}", server.port());
    match RedisState::connect(&url).await {
        Ok(s) => assert!(!format!("{s:?}").contains("hunter2"), "{s:?}"),
        Err(e) => {
            assert!(!e.to_string().contains("hunter2"), "{e}");
            assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_never_holds_a_call_longer_than_the_op_timeout() {
    let Some(server) = common::start("the shared-state tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    // Default options: every Redis operation is bounded by 50 ms.
    let state = RedisState::connect(&server.url()).await.unwrap();
    let breaker = shared_breaker(vendor.clone(), state.clone(), breaker_config()).unwrap();
    breaker.chat(&req(), &Context::new()).await.unwrap();

    // Redis stops answering commands (it still holds the connections) for 3 s.
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "3000", "ALL"])
        .query_async(&mut con)
        .await
        .unwrap();
    // Past the lease: the next call must ask Redis, which does not answer.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = Instant::now();
    breaker.chat(&req(), &Context::new()).await.unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1000),
        "the call waited {took:?} on a stalled Redis"
    );
    assert!(state.is_degraded());
    assert_eq!(state.degradations(), 1);
    assert_eq!(state.local_calls(), 1);
    assert_eq!(vendor.hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_opened_while_redis_is_down_starts_on_local_state_and_joins_later() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let options = StateOptions {
        op_timeout: Duration::from_secs(1),
        retry_interval: Duration::from_millis(200),
        ..StateOptions::default()
    };
    // No server yet: opening is not an error, and does no I/O.
    let state = RedisState::open(&format!("redis://127.0.0.1:{port}"), options).unwrap();
    assert!(!state.is_degraded());
    let vendor = Vendor::new(Duration::ZERO);
    let breaker = shared_breaker(vendor.clone(), state.clone(), breaker_config()).unwrap();
    for _ in 0..5 {
        breaker.chat(&req(), &Context::new()).await.unwrap();
    }
    assert!(state.is_degraded());
    assert_eq!(state.degradations(), 1, "one warning, not one per call");
    assert_eq!(state.local_calls(), 5);
    assert!(!state.ready().await);

    // Redis comes up on that port: the replica joins the shared state.
    let _server = match Server::start_on(port).await {
        Ok(s) => s,
        Err(StartError::NotInstalled) if std::env::var_os("CI").is_none() => return,
        Err(e) => panic!("{e}"),
    };
    let until = Instant::now() + Duration::from_secs(20);
    while !state.ready().await {
        assert!(Instant::now() < until, "the replica did not connect");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = state.local_calls();
    breaker.chat(&req(), &Context::new()).await.unwrap();
    assert!(!state.is_degraded());
    assert_eq!(state.local_calls(), before, "the call did not use Redis");
    assert_eq!(state.degradations(), 1);
    assert!(RedisState::open("not a url", StateOptions::default()).is_err());
}
