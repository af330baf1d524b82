//! Whose fault a failure is, and whether the vendor may have acted on the request.
//!
//! When a call ends badly two questions decide what happens next, and every policy must answer
//! them the same way, so they are answered once, here:
//!
//! 1. **May this failure count against the link?** ([`Error::fault`], [`Fault`]). Only a
//!    [`Fault::Vendor`] failure moves a breaker, a health record or a latency estimate. Refusals
//!    ripcord makes itself without reaching the vendor — an open breaker, a full or slow
//!    bulkhead queue, a rate-limit wait that cannot fit, a spent budget, a link reached with too
//!    little time left to be useful — are [`Fault::Local`]. Failures the caller caused — a bad
//!    request, a cancelled call, the caller's own deadline or a consumer that stopped reading a
//!    stream, or the stream's own total bound after it was committed — are [`Fault::Caller`].
//!    Blaming a healthy vendor for either trips its breaker and sends traffic elsewhere for
//!    nothing.
//! 2. **May the vendor have processed the request?** ([`Error::maybe_processed`]). A timeout
//!    after the request was written, a network error after it was sent, a 502/504 from a proxy
//!    in front of the vendor, a truncated or invalid answer: in each, the vendor may have acted
//!    on the request (and, for a tool-calling agent, on its side effects). When the caller says
//!    the request is not retry-safe ([`crate::Context::retry_safe`]), nothing — retry, chain
//!    fallback, stream restart — sends it again after such an error.
//!
//! Each has a default derived from the kind (and, for timeouts and server errors, its phase and
//! status); the layer that knows better overrides it where the error is made
//! ([`Error::with_fault`], [`Error::with_maybe_processed`]): a provider marks a connection that
//! was refused before anything was sent as not processed; a limiter marks its own cut as local.
//!
//! A deadline cut needs the context to be judged ([`Error::fault_in`]): the same
//! `DeadlineExceeded` is the vendor's fault when an attempt with a useful budget got no first
//! content, the caller's when it cuts a stream that was already delivering, and nobody's (local)
//! when the attempt started with less than [`crate::Context::min_attempt`] left.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::{Error, ErrorKind, TimeoutPhase};

/// Who a failure is charged to.
///
/// # Examples
///
/// ```
/// use ripcord_core::{Error, ErrorKind, Fault};
/// assert_eq!(Error::new(ErrorKind::ServerError, "boom").fault(), Fault::Vendor);
/// assert_eq!(Error::new(ErrorKind::BudgetExhausted, "queue full").fault(), Fault::Local);
/// assert_eq!(Error::cancelled().fault(), Fault::Caller);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Fault {
    /// The vendor (or the path to it) failed: breakers and health records count it.
    Vendor,
    /// ripcord refused or cut the call itself (breaker, bulkhead, limiter, budget, a link
    /// reached with too little time): nothing reached the vendor, or nothing useful could.
    Local,
    /// The caller caused it: a bad request, a cancellation, its own deadline, a consumer that
    /// stopped reading.
    Caller,
}

impl Fault {
    /// The stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Fault::Vendor => "vendor",
            Fault::Local => "local",
            Fault::Caller => "caller",
        }
    }
}

impl ErrorKind {
    /// The fault of this kind when nothing more is known (no override, no context).
    ///
    /// One exhaustive match without a wildcard arm: a new kind must decide.
    pub const fn fault(self) -> Fault {
        match self {
            ErrorKind::RateLimited
            | ErrorKind::QuotaExhausted
            | ErrorKind::Overloaded
            | ErrorKind::ServerError
            | ErrorKind::Timeout
            | ErrorKind::Network
            | ErrorKind::Auth
            | ErrorKind::PermissionDenied
            | ErrorKind::RegionBlocked
            | ErrorKind::ModelNotFound
            | ErrorKind::InvalidResponse => Fault::Vendor,
            ErrorKind::CircuitOpen | ErrorKind::LocalRateLimited | ErrorKind::BudgetExhausted => {
                Fault::Local
            }
            ErrorKind::PayloadTooLarge
            | ErrorKind::ContextLengthExceeded
            | ErrorKind::ContentFiltered
            | ErrorKind::InvalidRequest
            | ErrorKind::DeadlineExceeded
            | ErrorKind::Cancelled => Fault::Caller,
        }
    }
}

impl Error {
    /// Who this failure is charged to: the override set where the error was made, else the
    /// kind's default ([`ErrorKind::fault`]).
    ///
    /// Without the context this cannot judge a deadline cut; policies that record outcomes use
    /// [`Error::fault_in`].
    pub fn fault(&self) -> Fault {
        self.fault_override().unwrap_or(self.kind().fault())
    }

    /// True when this failure may count against the link (its fault is [`Fault::Vendor`]).
    pub fn counts_against_link(&self) -> bool {
        self.fault() == Fault::Vendor
    }

    /// True when a time limit ran out because the deadline did: `DeadlineExceeded`, or a
    /// `Timeout` of phase `Total` (the call's budget as a provider sees it).
    pub fn is_deadline_cut(&self) -> bool {
        match self.kind() {
            ErrorKind::DeadlineExceeded => true,
            ErrorKind::Timeout => self.timeout_phase() == Some(TimeoutPhase::Total),
            _ => false,
        }
    }

    /// Who this failure of one attempt is charged to, judged with the attempt's context.
    ///
    /// - An explicit override ([`Error::with_fault`]) wins.
    /// - A cancelled context: the caller's.
    /// - A deadline cut after the attempt's stream had delivered content (`after_content`):
    ///   the caller's (its budget or the stream's own total bound ended it, not the vendor).
    /// - A deadline cut, while the deadline has passed, of an attempt that started with less
    ///   than [`Context::min_attempt`] left (`budget` is what it had): local — the attempt was
    ///   starved, no vendor answers that fast.
    /// - A `DeadlineExceeded` of an attempt that had a useful budget: the vendor's (it gave no
    ///   answer within it).
    /// - Anything else: [`Error::fault`].
    pub fn fault_in(&self, ctx: &Context, budget: Option<Duration>, after_content: bool) -> Fault {
        if let Some(f) = self.fault_override() {
            return f;
        }
        if ctx.is_cancelled() || self.kind() == ErrorKind::Cancelled {
            return Fault::Caller;
        }
        if self.is_deadline_cut() {
            if after_content {
                return Fault::Caller;
            }
            let starved = match (budget, ctx.min_attempt()) {
                (Some(b), Some(min)) => b < min,
                _ => false,
            };
            if starved && (ctx.is_expired() || self.kind() == ErrorKind::DeadlineExceeded) {
                return Fault::Local;
            }
            if self.kind() == ErrorKind::DeadlineExceeded {
                return Fault::Vendor;
            }
        }
        self.fault()
    }

    /// Whether the vendor may have processed (acted on) the request before this failure.
    ///
    /// The override set where the error was made wins ([`Error::with_maybe_processed`]; a
    /// provider marks a refused connection `false`); else: timeouts other than `Connect`,
    /// network errors, `InvalidResponse` (truncated or invalid answers), and server errors with
    /// status 502 or 504 (a gateway in front of the vendor gave up while the vendor may still be
    /// working) are `true`; everything else is `false`.
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_core::{Error, ErrorKind, StatusCode, TimeoutPhase};
    /// assert!(Error::timeout(TimeoutPhase::FirstToken, "slow").maybe_processed());
    /// assert!(!Error::timeout(TimeoutPhase::Connect, "no route").maybe_processed());
    /// assert!(Error::new(ErrorKind::ServerError, "bad gateway").with_status(StatusCode(502)).maybe_processed());
    /// assert!(!Error::new(ErrorKind::Network, "refused").with_maybe_processed(false).maybe_processed());
    /// ```
    pub fn maybe_processed(&self) -> bool {
        if let Some(m) = self.processed_override() {
            return m;
        }
        match self.kind() {
            ErrorKind::Timeout => self.timeout_phase() != Some(TimeoutPhase::Connect),
            ErrorKind::Network | ErrorKind::InvalidResponse => true,
            ErrorKind::ServerError => self.status().is_some_and(|s| matches!(s.0, 502 | 504)),
            _ => false,
        }
    }

    /// True when `ctx` forbids sending the request again after this failure: the request is not
    /// retry-safe and the vendor may have processed it.
    pub fn forbids_resend(&self, ctx: &Context) -> bool {
        !ctx.retry_safe() && self.maybe_processed()
    }
}
