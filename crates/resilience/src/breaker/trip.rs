//! What trips the breaker, for how long, and which failures count.

use std::time::Duration;

use failsafe::FailurePolicy;
use ripcord_core::ErrorKind;

use crate::clock::SharedClock;
use crate::window::Window;

/// How long the breaker stays open after a trip.
///
/// Unlike `failsafe`'s backoffs (whole seconds, at least 1 s), these may be
/// sub-second. The sequence restarts after the breaker closes again.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::OpenBackoff;
/// let b = OpenBackoff::Exponential { base: Duration::from_millis(250), max: Duration::from_secs(1) };
/// let first: Vec<_> = b.iter().take(4).collect();
/// assert_eq!(first, [250, 500, 1000, 1000].map(Duration::from_millis));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenBackoff {
    /// The same duration after every trip.
    Constant(Duration),
    /// `base`, then doubling on every re-trip without a close in between, up to `max`.
    Exponential {
        /// The first open duration.
        base: Duration,
        /// The longest open duration.
        max: Duration,
    },
}

impl OpenBackoff {
    /// The open durations of consecutive trips.
    pub fn iter(&self) -> OpenBackoffIter {
        OpenBackoffIter {
            spec: *self,
            trip: 0,
        }
    }

    pub(crate) fn first(&self) -> Duration {
        match *self {
            OpenBackoff::Constant(d) => d,
            OpenBackoff::Exponential { base, max } => base.min(max),
        }
    }
}

/// The iterator of [`OpenBackoff::iter`]; `failsafe`'s failure policies draw from it.
#[derive(Debug, Clone)]
pub struct OpenBackoffIter {
    spec: OpenBackoff,
    trip: u32,
}

impl Iterator for OpenBackoffIter {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let d = match self.spec {
            OpenBackoff::Constant(d) => d,
            OpenBackoff::Exponential { base, max } => {
                let factor = 1u32 << self.trip.min(31);
                base.checked_mul(factor).unwrap_or(max).min(max)
            }
        };
        self.trip = self.trip.saturating_add(1);
        Some(d)
    }
}

/// What a failure of one kind does to the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KindAction {
    /// Not counted: it says nothing about the link's health.
    Ignore,
    /// Counted by the trip policy.
    Count,
    /// Counted, and trips the breaker at once for at least this long.
    TripFor(Duration),
}

/// The default action for a kind: kinds that are not the vendor's fault
/// ([`ErrorKind::fault`]) are ignored, and so is a vendor `RateLimited` (the vendor is healthy
/// and said when to come back: the rate limiter pauses the link for that long instead);
/// `Auth` and `ModelNotFound` trip at once for 5 minutes (a rejected key or a missing model
/// will not heal in seconds); the rest count.
pub(crate) fn default_action(kind: ErrorKind) -> KindAction {
    if kind.fault() != ripcord_core::Fault::Vendor || kind == ErrorKind::RateLimited {
        KindAction::Ignore
    } else if matches!(kind, ErrorKind::Auth | ErrorKind::ModelNotFound) {
        KindAction::TripFor(Duration::from_secs(300))
    } else {
        KindAction::Count
    }
}

/// A failure-rate policy over a sliding window, read through the crate's clock.
///
/// `failsafe` has its own success-rate policy, but it reads `std::time::Instant` (so tests on
/// paused time cannot drive its window), works in whole seconds and smooths with an EWMA. This
/// one implements `failsafe::FailurePolicy`, so `failsafe`'s state machine drives it like its
/// own policies.
#[derive(Debug)]
pub(crate) struct FailureRate {
    threshold: f64,
    min_calls: u32,
    clock: SharedClock,
    window: Window,
    backoff: OpenBackoffIter,
    fresh: OpenBackoffIter,
}

const CALLS: usize = 0;
const FAILURES: usize = 1;

impl FailureRate {
    pub(crate) fn new(
        threshold: f64,
        window: Duration,
        min_calls: u32,
        backoff: OpenBackoff,
        clock: SharedClock,
    ) -> Self {
        let w = Window::new(clock.now(), window, 10);
        FailureRate {
            threshold,
            min_calls,
            clock,
            window: w,
            backoff: backoff.iter(),
            fresh: backoff.iter(),
        }
    }
}

impl FailurePolicy for FailureRate {
    fn record_success(&mut self) {
        self.window.add(self.clock.now(), CALLS, 1);
    }

    fn mark_dead_on_failure(&mut self) -> Option<Duration> {
        let now = self.clock.now();
        self.window.add(now, CALLS, 1);
        self.window.add(now, FAILURES, 1);
        let calls = self.window.sum(now, CALLS);
        let failures = self.window.sum(now, FAILURES);
        if calls >= i64::from(self.min_calls)
            && calls > 0
            && failures as f64 / calls as f64 >= self.threshold
        {
            self.backoff.next()
        } else {
            None
        }
    }

    fn revived(&mut self) {
        self.window.reset();
        self.backoff = self.fresh.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::default_clock;

    #[tokio::test(start_paused = true)]
    async fn failure_rate_trips_on_rate_not_count() {
        let mut p = FailureRate::new(
            0.5,
            Duration::from_secs(10),
            4,
            OpenBackoff::Constant(Duration::from_millis(300)),
            default_clock(),
        );
        p.record_success();
        p.record_success();
        assert_eq!(p.mark_dead_on_failure(), None); // 1/3, below min_calls
        assert_eq!(p.mark_dead_on_failure(), Some(Duration::from_millis(300))); // 2/4
        p.revived();
        assert_eq!(p.mark_dead_on_failure(), None); // 1/1 but below min_calls
        tokio::time::advance(Duration::from_secs(11)).await;
        p.record_success();
        p.record_success();
        p.record_success();
        assert_eq!(p.mark_dead_on_failure(), None); // old failure expired: 1/4 < 0.5
    }

    #[test]
    fn default_actions_follow_the_kind() {
        assert_eq!(
            default_action(ErrorKind::InvalidRequest),
            KindAction::Ignore
        );
        assert_eq!(
            default_action(ErrorKind::ContentFiltered),
            KindAction::Ignore
        );
        assert_eq!(default_action(ErrorKind::ServerError), KindAction::Count);
        assert!(
            matches!(default_action(ErrorKind::Auth), KindAction::TripFor(d) if d >= Duration::from_secs(60))
        );
    }
}
