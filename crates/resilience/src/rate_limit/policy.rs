//! [`RateLimitPolicy`]: the limiter's settings, and the constructor of [`RateLimit`] wrappers.

use std::num::NonZeroU32;
use std::time::Duration;

use ripcord_core::ChatModel;

use super::RateLimit;
use crate::clock::{SharedClock, default_clock};
use crate::error::ConfigError;

/// Local rate limits for one link: requests per minute and tokens per minute.
///
/// Defaults ([`RateLimitPolicy::default`]): no limit at all (an explicit pass-through) until
/// [`RateLimitPolicyBuilder::rpm`] / [`RateLimitPolicyBuilder::tpm`] set one; a call waits at most 10 s
/// (and never past its deadline) for capacity; a vendor 429 pauses the link for its
/// retry-after (at most 5 minutes), or for 1 s when it names none.
///
/// # Examples
///
/// ```
/// use ripcord_resilience::RateLimitPolicy;
/// let policy = RateLimitPolicy::builder().rpm(500).tpm(90_000).build()?;
/// assert_eq!(policy.rpm(), Some(500));
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RateLimitPolicy {
    pub(crate) rpm: Option<NonZeroU32>,
    pub(crate) rpm_burst: Option<NonZeroU32>,
    pub(crate) tpm: Option<NonZeroU32>,
    pub(crate) tpm_burst: Option<NonZeroU32>,
    pub(crate) max_wait: Duration,
    pub(crate) pause_on_429: bool,
    pub(crate) max_pause: Duration,
    pub(crate) default_pause: Duration,
    pub(crate) clock: SharedClock,
}

/// The default pause after a vendor 429 that names no retry-after.
pub const DEFAULT_429_PAUSE: Duration = Duration::from_secs(1);

impl Default for RateLimitPolicy {
    fn default() -> Self {
        RateLimitPolicy {
            rpm: None,
            rpm_burst: None,
            tpm: None,
            tpm_burst: None,
            max_wait: Duration::from_secs(10),
            pause_on_429: true,
            max_pause: Duration::from_secs(300),
            default_pause: DEFAULT_429_PAUSE,
            clock: default_clock(),
        }
    }
}

impl RateLimitPolicy {
    /// A builder starting from the defaults.
    pub fn builder() -> RateLimitPolicyBuilder {
        RateLimitPolicyBuilder {
            policy: RateLimitPolicy::default(),
            rpm: None,
            rpm_burst: None,
            tpm: None,
            tpm_burst: None,
        }
    }

    /// Wraps a model; every wrapper gets its own buckets.
    pub fn wrap<M: ChatModel>(&self, model: M) -> RateLimit<M> {
        RateLimit::new(model, self.clone())
    }

    /// Requests per minute, if limited.
    pub fn rpm(&self) -> Option<u32> {
        self.rpm.map(NonZeroU32::get)
    }

    /// Tokens per minute, if limited.
    pub fn tpm(&self) -> Option<u32> {
        self.tpm.map(NonZeroU32::get)
    }

    /// Requests allowed at once, if the RPM is limited (default: the RPM).
    pub fn rpm_burst(&self) -> Option<u32> {
        self.rpm_burst.or(self.rpm).map(NonZeroU32::get)
    }

    /// Tokens allowed at once, if the TPM is limited (default: the TPM).
    pub fn tpm_burst(&self) -> Option<u32> {
        self.tpm_burst.or(self.tpm).map(NonZeroU32::get)
    }

    /// One of `replicas` processes' share of these limits (each rate and burst divided, at
    /// least 1), the rest of the settings unchanged: what a replica enforces on its own while
    /// the state it shares with the others is unreachable.
    pub fn share(&self, replicas: u32) -> RateLimitPolicy {
        let part = |n: Option<NonZeroU32>| {
            n.map(|n| NonZeroU32::new(n.get() / replicas.max(1)).unwrap_or(NonZeroU32::MIN))
        };
        RateLimitPolicy {
            rpm: part(self.rpm),
            rpm_burst: part(self.rpm_burst),
            tpm: part(self.tpm),
            tpm_burst: part(self.tpm_burst),
            ..self.clone()
        }
    }
}

/// Builds a [`RateLimitPolicy`]; validation happens in [`RateLimitPolicyBuilder::build`].
#[derive(Debug, Clone)]
pub struct RateLimitPolicyBuilder {
    policy: RateLimitPolicy,
    rpm: Option<u32>,
    rpm_burst: Option<u32>,
    tpm: Option<u32>,
    tpm_burst: Option<u32>,
}

impl RateLimitPolicyBuilder {
    ripcord_core::setters! {
        /// Requests per minute. The burst defaults to the same number.
        rpm(n: u32) => rpm = Some(n);

        /// Requests allowed at once after a quiet spell (default: the RPM).
        rpm_burst(n: u32) => rpm_burst = Some(n);

        /// Tokens per minute (prompt estimate plus `max_tokens` reserved before each call,
        /// reconciled with the reported usage after it). The burst defaults to the same number.
        tpm(n: u32) => tpm = Some(n);

        /// Tokens allowed at once (default: the TPM). A request reserving more than the burst takes
        /// the whole bucket, so set it at least as large as your largest request.
        tpm_burst(n: u32) => tpm_burst = Some(n);

        /// The longest a call waits for capacity (default 10 s); the deadline applies too.
        max_wait(d: Duration) => policy.max_wait = d;

        /// Whether a vendor 429 with retry-after pauses the link (default true).
        pause_on_429(yes: bool) => policy.pause_on_429 = yes;

        /// The pause after a vendor 429 that names no retry-after (default
        /// [`DEFAULT_429_PAUSE`], 1 s): the link is paused locally rather than hit again at once.
        default_pause(d: Duration) => policy.default_pause = d;

        /// The longest pause a vendor's retry-after can cause (default 5 minutes).
        max_pause(d: Duration) => policy.max_pause = d;

        /// Uses this clock (default [`crate::TokioClock`]).
        clock(clock: SharedClock) => policy.clock = clock;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a zero rate or burst, or a burst without its rate.
    pub fn build(self) -> Result<RateLimitPolicy, ConfigError> {
        let mut l = self.policy;
        let nz =
            |v: Option<u32>, setting: &'static str| -> Result<Option<NonZeroU32>, ConfigError> {
                match v {
                    None => Ok(None),
                    Some(n) => NonZeroU32::new(n).map(Some).ok_or_else(|| {
                        ConfigError::new(
                            "rate_limit",
                            setting,
                            "must be at least 1 (omit it for no limit)",
                        )
                    }),
                }
            };
        l.rpm = nz(self.rpm, "rpm")?;
        l.rpm_burst = nz(self.rpm_burst, "rpm_burst")?;
        l.tpm = nz(self.tpm, "tpm")?;
        l.tpm_burst = nz(self.tpm_burst, "tpm_burst")?;
        if l.rpm.is_none() && l.rpm_burst.is_some() {
            return Err(ConfigError::new("rate_limit", "rpm_burst", "set rpm too"));
        }
        if l.tpm.is_none() && l.tpm_burst.is_some() {
            return Err(ConfigError::new("rate_limit", "tpm_burst", "set tpm too"));
        }
        Ok(l)
    }
}
