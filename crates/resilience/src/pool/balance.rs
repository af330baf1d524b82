//! The strategies: which of the candidate deployments takes the next attempt.
//!
//! Every function gets only candidates that can take a call now (the pool filters cooldowns,
//! ejections and outages first), never an empty set. The candidates are a 64-bit set of slot
//! indices (bit `i`: slot `i`), read in ascending slot order: a set costs nothing to build or
//! keep across an await, where a list of indices would be a buffer on every call.

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::Shared;
use super::policy::Balance;

/// The `k`-th (from 0, in ascending order) slot index in `set` (`k` < its size).
pub(crate) fn nth(mut set: u64, k: usize) -> usize {
    for _ in 0..k {
        set &= set.wrapping_sub(1);
    }
    set.trailing_zeros() as usize
}

/// The slot indices in `set`, ascending.
fn members(mut set: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (set != 0).then(|| {
            let i = set.trailing_zeros() as usize;
            set &= set - 1;
            i
        })
    })
}

/// Picks one of the slots in `candidates` (never empty).
pub(crate) fn pick(shared: &Shared, candidates: u64, now: Instant) -> usize {
    let n = candidates.count_ones() as usize;
    match n {
        0 => return 0,
        1 => return nth(candidates, 0),
        _ => {}
    }
    match shared.policy.strategy {
        Balance::P2cPeakEwma => p2c(shared, candidates, n, now),
        Balance::LeastInFlight => least_in_flight(shared, candidates, n),
        Balance::Weighted => weighted(shared, candidates, n),
        Balance::RoundRobin => round_robin(shared, candidates),
        Balance::Usage => usage(shared, candidates, n, now),
    }
}

/// A uniform index below `n` (Lemire's multiply-shift; `n` > 0).
fn below(shared: &Shared, n: usize) -> usize {
    let r = shared.policy.rng.next_u64();
    ((u128::from(r) * n as u128) >> 64) as usize
}

/// Tower's p2c over peak EWMA: two distinct candidates at random, the one with the lower
/// `latency estimate × (in flight + 1)` wins (ties go to the first drawn).
fn p2c(shared: &Shared, candidates: u64, n: usize, now: Instant) -> usize {
    let a = below(shared, n);
    let mut b = below(shared, n - 1);
    if b >= a {
        b += 1;
    }
    let (a, b) = (nth(candidates, a), nth(candidates, b));
    if cost(shared, b, now) < cost(shared, a, now) {
        b
    } else {
        a
    }
}

/// The peak-EWMA load of a slot: its decayed latency estimate times its calls in flight plus
/// one, as tower's `PeakEwma::load`.
pub(crate) fn cost(shared: &Shared, i: usize, now: Instant) -> f64 {
    let slot = &shared.slots[i];
    let rtt = slot.health().ewma.decayed(now, shared.policy.ewma_decay);
    rtt * f64::from(slot.in_flight() + 1)
}

/// The fewest calls in flight; ties broken round-robin so equal deployments share the load.
fn least_in_flight(shared: &Shared, candidates: u64, n: usize) -> usize {
    let start = shared.next.fetch_add(1, Ordering::Relaxed);
    let mut best = nth(candidates, start % n);
    let mut best_load = shared.slots[best].in_flight();
    for k in 1..n {
        let i = nth(candidates, (start + k) % n);
        let load = shared.slots[i].in_flight();
        if load < best_load {
            best = i;
            best_load = load;
        }
    }
    best
}

/// A draw in proportion to the weights; when every candidate weighs 0, an even draw.
fn weighted(shared: &Shared, candidates: u64, n: usize) -> usize {
    let total: u64 = members(candidates)
        .map(|i| u64::from(shared.slots[i].spec.weight))
        .sum();
    if total == 0 {
        return nth(candidates, below(shared, n));
    }
    let mut r = ((u128::from(shared.policy.rng.next_u64()) * u128::from(total)) >> 64) as u64;
    let mut last = 0;
    for i in members(candidates) {
        let w = u64::from(shared.slots[i].spec.weight);
        if r < w {
            return i;
        }
        r -= w;
        last = i;
    }
    last
}

/// The next slot in turn among the candidates: the first candidate at or after the counter.
fn round_robin(shared: &Shared, candidates: u64) -> usize {
    let n = shared.slots.len();
    let turn = shared.next.fetch_add(1, Ordering::Relaxed) % n;
    members(candidates)
        .min_by_key(|&i| (i + n - turn) % n)
        .unwrap_or_else(|| nth(candidates, 0))
}

/// The smallest share of its own rpm / tpm used this minute; ties go round-robin.
fn usage(shared: &Shared, candidates: u64, n: usize, now: Instant) -> usize {
    let start = shared.next.fetch_add(1, Ordering::Relaxed);
    let share = |i: usize| {
        let slot = &shared.slots[i];
        slot.health().usage_share(now, slot.spec.rpm, slot.spec.tpm)
    };
    let mut best = nth(candidates, start % n);
    let mut best_share = share(best);
    for k in 1..n {
        let i = nth(candidates, (start + k) % n);
        let s = share(i);
        if s < best_share {
            best = i;
            best_share = s;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::{members, nth};

    #[test]
    fn a_set_reads_in_ascending_slot_order() {
        let set = 0b1011_0100u64;
        assert_eq!(members(set).collect::<Vec<_>>(), [2, 4, 5, 7]);
        assert_eq!(
            (0..4).map(|k| nth(set, k)).collect::<Vec<_>>(),
            [2, 4, 5, 7]
        );
        assert_eq!(nth(1 << 63, 0), 63);
        assert_eq!(members(0).count(), 0);
    }
}
