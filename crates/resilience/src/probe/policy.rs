//! [`ProbePolicy`]: the active prober's settings.

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::ChatRequest;

use crate::error::ConfigError;
use crate::retry::{RandomSource, SplitMix64};

/// Active health probe settings.
///
/// Defaults ([`ProbePolicy::default`]): every 30 s ± 20 %, each probe bounded by 5 s, request
/// `ChatRequest::user("ping").with_max_tokens(1)`, closed-and-healthy links not probed.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::ChatRequest;
/// use ripcord_resilience::ProbePolicy;
/// let policy = ProbePolicy::builder()
///     .interval(Duration::from_secs(15))
///     .jitter(0.1)
///     .timeout(Duration::from_secs(2))
///     .request(ChatRequest::user("Reply with OK.").with_max_tokens(2))
///     .build()?;
/// # let _ = policy;
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ProbePolicy {
    pub(crate) interval: Duration,
    pub(crate) jitter: f64,
    pub(crate) timeout: Duration,
    pub(crate) request: ChatRequest,
    pub(crate) probe_healthy: bool,
    pub(crate) rng: Arc<dyn RandomSource>,
}

impl Default for ProbePolicy {
    fn default() -> Self {
        ProbePolicy {
            interval: Duration::from_secs(30),
            jitter: 0.2,
            timeout: Duration::from_secs(5),
            request: ChatRequest::user("ping").with_max_tokens(1),
            probe_healthy: false,
            rng: Arc::new(SplitMix64::from_entropy()),
        }
    }
}

policy_builder!(ProbePolicyBuilder => ProbePolicy);

impl ProbePolicyBuilder {
    ripcord_core::setters! {
        /// The mean time between probes (default 30 s).
        interval(d: Duration) => policy.interval = d;

        /// Each wait is `interval` moved uniformly by up to ± `fraction` × `interval`, `fraction`
        /// in [0, 1) (default 0.2).
        jitter(fraction: f64) => policy.jitter = fraction;

        /// The longest one probe may take; it counts as a timeout after that (default 5 s).
        timeout(d: Duration) => policy.timeout = d;

        /// The probe request (default `"ping"` with `max_tokens = 1`). Keep it cheap.
        request(req: ChatRequest) => policy.request = req;

        /// Probes links whose breaker is closed and whose health is fine too (default `false`:
        /// such links are skipped, their real traffic says enough).
        probe_healthy(yes: bool) => policy.probe_healthy = yes;

        /// A fixed seed for the jitter (tests, reproducible runs).
        seed(seed: u64) => policy.rng = Arc::new(SplitMix64::seeded(seed));
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a zero interval or timeout, a jitter outside [0, 1), a timeout not
    /// shorter than the shortest jittered interval (probes would overlap their own schedule),
    /// or a request without messages.
    pub fn build(self) -> Result<ProbePolicy, ConfigError> {
        let l = self.policy;
        let err = |setting, reason: String| ConfigError::new("probe", setting, reason);
        if l.interval.is_zero() {
            return Err(err("interval", "must be greater than zero".into()));
        }
        if !(0.0..1.0).contains(&l.jitter) {
            return Err(err(
                "jitter",
                format!("must be in [0, 1), got {}", l.jitter),
            ));
        }
        if l.timeout.is_zero() {
            return Err(err("timeout", "must be greater than zero".into()));
        }
        let shortest = l.interval.saturating_sub(l.interval.mul_f64(l.jitter));
        if l.timeout > shortest {
            return Err(err(
                "timeout",
                format!(
                    "{} ms is longer than the shortest jittered interval ({} ms)",
                    l.timeout.as_millis(),
                    shortest.as_millis()
                ),
            ));
        }
        if l.request.messages.is_empty() {
            return Err(err("request", "the probe request has no messages".into()));
        }
        Ok(l)
    }
}
