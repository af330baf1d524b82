//! The workspace's one small random generator: SplitMix64.
//!
//! Used wherever ripcord needs cheap, well-spread randomness that is not a secret: retry and
//! probe jitter, the chain's weighted order, the fake vendors' fault draws and the chaos runs'
//! virtual users. Its output is fixed by its seed forever (unlike `rand`'s `StdRng`, which may
//! change between releases), so seeded tests and chaos runs stay repeatable across dependency
//! upgrades. Not for cryptography.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// The increment SplitMix64 adds per draw (2^64 / φ).
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// A lock-free SplitMix64 generator: shared by reference between tasks, each draw one atomic add.
///
/// ```
/// use ripcord_core::rng::SplitMix64;
/// let a = SplitMix64::seeded(7);
/// let b = SplitMix64::seeded(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// ```
#[derive(Debug)]
pub struct SplitMix64 {
    state: AtomicU64,
}

impl SplitMix64 {
    /// A generator with a fixed seed: the same seed gives the same sequence.
    pub const fn seeded(seed: u64) -> Self {
        SplitMix64 {
            state: AtomicU64::new(seed),
        }
    }

    /// A generator seeded from the process's hash randomness.
    pub fn from_entropy() -> Self {
        let seed = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
        SplitMix64::seeded(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        mix64(
            self.state
                .fetch_add(GOLDEN_GAMMA, Ordering::Relaxed)
                .wrapping_add(GOLDEN_GAMMA),
        )
    }

    /// A uniform draw in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform draw in `0..n` by multiply-shift (bias below 2^-32 for `n` < 2^32); 0 when `n` is 0.
    pub fn below(&self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

impl Clone for SplitMix64 {
    /// A generator that continues from the same state (the two then draw the same sequence).
    fn clone(&self) -> Self {
        SplitMix64::seeded(self.state.load(Ordering::Relaxed))
    }
}

/// The SplitMix64 finalizer: a fast, well-mixing 64-bit hash step (also for hashing inputs).
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_reference_sequence() {
        // First outputs of SplitMix64 seeded with 0 (Vigna's reference implementation).
        let rng = SplitMix64::seeded(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn draws_stay_in_range_and_clones_continue() {
        let rng = SplitMix64::seeded(3);
        assert!(
            (0..1000)
                .map(|_| rng.next_f64())
                .all(|x| (0.0..1.0).contains(&x))
        );
        assert!((0..1000).map(|_| rng.below(7)).all(|x| x < 7));
        assert_eq!(rng.below(0), 0);
        let twin = rng.clone();
        assert_eq!(rng.next_u64(), twin.next_u64());
    }
}
