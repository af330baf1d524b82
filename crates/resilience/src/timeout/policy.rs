//! [`TimeoutPolicy`]: per-attempt time limits, and the constructor of [`Timeout`] wrappers.

use std::time::Duration;

use ripcord_core::ChatModel;

use super::Timeout;
use crate::error::ConfigError;

/// Time limits for one attempt at a link.
///
/// Defaults ([`TimeoutPolicy::default`]): an attempt may take 60 s in total, a stream must show
/// its first content within 20 s, and may then go at most 20 s between events. The call's
/// deadline ([`ripcord_core::Context::deadline`]) applies on top of all three.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::TimeoutPolicy;
/// let policy = TimeoutPolicy::builder()
///     .attempt(Duration::from_secs(30))
///     .first_token(Duration::from_secs(5))
///     .idle(Duration::from_secs(10))
///     .build()?;
/// assert_eq!(policy.first_token_limit(), Some(Duration::from_secs(5)));
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutPolicy {
    pub(crate) attempt: Option<Duration>,
    pub(crate) first_token: Option<Duration>,
    pub(crate) idle: Option<Duration>,
}

impl Default for TimeoutPolicy {
    fn default() -> Self {
        TimeoutPolicy {
            attempt: Some(Duration::from_secs(60)),
            first_token: Some(Duration::from_secs(20)),
            idle: Some(Duration::from_secs(20)),
        }
    }
}

impl TimeoutPolicy {
    /// Wraps a model.
    pub fn wrap<M: ChatModel>(&self, model: M) -> Timeout<M> {
        Timeout::new(model, *self)
    }

    /// The limit on a whole attempt.
    pub fn attempt_limit(&self) -> Option<Duration> {
        self.attempt
    }

    /// The limit on a stream's first content.
    pub fn first_token_limit(&self) -> Option<Duration> {
        self.first_token
    }

    /// The limit on the gap between stream events after the first content.
    pub fn idle_limit(&self) -> Option<Duration> {
        self.idle
    }
}

policy_builder!(TimeoutPolicyBuilder => TimeoutPolicy);

impl TimeoutPolicyBuilder {
    ripcord_core::setters! {
        /// The whole attempt, a stream's end included (default 60 s).
        attempt(d: Duration) => policy.attempt = Some(d);

        /// No limit on the whole attempt (the deadline still applies).
        no_attempt_limit() => policy.attempt = None;

        /// Until a stream's first content event, counted from the start of the call (default 20 s).
        first_token(d: Duration) => policy.first_token = Some(d);

        /// No first-token limit.
        no_first_token_limit() => policy.first_token = None;

        /// The longest gap between two stream events after the first content (default 20 s).
        idle(d: Duration) => policy.idle = Some(d);

        /// No idle limit.
        no_idle_limit() => policy.idle = None;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a zero limit.
    pub fn build(self) -> Result<TimeoutPolicy, ConfigError> {
        let l = self.policy;
        for (name, v) in [
            ("attempt", l.attempt),
            ("first_token", l.first_token),
            ("idle", l.idle),
        ] {
            if v.is_some_and(|d| d.is_zero()) {
                return Err(ConfigError::new(
                    "timeout",
                    name,
                    "must be greater than zero",
                ));
            }
        }
        Ok(l)
    }
}
