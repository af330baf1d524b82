//! Pool tests, all on paused time: the strategies, exact cooldowns, retries to another
//! deployment, outages, ejection and its growth, streams, and the pool as one chain link.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use ripcord_core::alert::AlertGate;
use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{
    Chain, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Result,
    StreamEvent,
};
use tokio::time::Instant;

use super::*;
use crate::retry::SplitMix64;
use crate::{BreakerPolicy, ChatModelExt};

/// A scripted model that also logs the instant of every call.
#[derive(Debug)]
struct Timed {
    inner: ScriptedModel,
    log: Mutex<Vec<Instant>>,
}

impl Timed {
    fn new(inner: ScriptedModel) -> Arc<Timed> {
        Arc::new(Timed {
            inner,
            log: Mutex::new(Vec::new()),
        })
    }

    fn times(&self) -> Vec<Instant> {
        self.log.lock().unwrap().clone()
    }

    fn calls(&self) -> usize {
        self.inner.calls()
    }
}

#[async_trait]
impl ripcord_core::Decorator for Timed {
    inner_model!(inner: ScriptedModel);
    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        self.log.lock().unwrap().push(Instant::now());
        self.inner.chat(req, ctx).await
    }
    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        self.log.lock().unwrap().push(Instant::now());
        self.inner.stream(req, ctx).await
    }
}

fn ask() -> ChatRequest {
    ChatRequest::user("hi")
}

fn dep(name: &str, m: &Arc<Timed>) -> Deployment {
    Deployment::from_arc(name, Arc::clone(m) as Arc<dyn ChatModel>)
}

fn ok(name: &str) -> Arc<Timed> {
    Timed::new(ScriptedModel::new("pool").reply(name))
}

/// A deployment that fails with each of `kinds` in turn, then answers `reply`.
fn failing(kinds: &[ErrorKind], reply: &str) -> Arc<Timed> {
    let script = kinds
        .iter()
        .fold(ScriptedModel::new("pool"), |m, kind| m.fail(*kind));
    Timed::new(script.reply(reply))
}

fn policy(strategy: Balance) -> PoolPolicyBuilder {
    PoolPolicy::builder()
        .strategy(strategy)
        .rng(Arc::new(SplitMix64::seeded(7)))
}

/// A pool named "pool" over `deployments`, with the policy `policy` builds.
fn pooled(deployments: Vec<Deployment>, policy: PoolPolicyBuilder) -> Pool {
    Pool::new("pool", deployments, policy.build().unwrap()).unwrap()
}

fn throttled(after: Duration) -> Error {
    Error::new(ErrorKind::RateLimited, "429").with_retry_after(after)
}

async fn serve_n(pool: &Pool, n: usize) -> Vec<String> {
    let mut served = Vec::new();
    for _ in 0..n {
        let r = pool.chat(&ask(), &Context::new()).await.unwrap();
        served.push(r.provenance.deployment().unwrap().to_string());
    }
    served
}

fn count(served: &[String], name: &str) -> usize {
    served.iter().filter(|s| *s == name).count()
}

#[tokio::test(start_paused = true)]
async fn round_robin_takes_each_deployment_in_turn() {
    let (a, b, c) = (ok("a"), ok("b"), ok("c"));
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b), dep("c", &c)],
        policy(Balance::RoundRobin),
    );
    let served = serve_n(&pool, 6).await;
    assert_eq!(served, ["a", "b", "c", "a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn weighted_draws_in_proportion_to_the_weights() {
    let (a, b) = (ok("a"), ok("b"));
    let pool = pooled(
        vec![dep("a", &a).weight(3), dep("b", &b).weight(1)],
        policy(Balance::Weighted),
    );
    let served = serve_n(&pool, 400).await;
    let share = count(&served, "a") as f64 / 400.0;
    assert!((0.68..=0.82).contains(&share), "a's share {share}");
}

#[tokio::test(start_paused = true)]
async fn least_in_flight_spreads_concurrent_calls() {
    let slow =
        |n: &str| Timed::new(ScriptedModel::new("pool").reply_after(n, Duration::from_secs(1)));
    let (a, b, c) = (slow("a"), slow("b"), slow("c"));
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b), dep("c", &c)],
        policy(Balance::LeastInFlight),
    );
    let (req, ctx) = (ask(), Context::new());
    let calls = (0..3).map(|_| pool.chat(&req, &ctx));
    let replies = futures::future::join_all(calls).await;
    assert!(replies.iter().all(|r| r.is_ok()));
    assert_eq!((a.calls(), b.calls(), c.calls()), (1, 1, 1));
    assert_eq!(a.inner.peak_concurrency(), 1);
    assert!(pool.snapshot().deployments.iter().all(|d| d.in_flight == 0));
}

#[tokio::test(start_paused = true)]
async fn p2c_peak_ewma_sends_most_calls_to_the_fast_deployment() {
    let a = Timed::new(ScriptedModel::new("pool").reply_after("a", Duration::from_millis(800)));
    let b = Timed::new(ScriptedModel::new("pool").reply_after("b", Duration::from_millis(20)));
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::P2cPeakEwma),
    );
    let served = serve_n(&pool, 50).await;
    assert!(count(&served, "b") >= 45, "{served:?}");
    let snap = pool.snapshot();
    let ewma = |i: usize| snap.deployments[i].latency_ewma_ms.unwrap();
    assert!(ewma(0) > ewma(1) * 5.0, "{snap:?}");
}

#[tokio::test(start_paused = true)]
async fn peak_ewma_believes_a_spike_at_once_and_recovers_gradually() {
    let t0 = Instant::now();
    let decay = Duration::from_secs(10);
    let mut e = deployment::PeakEwma::new(Duration::from_millis(100), t0);
    e.observe(Duration::from_millis(100), t0, decay);
    e.observe(
        Duration::from_millis(900),
        t0 + Duration::from_secs(1),
        decay,
    );
    assert_eq!(e.rtt_ns, 900e6, "a spike replaces the estimate");
    e.observe(
        Duration::from_millis(100),
        t0 + Duration::from_secs(2),
        decay,
    );
    assert!(e.rtt_ns > 800e6 && e.rtt_ns < 900e6, "{}", e.rtt_ns);
}

#[tokio::test(start_paused = true)]
async fn usage_sends_calls_in_proportion_to_each_quota() {
    let (a, b) = (ok("a"), ok("b"));
    let pool = pooled(
        vec![dep("a", &a).rpm(100), dep("b", &b).rpm(300)],
        policy(Balance::Usage),
    );
    let served = serve_n(&pool, 40).await;
    assert_eq!(count(&served, "a"), 10, "{served:?}");
    assert_eq!(count(&served, "b"), 30);
}

#[tokio::test(start_paused = true)]
async fn a_cooled_deployment_gets_no_call_before_its_retry_after() {
    let a = Timed::new(
        ScriptedModel::new("pool")
            .fail_with(throttled(Duration::from_secs(3)), Duration::ZERO)
            .reply("a"),
    );
    let b = Timed::new(
        ScriptedModel::new("pool")
            .fail_with(throttled(Duration::from_secs(5)), Duration::ZERO)
            .reply("b"),
    );
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin),
    );
    let t0 = Instant::now();
    let r = pool
        .chat(
            &ask(),
            &Context::new().with_timeout(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    // Both throttled: the pool waits for the first one back, exactly its retry-after.
    assert_eq!(r.provenance.deployment(), Some("a"));
    let times = a.times();
    assert_eq!(times.len(), 2);
    let gap = times[1] - times[0];
    assert!(gap >= Duration::from_secs(3), "called again after {gap:?}");
    assert!(gap < Duration::from_millis(3010), "waited {gap:?}");
    assert_eq!(r.provenance.attempts.len(), 3);
    assert_eq!(b.calls(), 1);
    // b's own wait is not over: a call now goes to a, never to b early.
    for _ in 0..3 {
        pool.chat(&ask(), &Context::new()).await.unwrap();
    }
    assert_eq!(b.calls(), 1);
    assert!(b.times().iter().all(|t| *t - t0 < Duration::from_secs(5)));
    let snap = pool.snapshot();
    assert_eq!(snap.deployments[1].state, DeploymentState::CoolingDown);
    assert!(snap.deployments[1].cooldown_left_ms > 1_900);
}

#[tokio::test(start_paused = true)]
async fn a_cooldown_past_the_deadline_ends_the_call_at_once_with_the_wait() {
    let a = Timed::new(
        ScriptedModel::new("pool").fail_with(throttled(Duration::from_secs(30)), Duration::ZERO),
    );
    let pool = pooled(vec![dep("a", &a)], policy(Balance::RoundRobin));
    let t0 = Instant::now();
    let ctx = Context::new().with_timeout(Duration::from_secs(5));
    let e = pool.chat(&ask(), &ctx).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert_eq!(Instant::now(), t0, "nothing waited");
    // The next call is refused without reaching the vendor, and says when it may return.
    let refusal = pool.refusal(&ctx).unwrap();
    assert_eq!(refusal.kind(), ErrorKind::LocalRateLimited);
    assert_eq!(refusal.retry_after(), Some(Duration::from_secs(30)));
    let e = pool.chat(&ask(), &ctx).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LocalRateLimited);
    assert_eq!(a.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_goes_to_another_deployment_first() {
    let a = failing(&[ErrorKind::ServerError], "a");
    let b = ok("b");
    // a outweighs b a hundredfold: only the retry rule sends the second attempt to b.
    let pool = pooled(
        vec![dep("a", &a).weight(1000), dep("b", &b).weight(1)],
        policy(Balance::Weighted),
    );
    let r = pool.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(r.provenance.deployment(), Some("b"));
    let kinds: Vec<_> = r
        .provenance
        .attempts
        .iter()
        .map(|x| (x.deployment.as_deref().unwrap().to_owned(), x.error_kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("a".to_owned(), Some(ErrorKind::ServerError)),
            ("b".to_owned(), None)
        ]
    );
    assert_eq!(a.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_same_deployment_is_retried_only_when_no_other_can_serve() {
    let a = failing(&[ErrorKind::ServerError], "a");
    let b = Timed::new(ScriptedModel::new("pool").fail(ErrorKind::QuotaExhausted));
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin),
    )
    .with_alert_gate(Arc::new(AlertGate::default()));
    let r = pool.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(r.provenance.deployment(), Some("a"));
    assert_eq!((a.calls(), b.calls()), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn quota_auth_and_region_take_a_deployment_out_until_reinstated() {
    for kind in [
        ErrorKind::QuotaExhausted,
        ErrorKind::Auth,
        ErrorKind::RegionBlocked,
    ] {
        let a = Timed::new(ScriptedModel::new("pool").fail(kind).reply("a"));
        let b = ok("b");
        let gate = Arc::new(AlertGate::default());
        let pool = pooled(
            vec![dep("a", &a), dep("b", &b)],
            policy(Balance::RoundRobin).out_of_service_recheck(None),
        )
        .with_alert_gate(Arc::clone(&gate));
        let served = serve_n(&pool, 5).await;
        assert!(served.iter().all(|s| s == "b"), "{kind:?}: {served:?}");
        assert_eq!(a.calls(), 1, "{kind:?}");
        let snap = pool.snapshot();
        assert_eq!(snap.deployments[0].state, DeploymentState::OutOfService);
        assert_eq!(snap.deployments[0].out_reason, Some(kind));
        // The alert went through the gate under pool/deployment (a second one is held back).
        assert_eq!(gate.admit("pool/a", kind), None, "{kind:?}");
        // Time alone does not bring it back (trial calls are off here); an operator does.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(pool.snapshot().available(), 1);
        assert!(pool.handle().reinstate("a"));
        assert!(!pool.handle().reinstate("nope"));
        let served = serve_n(&pool, 4).await;
        assert_eq!(count(&served, "a"), 2, "{kind:?}: {served:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_out_of_service_deployment_gets_one_trial_call_per_period() {
    let a = failing(&[ErrorKind::QuotaExhausted; 2], "a");
    let b = ok("b");
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin).out_of_service_recheck(Some(Duration::from_secs(60))),
    )
    .with_alert_gate(Arc::new(AlertGate::default()));
    let t0 = Instant::now();
    serve_n(&pool, 1).await;
    assert_eq!(pool.snapshot().deployments[0].cooldown_left_ms, 60_000);
    tokio::time::sleep(Duration::from_secs(59)).await;
    serve_n(&pool, 4).await;
    assert_eq!(a.calls(), 1, "no call before the period ends");
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The trial fails (still no quota): out for another period, the call served by b.
    serve_n(&pool, 4).await;
    assert_eq!(a.calls(), 2);
    assert_eq!(a.times()[1] - t0, Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(60)).await;
    // This trial is answered: a is back in the rotation.
    let served = serve_n(&pool, 4).await;
    assert_eq!(a.calls(), 4, "{served:?}");
    assert_eq!(
        pool.snapshot().deployments[0].state,
        DeploymentState::Available
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_fault_is_not_shopped_around_the_deployments() {
    for kind in [
        ErrorKind::ContextLengthExceeded,
        ErrorKind::ContentFiltered,
        ErrorKind::InvalidRequest,
    ] {
        let a = Timed::new(ScriptedModel::new("pool").fail(kind));
        let b = ok("b");
        let pool = pooled(
            vec![dep("a", &a), dep("b", &b)],
            policy(Balance::RoundRobin),
        );
        let e = pool.chat(&ask(), &Context::new()).await.unwrap_err();
        assert_eq!(e.kind(), kind);
        assert_eq!(b.calls(), 0, "{kind:?}");
        assert_eq!(pool.snapshot().available(), 2, "{kind:?} says nothing of a");
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_not_retry_safe_is_not_resent_after_an_ambiguous_failure() {
    let a = Timed::new(ScriptedModel::new("pool").fail_with(
        Error::new(ErrorKind::Timeout, "read timed out").with_request_delivered(),
        Duration::ZERO,
    ));
    let b = ok("b");
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin),
    );
    let ctx = Context::new().with_retry_safe(false);
    assert!(pool.chat(&ask(), &ctx).await.is_err());
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_on_one_deployment_passes_it_over_without_a_call() {
    let a = Arc::new(ScriptedModel::new("pool").fail(ErrorKind::ServerError));
    let guarded = Arc::clone(&a).with_breaker(
        BreakerPolicy::builder()
            .consecutive_failures(1)
            .open_for(Duration::from_secs(60))
            .background_probe(None)
            .build()
            .unwrap(),
    );
    let b = ok("b");
    let pool = pooled(
        vec![Deployment::new("a", guarded), dep("b", &b)],
        policy(Balance::RoundRobin).no_ejection(),
    );
    let served = serve_n(&pool, 6).await;
    assert!(served.iter().all(|s| s == "b"));
    assert_eq!(
        a.calls(),
        1,
        "the breaker opened after one failure and refused after"
    );
}

#[tokio::test(start_paused = true)]
async fn every_deployment_failing_returns_every_attempt_and_the_chain_falls_back() {
    let a = Timed::new(ScriptedModel::new("pool").fail(ErrorKind::ServerError));
    let b = Timed::new(ScriptedModel::new("pool").fail(ErrorKind::Overloaded));
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin).max_attempts(2),
    );
    let chain = Chain::builder()
        .link(pool)
        .link(ScriptedModel::new("backup").reply("backup"))
        .build()
        .unwrap();
    let r = chain.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(r.served_by(), "backup");
    let deployments: Vec<_> = r
        .provenance
        .attempts
        .iter()
        .map(|x| (x.provider.to_string(), x.deployment.clone()))
        .collect();
    assert_eq!(
        deployments,
        [
            ("pool".to_owned(), Some("a".into())),
            ("pool".to_owned(), Some("b".into())),
            ("backup".to_owned(), None)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn in_a_chain_the_pool_is_one_link_naming_its_deployment() {
    let a = Timed::new(ScriptedModel::new("pool").fail(ErrorKind::ServerError));
    let b = ok("b");
    let backup = Arc::new(ScriptedModel::new("backup").reply("backup"));
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin),
    );
    let chain = Chain::builder()
        .link(pool)
        .link(Arc::clone(&backup))
        .build()
        .unwrap();
    let r = chain.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(r.served_by(), "pool");
    assert_eq!(r.provenance.deployment(), Some("b"));
    assert!(!r.provenance.degraded, "served by the first link");
    assert_eq!(backup.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_stream_retries_another_deployment_before_first_content() {
    let a = Timed::new(ScriptedModel::new("pool").stream_items(vec![(
        Duration::ZERO,
        StreamItem::Error(Error::new(ErrorKind::Overloaded, "529 in-band")),
    )]));
    let b = Timed::new(
        ScriptedModel::new("pool")
            .stream_items(text_stream(&["he", "llo"], Duration::from_millis(5))),
    );
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin),
    );
    let mut s = pool.stream(&ask(), &Context::new()).await.unwrap();
    assert_eq!(
        pool.snapshot().deployments[1].in_flight,
        1,
        "held while streaming"
    );
    let mut text = String::new();
    let mut deployment = None;
    while let Some(ev) = s.next().await {
        match ev.unwrap() {
            StreamEvent::TextDelta { text: t } => text.push_str(&t),
            StreamEvent::Provenance { provenance } => {
                deployment = deployment.or(provenance.deployment().map(str::to_owned));
            }
            _ => {}
        }
    }
    drop(s);
    assert_eq!(text, "hello");
    assert_eq!(deployment.as_deref(), Some("b"));
    let snap = pool.snapshot();
    assert_eq!(snap.deployments[1].in_flight, 0);
    assert_eq!(snap.deployments[1].successes, 1);
}

/// A script failing 40% of calls and never twice in a row (so never five).
fn flaky(n: usize) -> ScriptedModel {
    let mut m = ScriptedModel::new("pool");
    for i in 0..n {
        m = if i % 5 == 1 || i % 5 == 3 {
            m.fail(ErrorKind::ServerError)
        } else {
            m.reply("flaky")
        };
    }
    m
}

fn ejection() -> Ejection {
    Ejection::default()
        .with_min_requests(10)
        .with_failure_threshold(0.3)
        .with_interval(Duration::from_secs(60))
        .with_ejection_times(Duration::from_secs(30), Duration::from_secs(300))
}

#[tokio::test(start_paused = true)]
async fn a_deployment_failing_forty_percent_is_ejected_for_growing_intervals() {
    let a = Timed::new(flaky(400));
    let b = ok("b");
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin).ejection(ejection()),
    );
    // Round robin: a gets every other first attempt until its tenth call ejects it.
    while pool.snapshot().deployments[0].state != DeploymentState::Ejected {
        pool.chat(&ask(), &Context::new()).await.unwrap();
        assert!(a.calls() <= 10);
    }
    let ejected_at = Instant::now();
    assert_eq!(a.calls(), 10);
    assert_eq!(pool.snapshot().deployments[0].ejections, 1);
    assert_eq!(pool.snapshot().deployments[0].cooldown_left_ms, 30_000);
    // While ejected it gets nothing.
    serve_n(&pool, 20).await;
    assert_eq!(a.calls(), 10);
    tokio::time::sleep_until(ejected_at + Duration::from_secs(30)).await;
    assert_eq!(
        pool.snapshot().deployments[0].state,
        DeploymentState::Available
    );
    // Still flaky: the second ejection lasts twice as long.
    while pool.snapshot().deployments[0].state != DeploymentState::Ejected {
        pool.chat(&ask(), &Context::new()).await.unwrap();
    }
    let snap = pool.snapshot();
    assert_eq!(snap.deployments[0].ejections, 2);
    assert_eq!(snap.deployments[0].cooldown_left_ms, 60_000);
}

#[tokio::test(start_paused = true)]
async fn the_floor_of_healthy_deployments_is_never_ejected() {
    let (a, b) = (Timed::new(flaky(400)), Timed::new(flaky(400)));
    let pool = pooled(
        vec![dep("a", &a), dep("b", &b)],
        policy(Balance::RoundRobin).ejection(ejection().with_min_healthy(1)),
    );
    for _ in 0..40 {
        let _ = pool.chat(&ask(), &Context::new()).await;
    }
    let snap = pool.snapshot();
    let ejected = snap
        .deployments
        .iter()
        .filter(|d| d.state == DeploymentState::Ejected)
        .count();
    assert_eq!(ejected, 1, "{snap:?}");
}

#[tokio::test(start_paused = true)]
async fn a_clean_window_takes_one_off_the_ejection_multiplier() {
    let t0 = Instant::now();
    let e = ejection();
    let mut h = deployment::Health::new(&PoolPolicy::default(), t0);
    h.eject(t0, &e);
    h.eject(t0, &e);
    assert_eq!(h.ejections, 2);
    // Back, and a whole clean window passes.
    let back = t0 + Duration::from_secs(61);
    for _ in 0..10 {
        h.count(false, back, &e);
    }
    assert_eq!(h.ejections, 1);
    h.count(false, back + Duration::from_secs(61), &e);
    assert_eq!(h.ejections, 0);
}

#[test]
fn bad_settings_are_refused_by_name() {
    let e = PoolPolicy::builder().max_attempts(0).build().unwrap_err();
    assert_eq!(e.setting(), "max_attempts");
    let e = PoolPolicy::builder()
        .ejection(Ejection::default().with_failure_threshold(1.5))
        .build()
        .unwrap_err();
    assert_eq!(e.setting(), "ejection.failure_threshold");
    let e = Pool::new("p", Vec::new(), PoolPolicy::default()).unwrap_err();
    assert!(e.reason().contains("at least one deployment"), "{e}");
    let twice = vec![
        Deployment::new("a", ScriptedModel::new("p")),
        Deployment::new("a", ScriptedModel::new("p")),
    ];
    let e = Pool::new("p", twice, PoolPolicy::default()).unwrap_err();
    assert!(e.reason().contains("twice"), "{e}");
}
