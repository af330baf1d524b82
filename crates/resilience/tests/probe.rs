//! Active health probes, on paused tokio time.

// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ripcord_core::testing::{FnModel, ScriptedModel};
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, Context, ErrorKind, ModelId,
};
use ripcord_resilience::*;
use tokio::time::Instant;

/// What each call of [`recorder`] was: when, the request, and its deadline.
type Calls = Arc<Mutex<Vec<(Instant, ChatRequest, Option<Instant>)>>>;

/// An instant model that records when it was called and with what.
fn recorder() -> (Arc<impl ChatModel>, Calls) {
    let calls = Calls::default();
    let log = Arc::clone(&calls);
    let model = FnModel::new(
        ModelId::new("rec", "rec-model"),
        Capabilities::new(8192, 512),
        move |req: &ChatRequest, ctx: &Context| {
            log.lock()
                .unwrap()
                .push((Instant::now(), req.clone(), ctx.deadline()));
            Ok(ChatResponse::new("pong"))
        },
    );
    (Arc::new(model), calls)
}

fn times(calls: &Calls) -> Vec<Instant> {
    calls.lock().unwrap().iter().map(|c| c.0).collect()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Probes every `interval` moved by up to ± `jitter`, each allowed 1 s, healthy links too; to be
/// set further.
fn probing(interval: Duration, jitter: f64) -> ProbePolicyBuilder {
    ProbePolicy::builder()
        .interval(interval)
        .jitter(jitter)
        .timeout(secs(1))
        .probe_healthy(true)
}

/// Probes every 10 s without jitter, each allowed `timeout`; with `probe_healthy`, healthy links
/// are probed too.
fn every_10s(timeout: Duration, probe_healthy: bool) -> ProbePolicy {
    let b = ProbePolicy::builder()
        .interval(secs(10))
        .jitter(0.0)
        .timeout(timeout);
    let b = if probe_healthy {
        b.probe_healthy(true)
    } else {
        b
    };
    b.build().unwrap()
}

fn breaker(open_for: Duration) -> BreakerPolicy {
    BreakerPolicy::builder()
        .consecutive_failures(1)
        .open_for(open_for)
        .build()
        .unwrap()
}

/// A link to `vendor`: a breaker open for `open_for` after one failure, inside health that
/// reads the breaker.
fn guarded(vendor: &Arc<ScriptedModel>, open_for: Duration) -> Link {
    let link = vendor.clone().with_breaker(breaker(open_for));
    let breaker = link.handle();
    link.with_health(HealthPolicy::builder().breaker(breaker).build().unwrap())
}

/// The link [`guarded`] builds.
type Link = Health<Breaker<Arc<ScriptedModel>>>;

/// Probes `vendor` under `policy`, reporting to `link`'s breaker and health.
fn probing_link(vendor: &Arc<ScriptedModel>, link: &Link, policy: ProbePolicy) -> Prober {
    Prober::builder(vendor.clone(), policy)
        .breaker(link.get_ref().handle())
        .health(link.handle())
        .spawn()
}

#[tokio::test(start_paused = true)]
async fn probes_follow_the_interval_within_the_jitter_bounds() {
    let (model, calls) = recorder();
    let policy = probing(secs(10), 0.3).seed(42).build().unwrap();
    let start = Instant::now();
    let prober = Prober::builder(model.clone(), policy).spawn();
    tokio::time::sleep(secs(300)).await;

    let times = times(&calls);
    assert!(times.len() >= 300 / 13, "only {} probes", times.len());
    assert!(times.len() <= 300 / 7 + 1, "{} probes", times.len());
    let mut prev = start;
    let mut gaps = Vec::new();
    for t in &times {
        let gap = *t - prev;
        assert!(
            gap >= secs(7) && gap <= secs(13),
            "gap {gap:?} outside 10 s ± 30 %"
        );
        gaps.push(gap);
        prev = *t;
    }
    gaps.sort();
    gaps.dedup();
    assert!(gaps.len() > 3, "the jitter moved nothing: {gaps:?}");
    assert_eq!(prober.stats().probes, times.len() as u64);
    assert_eq!(prober.stats().ok, times.len() as u64);

    // The configured cheap request, under the probe timeout as its deadline.
    let calls = calls.lock().unwrap();
    let (at, req, deadline) = &calls[0];
    assert_eq!(req.max_tokens, Some(1));
    assert_eq!(req.messages[0].text(), "ping");
    assert_eq!(*deadline, Some(*at + secs(1)));
}

#[tokio::test(start_paused = true)]
async fn zero_jitter_probes_on_the_dot_with_a_custom_request() {
    let (model, calls) = recorder();
    let policy = probing(secs(5), 0.0)
        .request(ChatRequest::user("Reply with OK.").with_max_tokens(2))
        .build()
        .unwrap();
    let start = Instant::now();
    let _prober = Prober::builder(model.clone(), policy).spawn();
    tokio::time::sleep(Duration::from_millis(20_500)).await;
    let expected: Vec<Instant> = (1..=4).map(|n| start + secs(5 * n)).collect();
    assert_eq!(times(&calls), expected);
    assert_eq!(
        calls.lock().unwrap()[0].1.messages[0].text(),
        "Reply with OK."
    );
}

#[tokio::test(start_paused = true)]
async fn closed_and_healthy_links_are_not_probed_unless_configured() {
    let vendor = Arc::new(ScriptedModel::new("openai"));
    let link = guarded(&vendor, secs(300));
    link.chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert_eq!(link.snapshot().status, HealthStatus::Healthy);

    let policy = every_10s(secs(1), false);
    let prober = probing_link(&vendor, &link, policy.clone());
    tokio::time::sleep(secs(105)).await;
    assert_eq!(
        vendor.calls(),
        1,
        "only the caller's call reached the vendor"
    );
    assert_eq!(prober.stats().probes, 0);
    assert_eq!(prober.stats().skipped, 10);
    assert!(link.snapshot().probe.is_none());
    drop(prober);

    // The same link with `probe_healthy` set is probed.
    let policy = every_10s(secs(1), true);
    let prober = probing_link(&vendor, &link, policy);
    tokio::time::sleep(secs(35)).await;
    assert_eq!(prober.stats().probes, 3);
    assert_eq!(vendor.calls(), 4);
    // Probes stay out of the callers' numbers.
    let snap = link.snapshot();
    assert_eq!(snap.calls, 1);
    assert_eq!(snap.latency_ewma_ms, Some(0.0));
    let probe = snap.probe.unwrap();
    assert!(probe.ok);
    assert_eq!(probe.probes, 3);
    assert_eq!(probe.failures, 0);
}

#[tokio::test(start_paused = true)]
async fn an_open_link_that_answers_a_probe_goes_half_open_early() {
    // Fails the caller's call, then recovers.
    let vendor = Arc::new(
        ScriptedModel::new("openai")
            .fail(ErrorKind::ServerError)
            .reply("pong"),
    );
    let link = guarded(&vendor, secs(600));
    let req = ChatRequest::user("hi");
    assert!(link.chat(&req, &Context::new()).await.is_err());
    assert_eq!(link.get_ref().snapshot().state, BreakerState::Open);
    let refused = link.chat(&req, &Context::new()).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::CircuitOpen);

    let policy = every_10s(secs(2), false);
    let prober = probing_link(&vendor, &link, policy);
    tokio::time::sleep(secs(11)).await;
    let breaker_now = link.get_ref().snapshot();
    assert_eq!(breaker_now.state, BreakerState::HalfOpen);
    assert_eq!(
        breaker_now.history.last().map(|t| (t.from, t.to)),
        Some((BreakerState::Open, BreakerState::HalfOpen))
    );
    assert_eq!(prober.stats().early_half_open, 1);
    let snap = link.snapshot();
    assert_eq!(snap.status, HealthStatus::Degraded);
    assert!(snap.probe.as_ref().unwrap().ok);

    // The next real call is the half-open probe and closes the breaker, 589 s early.
    let reply = link.chat(&req, &Context::new()).await.unwrap();
    assert_eq!(reply.text(), "pong");
    assert_eq!(link.get_ref().snapshot().state, BreakerState::Closed);

    // Closed and healthy again: the prober goes quiet.
    let probes = prober.stats().probes;
    tokio::time::sleep(secs(100)).await;
    assert_eq!(prober.stats().probes, probes);
}

#[tokio::test(start_paused = true)]
async fn a_failing_probe_leaves_the_breaker_open_and_is_recorded() {
    let vendor = Arc::new(ScriptedModel::new("openai").fail(ErrorKind::Overloaded));
    let link = vendor.clone().with_breaker(breaker(secs(600)));
    assert!(
        link.chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .is_err()
    );
    let health = HealthPolicy::builder()
        .breaker(link.handle())
        .build()
        .unwrap();
    let health = vendor.clone().with_health(health);
    let policy = every_10s(secs(2), false);
    let prober = Prober::builder(vendor.clone(), policy)
        .breaker(link.handle())
        .health(health.handle())
        .spawn();
    tokio::time::sleep(secs(31)).await;
    assert_eq!(link.snapshot().state, BreakerState::Open);
    let stats = prober.stats();
    assert_eq!(
        (stats.probes, stats.failed, stats.early_half_open),
        (3, 3, 0)
    );
    let probe = health.snapshot().probe.unwrap();
    assert!(!probe.ok);
    assert_eq!(probe.error, Some(ErrorKind::Overloaded));
    assert_eq!(probe.age_ms, 1000.0);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_probe_is_cut_at_its_timeout_and_never_overlaps() {
    let vendor = Arc::new(ScriptedModel::new("openai").hang());
    let health = vendor.clone().with_health(HealthPolicy::default());
    let policy = every_10s(secs(2), true);
    let prober = Prober::builder(vendor.clone(), policy)
        .health(health.handle())
        .spawn();
    tokio::time::sleep(Duration::from_millis(12_500)).await;
    let probe = health.snapshot().probe.unwrap();
    assert_eq!(probe.error, Some(ErrorKind::Timeout));
    assert_eq!(probe.latency_ms, 2000.0);
    assert_eq!(probe.age_ms, 500.0);
    // A link that has only failed probes reads as unhealthy, not unknown.
    assert_eq!(health.snapshot().status, HealthStatus::Unhealthy);
    tokio::time::sleep(secs(100)).await;
    assert_eq!(prober.stats().probes, vendor.calls() as u64);
    assert_eq!(prober.stats().failed, prober.stats().probes);
    assert_eq!(vendor.peak_concurrency(), 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_prober_stops_probing() {
    let vendor = Arc::new(ScriptedModel::new("openai"));
    let policy = every_10s(secs(1), true);
    let prober = Prober::builder(vendor.clone(), policy).spawn();
    assert_eq!(prober.link(), "openai");
    tokio::time::sleep(secs(25)).await;
    assert_eq!(vendor.calls(), 2);
    assert_eq!(Arc::strong_count(&vendor), 2);
    drop(prober);
    tokio::time::sleep(secs(100)).await;
    assert_eq!(vendor.calls(), 2);
    // The aborted task released its model: nothing is left running.
    assert_eq!(Arc::strong_count(&vendor), 1);
}

#[tokio::test(start_paused = true)]
async fn the_loop_can_be_driven_as_a_future() {
    let vendor = Arc::new(ScriptedModel::new("openai"));
    let policy = every_10s(secs(1), true);
    let (counters, run) = Prober::builder(vendor.clone(), policy).run();
    assert!(tokio::time::timeout(secs(35), run).await.is_err());
    assert_eq!(counters.stats().probes, 3);
    tokio::time::sleep(secs(100)).await;
    assert_eq!(vendor.calls(), 3);
}

#[test]
fn bad_settings_are_refused_with_the_setting_named() {
    let b = ProbePolicy::builder;
    for (case, built, setting) in [
        ("zero interval", b().interval(Duration::ZERO), "interval"),
        ("jitter of 1", b().jitter(1.0), "jitter"),
        ("NaN jitter", b().jitter(f64::NAN), "jitter"),
        (
            "timeout over the shortest gap",
            b().interval(secs(10)).jitter(0.5).timeout(secs(6)),
            "timeout",
        ),
        (
            "no messages",
            b().request(ChatRequest::new(Vec::new())),
            "request",
        ),
    ] {
        let e = built.build().unwrap_err();
        assert_eq!((e.policy(), e.setting()), ("probe", setting), "{case}");
    }
    assert!(ProbePolicy::builder().build().is_ok());
}

#[tokio::test(start_paused = true)]
async fn an_unknown_link_is_probed_until_a_probe_answers() {
    // Two failed probes, then the vendor answers.
    let vendor = Arc::new(
        ScriptedModel::new("qwen")
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .reply("pong"),
    );
    let link = vendor.clone().with_health(HealthPolicy::default());
    assert_eq!(link.snapshot().status, HealthStatus::Unknown);
    let policy = every_10s(secs(1), false);
    let prober = Prober::builder(vendor.clone(), policy)
        .health(link.handle())
        .spawn();
    tokio::time::sleep(secs(25)).await;
    assert_eq!(link.snapshot().status, HealthStatus::Unhealthy);
    tokio::time::sleep(secs(100)).await;
    let stats = prober.stats();
    assert_eq!((stats.probes, stats.ok, stats.failed), (3, 1, 2));
    assert_eq!(stats.skipped, 9);
    let snap = link.snapshot();
    assert_eq!(snap.status, HealthStatus::Healthy);
    assert_eq!(snap.calls, 0, "probes are not caller traffic");
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["probe"]["ok"], true);
    assert_eq!(json["probe"]["probes"], 3);
    assert_eq!(json["probe"]["failures"], 2);
}

#[tokio::test(start_paused = true)]
async fn probe_succeeded_only_moves_an_open_breaker() {
    let link = ScriptedModel::new("openai")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .with_breaker(breaker(secs(600)));
    let handle = link.handle();
    assert!(!handle.probe_succeeded(), "a closed breaker stays closed");
    assert_eq!(handle.state(), BreakerState::Closed);
    let req = ChatRequest::user("hi");
    assert!(link.chat(&req, &Context::new()).await.is_err());
    assert_eq!(handle.state(), BreakerState::Open);
    assert!(handle.probe_succeeded());
    assert_eq!(handle.state(), BreakerState::HalfOpen);
    assert!(!handle.probe_succeeded(), "already half-open");
    let snap = handle.snapshot();
    assert_eq!(snap.trips, 1);
    assert_eq!(snap.open_remaining_ms, None);
    // Only one half-open probe call is admitted, and it closes the breaker.
    assert_eq!(link.chat(&req, &Context::new()).await.unwrap().text(), "ok");
    assert_eq!(handle.state(), BreakerState::Closed);
}
