//! Two replicas of one pool over one Redis (a REAL `redis-server` child on loopback): a
//! deployment one replica saw throttled, ejected or out of service is left alone by the other,
//! for exactly as long as the block lasts; with Redis gone each replica keeps its own view.
//!
//! Real time (Redis keeps time by its own clock), short waits. Without `redis-server` these
//! skip loudly (an error under `CI`).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{ChatModel, ChatRequest, Context, Error, ErrorKind};
use ripcord_redis::{RedisPoolStore, RedisState, SharedPoolConfig, StateOptions};
use ripcord_resilience::{
    Balance, Deployment, DeploymentState, Ejection, Pool, PoolBlock, PoolPolicy, PoolStore,
};

fn replica(state: &RedisState, east: Arc<ScriptedModel>, west: Arc<ScriptedModel>) -> Pool {
    let policy = PoolPolicy::builder()
        .strategy(Balance::RoundRobin)
        .build()
        .unwrap();
    let store = RedisPoolStore::new(
        "azure",
        state.clone(),
        SharedPoolConfig {
            view_ttl: Duration::ZERO,
        },
    );
    Pool::new(
        "azure",
        vec![
            Deployment::from_arc("east", east as Arc<dyn ChatModel>),
            Deployment::from_arc("west", west as Arc<dyn ChatModel>),
        ],
        policy,
    )
    .unwrap()
    .with_store(store)
}

fn ok(text: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new("az").reply(text).reply(text).reply(text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_seen_by_one_replica_keeps_the_other_off_until_it_ends() {
    let Some(server) = common::start("the shared pool store tests").await else {
        return;
    };
    let (sa, sb) = (
        common::connect(&server).await,
        common::connect(&server).await,
    );
    let wait = Duration::from_millis(1500);
    let throttled = Arc::new(ScriptedModel::new("az").fail_with(
        Error::new(ErrorKind::RateLimited, "429").with_retry_after(wait),
        Duration::ZERO,
    ));
    let a = replica(&sa, throttled, ok("west"));
    let b_east = Arc::new(ScriptedModel::new("az"));
    let b = replica(&sb, Arc::clone(&b_east), Arc::new(ScriptedModel::new("az")));
    let started = Instant::now();
    let r = a
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.provenance.deployment(), Some("west"));
    let ttl: i64 = server
        .command("PTTL ripcord:v1:{azure}:pool:east:cool")
        .and_then(|l| l.trim_start_matches(':').parse().ok())
        .unwrap();
    // The key was written after `started` (by as long as A's call took on a loaded machine), so
    // the cool-down ends by this reading, not by `started + wait`.
    let cool_ends = Instant::now() + Duration::from_millis(ttl.unsigned_abs());
    assert!(
        ttl > 1000 && ttl <= 1500,
        "the key expires with the wait: {ttl}"
    );
    // Replica B never saw the 429: until the wait is over it sends nothing to east.
    let mut calls = 0;
    while started.elapsed() < wait - Duration::from_millis(200) {
        let r = b
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .unwrap();
        assert_eq!(r.provenance.deployment(), Some("west"));
        calls += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(calls > 5, "{calls}");
    assert_eq!(b_east.calls(), 0);
    assert_eq!(
        b.snapshot().deployments[0].state,
        DeploymentState::CoolingDown
    );
    // Once it ends, B goes back to it: within two calls, or a little later where B's last read
    // of the key came back late (B holds what it read from the moment the reply arrived).
    tokio::time::sleep(
        cool_ends.saturating_duration_since(Instant::now()) + Duration::from_millis(20),
    )
    .await;
    let give_up = cool_ends + Duration::from_millis(500);
    let mut after = 0;
    while b_east.calls() == 0 && (after < 2 || Instant::now() < give_up) {
        b.chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .unwrap();
        after += 1;
        if after >= 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(b_east.calls(), 1, "{after} calls after the cool-down");
    assert_eq!(sa.local_calls() + sb.local_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ejections_grow_across_replicas_and_an_outage_is_lifted_for_all() {
    let Some(server) = common::start("the shared pool store tests").await else {
        return;
    };
    let state = common::connect(&server).await;
    let store = RedisPoolStore::new("p", state.clone(), SharedPoolConfig::default());
    let other = RedisPoolStore::new("p", state.clone(), SharedPoolConfig::default());
    let ej =
        Ejection::default().with_ejection_times(Duration::from_secs(10), Duration::from_secs(25));
    let d1 = store
        .publish("east", PoolBlock::Ejection(ej))
        .await
        .unwrap();
    let d2 = other
        .publish("east", PoolBlock::Ejection(ej))
        .await
        .unwrap();
    let d3 = store
        .publish("east", PoolBlock::Ejection(ej))
        .await
        .unwrap();
    assert_eq!(d1, Duration::from_secs(10));
    assert_eq!(d2, Duration::from_secs(20));
    assert_eq!(d3, Duration::from_secs(25), "capped at the maximum");
    // A shorter cooldown never shortens a longer one.
    let long = store
        .publish("west", PoolBlock::Cooldown(Duration::from_secs(9)))
        .await
        .unwrap();
    let short = other
        .publish("west", PoolBlock::Cooldown(Duration::from_secs(2)))
        .await
        .unwrap();
    assert_eq!(long, Duration::from_secs(9));
    assert!(short > Duration::from_secs(8), "{short:?}");
    store
        .publish("west", PoolBlock::Out(ErrorKind::QuotaExhausted))
        .await
        .unwrap();
    let names: Vec<Arc<str>> = vec!["east".into(), "west".into()];
    let view = other.read(&names).await.unwrap();
    assert!(view[0].ejected_left.unwrap() > Duration::from_secs(24));
    assert_eq!(view[0].ejections, 3);
    assert_eq!(view[1].out, Some(ErrorKind::QuotaExhausted));
    assert!(view[1].cooldown_left.unwrap() > Duration::from_secs(8));
    // Within its view_ttl a replica does not read again.
    assert!(other.read(&names).await.is_none());
    // Lifted (an operator): gone for every replica; the ejection count stays.
    store.clear("west").await;
    store.clear("east").await;
    let fresh = RedisPoolStore::new("p", state, SharedPoolConfig::default());
    let view = fresh.read(&names).await.unwrap();
    assert_eq!(view[1].out, None);
    assert_eq!(view[1].cooldown_left, None);
    assert_eq!(view[0].ejected_left, None);
    assert_eq!(view[0].ejections, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_each_replica_keeps_its_own_view_and_says_so() {
    let state = RedisState::open(
        "redis://127.0.0.1:9",
        StateOptions {
            op_timeout: Duration::from_millis(50),
            ..StateOptions::default()
        },
    )
    .unwrap();
    let throttled = Arc::new(ScriptedModel::new("az").fail_with(
        Error::new(ErrorKind::RateLimited, "429").with_retry_after(Duration::from_secs(30)),
        Duration::ZERO,
    ));
    let pool = replica(&state, throttled, ok("west"));
    let r = pool
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.provenance.deployment(), Some("west"));
    assert_eq!(
        pool.snapshot().deployments[0].state,
        DeploymentState::CoolingDown
    );
    let r = pool
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.provenance.deployment(), Some("west"));
    assert!(state.is_degraded());
    assert!(state.local_calls() >= 1, "{}", state.local_calls());
    assert!(state.unsent_writes() >= 1, "{}", state.unsent_writes());
}
