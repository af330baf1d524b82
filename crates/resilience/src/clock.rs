//! One injectable clock for every policy.
//!
//! # Why a clock of our own
//!
//! Tests of time-based policies must be deterministic, and `tokio::time::pause` only moves
//! tokio's clock. The two libraries we build on read other clocks: `failsafe` reads
//! `std::time::Instant` (through a thread-local mock that cannot cross an `.await`), and
//! `governor` reads its own `Clock` (quanta by default) and sleeps on `futures-timer`. A test that
//! pauses tokio would see the breaker and the limiters keep real time.
//!
//! So every policy of this crate reads time through [`Clock`], and the default [`TokioClock`]
//! reads `tokio::time::Instant::now()`, which follows tokio's paused clock. Under
//! `#[tokio::test(start_paused = true)]` one fake time then drives the breaker's open-until, the
//! limiters' buckets, the budgets' windows and every sleep (all sleeps are tokio sleeps). The
//! breaker never lets `failsafe` time anything (see [`crate::breaker`]); the limiters hand
//! `governor` an adapter of this clock.

use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;

/// A source of "now" for policies.
///
/// Implementations must be monotonic. The default, [`TokioClock`], follows tokio's clock, so
/// paused-time tests drive every policy with one fake time.
///
/// The clock decides state that lives across calls — a breaker's open-until, the limiters'
/// buckets, the budgets' and failure-rate windows. Waiting is always done with tokio's timer
/// (the context's deadline is a tokio instant too), so a custom clock should move with tokio's
/// time, as [`TokioClock`] does, unless nothing waits on it.
///
/// # Examples
///
/// ```
/// use ripcord_resilience::{Clock, TokioClock};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let clock = TokioClock;
/// let t0 = clock.now();
/// tokio::time::sleep(std::time::Duration::from_secs(5)).await; // instant under paused time
/// assert_eq!(clock.now() - t0, std::time::Duration::from_secs(5));
/// # }
/// ```
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant, on tokio's time line.
    fn now(&self) -> Instant;
}

/// The default clock: `tokio::time::Instant::now()`, which follows `tokio::time::pause`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A shared clock handle, as the policies hold it.
pub type SharedClock = Arc<dyn Clock>;

/// The default shared clock.
pub(crate) fn default_clock() -> SharedClock {
    Arc::new(TokioClock)
}

#[cfg(feature = "rate-limit")]
pub(crate) use governor_clock::GovernorClock;

#[cfg(feature = "rate-limit")]
mod governor_clock {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::SharedClock;

    /// `governor`'s view of a [`Clock`](super::Clock): time elapsed since the adapter was made, as a `Duration`
    /// (governor accepts `Duration` as its instant type).
    #[derive(Debug, Clone)]
    pub(crate) struct GovernorClock {
        clock: SharedClock,
        epoch: Instant,
    }

    impl GovernorClock {
        pub(crate) fn new(clock: SharedClock) -> Self {
            let epoch = clock.now();
            GovernorClock { clock, epoch }
        }
    }

    impl governor::clock::Clock for GovernorClock {
        type Instant = Duration;

        fn now(&self) -> Duration {
            self.clock.now().saturating_duration_since(self.epoch)
        }
    }
}

#[cfg(all(test, feature = "rate-limit"))]
mod tests {
    use std::time::Duration;

    use super::*;
    use governor::clock::Clock as _;

    #[tokio::test(start_paused = true)]
    async fn governor_clock_follows_paused_tokio_time() {
        let g = GovernorClock::new(default_clock());
        assert_eq!(g.now(), Duration::ZERO);
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(g.now(), Duration::from_millis(1500));
    }
}
