//! One deployment of a pool: what it is (name, region, weight, quota) and what the pool knows
//! of it (calls in flight, latency estimate, cooldown, ejection, usage this minute).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ripcord_core::{ChatModel, ErrorKind};
use serde::Serialize;
use tokio::time::Instant;

use super::policy::{Ejection, PoolPolicy};

/// A deployment of the pool's model: a region, a key, an account — any endpoint serving the
/// same model, behind its own [`ChatModel`] (usually an adapter wrapped in its own breaker and
/// rate limit, so each deployment's quota is its own).
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_resilience::Deployment;
/// let d = Deployment::new("eastus", ScriptedModel::new("azure")).region("eastus").weight(2).rpm(600);
/// assert_eq!(d.name(), "eastus");
/// ```
#[derive(Debug, Clone)]
pub struct Deployment {
    pub(crate) name: Arc<str>,
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) region: Option<Arc<str>>,
    pub(crate) weight: u32,
    pub(crate) rpm: Option<u32>,
    pub(crate) tpm: Option<u32>,
}

impl Deployment {
    /// A deployment named `name` (unique within its pool) served by `model`; weight 1, no
    /// stated quota.
    pub fn new(name: impl Into<Arc<str>>, model: impl ChatModel + 'static) -> Self {
        Deployment::from_arc(name, Arc::new(model))
    }

    /// A deployment over a shared model.
    pub fn from_arc(name: impl Into<Arc<str>>, model: Arc<dyn ChatModel>) -> Self {
        Deployment {
            name: name.into(),
            model,
            region: None,
            weight: 1,
            rpm: None,
            tpm: None,
        }
    }

    ripcord_core::setters! {
        /// The region it runs in (shown on status pages).
        region(region: impl Into<Arc<str>>) => region = Some(region.into());

        /// Its weight for the `weighted` strategy (default 1; 0 takes it out of weighted draws
        /// while others can serve).
        weight(weight: u32) => weight = weight;

        /// Its requests-per-minute quota, for the `usage` strategy.
        rpm(rpm: u32) => rpm = Some(rpm);

        /// Its tokens-per-minute quota, for the `usage` strategy.
        tpm(tpm: u32) => tpm = Some(tpm);
    }

    /// The deployment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model serving it.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }
}

/// Where a deployment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DeploymentState {
    /// Taking calls.
    Available,
    /// Cooling down after the vendor's rate limit, until its retry-after passes.
    CoolingDown,
    /// Ejected for its error rate, until the ejection ends.
    Ejected,
    /// Out of service (quota spent, key refused, region blocked, model missing) until a probe
    /// or an operator reinstates it.
    OutOfService,
}

impl DeploymentState {
    /// The snake_case name (status pages, metrics).
    pub const fn as_str(self) -> &'static str {
        match self {
            DeploymentState::Available => "available",
            DeploymentState::CoolingDown => "cooling_down",
            DeploymentState::Ejected => "ejected",
            DeploymentState::OutOfService => "out_of_service",
        }
    }
}

/// A point-in-time view of one deployment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct DeploymentSnapshot {
    /// Its name.
    pub name: Arc<str>,
    /// Its region, if stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<Arc<str>>,
    /// Where it stands.
    pub state: DeploymentState,
    /// Calls in flight on it.
    pub in_flight: u32,
    /// The peak-EWMA latency estimate, in milliseconds (`None` before its first answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ewma_ms: Option<f64>,
    /// Time left of its cooldown or ejection, in milliseconds (0 when none).
    pub cooldown_left_ms: u64,
    /// Why it is out of service, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_reason: Option<ErrorKind>,
    /// How many times it was ejected in a row (the multiplier of the next ejection).
    pub ejections: u32,
    /// Calls it answered.
    pub successes: u64,
    /// Calls that failed on it.
    pub failures: u64,
    /// Its weight.
    pub weight: u32,
    /// Its stated rpm / tpm quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    /// Its stated tokens-per-minute quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u32>,
}

/// Peak-EWMA latency, as tower's `PeakEwma`: a sample above the estimate replaces it at once
/// (a spike is believed immediately); a lower one is blended in with a weight that grows with
/// the time since the last update.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeakEwma {
    pub(crate) rtt_ns: f64,
    pub(crate) at: Instant,
    pub(crate) measured: bool,
}

impl PeakEwma {
    pub(crate) fn new(default_rtt: Duration, now: Instant) -> Self {
        PeakEwma {
            rtt_ns: nanos_f64(default_rtt),
            at: now,
            measured: false,
        }
    }

    pub(crate) fn observe(&mut self, rtt: Duration, now: Instant, decay: Duration) {
        let sample = nanos_f64(rtt);
        if now < self.at {
            return;
        }
        if !self.measured || self.rtt_ns < sample {
            self.rtt_ns = sample;
        } else {
            let w = self.weight(now, decay);
            self.rtt_ns = self.rtt_ns * w + sample * (1.0 - w);
        }
        self.measured = true;
        self.at = now;
    }

    /// The estimate decayed to `now` without a sample: an idle deployment's estimate drifts
    /// towards zero, so a deployment that was slow once is tried again eventually.
    pub(crate) fn decayed(&self, now: Instant, decay: Duration) -> f64 {
        self.rtt_ns * self.weight(now, decay)
    }

    fn weight(&self, now: Instant, decay: Duration) -> f64 {
        let elapsed = nanos_f64(now.saturating_duration_since(self.at));
        (-elapsed / nanos_f64(decay)).exp()
    }
}

/// `d` in nanoseconds, as `d.as_nanos() as f64` but without the 128-bit integer (whose
/// conversion to a float is a slow library call, paid several times on every pick); the same
/// value for any duration below 584 years.
fn nanos_f64(d: Duration) -> f64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos())) as f64
}

/// Counts of one ejection window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) start: Instant,
    pub(crate) calls: u32,
    pub(crate) failures: u32,
}

/// Requests and tokens of the current minute (the `usage` strategy).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Minute {
    pub(crate) start: Instant,
    pub(crate) requests: u32,
    pub(crate) tokens: u64,
}

/// What the pool knows of a deployment; behind a mutex never held across an await.
#[derive(Debug, Clone)]
pub(crate) struct Health {
    pub(crate) ewma: PeakEwma,
    pub(crate) cooldown_until: Option<Instant>,
    pub(crate) ejected_until: Option<Instant>,
    pub(crate) ejections: u32,
    pub(crate) out: Option<ErrorKind>,
    /// The outage is also in the pool's shared store (so another replica lifting it there
    /// lifts it here).
    pub(crate) out_shared: bool,
    /// When an out-of-service deployment gets its next trial call (`None`: only an operator
    /// or a probe brings it back).
    pub(crate) recheck_at: Option<Instant>,
    pub(crate) window: Window,
    pub(crate) minute: Minute,
    pub(crate) successes: u64,
    pub(crate) failures: u64,
}

/// When a deployment takes calls again ([`Health::blocked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// It does now.
    No,
    /// It returns by itself at this instant.
    Until(Instant),
    /// Only a probe or an operator can bring it back.
    UntilBroughtBack,
}

impl Blocked {
    /// The instant it returns by itself, if it is blocked until one.
    pub(crate) fn until(self) -> Option<Instant> {
        match self {
            Blocked::Until(at) => Some(at),
            Blocked::No | Blocked::UntilBroughtBack => None,
        }
    }
}

impl Health {
    pub(crate) fn new(policy: &PoolPolicy, now: Instant) -> Self {
        Health {
            ewma: PeakEwma::new(policy.default_rtt, now),
            cooldown_until: None,
            ejected_until: None,
            ejections: 0,
            out: None,
            out_shared: false,
            recheck_at: None,
            window: Window {
                start: now,
                calls: 0,
                failures: 0,
            },
            minute: Minute {
                start: now,
                requests: 0,
                tokens: 0,
            },
            successes: 0,
            failures: 0,
        }
    }

    /// When it takes calls again.
    pub(crate) fn blocked(&self, now: Instant) -> Blocked {
        if self.out.is_some() {
            return match self.recheck_at {
                // Its trial call is due: it may take one.
                Some(at) if at <= now => Blocked::No,
                Some(at) => Blocked::Until(at),
                None => Blocked::UntilBroughtBack,
            };
        }
        [self.cooldown_until, self.ejected_until]
            .into_iter()
            .flatten()
            .filter(|&t| t > now)
            .max()
            .map_or(Blocked::No, Blocked::Until)
    }

    pub(crate) fn state(&self, now: Instant) -> DeploymentState {
        if self.out.is_some() {
            DeploymentState::OutOfService
        } else if self.ejected_until.is_some_and(|t| t > now) {
            DeploymentState::Ejected
        } else if self.cooldown_until.is_some_and(|t| t > now) {
            DeploymentState::CoolingDown
        } else {
            DeploymentState::Available
        }
    }

    /// Sets a cooldown ending at `until`; a later one already set stands (a vendor's wait is
    /// never shortened).
    pub(crate) fn cool_until(&mut self, until: Instant) {
        self.cooldown_until = Some(self.cooldown_until.map_or(until, |t| t.max(until)));
    }

    /// Rolls the usage minute forward and returns the share of the stated quota used.
    pub(crate) fn usage_share(&mut self, now: Instant, rpm: Option<u32>, tpm: Option<u32>) -> f64 {
        self.roll_minute(now);
        let r = rpm.map_or(0.0, |q| {
            f64::from(self.minute.requests) / f64::from(q.max(1))
        });
        let t = tpm.map_or(0.0, |q| self.minute.tokens as f64 / f64::from(q.max(1)));
        if rpm.is_none() && tpm.is_none() {
            // No stated quota: fall back on the raw request count, so such deployments are
            // still spread evenly.
            return f64::from(self.minute.requests);
        }
        r.max(t)
    }

    pub(crate) fn roll_minute(&mut self, now: Instant) {
        if now.saturating_duration_since(self.minute.start) >= Duration::from_secs(60) {
            self.minute = Minute {
                start: now,
                requests: 0,
                tokens: 0,
            };
        }
    }

    /// Records a call's outcome in the ejection window; returns true when the window says
    /// "eject". A window that ran out without an ejection takes one off the multiplier.
    pub(crate) fn count(&mut self, failed: bool, now: Instant, e: &Ejection) -> bool {
        if now.saturating_duration_since(self.window.start) >= e.interval {
            let clean = self.window.calls < e.min_requests
                || f64::from(self.window.failures) / f64::from(self.window.calls.max(1))
                    < e.failure_threshold;
            if clean && self.ejected_until.is_none_or(|t| t <= now) {
                self.ejections = self.ejections.saturating_sub(1);
            }
            self.window = Window {
                start: now,
                calls: 0,
                failures: 0,
            };
        }
        self.window.calls += 1;
        self.window.failures += u32::from(failed);
        self.window.calls >= e.min_requests
            && f64::from(self.window.failures) / f64::from(self.window.calls) >= e.failure_threshold
    }

    pub(crate) fn eject(&mut self, now: Instant, e: &Ejection) -> Duration {
        self.ejections = self.ejections.saturating_add(1);
        let d = e.ejection_time(self.ejections);
        self.ejected_until = Some(now + d);
        self.window = Window {
            start: now,
            calls: 0,
            failures: 0,
        };
        d
    }
}

/// A deployment inside its pool.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) spec: Deployment,
    pub(crate) in_flight: AtomicU32,
    pub(crate) health: std::sync::Mutex<Health>,
}

impl Slot {
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The slot's health; a poisoned lock still yields its data (a panic elsewhere must not
    /// take the pool down with it).
    pub(crate) fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        match self.health.lock() {
            Ok(h) => h,
            Err(p) => p.into_inner(),
        }
    }
}

/// Counts a call in flight on a slot until dropped.
#[derive(Debug)]
pub(crate) struct InFlight(pub(crate) Arc<super::Shared>, pub(crate) usize);

impl InFlight {
    pub(crate) fn new(shared: Arc<super::Shared>, i: usize) -> Self {
        shared.slots[i].in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(shared, i)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.slots[self.1]
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}
