//! The kinds of failure, what the chain does with each, and the small labels kept beside them
//! (timeout phase, HTTP status).

use std::fmt;
use std::time::Duration;

#[cfg(doc)]
use super::Error;

use serde::{Deserialize, Serialize};

/// What failed, as a small label that is safe to use in metrics, spans and JSON.
///
/// The snake_case names returned by [`ErrorKind::as_str`] (and used by serde) are a public
/// interface: the CLI's JSON, metric labels and span attributes all use them.
///
/// # Examples
///
/// ```
/// use ripcord_core::{Disposition, ErrorKind};
/// assert_eq!(ErrorKind::QuotaExhausted.as_str(), "quota_exhausted");
/// assert_eq!(ErrorKind::QuotaExhausted.disposition(), Disposition::Fallback);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The vendor is limiting our request or token rate (429); try again after a wait.
    RateLimited,
    /// The account's quota or balance is spent (429 `insufficient_quota`, 402); waiting won't help.
    QuotaExhausted,
    /// The vendor is overloaded (503, Anthropic 529).
    Overloaded,
    /// The vendor failed internally (500, 502).
    ServerError,
    /// A time limit ran out; see [`Error::timeout_phase`] for which one. A vendor's own 408 or
    /// 504 (a gateway that gave up waiting) is a timeout too, without a phase.
    Timeout,
    /// The connection failed: reset, DNS, TLS, refused — or an answer cut short (a body
    /// shorter than its declared length, a stream closed before its terminator); see
    /// [`Error::request_delivered`].
    Network,
    /// The credentials were rejected (401).
    Auth,
    /// The credentials lack permission for this model or feature (403).
    PermissionDenied,
    /// The vendor refuses requests from this region (403 with a region/country reason).
    RegionBlocked,
    /// The model does not exist or is not available to this account (404).
    ModelNotFound,
    /// The request body is too large for the vendor (413).
    PayloadTooLarge,
    /// The prompt plus the requested output exceed the model's context window.
    ContextLengthExceeded,
    /// The vendor's content policy refused the prompt or the answer.
    ContentFiltered,
    /// The request is malformed for this vendor (other 400 / 422).
    InvalidRequest,
    /// The vendor's answer could not be understood: bad JSON, failed validation, a stream that
    /// broke its grammar.
    InvalidResponse,
    /// ripcord's circuit breaker for this link is open; the call was not made.
    CircuitOpen,
    /// ripcord's own rate limiter for this link is exhausted; the call was not made.
    LocalRateLimited,
    /// A tenant's token budget (or a bulkhead's queue) refused the call; it was not made.
    BudgetExhausted,
    /// The end-to-end deadline of the call has passed.
    DeadlineExceeded,
    /// The caller cancelled the call.
    Cancelled,
}

/// What the chain and the policies do with a failure.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::{Disposition, Error, ErrorKind};
/// let e = Error::new(ErrorKind::RateLimited, "slow down").with_retry_after(Duration::from_secs(2));
/// assert_eq!(e.disposition(), Disposition::Retry { after: Some(Duration::from_secs(2)) });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Disposition {
    /// Retry on the same link (within the retry budget and the deadline), honouring `after` when
    /// the vendor named a wait; when retries are spent, fall back.
    Retry {
        /// The wait the vendor asked for, if any.
        after: Option<Duration>,
    },
    /// Don't retry this link; move on to the next link of the chain.
    Fallback,
    /// Stop: neither retrying nor another link can help (or the caller is gone).
    FailFast,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 20] = [
        ErrorKind::RateLimited,
        ErrorKind::QuotaExhausted,
        ErrorKind::Overloaded,
        ErrorKind::ServerError,
        ErrorKind::Timeout,
        ErrorKind::Network,
        ErrorKind::Auth,
        ErrorKind::PermissionDenied,
        ErrorKind::RegionBlocked,
        ErrorKind::ModelNotFound,
        ErrorKind::PayloadTooLarge,
        ErrorKind::ContextLengthExceeded,
        ErrorKind::ContentFiltered,
        ErrorKind::InvalidRequest,
        ErrorKind::InvalidResponse,
        ErrorKind::CircuitOpen,
        ErrorKind::LocalRateLimited,
        ErrorKind::BudgetExhausted,
        ErrorKind::DeadlineExceeded,
        ErrorKind::Cancelled,
    ];

    /// The stable snake_case name of the kind (for metrics, spans and JSON).
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::QuotaExhausted => "quota_exhausted",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::ServerError => "server_error",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Network => "network",
            ErrorKind::Auth => "auth",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::RegionBlocked => "region_blocked",
            ErrorKind::ModelNotFound => "model_not_found",
            ErrorKind::PayloadTooLarge => "payload_too_large",
            ErrorKind::ContextLengthExceeded => "context_length_exceeded",
            ErrorKind::ContentFiltered => "content_filtered",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::InvalidResponse => "invalid_response",
            ErrorKind::CircuitOpen => "circuit_open",
            ErrorKind::LocalRateLimited => "local_rate_limited",
            ErrorKind::BudgetExhausted => "budget_exhausted",
            ErrorKind::DeadlineExceeded => "deadline_exceeded",
            ErrorKind::Cancelled => "cancelled",
        }
    }

    /// Parses a snake_case name produced by [`ErrorKind::as_str`].
    pub fn parse(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The disposition of this kind when no retry-after is known.
    ///
    /// This is the table of `docs/errors.md`, as one exhaustive match without a wildcard arm.
    pub const fn disposition(self) -> Disposition {
        match self {
            ErrorKind::RateLimited
            | ErrorKind::ServerError
            | ErrorKind::Timeout
            | ErrorKind::Network
            | ErrorKind::InvalidResponse => Disposition::Retry { after: None },
            ErrorKind::QuotaExhausted
            | ErrorKind::Overloaded
            | ErrorKind::Auth
            | ErrorKind::PermissionDenied
            | ErrorKind::RegionBlocked
            | ErrorKind::ModelNotFound
            | ErrorKind::PayloadTooLarge
            | ErrorKind::ContextLengthExceeded
            | ErrorKind::CircuitOpen
            | ErrorKind::LocalRateLimited
            | ErrorKind::BudgetExhausted => Disposition::Fallback,
            ErrorKind::ContentFiltered
            | ErrorKind::InvalidRequest
            | ErrorKind::DeadlineExceeded
            | ErrorKind::Cancelled => Disposition::FailFast,
        }
    }

    /// True for kinds that waiting cannot fix and an operator should be alerted about: a
    /// revoked or wrong key, an exhausted quota or balance, a key or region the vendor refuses.
    /// The chain announces them through [`crate::alert::AlertGate`].
    pub const fn needs_alert(self) -> bool {
        matches!(
            self,
            ErrorKind::QuotaExhausted
                | ErrorKind::Auth
                | ErrorKind::PermissionDenied
                | ErrorKind::RegionBlocked
        )
    }

    /// True for kinds raised by ripcord itself without calling the vendor (the link was skipped).
    pub const fn is_local_refusal(self) -> bool {
        matches!(
            self,
            ErrorKind::CircuitOpen | ErrorKind::LocalRateLimited | ErrorKind::BudgetExhausted
        )
    }

    /// True for kinds that say nothing about the vendor's health (the request or the caller is at
    /// fault, or ripcord refused locally); breakers and health trackers don't count them.
    pub const fn is_caller_side(self) -> bool {
        matches!(
            self,
            ErrorKind::ContentFiltered
                | ErrorKind::InvalidRequest
                | ErrorKind::ContextLengthExceeded
                | ErrorKind::PayloadTooLarge
                | ErrorKind::CircuitOpen
                | ErrorKind::LocalRateLimited
                | ErrorKind::BudgetExhausted
                | ErrorKind::DeadlineExceeded
                | ErrorKind::Cancelled
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which time limit ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// Establishing the connection (TCP + TLS).
    Connect,
    /// Waiting for the response headers or the first token / first stream event.
    FirstToken,
    /// Waiting for the first byte of the response (its headers) under the first-token limit:
    /// the vendor accepted the connection and said nothing at all. Retrying such a *silent*
    /// link costs a whole first-token limit per attempt, so by default it falls to the next
    /// link instead.
    FirstByte,
    /// The gap between two stream events after the first.
    StreamIdle,
    /// The whole attempt or the whole call (the deadline budget given to it).
    Total,
}

impl TimeoutPhase {
    /// The stable snake_case name of the phase.
    pub const fn as_str(self) -> &'static str {
        match self {
            TimeoutPhase::Connect => "connect",
            TimeoutPhase::FirstToken => "first_token",
            TimeoutPhase::FirstByte => "first_byte",
            TimeoutPhase::StreamIdle => "stream_idle",
            TimeoutPhase::Total => "total",
        }
    }
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An HTTP status code, kept as data (core has no HTTP dependency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StatusCode(pub u16);

impl StatusCode {
    /// The numeric code.
    pub const fn as_u16(self) -> u16 {
        self.0
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
