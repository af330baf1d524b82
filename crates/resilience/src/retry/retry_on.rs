//! [`RetryOn`]: which failure classes a retry policy retries on the same link.
//!
//! Why a set and not just the error's disposition: two classes want a different answer than
//! their kind's default. A *silent* link — a connect timeout, or a vendor that accepted the
//! connection and sent no response byte within the first-token limit — costs a whole limit per
//! attempt, so retrying it on the same link makes the client wait `attempts × limit` before the
//! backup is even tried; by default it falls to the next link at once. And `overloaded` (503,
//! Anthropic's 529) falls back by default but some operators prefer a short retry.

use std::fmt;

use ripcord_core::{Error, ErrorKind, TimeoutPhase};

use crate::error::ConfigError;

/// A failure class a retry policy may retry, as named in config (`retry_on = [...]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryClass {
    /// `rate_limited`: a 429 that is a rate limit (never quota exhaustion).
    RateLimited,
    /// `overloaded`: 503, Anthropic's 529.
    Overloaded,
    /// `server_error`: 500, 502, 504.
    ServerError,
    /// `timeout`: a timeout after the vendor started answering (first token, idle, total).
    Timeout,
    /// `silent`: a connect timeout, or no response byte within the first-token limit.
    Silent,
    /// `network`: reset, refused, truncated.
    Network,
    /// `invalid_response`: bad JSON, failed validation.
    InvalidResponse,
}

const ALL: [RetryClass; 7] = [
    RetryClass::RateLimited,
    RetryClass::Overloaded,
    RetryClass::ServerError,
    RetryClass::Timeout,
    RetryClass::Silent,
    RetryClass::Network,
    RetryClass::InvalidResponse,
];

impl RetryClass {
    /// The config name.
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryClass::RateLimited => "rate_limited",
            RetryClass::Overloaded => "overloaded",
            RetryClass::ServerError => "server_error",
            RetryClass::Timeout => "timeout",
            RetryClass::Silent => "silent",
            RetryClass::Network => "network",
            RetryClass::InvalidResponse => "invalid_response",
        }
    }

    /// The class of a failure, or `None` for failures no retry can fix (quota, auth, a bad
    /// request, a local refusal, the deadline, cancellation).
    pub fn of(e: &Error) -> Option<RetryClass> {
        Some(match e.kind() {
            ErrorKind::RateLimited => RetryClass::RateLimited,
            ErrorKind::Overloaded => RetryClass::Overloaded,
            ErrorKind::ServerError => RetryClass::ServerError,
            ErrorKind::Timeout => match e.timeout_phase() {
                Some(TimeoutPhase::Connect | TimeoutPhase::FirstByte) => RetryClass::Silent,
                _ => RetryClass::Timeout,
            },
            ErrorKind::Network => RetryClass::Network,
            ErrorKind::InvalidResponse => RetryClass::InvalidResponse,
            _ => return None,
        })
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for RetryClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The set of [`RetryClass`]es a policy retries on the same link.
///
/// The default is `rate_limited`, `server_error`, `timeout`, `network` and `invalid_response`:
/// a silent link and an overloaded one fall to the next link at once.
///
/// # Examples
///
/// ```
/// use ripcord_resilience::{RetryClass, RetryOn};
/// let on = RetryOn::parse(["rate_limited", "overloaded", "server_error"])?;
/// assert!(on.contains(RetryClass::Overloaded));
/// assert!(!on.contains(RetryClass::Silent));
/// assert!(!RetryOn::default().contains(RetryClass::Silent));
/// assert!(RetryOn::parse(["teapot"]).is_err());
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryOn(u8);

impl Default for RetryOn {
    fn default() -> Self {
        RetryOn::none()
            .with(RetryClass::RateLimited)
            .with(RetryClass::ServerError)
            .with(RetryClass::Timeout)
            .with(RetryClass::Network)
            .with(RetryClass::InvalidResponse)
    }
}

impl RetryOn {
    /// No class: nothing is retried.
    pub const fn none() -> Self {
        RetryOn(0)
    }

    /// Every class, `silent` and `overloaded` included.
    pub fn all() -> Self {
        ALL.into_iter().fold(RetryOn::none(), RetryOn::with)
    }

    /// This set plus `class`.
    pub const fn with(self, class: RetryClass) -> Self {
        RetryOn(self.0 | class.bit())
    }

    /// True when `class` is retried.
    pub const fn contains(self, class: RetryClass) -> bool {
        self.0 & class.bit() != 0
    }

    /// True when this failure is retried (its class is in the set).
    pub fn retries(self, e: &Error) -> bool {
        RetryClass::of(e).is_some_and(|c| self.contains(c))
    }

    /// The classes in the set, in a fixed order.
    pub fn classes(self) -> impl Iterator<Item = RetryClass> {
        ALL.into_iter().filter(move |c| self.contains(*c))
    }

    /// Parses config names.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming an unknown class and listing the known ones.
    pub fn parse<I, S>(names: I) -> Result<RetryOn, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut on = RetryOn::none();
        for name in names {
            let name = name.as_ref();
            let Some(c) = ALL.into_iter().find(|c| c.as_str() == name) else {
                let known: Vec<&str> = ALL.iter().map(|c| c.as_str()).collect();
                return Err(ConfigError::new(
                    "retry",
                    "retry_on",
                    format!("unknown class `{name}`; known: {}", known.join(", ")),
                ));
            };
            on = on.with(c);
        }
        Ok(on)
    }
}

impl fmt::Debug for RetryOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.classes()).finish()
    }
}

impl fmt::Display for RetryOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.classes().map(RetryClass::as_str).collect();
        write!(f, "[{}]", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_timeouts_are_their_own_class_and_not_retried_by_default() {
        for (phase, class) in [
            (TimeoutPhase::Connect, RetryClass::Silent),
            (TimeoutPhase::FirstByte, RetryClass::Silent),
            (TimeoutPhase::FirstToken, RetryClass::Timeout),
            (TimeoutPhase::StreamIdle, RetryClass::Timeout),
        ] {
            let e = Error::timeout(phase, "t");
            assert_eq!(RetryClass::of(&e), Some(class), "{phase}");
        }
        let d = RetryOn::default();
        assert!(!d.retries(&Error::timeout(TimeoutPhase::FirstByte, "silent")));
        assert!(d.retries(&Error::timeout(TimeoutPhase::FirstToken, "slow")));
        assert!(!d.retries(&Error::new(ErrorKind::Overloaded, "529")));
        assert!(!RetryOn::all().retries(&Error::new(ErrorKind::QuotaExhausted, "q")));
        assert_eq!(
            RetryOn::parse(d.classes().map(RetryClass::as_str)).unwrap(),
            d
        );
        assert_eq!(
            d.to_string(),
            "[rate_limited, server_error, timeout, network, invalid_response]"
        );
    }
}
