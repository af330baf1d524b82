//! The strategies: which of the candidate deployments takes the next attempt.
//!
//! Every function gets only candidates that can take a call now (the pool filters cooldowns,
//! ejections and outages first), never an empty list.

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::Shared;
use super::layer::Balance;

/// Picks one of `candidates` (indices into the pool's slots; never empty).
pub(crate) fn pick(shared: &Shared, candidates: &[usize], now: Instant) -> usize {
    match candidates {
        [] => 0,
        [only] => *only,
        _ => match shared.policy.strategy {
            Balance::P2cPeakEwma => p2c(shared, candidates, now),
            Balance::LeastInFlight => least_in_flight(shared, candidates),
            Balance::Weighted => weighted(shared, candidates),
            Balance::RoundRobin => round_robin(shared, candidates),
            Balance::Usage => usage(shared, candidates, now),
        },
    }
}

/// A uniform index below `n` (Lemire's multiply-shift; `n` > 0).
fn below(shared: &Shared, n: usize) -> usize {
    let r = shared.policy.rng.next_u64();
    ((u128::from(r) * n as u128) >> 64) as usize
}

/// Tower's p2c over peak EWMA: two distinct candidates at random, the one with the lower
/// `latency estimate × (in flight + 1)` wins (ties go to the first drawn).
fn p2c(shared: &Shared, candidates: &[usize], now: Instant) -> usize {
    let n = candidates.len();
    let a = below(shared, n);
    let mut b = below(shared, n - 1);
    if b >= a {
        b += 1;
    }
    let (a, b) = (candidates[a], candidates[b]);
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
fn least_in_flight(shared: &Shared, candidates: &[usize]) -> usize {
    let start = shared.next.fetch_add(1, Ordering::Relaxed);
    let n = candidates.len();
    let mut best = candidates[start % n];
    let mut best_load = shared.slots[best].in_flight();
    for k in 1..n {
        let i = candidates[(start + k) % n];
        let load = shared.slots[i].in_flight();
        if load < best_load {
            best = i;
            best_load = load;
        }
    }
    best
}

/// A draw in proportion to the weights; when every candidate weighs 0, an even draw.
fn weighted(shared: &Shared, candidates: &[usize]) -> usize {
    let total: u64 = candidates
        .iter()
        .map(|&i| u64::from(shared.slots[i].spec.weight))
        .sum();
    if total == 0 {
        return candidates[below(shared, candidates.len())];
    }
    let mut r = ((u128::from(shared.policy.rng.next_u64()) * u128::from(total)) >> 64) as u64;
    for &i in candidates {
        let w = u64::from(shared.slots[i].spec.weight);
        if r < w {
            return i;
        }
        r -= w;
    }
    candidates[candidates.len() - 1]
}

/// The next slot in turn among the candidates: the first candidate at or after the counter.
fn round_robin(shared: &Shared, candidates: &[usize]) -> usize {
    let n = shared.slots.len();
    let turn = shared.next.fetch_add(1, Ordering::Relaxed) % n;
    candidates
        .iter()
        .copied()
        .min_by_key(|&i| (i + n - turn) % n)
        .unwrap_or(candidates[0])
}

/// The smallest share of its own rpm / tpm used this minute; ties go round-robin.
fn usage(shared: &Shared, candidates: &[usize], now: Instant) -> usize {
    let start = shared.next.fetch_add(1, Ordering::Relaxed);
    let n = candidates.len();
    let share = |i: usize| {
        let slot = &shared.slots[i];
        slot.health().usage_share(now, slot.spec.rpm, slot.spec.tpm)
    };
    let mut best = candidates[start % n];
    let mut best_share = share(best);
    for k in 1..n {
        let i = candidates[(start + k) % n];
        let s = share(i);
        if s < best_share {
            best = i;
            best_share = s;
        }
    }
    best
}
