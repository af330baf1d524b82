//! Configuration errors of the policies' builders.
//!
//! Call-time failures are always `ripcord_core::Error`s; this type only reports a bad setting at
//! `build()` time, naming the policy, the setting and why.

use std::fmt;

/// A policy setting that cannot work, reported by a builder's `build()`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::RetryPolicy;
/// let err = RetryPolicy::builder()
///     .base_delay(Duration::from_secs(30))
///     .max_delay(Duration::from_secs(1))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.policy(), "retry");
/// assert_eq!(err.setting(), "max_delay");
/// assert!(err.to_string().starts_with("retry.max_delay: "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    policy: &'static str,
    setting: &'static str,
    reason: String,
}

impl ConfigError {
    pub(crate) fn new(
        policy: &'static str,
        setting: &'static str,
        reason: impl Into<String>,
    ) -> Self {
        ConfigError {
            policy,
            setting,
            reason: reason.into(),
        }
    }

    /// The policy whose builder refused (`retry`, `breaker`, `rate_limit`, …).
    pub fn policy(&self) -> &'static str {
        self.policy
    }

    /// The setting at fault.
    pub fn setting(&self) -> &'static str {
        self.setting
    }

    /// Why it cannot work.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}: {}", self.policy, self.setting, self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl From<ConfigError> for ripcord_core::Error {
    fn from(e: ConfigError) -> Self {
        ripcord_core::Error::new(
            ripcord_core::ErrorKind::InvalidRequest,
            format!("invalid policy: {e}"),
        )
    }
}

/// Tags an error with the link it came from, unless it already names one.
pub(crate) fn tag(e: ripcord_core::Error, id: &ripcord_core::ModelId) -> ripcord_core::Error {
    if e.provider().is_some() {
        e
    } else {
        e.with_provider(id.name.clone(), id.model.clone())
    }
}
