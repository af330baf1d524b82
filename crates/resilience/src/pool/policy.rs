//! [`PoolPolicy`]: how a pool balances, cools down and ejects its deployments.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::clock::{SharedClock, default_clock};
use crate::error::ConfigError;
use crate::retry::{Backoff, RandomSource, SplitMix64};

/// How a pool picks the deployment for an attempt.
///
/// Every strategy chooses only among the deployments that can take a call now (not cooling
/// down, not out of service, not ejected, not refused by their own breaker or limiter), and a
/// retry inside one call prefers the deployments that call has not tried yet.
///
/// # Examples
///
/// ```
/// use ripcord_resilience::Balance;
/// assert_eq!("least_in_flight".parse::<Balance>(), Ok(Balance::LeastInFlight));
/// assert_eq!(Balance::default().as_str(), "p2c_peak_ewma");
/// assert!("fastest".parse::<Balance>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Balance {
    /// Power of two choices over peak-EWMA latency times calls in flight (tower's `balance`
    /// p2c with `PeakEwma` as the model): two deployments drawn at random, the cheaper one
    /// wins. Reacts at once to a latency spike, recovers gradually.
    #[default]
    P2cPeakEwma,
    /// The deployment with the fewest calls in flight (ties go round-robin).
    LeastInFlight,
    /// A random draw in proportion to each deployment's `weight`.
    Weighted,
    /// Each deployment in turn.
    RoundRobin,
    /// The deployment that has used the smallest share of its own `rpm` / `tpm` this minute.
    Usage,
}

impl Balance {
    /// Every strategy.
    pub const ALL: [Balance; 5] = [
        Balance::P2cPeakEwma,
        Balance::LeastInFlight,
        Balance::Weighted,
        Balance::RoundRobin,
        Balance::Usage,
    ];

    /// The name used in config files and status pages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Balance::P2cPeakEwma => "p2c_peak_ewma",
            Balance::LeastInFlight => "least_in_flight",
            Balance::Weighted => "weighted",
            Balance::RoundRobin => "round_robin",
            Balance::Usage => "usage",
        }
    }
}

impl fmt::Display for Balance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown strategy name; its `Display` lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownBalance(pub String);

impl fmt::Display for UnknownBalance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = Balance::ALL.iter().map(|s| s.as_str()).collect();
        write!(
            f,
            "unknown balance strategy {:?} (known: {})",
            self.0,
            known.join(", ")
        )
    }
}

impl std::error::Error for UnknownBalance {}

impl FromStr for Balance {
    type Err = UnknownBalance;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Balance::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownBalance(s.to_owned()))
    }
}

/// Outlier ejection by error rate, after Envoy's outlier detection.
///
/// Each deployment counts its calls and the failures charged to it (server errors, timeouts,
/// network errors, invalid answers, overload — not rate limits, which cool it down instead, and
/// not the caller's mistakes) over a window of `interval`. When a window holds at least
/// `min_requests` calls and the failure share reaches `failure_threshold`, the deployment is
/// ejected for `base_ejection × n` (capped at `max_ejection`), where `n` counts its
/// ejections; every full window it then passes without being ejected takes one off `n`. This
/// catches a deployment that fails, say, 40% of its calls but never five in a row, which a
/// consecutive-failure breaker never trips on. At least `min_healthy` deployments are never
/// ejected, however bad they look: ejecting the last ones would turn a degraded pool into a
/// dead one.
///
/// Defaults: window 10 s, at least 10 calls, threshold 30%, 30 s base, 5 min cap, 1 healthy.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::Ejection;
/// let e = Ejection::default().with_failure_threshold(0.4).with_min_healthy(2);
/// assert_eq!(e.ejection_time(1), Duration::from_secs(30));
/// assert_eq!(e.ejection_time(3), Duration::from_secs(90));
/// assert_eq!(e.ejection_time(100), Duration::from_secs(300));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ejection {
    /// Length of the counting window.
    pub interval: Duration,
    /// Calls a window needs before its failure share is judged.
    pub min_requests: u32,
    /// Failure share (0 to 1) at which a deployment is ejected.
    pub failure_threshold: f64,
    /// The first ejection's length; the n-th lasts n times as long.
    pub base_ejection: Duration,
    /// No ejection lasts longer.
    pub max_ejection: Duration,
    /// Deployments that are never ejected, however they fail.
    pub min_healthy: u32,
}

impl Default for Ejection {
    fn default() -> Self {
        Ejection {
            interval: Duration::from_secs(10),
            min_requests: 10,
            failure_threshold: 0.3,
            base_ejection: Duration::from_secs(30),
            max_ejection: Duration::from_secs(300),
            min_healthy: 1,
        }
    }
}

impl Ejection {
    ripcord_core::setters! {
        /// The same settings with another failure threshold.
        with_failure_threshold(share: f64) => failure_threshold = share;

        /// The same settings with another floor of never-ejected deployments.
        with_min_healthy(n: u32) => min_healthy = n;

        /// The same settings with another minimum of calls per window.
        with_min_requests(n: u32) => min_requests = n;

        /// The same settings with another window.
        with_interval(interval: Duration) => interval = interval;
    }

    /// The same settings with other ejection lengths.
    pub fn with_ejection_times(mut self, base: Duration, max: Duration) -> Self {
        self.base_ejection = base;
        self.max_ejection = max;
        self
    }

    /// How long the `n`-th ejection in a row lasts.
    pub fn ejection_time(&self, n: u32) -> Duration {
        self.base_ejection
            .saturating_mul(n.max(1))
            .min(self.max_ejection)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.interval.is_zero() {
            return Err(ConfigError::new("pool", "ejection.interval", "must be > 0"));
        }
        if !(self.failure_threshold > 0.0 && self.failure_threshold <= 1.0) {
            return Err(ConfigError::new(
                "pool",
                "ejection.failure_threshold",
                format!("must be in (0, 1], got {}", self.failure_threshold),
            ));
        }
        if self.min_requests == 0 {
            return Err(ConfigError::new(
                "pool",
                "ejection.min_requests",
                "must be at least 1",
            ));
        }
        if self.base_ejection.is_zero() || self.max_ejection < self.base_ejection {
            return Err(ConfigError::new(
                "pool",
                "ejection.max_ejection",
                "the base ejection must be > 0 and no longer than the maximum",
            ));
        }
        Ok(())
    }
}

/// A pool's settings: strategy, attempts, cooldowns, peak-EWMA constants and ejection.
///
/// Defaults ([`PoolPolicy::default`]): `p2c_peak_ewma`; as many attempts as deployments, but at
/// least 3; a 429 that names no wait cools its deployment for 1 s; a latency estimate that
/// decays over 10 s and starts at 100 ms for a deployment never measured (below what a model
/// answers in, so an unmeasured deployment is tried, not avoided); ejection as [`Ejection::default`].
///
/// # Examples
///
/// ```
/// use ripcord_resilience::{PoolPolicy, Balance};
/// let p = PoolPolicy::builder().strategy(Balance::RoundRobin).max_attempts(4).build()?;
/// assert_eq!(p.strategy(), Balance::RoundRobin);
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PoolPolicy {
    pub(crate) strategy: Balance,
    pub(crate) max_attempts: Option<NonZeroU32>,
    pub(crate) default_cooldown: Duration,
    pub(crate) ewma_decay: Duration,
    pub(crate) default_rtt: Duration,
    pub(crate) ejection: Option<Ejection>,
    pub(crate) out_recheck: Option<Duration>,
    pub(crate) clock: SharedClock,
    pub(crate) rng: Arc<dyn RandomSource>,
    /// The backoff before a deployment already tried takes the call again: the retry
    /// policy's default, read once here rather than built on every call.
    pub(crate) backoff: Backoff,
}

impl Default for PoolPolicy {
    fn default() -> Self {
        PoolPolicy {
            strategy: Balance::default(),
            max_attempts: None,
            default_cooldown: Duration::from_secs(1),
            ewma_decay: Duration::from_secs(10),
            default_rtt: Duration::from_millis(100),
            ejection: Some(Ejection::default()),
            out_recheck: Some(Duration::from_secs(300)),
            clock: default_clock(),
            rng: Arc::new(SplitMix64::from_entropy()),
            backoff: crate::RetryPolicy::default().backoff(),
        }
    }
}

impl PoolPolicy {
    /// A builder starting from the defaults.
    pub fn builder() -> PoolPolicyBuilder {
        PoolPolicyBuilder {
            policy: PoolPolicy::default(),
            zero_attempts: false,
        }
    }

    /// The balancing strategy.
    pub fn strategy(&self) -> Balance {
        self.strategy
    }

    /// The ejection settings (`None`: ejection off).
    pub fn ejection(&self) -> Option<&Ejection> {
        self.ejection.as_ref()
    }

    /// Attempts per call for a pool of `deployments`.
    pub(crate) fn attempts_for(&self, deployments: usize) -> u32 {
        self.max_attempts.map_or_else(
            || u32::try_from(deployments).unwrap_or(u32::MAX).max(3),
            NonZeroU32::get,
        )
    }
}

/// Builds a [`PoolPolicy`].
#[derive(Debug, Clone)]
pub struct PoolPolicyBuilder {
    policy: PoolPolicy,
    zero_attempts: bool,
}

impl PoolPolicyBuilder {
    ripcord_core::setters! {
        /// The balancing strategy (default `p2c_peak_ewma`).
        strategy(strategy: Balance) => policy.strategy = strategy;
    }

    /// Wire attempts per call across all deployments (default: the number of deployments, at
    /// least 3). 0 is refused by `build`.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.policy.max_attempts = NonZeroU32::new(n);
        self.zero_attempts = n == 0;
        self
    }

    ripcord_core::setters! {
        /// How long a 429 that names no wait cools its deployment down (default 1 s).
        default_cooldown(d: Duration) => policy.default_cooldown = d;

        /// The peak-EWMA decay time (default 10 s).
        ewma_decay(d: Duration) => policy.ewma_decay = d;

        /// The latency assumed for a deployment never measured (default 100 ms).
        default_rtt(d: Duration) => policy.default_rtt = d;

        /// Outlier ejection settings.
        ejection(e: Ejection) => policy.ejection = Some(e);

        /// How long a deployment taken out of service (quota, auth, region, model) waits before
        /// one trial call may reach it again (default 5 min; `None`: only
        /// [`PoolHandle::reinstate`](super::PoolHandle::reinstate) or
        /// [`PoolHandle::probe`](super::PoolHandle::probe) bring it back). An answer reinstates it;
        /// the same failure takes it out for another period.
        out_of_service_recheck(every: Option<Duration>) => policy.out_recheck = every;

        /// Turns outlier ejection off.
        no_ejection() => policy.ejection = None;

        /// The clock (tests pass a fake one; the default follows tokio's).
        clock(clock: SharedClock) => policy.clock = clock;

        /// The random source of the p2c and weighted draws (tests pass a seeded one).
        rng(rng: Arc<dyn RandomSource>) => policy.rng = rng;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the setting: zero attempts, a zero EWMA decay, a zero default
    /// latency, or ejection settings that cannot work.
    pub fn build(self) -> Result<PoolPolicy, ConfigError> {
        let p = self.policy;
        if self.zero_attempts {
            return Err(ConfigError::new(
                "pool",
                "max_attempts",
                "must be at least 1",
            ));
        }
        if p.default_rtt.is_zero() {
            return Err(ConfigError::new("pool", "default_rtt", "must be > 0"));
        }
        if p.ewma_decay.is_zero() {
            return Err(ConfigError::new("pool", "ewma_decay", "must be > 0"));
        }
        if let Some(e) = &p.ejection {
            e.validate()?;
        }
        Ok(p)
    }
}
