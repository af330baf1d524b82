//! Passive health per link: EWMA latency, error rate and breaker state in one snapshot.
//!
//! The [`Health`] decorator watches real traffic (no synthetic probes) and keeps an
//! exponentially-weighted moving average of successful calls' latency and of the failure rate.
//! Its [`HealthSnapshot`] — with the link's [`BreakerSnapshot`] when a breaker handle is
//! attached — is the one type the CLI's health endpoint and telemetry both read. Only failures
//! charged to the vendor ([`Error::fault_in`], see [`ripcord_core::Fault`]) count: local
//! refusals, the caller's own mistakes and deadline cuts that were not the vendor's doing say
//! nothing about the link.
//!
//! An opt-in [`Prober`](crate::Prober) attached through [`HealthHandle`] adds the last active
//! probe to the snapshot ([`HealthSnapshot::probe`]). Probes never enter the latency or
//! error-rate averages (those describe what callers experienced); they only decide the status of
//! a link that has seen no traffic yet.

mod policy;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Fault, Result,
};
use serde::Serialize;
use tokio::time::Instant;

pub use policy::{HealthPolicy, HealthPolicyBuilder};

use crate::breaker::{BreakerHandle, BreakerSnapshot, BreakerState};
use crate::stream_util::{Blame, End, Observed, StreamObserver};

/// The overall verdict on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HealthStatus {
    /// No calls seen yet.
    Unknown,
    /// Serving normally.
    Healthy,
    /// Serving, but with a raised error rate or a half-open breaker.
    Degraded,
    /// Failing: high error rate or open breaker.
    Unhealthy,
}

/// A point-in-time view of a link's health.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct HealthSnapshot {
    /// The link.
    pub link: Arc<str>,
    /// The verdict.
    pub status: HealthStatus,
    /// EWMA of successful calls' latency, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ewma_ms: Option<f64>,
    /// EWMA of the failure rate (0 to 1) over counted calls.
    pub error_rate: f64,
    /// Calls seen.
    pub calls: u64,
    /// Successful calls.
    pub successes: u64,
    /// Counted failures.
    pub failures: u64,
    /// The kind of the last counted failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<ErrorKind>,
    /// The link's breaker, when a handle was attached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerSnapshot>,
    /// The last active health probe, when a [`Prober`](crate::Prober) reports to this link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeSummary>,
}

/// Active health probes of a link, as seen in its [`HealthSnapshot`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProbeSummary {
    /// When the last probe ended, on the crate's clock.
    #[serde(skip)]
    pub last_at: Instant,
    /// How long ago the last probe ended, in milliseconds, when the snapshot was taken.
    pub age_ms: f64,
    /// Whether the last probe got an answer.
    pub ok: bool,
    /// The kind of the last probe's failure (`Timeout` when it outlasted its limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorKind>,
    /// How long the last probe took, in milliseconds.
    pub latency_ms: f64,
    /// Probes made so far.
    pub probes: u64,
    /// Probes that failed so far.
    pub failures: u64,
}

#[derive(Debug, Clone, Copy)]
struct ProbeRecord {
    at: Instant,
    latency: std::time::Duration,
    error: Option<ErrorKind>,
    probes: u64,
    failures: u64,
}

#[derive(Debug, Default)]
struct Averages {
    latency_ms: Option<f64>,
    error_rate: f64,
    last_error: Option<ErrorKind>,
}

/// The shared state of one link's health.
#[derive(Debug)]
struct State {
    link: Arc<str>,
    policy: HealthPolicy,
    averages: Mutex<Averages>,
    calls: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    probe: Mutex<Option<ProbeRecord>>,
}

impl State {
    fn record_probe(&self, at: Instant, latency: std::time::Duration, error: Option<ErrorKind>) {
        let Ok(mut p) = self.probe.lock() else {
            return;
        };
        let (probes, failures) = p.map_or((0, 0), |r| (r.probes, r.failures));
        *p = Some(ProbeRecord {
            at,
            latency,
            error,
            probes: probes + 1,
            failures: failures + u64::from(error.is_some()),
        });
    }

    /// Records one call: its latency, or the kind of a failure charged to the vendor (`None`
    /// for a failure that is not, which counts as a call but not as a failure).
    fn record(&self, outcome: std::result::Result<std::time::Duration, Option<ErrorKind>>) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let a = self.policy.alpha;
        let Ok(mut avg) = self.averages.lock() else {
            return;
        };
        match outcome {
            Ok(latency) => {
                self.successes.fetch_add(1, Ordering::Relaxed);
                let ms = latency.as_secs_f64() * 1000.0;
                avg.latency_ms = Some(avg.latency_ms.map_or(ms, |old| old + a * (ms - old)));
                avg.error_rate -= a * avg.error_rate;
            }
            Err(None) => {}
            Err(Some(kind)) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                avg.error_rate += a * (1.0 - avg.error_rate);
                avg.last_error = Some(kind);
            }
        }
    }

    fn snapshot(&self) -> HealthSnapshot {
        let (latency_ewma_ms, error_rate, last_error) = match self.averages.lock() {
            Ok(a) => (a.latency_ms, a.error_rate, a.last_error),
            Err(_) => (None, 0.0, None),
        };
        let breaker = self.policy.breaker.as_ref().map(BreakerHandle::snapshot);
        let calls = self.calls.load(Ordering::Relaxed);
        let probe = self.probe.lock().ok().and_then(|p| *p);
        let status = match breaker.as_ref().map(|b| b.state) {
            Some(BreakerState::Open) => HealthStatus::Unhealthy,
            _ if error_rate >= self.policy.unhealthy_error_rate && calls > 0 => {
                HealthStatus::Unhealthy
            }
            Some(BreakerState::HalfOpen) => HealthStatus::Degraded,
            _ if error_rate >= self.policy.degraded_error_rate && calls > 0 => {
                HealthStatus::Degraded
            }
            // No traffic yet: the last probe, if any, is all we know.
            _ if calls == 0 => match probe {
                None => HealthStatus::Unknown,
                Some(p) if p.error.is_none() => HealthStatus::Healthy,
                Some(_) => HealthStatus::Unhealthy,
            },
            _ => HealthStatus::Healthy,
        };
        let probe = probe.map(|p| ProbeSummary {
            last_at: p.at,
            age_ms: Instant::now().saturating_duration_since(p.at).as_secs_f64() * 1000.0,
            ok: p.error.is_none(),
            error: p.error,
            latency_ms: p.latency.as_secs_f64() * 1000.0,
            probes: p.probes,
            failures: p.failures,
        });
        HealthSnapshot {
            link: self.link.clone(),
            status,
            latency_ewma_ms,
            error_rate,
            calls,
            successes: self.successes.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            last_error,
            breaker,
            probe,
        }
    }
}

/// A model whose traffic feeds a passive health tracker.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// use ripcord_resilience::{ChatModelExt, HealthPolicy, HealthStatus};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let model = ScriptedModel::new("primary")
///     .reply_after("ok", Duration::from_millis(200))
///     .with_health(HealthPolicy::default());
/// let health = model.handle();
/// model.chat(&ChatRequest::user("hi"), &Context::new()).await.unwrap();
/// let snap = health.snapshot();
/// assert_eq!(snap.status, HealthStatus::Healthy);
/// assert_eq!(snap.latency_ewma_ms, Some(200.0));
/// # }
/// ```
#[derive(Debug)]
pub struct Health<M> {
    inner: M,
    state: Arc<State>,
}

/// A cheap, cloneable handle to a link's health, for endpoints and telemetry.
#[derive(Debug, Clone)]
pub struct HealthHandle {
    state: Arc<State>,
}

impl HealthHandle {
    /// A snapshot of the link's health.
    pub fn snapshot(&self) -> HealthSnapshot {
        self.state.snapshot()
    }

    /// The link's name.
    pub fn link(&self) -> &str {
        &self.state.link
    }

    /// Records an active probe's result (kept apart from the traffic averages).
    pub(crate) fn record_probe(
        &self,
        at: Instant,
        latency: std::time::Duration,
        error: Option<ErrorKind>,
    ) {
        self.state.record_probe(at, latency, error);
    }
}

impl<M: ChatModel> Health<M> {
    /// Wraps `inner` with a fresh tracker.
    pub fn new(inner: M, policy: HealthPolicy) -> Self {
        let state = Arc::new(State {
            link: inner.id().name.clone(),
            policy,
            averages: Mutex::new(Averages::default()),
            calls: AtomicU64::new(0),
            successes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            probe: Mutex::new(None),
        });
        Health { inner, state }
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, mutably.
    pub fn get_mut(&mut self) -> &mut M {
        &mut self.inner
    }

    /// Unwraps the model.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// A handle to this link's health.
    pub fn handle(&self) -> HealthHandle {
        HealthHandle {
            state: self.state.clone(),
        }
    }

    /// A snapshot of this link's health.
    pub fn snapshot(&self) -> HealthSnapshot {
        self.state.snapshot()
    }
}

/// The kind of a failure charged to the vendor (`fault`, see [`Error::fault_in`]), `None` for
/// one that is not.
fn charged(e: &Error, fault: Fault) -> Option<ErrorKind> {
    (fault == Fault::Vendor).then_some(e.kind())
}

/// Records a stream's outcome when it ends.
struct HealthObserver {
    state: Arc<State>,
    started: Instant,
    blame: Blame,
}

impl StreamObserver for HealthObserver {
    fn on_content(&mut self) {
        self.blame.content_came();
    }

    fn on_end(&mut self, end: End<'_>) {
        match end {
            End::Finished => self.state.record(Ok(self.started.elapsed())),
            End::Failed(e) => self.state.record(Err(charged(e, self.blame.fault(e)))),
            End::Dropped => {}
        }
    }
}

#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Health<M> {
    // `bounds_itself` forwards to this model: recording adds no wait.
    inner_model!(inner: M);

    /// As the inner model, recorded as a failed call.
    fn decorated_refusal(&self, ctx: &Context) -> Option<Error> {
        let e = self.inner.refusal(ctx)?;
        self.state
            .record(Err(charged(&e, e.fault_in(ctx, None, false))));
        Some(e)
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let started = Instant::now();
        let budget = ctx.remaining();
        let result = self.inner.chat(req, ctx).await;
        self.state.record(match &result {
            Ok(_) => Ok(started.elapsed()),
            Err(e) => Err(charged(e, e.fault_in(ctx, budget, false))),
        });
        result
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let started = Instant::now();
        let budget = ctx.remaining();
        match self.inner.stream(req, ctx).await {
            Ok(s) => Ok(Observed::boxed(
                s,
                HealthObserver {
                    state: self.state.clone(),
                    started,
                    blame: Blame::new(ctx, budget),
                },
            )),
            Err(e) => {
                self.state
                    .record(Err(charged(&e, e.fault_in(ctx, budget, false))));
                Err(e)
            }
        }
    }
}
