//! [`BreakerPolicy`]: the breaker's settings, and the constructor of [`Breaker`] wrappers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use failsafe::FailurePolicy;
use ripcord_core::{ChatModel, ErrorKind};

use super::Breaker;
use super::listener::BreakerListener;
use super::state::{Core, CoreSettings};
use super::store::LocalStore;
use super::trip::{FailureRate, KindAction, OpenBackoff, default_action};
use crate::clock::{SharedClock, default_clock};
use crate::error::ConfigError;

/// The first open spell of a default breaker.
pub const DEFAULT_OPEN_BASE: Duration = Duration::from_secs(5);

/// The longest open spell of a default breaker (reached after four re-trips in a row).
pub const DEFAULT_OPEN_MAX: Duration = Duration::from_secs(60);

/// How often an open default breaker runs its link's liveness check.
pub const DEFAULT_BACKGROUND_PROBE: Duration = Duration::from_secs(5);

/// The longest one background liveness check may take.
pub const DEFAULT_BACKGROUND_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq)]
struct RateSettings {
    threshold: f64,
    window: Duration,
    min_calls: u32,
}

/// The circuit breaker's settings.
///
/// Defaults ([`BreakerPolicy::default`]): trips after 5 consecutive failures; the first open
/// spell is [`DEFAULT_OPEN_BASE`] (5 s) and each re-trip without a close in between doubles it,
/// up to [`DEFAULT_OPEN_MAX`] (60 s), back to 5 s after a close; while open, the link's cheap
/// liveness check ([`ChatModel::liveness`], e.g. listing models) runs every
/// [`DEFAULT_BACKGROUND_PROBE`] (5 s) and an answer re-admits the link (half-open) without
/// waiting for the spell to end; admits 1 probe at a time in half-open (each probe bounded by
/// 30 s), closes after 1 successful probe; `Auth` failures trip at once for 5 minutes;
/// caller-side kinds (content filtered, invalid request, context length, local refusals,
/// cancellation) never count. Why these numbers: `docs/breakers.md`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::ErrorKind;
/// use ripcord_resilience::{BreakerPolicy, KindAction, OpenBackoff};
/// let policy = BreakerPolicy::builder()
///     .consecutive_failures(3)
///     .failure_rate(0.5, Duration::from_secs(30), 20)
///     .open(OpenBackoff::Exponential { base: Duration::from_millis(500), max: Duration::from_secs(30) })
///     .success_threshold(2)
///     .kind(ErrorKind::QuotaExhausted, KindAction::TripFor(Duration::from_secs(600)))
///     .build()?;
/// # let _ = policy;
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BreakerPolicy {
    consecutive: Option<u32>,
    rate: Option<RateSettings>,
    open: OpenBackoff,
    success_threshold: u32,
    max_probes: usize,
    probe_timeout: Duration,
    half_open_retry_hint: Duration,
    history: usize,
    kinds: BTreeMap<ErrorKind, KindAction>,
    listener: Arc<dyn BreakerListener>,
    clock: SharedClock,
    background_probe: Option<Duration>,
    background_probe_timeout: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            consecutive: Some(5),
            rate: None,
            open: OpenBackoff::Exponential {
                base: DEFAULT_OPEN_BASE,
                max: DEFAULT_OPEN_MAX,
            },
            background_probe: Some(DEFAULT_BACKGROUND_PROBE),
            background_probe_timeout: DEFAULT_BACKGROUND_PROBE_TIMEOUT,
            success_threshold: 1,
            max_probes: 1,
            probe_timeout: Duration::from_secs(30),
            half_open_retry_hint: Duration::from_secs(1),
            history: 32,
            kinds: BTreeMap::new(),
            listener: Arc::new(()),
            clock: default_clock(),
        }
    }
}

impl BreakerPolicy {
    /// A builder starting from the defaults.
    pub fn builder() -> BreakerPolicyBuilder {
        BreakerPolicyBuilder {
            policy: BreakerPolicy::default(),
            consecutive_set: false,
        }
    }

    /// Wraps a model; every wrapper gets its own breaker state.
    pub fn wrap<M: ChatModel>(&self, model: M) -> Breaker<M> {
        Breaker::new(model, self.clone())
    }

    /// Consecutive failed calls that trip the breaker (`None` when only a failure rate trips
    /// it).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use ripcord_resilience::{BreakerPolicy, OpenBackoff};
    /// let d = BreakerPolicy::default();
    /// assert_eq!(d.consecutive_failures(), Some(5));
    /// assert_eq!(
    ///     d.open(),
    ///     OpenBackoff::Exponential { base: Duration::from_secs(5), max: Duration::from_secs(60) }
    /// );
    /// assert_eq!(d.background_probe(), Some(Duration::from_secs(5)));
    /// assert_eq!(d.max_probes(), 1);
    /// ```
    pub fn consecutive_failures(&self) -> Option<u32> {
        self.consecutive
    }

    /// How long the breaker stays open after each trip.
    pub fn open(&self) -> OpenBackoff {
        self.open
    }

    /// Probes admitted at once in half-open.
    pub fn max_probes(&self) -> usize {
        self.max_probes
    }

    /// Successful probes needed to close from half-open.
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_resilience::BreakerPolicy;
    /// assert_eq!(BreakerPolicy::default().success_threshold(), 1);
    /// ```
    pub fn success_threshold(&self) -> u32 {
        self.success_threshold
    }

    /// The failure-rate rule, when one is set: (threshold, window, least calls in the window).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use ripcord_resilience::BreakerPolicy;
    /// assert_eq!(BreakerPolicy::default().failure_rate(), None);
    /// let b = BreakerPolicy::builder().failure_rate(0.5, Duration::from_secs(10), 4).build()?;
    /// assert_eq!(b.failure_rate(), Some((0.5, Duration::from_secs(10), 4)));
    /// # Ok::<(), ripcord_resilience::ConfigError>(())
    /// ```
    pub fn failure_rate(&self) -> Option<(f64, Duration, u32)> {
        self.rate.map(|r| (r.threshold, r.window, r.min_calls))
    }

    /// How often an open breaker runs its link's liveness check (`None`: never).
    pub fn background_probe(&self) -> Option<Duration> {
        self.background_probe
    }

    /// The longest one background liveness check may take.
    pub fn background_probe_timeout(&self) -> Duration {
        self.background_probe_timeout
    }

    /// What a failure of `kind` does.
    pub fn action(&self, kind: ErrorKind) -> KindAction {
        self.kinds
            .get(&kind)
            .copied()
            .unwrap_or_else(|| default_action(kind))
    }

    pub(crate) fn probe_timeout(&self) -> Duration {
        self.probe_timeout
    }

    /// A fresh in-process store for `link` with these settings (what [`BreakerPolicy::wrap`]
    /// uses; a shared store keeps one as its cached view and local fallback).
    pub fn local_store(&self, link: impl Into<Arc<str>>) -> LocalStore {
        LocalStore::new(self.core(link.into()))
    }

    pub(crate) fn core(&self, link: Arc<str>) -> Core {
        let policy: Box<dyn FailurePolicy + Send> = match (self.consecutive, self.rate) {
            (Some(n), None) => Box::new(failsafe::failure_policy::consecutive_failures(
                n,
                self.open.iter(),
            )),
            (None, Some(r)) => Box::new(FailureRate::new(
                r.threshold,
                r.window,
                r.min_calls,
                self.open,
                self.clock.clone(),
            )),
            (Some(n), Some(r)) => Box::new(
                failsafe::failure_policy::consecutive_failures(n, self.open.iter()).or_else(
                    FailureRate::new(
                        r.threshold,
                        r.window,
                        r.min_calls,
                        self.open,
                        self.clock.clone(),
                    ),
                ),
            ),
            // `build` rejects this; a default breaker counts consecutive failures.
            (None, None) => Box::new(failsafe::failure_policy::consecutive_failures(
                5,
                self.open.iter(),
            )),
        };
        Core::new(
            link,
            policy,
            CoreSettings {
                success_threshold: self.success_threshold,
                max_probes: self.max_probes,
                half_open_retry_hint: self.half_open_retry_hint,
                history: self.history,
                first_delay: self.open.first(),
            },
            self.clock.clone(),
            self.listener.clone(),
        )
    }
}

/// Builds a [`BreakerPolicy`]; validation happens in [`BreakerPolicyBuilder::build`].
#[derive(Debug, Clone)]
pub struct BreakerPolicyBuilder {
    policy: BreakerPolicy,
    consecutive_set: bool,
}

impl BreakerPolicyBuilder {
    /// Trips after `n` consecutive counted failures (default 5). With
    /// [`BreakerPolicyBuilder::failure_rate`] as well, either one trips.
    pub fn consecutive_failures(mut self, n: u32) -> Self {
        self.policy.consecutive = Some(n);
        self.consecutive_set = true;
        self
    }

    /// Trips when at least `threshold` (0 < t ≤ 1) of the calls in the last `window` failed,
    /// once the window holds at least `min_calls` calls. Alone, it replaces the default
    /// consecutive-failure rule.
    pub fn failure_rate(mut self, threshold: f64, window: Duration, min_calls: u32) -> Self {
        self.policy.rate = Some(RateSettings {
            threshold,
            window,
            min_calls,
        });
        if !self.consecutive_set {
            self.policy.consecutive = None;
        }
        self
    }

    ripcord_core::setters! {
        /// How long the breaker stays open after each trip (default: 5 s, doubling on every
        /// re-trip without a close in between, up to 60 s).
        open(backoff: OpenBackoff) => policy.open = backoff;
    }

    /// Shorthand for a constant open duration.
    pub fn open_for(self, d: Duration) -> Self {
        self.open(OpenBackoff::Constant(d))
    }

    ripcord_core::setters! {
        /// While the breaker is open, run the link's cheap liveness check
        /// ([`ChatModel::liveness`]) every `every`; an answer moves the breaker to half-open at
        /// once, so the next call tests the link without waiting out the open spell. `None` turns
        /// it off; links without a liveness check are never probed this way. Default 5 s.
        ///
        /// The check runs on a task the breaker owns: it starts when the breaker opens, ends when
        /// the breaker leaves open, and is aborted when the breaker is dropped.
        background_probe(every: Option<Duration>) => policy.background_probe = every;

        /// The longest one background liveness check may take (default 3 s).
        background_probe_timeout(d: Duration) => policy.background_probe_timeout = d;

        /// Successful probes needed to close from half-open (default 1).
        success_threshold(n: u32) => policy.success_threshold = n;

        /// Probes admitted at once in half-open (default 1).
        max_probes(n: usize) => policy.max_probes = n;

        /// The longest a probe may take before it counts as failed and releases its permit, even
        /// without a deadline in the context (default 30 s).
        probe_timeout(d: Duration) => policy.probe_timeout = d;

        /// The retry-after given to callers refused in half-open while probes run (default 1 s).
        half_open_retry_hint(d: Duration) => policy.half_open_retry_hint = d;

        /// Transitions kept in the history (default 32).
        history(n: usize) => policy.history = n;
    }

    /// Overrides what failures of `kind` do.
    pub fn kind(mut self, kind: ErrorKind, action: KindAction) -> Self {
        self.policy.kinds.insert(kind, action);
        self
    }

    ripcord_core::setters! {
        /// Hears transitions and refusals (default: none).
        listener(listener: Arc<dyn BreakerListener>) => policy.listener = listener;

        /// Uses this clock (default [`crate::TokioClock`]).
        clock(clock: SharedClock) => policy.clock = clock;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a zero failure count, a rate outside (0, 1], a zero window, a zero
    /// open duration, an exponential max below its base, zero probes, a zero success
    /// threshold, a zero probe timeout, or a zero background-probe interval or timeout.
    pub fn build(self) -> Result<BreakerPolicy, ConfigError> {
        let l = self.policy;
        let err = |setting, reason: String| ConfigError::new("breaker", setting, reason);
        if l.consecutive == Some(0) {
            return Err(err("consecutive_failures", "must be at least 1".into()));
        }
        if let Some(r) = l.rate {
            if !(r.threshold > 0.0 && r.threshold <= 1.0) {
                return Err(err(
                    "failure_rate.threshold",
                    format!("must be in (0, 1], got {}", r.threshold),
                ));
            }
            if r.window.is_zero() {
                return Err(err(
                    "failure_rate.window",
                    "must be greater than zero".into(),
                ));
            }
        }
        if l.consecutive.is_none() && l.rate.is_none() {
            return Err(err(
                "policy",
                "set consecutive_failures or failure_rate".into(),
            ));
        }
        match l.open {
            OpenBackoff::Constant(d) if d.is_zero() => {
                return Err(err(
                    "open",
                    "the open duration must be greater than zero".into(),
                ));
            }
            OpenBackoff::Exponential { base, max } if base.is_zero() || max < base => {
                return Err(err(
                    "open",
                    format!("exponential needs 0 < base <= max, got base {base:?}, max {max:?}"),
                ));
            }
            _ => {}
        }
        if l.success_threshold == 0 {
            return Err(err("success_threshold", "must be at least 1".into()));
        }
        if l.max_probes == 0 {
            return Err(err("max_probes", "must be at least 1".into()));
        }
        if l.probe_timeout.is_zero() {
            return Err(err("probe_timeout", "must be greater than zero".into()));
        }
        if l.background_probe.is_some_and(|d| d.is_zero()) {
            return Err(err(
                "background_probe",
                "the interval must be greater than zero (None turns it off)".into(),
            ));
        }
        if l.background_probe_timeout.is_zero() {
            return Err(err(
                "background_probe_timeout",
                "must be greater than zero".into(),
            ));
        }
        Ok(l)
    }
}
