//! Active health probes (opt-in): a cheap request to a link on a jittered interval.
//!
//! Passive health ([`crate::health`]) and the breaker only learn from real traffic, so an open
//! breaker waits out its whole open duration even when the vendor recovered seconds after it
//! tripped, and a link nobody has called yet reads as `unknown`. A [`Prober`] sends a small
//! request ([`ProbePolicy`]'s, by default `"ping"` with `max_tokens = 1`) to one link:
//!
//! - **when**: every `interval`, moved by up to ± `jitter` × `interval` so the probes of many
//!   links (or many replicas) do not line up; the first probe comes one jittered interval after
//!   the prober starts;
//! - **bounded**: each probe runs under its own `timeout` (as the context's deadline and as a
//!   hard limit), and probes are sequential, so at most one is in flight per link;
//! - **only when useful**: a link whose breaker is closed and whose health is `Healthy` is
//!   skipped unless [`ProbePolicyBuilder::probe_healthy`] is set (without a health handle, a closed
//!   breaker alone counts as healthy); a link with no traffic yet (`Unknown`) is probed until
//!   a probe answers, which makes it `Healthy`;
//! - **results**: an answer to a probe while the link's breaker is open moves it to half-open
//!   early ([`BreakerHandle::probe_succeeded`]) so the next real call tests the link; every
//!   result goes into the link's [`HealthSnapshot::probe`](crate::HealthSnapshot::probe). A
//!   failed probe changes no breaker: the breaker stays driven by real calls;
//! - **metrics, not latency**: each probe emits a `ripcord.probe` `tracing` event (`link`,
//!   `outcome` = `ok` / `error` / `timeout`, `latency_ms`, `error.type`). Probes run on their own
//!   task, never inside a caller's call, and stay out of the health averages.
//!
//! The prober probes the model you give it directly, so give it the *undecorated* link (an
//! `Arc` shared with the guarded one): a probe must reach the vendor even while the breaker
//! refuses callers, and must not spend callers' rate limits or budgets.
//!
//! # Lifetime
//!
//! [`ProberBuilder::spawn`] starts one tokio task and keeps its handle; dropping the [`Prober`] aborts
//! the task, so keep it next to the chain it serves (in the same struct) and probing stops when
//! the chain is dropped. No task is ever detached. [`ProberBuilder::run`] is the same loop as a future
//! for callers who drive it themselves (in a `JoinSet`, or under `select!`).

mod policy;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ripcord_core::{ChatModel, Context, Error, ErrorKind};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use policy::{ProbePolicy, ProbePolicyBuilder};

use crate::breaker::{BreakerHandle, BreakerState};
use crate::health::{HealthHandle, HealthStatus};
use crate::retry::RandomSource;

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProbeOutcome {
    /// The link answered.
    Ok,
    /// The link failed with this kind.
    Failed(ErrorKind),
    /// The probe outlasted its timeout.
    TimedOut,
}

impl ProbeOutcome {
    /// `ok`, `error` or `timeout`, as in the `ripcord.probe` event.
    pub fn as_str(&self) -> &'static str {
        match self {
            ProbeOutcome::Ok => "ok",
            ProbeOutcome::Failed(_) => "error",
            ProbeOutcome::TimedOut => "timeout",
        }
    }
}

/// Counters of one prober.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ProberStats {
    /// Probes sent.
    pub probes: u64,
    /// Probes that got an answer.
    pub ok: u64,
    /// Probes that failed or timed out.
    pub failed: u64,
    /// Ticks skipped because the link was closed and healthy.
    pub skipped: u64,
    /// Open breakers moved to half-open early by a probe.
    pub early_half_open: u64,
}

#[derive(Debug, Default)]
struct Counters {
    probes: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
    early_half_open: AtomicU64,
}

impl Counters {
    fn stats(&self) -> ProberStats {
        ProberStats {
            probes: self.probes.load(Ordering::Relaxed),
            ok: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            early_half_open: self.early_half_open.load(Ordering::Relaxed),
        }
    }
}

/// The probing loop of one link, before it is spawned or driven.
#[derive(Debug)]
struct Probe<M> {
    model: M,
    policy: ProbePolicy,
    breaker: Option<BreakerHandle>,
    health: Option<HealthHandle>,
    counters: Arc<Counters>,
}

impl<M: ChatModel> Probe<M> {
    /// True when the link's breaker (if any) is closed and its health (if tracked) is
    /// `Healthy`: nothing to learn from a probe. A link with no traffic yet reads as `Unknown`
    /// and is probed until a probe tells how it is.
    fn closed_and_healthy(&self) -> bool {
        let closed = self
            .breaker
            .as_ref()
            .is_none_or(|b| b.state() == BreakerState::Closed);
        let healthy = self
            .health
            .as_ref()
            .is_none_or(|h| h.snapshot().status == HealthStatus::Healthy);
        closed && healthy
    }

    fn next_delay(&self) -> Duration {
        jittered(self.policy.interval, self.policy.jitter, &*self.policy.rng)
    }

    async fn probe_once(&self) -> ProbeOutcome {
        let started = Instant::now();
        let limit = started + self.policy.timeout;
        let ctx = Context::new()
            .with_deadline(limit)
            .with_intent("ripcord.probe");
        let outcome =
            match tokio::time::timeout_at(limit, self.model.chat(&self.policy.request, &ctx)).await
            {
                Ok(Ok(_)) => ProbeOutcome::Ok,
                Ok(Err(e)) if is_timeout(&e) => ProbeOutcome::TimedOut,
                Ok(Err(e)) => ProbeOutcome::Failed(e.kind()),
                Err(_) => ProbeOutcome::TimedOut,
            };
        let latency = started.elapsed();
        self.report(&outcome, latency);
        outcome
    }

    fn report(&self, outcome: &ProbeOutcome, latency: Duration) {
        let c = &self.counters;
        c.probes.fetch_add(1, Ordering::Relaxed);
        let error = match outcome {
            ProbeOutcome::Ok => None,
            ProbeOutcome::Failed(kind) => Some(*kind),
            ProbeOutcome::TimedOut => Some(ErrorKind::Timeout),
        };
        if error.is_none() {
            c.ok.fetch_add(1, Ordering::Relaxed);
        } else {
            c.failed.fetch_add(1, Ordering::Relaxed);
        }
        let mut early = false;
        if let (ProbeOutcome::Ok, Some(b)) = (outcome, &self.breaker) {
            early = b.probe_succeeded();
            if early {
                c.early_half_open.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(h) = &self.health {
            h.record_probe(Instant::now(), latency, error);
        }
        tracing::info!(
            ripcord.link = %self.model.id().name,
            outcome = outcome.as_str(),
            latency_ms = latency.as_secs_f64() * 1000.0,
            error.type = error.map(ErrorKind::as_str),
            early_half_open = early,
            message = ripcord_core::telemetry::event::PROBE
        );
    }

    async fn run(self) {
        loop {
            tokio::time::sleep(self.next_delay()).await;
            if !self.policy.probe_healthy && self.closed_and_healthy() {
                self.counters.skipped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(ripcord.link = %self.model.id().name, message = ripcord_core::telemetry::event::PROBE_SKIPPED);
                continue;
            }
            self.probe_once().await;
        }
    }
}

fn is_timeout(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Timeout | ErrorKind::DeadlineExceeded)
}

/// `interval` moved uniformly by up to ± `jitter` × `interval`.
pub(crate) fn jittered(interval: Duration, jitter: f64, rng: &dyn RandomSource) -> Duration {
    if jitter <= 0.0 {
        return interval;
    }
    let spread = interval.mul_f64(jitter);
    let lo = interval.saturating_sub(spread);
    crate::retry::uniform(rng, lo, interval + spread)
}

/// A running prober of one link: a tokio task, aborted when this value is dropped.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// use ripcord_resilience::{BreakerPolicy, BreakerState, ChatModelExt, ProbePolicy, Prober};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // The vendor fails once, then recovers.
/// let vendor = Arc::new(ScriptedModel::new("openai").fail(ErrorKind::ServerError).reply("pong"));
/// let link = vendor.clone().with_breaker(
///     BreakerPolicy::builder().consecutive_failures(1).open_for(Duration::from_secs(300)).build()?,
/// );
/// assert!(link.chat(&ChatRequest::user("hi"), &Context::new()).await.is_err());
/// assert_eq!(link.snapshot().state, BreakerState::Open);
///
/// let policy = ProbePolicy::builder().interval(Duration::from_secs(10)).jitter(0.0).build()?;
/// let prober = Prober::builder(vendor, policy).breaker(link.handle()).spawn();
/// tokio::time::sleep(Duration::from_secs(11)).await;
/// // Half-open after 10 s instead of 300 s: the next call tests the link.
/// assert_eq!(link.snapshot().state, BreakerState::HalfOpen);
/// assert_eq!(prober.stats().early_half_open, 1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Prober {
    link: Arc<str>,
    task: JoinHandle<()>,
    counters: Arc<Counters>,
}

/// Sets up a [`Prober`]: the model to probe, its settings, and where results go.
#[derive(Debug)]
pub struct ProberBuilder<M> {
    probe: Probe<M>,
}

impl<M: ChatModel + 'static> ProberBuilder<M> {
    ripcord_core::setters! {
        /// Feeds probe answers to this breaker (an open breaker moves to half-open early).
        breaker(handle: BreakerHandle) => probe.breaker = Some(handle);

        /// Records probe results in this link's health snapshots.
        health(handle: HealthHandle) => probe.health = Some(handle);
    }

    /// Starts probing on a tokio task (call inside a tokio runtime).
    pub fn spawn(self) -> Prober {
        let link = self.probe.model.id().name.clone();
        let counters = self.probe.counters.clone();
        let task = tokio::spawn(self.probe.run());
        Prober {
            link,
            task,
            counters,
        }
    }

    /// The probing loop as a future that never completes, for callers who drive it
    /// themselves; probing stops when the future is dropped. Returns the counters with it.
    pub fn run(self) -> (ProberCounters, impl Future<Output = ()> + Send) {
        let counters = ProberCounters {
            counters: self.probe.counters.clone(),
        };
        (counters, self.probe.run())
    }
}

/// The counters of a prober driven through [`ProberBuilder::run`].
#[derive(Debug, Clone)]
pub struct ProberCounters {
    counters: Arc<Counters>,
}

impl ProberCounters {
    /// The counters now.
    pub fn stats(&self) -> ProberStats {
        self.counters.stats()
    }
}

impl Prober {
    /// Starts setting up a prober of `model` (give it the undecorated link, see the
    /// [module docs](crate::probe)).
    pub fn builder<M: ChatModel + 'static>(model: M, policy: ProbePolicy) -> ProberBuilder<M> {
        ProberBuilder {
            probe: Probe {
                model,
                policy,
                breaker: None,
                health: None,
                counters: Arc::new(Counters::default()),
            },
        }
    }

    /// The probed link's name.
    pub fn link(&self) -> &str {
        &self.link
    }

    /// The counters now.
    pub fn stats(&self) -> ProberStats {
        self.counters.stats()
    }

    /// Stops probing now (dropping the prober does the same).
    pub fn stop(self) {}
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.task.abort();
    }
}
