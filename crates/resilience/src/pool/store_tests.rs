//! The pool over a shared store, on paused time: two pools (two replicas) over one in-memory
//! store that behaves like the Redis one (blocks expire when they end, ejections are counted
//! across replicas), so what one replica learns keeps the other off the deployment.

use std::collections::HashMap;
use std::sync::Mutex;

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{ChatModel, ChatRequest, Context, Error};
use tokio::time::Instant;

use super::*;
use crate::pool::{Balance, Deployment, DeploymentState, Pool, PoolPolicy};
use crate::retry::SplitMix64;

#[derive(Debug, Default, Clone)]
struct Entry {
    cool: Option<Instant>,
    eject: Option<Instant>,
    ejections: u32,
    out: Option<ErrorKind>,
}

/// One "Redis" for both replicas.
#[derive(Debug, Default)]
struct Fake {
    map: Mutex<HashMap<String, Entry>>,
    reads: Mutex<u32>,
    down: Mutex<bool>,
}

#[async_trait]
impl PoolStore for Fake {
    fn is_shared(&self) -> bool {
        true
    }

    async fn publish(&self, deployment: &str, block: PoolBlock) -> Option<Duration> {
        if *self.down.lock().unwrap() {
            return None;
        }
        let now = Instant::now();
        let mut map = self.map.lock().unwrap();
        let e = map.entry(deployment.to_owned()).or_default();
        match block {
            PoolBlock::Cooldown(d) => {
                let until = e
                    .cool
                    .filter(|t| *t > now)
                    .map_or(now + d, |t| t.max(now + d));
                e.cool = Some(until);
                Some(until - now)
            }
            PoolBlock::Ejection(ej) => {
                e.ejections += 1;
                let d = ej.ejection_time(e.ejections);
                e.eject = Some(now + d);
                Some(d)
            }
            PoolBlock::Out(kind) => {
                e.out = Some(kind);
                Some(Duration::ZERO)
            }
        }
    }

    async fn read(&self, deployments: &[Arc<str>]) -> Option<Vec<SharedBlocks>> {
        if *self.down.lock().unwrap() {
            return None;
        }
        *self.reads.lock().unwrap() += 1;
        let now = Instant::now();
        let map = self.map.lock().unwrap();
        let left = |t: Option<Instant>| t.filter(|t| *t > now).map(|t| t - now);
        Some(
            deployments
                .iter()
                .map(|d| {
                    let e = map.get(&**d).cloned().unwrap_or_default();
                    SharedBlocks::new(left(e.cool), left(e.eject), e.ejections, e.out)
                })
                .collect(),
        )
    }

    async fn clear(&self, deployment: &str) {
        if let Some(e) = self.map.lock().unwrap().get_mut(deployment) {
            e.cool = None;
            e.eject = None;
            e.out = None;
        }
    }
}

fn replica(store: &Arc<Fake>, east: ScriptedModel, west: ScriptedModel) -> Pool {
    let policy = PoolPolicy::builder()
        .strategy(Balance::RoundRobin)
        .rng(Arc::new(SplitMix64::seeded(3)))
        .build()
        .unwrap();
    Pool::new(
        "azure",
        vec![Deployment::new("east", east), Deployment::new("west", west)],
        policy,
    )
    .unwrap()
    .with_store(Arc::clone(store) as Arc<dyn PoolStore>)
}

fn throttled(after: Duration) -> Error {
    Error::new(ErrorKind::RateLimited, "429").with_retry_after(after)
}

/// A replica whose east deployment answers its first call with a 429 asking for 20 s, and
/// whose west deployment answers "west".
fn throttled_east(store: &Arc<Fake>) -> Pool {
    replica(
        store,
        ScriptedModel::new("az").fail_with(throttled(Duration::from_secs(20)), Duration::ZERO),
        ScriptedModel::new("az").reply("west"),
    )
}

#[tokio::test(start_paused = true)]
async fn a_cooldown_seen_by_one_replica_keeps_the_other_off_until_it_ends() {
    let store = Arc::new(Fake::default());
    let a = throttled_east(&store);
    let b_east = Arc::new(ScriptedModel::new("az").reply("east"));
    let b = Pool::new(
        "azure",
        vec![
            Deployment::from_arc("east", Arc::clone(&b_east) as Arc<dyn ChatModel>),
            Deployment::new("west", ScriptedModel::new("az").reply("west")),
        ],
        PoolPolicy::builder()
            .strategy(Balance::RoundRobin)
            .build()
            .unwrap(),
    )
    .unwrap()
    .with_store(Arc::clone(&store) as Arc<dyn PoolStore>);
    let t0 = Instant::now();
    let r = a
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.provenance.deployment(), Some("west"));
    // Replica B never saw the 429, yet sends nothing to east while the wait lasts.
    for _ in 0..6 {
        let r = b
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .unwrap();
        assert_eq!(r.provenance.deployment(), Some("west"));
        tokio::time::advance(Duration::from_secs(3)).await;
    }
    assert_eq!(b_east.calls(), 0);
    assert_eq!(
        b.snapshot().deployments[0].state,
        DeploymentState::CoolingDown
    );
    // Exactly at the end of the vendor's wait it is back, on B too.
    let left = Duration::from_secs(20).saturating_sub(Instant::now() - t0);
    tokio::time::advance(left).await;
    let mut served = Vec::new();
    for _ in 0..2 {
        let r = b
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .unwrap();
        served.push(r.provenance.deployment().unwrap_or_default().to_owned());
    }
    assert!(served.iter().any(|d| d == "east"), "{served:?}");
    assert_eq!(b_east.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_outage_is_shared_and_an_operator_lifts_it_everywhere() {
    let store = Arc::new(Fake::default());
    let a = replica(
        &store,
        ScriptedModel::new("az").fail(ErrorKind::Auth),
        ScriptedModel::new("az").reply("west"),
    );
    let b = replica(
        &store,
        ScriptedModel::new("az").reply("east"),
        ScriptedModel::new("az").reply("west"),
    );
    a.chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    b.chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    let snap = b.snapshot();
    assert_eq!(snap.deployments[0].state, DeploymentState::OutOfService);
    assert_eq!(snap.deployments[0].out_reason, Some(ErrorKind::Auth));
    // The operator reinstates it on replica A; B hears it through the store.
    assert!(a.handle().reinstate("east"));
    // The store's write is sent without waiting: let it run.
    tokio::task::yield_now().await;
    assert!(store.map.lock().unwrap()["east"].out.is_none());
    b.chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert_eq!(
        b.snapshot().deployments[0].state,
        DeploymentState::Available
    );
}

/// Tells the store that `pool` ejected its first deployment (east) under `ej`.
async fn spread_ejection(pool: &Pool, ej: &Ejection) {
    let spread = Spread {
        eject: Some(*ej),
        ..Spread::default()
    };
    pool.shared.spread(0, spread).await;
}

#[tokio::test(start_paused = true)]
async fn ejections_grow_with_the_count_across_replicas() {
    let store = Arc::new(Fake::default());
    let ej =
        Ejection::default().with_ejection_times(Duration::from_secs(30), Duration::from_secs(300));
    let a = replica(&store, ScriptedModel::new("az"), ScriptedModel::new("az"));
    let b = replica(&store, ScriptedModel::new("az"), ScriptedModel::new("az"));
    // Replica A ejected east once before; now B ejects it: the second in a row, 60 s.
    spread_ejection(&a, &ej).await;
    b.shared.slots[0].health().eject(Instant::now(), &ej);
    spread_ejection(&b, &ej).await;
    let snap = b.snapshot();
    assert_eq!(snap.deployments[0].state, DeploymentState::Ejected);
    assert!(snap.deployments[0].cooldown_left_ms >= 59_000, "{snap:?}");
    // A merges the longer ejection and the count.
    a.chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    let snap = a.snapshot();
    assert_eq!(snap.deployments[0].state, DeploymentState::Ejected);
    assert!(snap.deployments[0].cooldown_left_ms >= 59_000, "{snap:?}");
    assert_eq!(snap.deployments[0].ejections, 2);
}

#[tokio::test(start_paused = true)]
async fn a_store_that_does_not_answer_leaves_each_replica_its_own_view() {
    let store = Arc::new(Fake::default());
    *store.down.lock().unwrap() = true;
    let a = throttled_east(&store);
    let r = a
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.provenance.deployment(), Some("west"));
    // Its own cooldown holds on A all the same.
    assert_eq!(
        a.snapshot().deployments[0].state,
        DeploymentState::CoolingDown
    );
    assert!(store.map.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_local_store_is_never_asked() {
    let pool = Pool::new(
        "p",
        vec![Deployment::new("a", ScriptedModel::new("az"))],
        PoolPolicy::builder().build().unwrap(),
    )
    .unwrap();
    assert!(!pool.shared.store.is_shared());
    pool.chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert!(LocalPoolStore.read(&pool.shared.names).await.is_none());
}
