//! Backoff math and the jitter random source: every retry delay of the crate comes from here.
//!
//! Full jitter (the default) spreads retries uniformly over `[0, min(cap, base · 2ⁿ⁻¹)]`, which
//! is what keeps a fleet of clients from retrying in lock-step after an outage. Decorrelated
//! jitter (`min(cap, uniform[base, 3 · previous])`) is the other well-studied choice; it grows
//! with the previous delay instead of the attempt number.

use std::fmt;
use std::time::Duration;

/// How retry delays are randomised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Jitter {
    /// No randomness: `min(cap, base · 2ⁿ⁻¹)`. Only for tests and single clients.
    None,
    /// Full jitter: uniform in `[0, min(cap, base · 2ⁿ⁻¹)]` (the default).
    #[default]
    Full,
    /// Decorrelated jitter: `min(cap, uniform[base, 3 · previous delay])`.
    Decorrelated,
}

/// A source of random numbers for jitter; inject a seeded one for reproducible tests.
///
/// # Examples
///
/// ```
/// use ripcord_resilience::{RandomSource, SplitMix64};
/// let a = SplitMix64::seeded(7);
/// let b = SplitMix64::seeded(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// ```
pub trait RandomSource: Send + Sync + fmt::Debug + 'static {
    /// The next 64 random bits.
    fn next_u64(&self) -> u64;
}

pub use ripcord_core::rng::SplitMix64;

impl RandomSource for SplitMix64 {
    fn next_u64(&self) -> u64 {
        SplitMix64::next_u64(self)
    }
}

/// A uniform duration in `[lo, hi]` (nanosecond resolution).
pub(crate) fn uniform(rng: &dyn RandomSource, lo: Duration, hi: Duration) -> Duration {
    if hi <= lo {
        return lo;
    }
    let span = u64::try_from((hi - lo).as_nanos()).unwrap_or(u64::MAX);
    let r = ((u128::from(rng.next_u64()) * (u128::from(span) + 1)) >> 64) as u64;
    lo + Duration::from_nanos(r)
}

/// Exponential backoff with jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay (before jitter).
    pub base: Duration,
    /// No delay exceeds this.
    pub cap: Duration,
    /// The jitter.
    pub jitter: Jitter,
}

impl Backoff {
    /// The delay before retry number `retry` (1 = the first retry), given the previous delay
    /// (decorrelated jitter uses it; pass `base` for the first retry).
    ///
    /// Always at most `cap`. With [`Jitter::Full`] at most the exponential ceiling; with
    /// [`Jitter::Decorrelated`] at least `min(base, cap)`.
    pub fn delay(&self, retry: u32, previous: Duration, rng: &dyn RandomSource) -> Duration {
        let ceiling = self.ceiling(retry);
        match self.jitter {
            Jitter::None => ceiling,
            Jitter::Full => uniform(rng, Duration::ZERO, ceiling),
            Jitter::Decorrelated => {
                let lo = self.base.min(self.cap);
                let hi = previous.max(self.base).saturating_mul(3).min(self.cap);
                uniform(rng, lo, hi)
            }
        }
    }

    /// `min(cap, base · 2^(retry-1))`, without jitter.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let shift = retry.saturating_sub(1).min(63);
        let factor = 1u64 << shift;
        let nanos = self.base.as_nanos().saturating_mul(u128::from(factor));
        let d = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        d.min(self.cap)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn backoff(base_ms: u64, cap_ms: u64, jitter: Jitter) -> Backoff {
        Backoff {
            base: Duration::from_millis(base_ms),
            cap: Duration::from_millis(cap_ms),
            jitter,
        }
    }

    #[test]
    fn ceiling_doubles_until_the_cap() {
        let b = backoff(1000, 20_000, Jitter::None);
        let rng = SplitMix64::seeded(1);
        let got: Vec<u64> = (1..=7)
            .map(|n| b.delay(n, b.base, &rng).as_millis() as u64)
            .collect();
        assert_eq!(got, vec![1000, 2000, 4000, 8000, 16_000, 20_000, 20_000]);
        assert_eq!(b.ceiling(200), Duration::from_secs(20));
    }

    #[test]
    fn seeded_sources_repeat_and_spread() {
        let a = SplitMix64::seeded(42);
        let b = SplitMix64::seeded(42);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let bo = backoff(1000, 20_000, Jitter::Full);
        let rng = SplitMix64::seeded(9);
        let ds: Vec<Duration> = (0..200).map(|_| bo.delay(3, bo.base, &rng)).collect();
        // Full jitter spreads over [0, 4 s]: both halves are used.
        assert!(ds.iter().any(|d| *d < Duration::from_secs(2)));
        assert!(ds.iter().any(|d| *d > Duration::from_secs(2)));
    }

    proptest! {
        #[test]
        fn delays_respect_cap_and_ceiling(
            base in 1u64..5_000,
            extra in 0u64..60_000,
            retry in 1u32..40,
            prev in 0u64..100_000,
            seed in any::<u64>(),
            kind in 0u8..3,
        ) {
            let jitter = match kind { 0 => Jitter::None, 1 => Jitter::Full, _ => Jitter::Decorrelated };
            let b = backoff(base, base + extra, jitter);
            let rng = SplitMix64::seeded(seed);
            let d = b.delay(retry, Duration::from_millis(prev), &rng);
            prop_assert!(d <= b.cap);
            match jitter {
                Jitter::Full | Jitter::None => prop_assert!(d <= b.ceiling(retry)),
                _ => prop_assert!(d >= b.base),
            }
        }

        #[test]
        fn uniform_stays_in_range(lo in 0u64..1_000_000, span in 0u64..1_000_000, seed in any::<u64>()) {
            let rng = SplitMix64::seeded(seed);
            let lo_d = Duration::from_nanos(lo);
            let hi_d = Duration::from_nanos(lo + span);
            let d = uniform(&rng, lo_d, hi_d);
            prop_assert!(d >= lo_d && d <= hi_d);
        }
    }
}
