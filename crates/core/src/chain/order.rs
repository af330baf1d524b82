//! Link ordering strategies: the order in which one call tries the chain's links.
//!
//! The order is computed once per call into a fixed array of link indices (no allocation);
//! the chain's skip rules, routes, deadline and re-admission wait then walk that order instead
//! of the configured one. [`Strategy::Ordered`] (the default) does not even fill the array.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::{BuildError, Link, MAX_LINKS};
use crate::capabilities::{Capabilities, Locality};
use crate::request::{ChatRequest, Needs};
use crate::rng::SplitMix64;
use crate::tokens;

/// The weight of a new sample in the latency EWMA of [`Strategy::LowestLatency`].
pub const LATENCY_EWMA_ALPHA: f64 = 0.25;

/// The output tokens [`Strategy::LowestCost`] assumes when the request sets no `max_tokens`
/// (capped by each link's own output limit).
pub const DEFAULT_OUTPUT_ESTIMATE: u32 = 512;

/// How a chain orders its links for each call (see [`super::ChainBuilder::strategy`]).
///
/// Whatever the strategy, links the request cannot use are still skipped, per-kind routes
/// still pick the link they name, and one deadline still covers the call.
///
/// # Examples
///
/// ```
/// use ripcord_core::chain::Strategy;
/// let s = Strategy::weighted([("openai", 3), ("anthropic", 1)]);
/// assert_eq!(s.name(), "weighted");
/// assert_eq!(Strategy::default(), Strategy::Ordered);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// The configured order (the default).
    #[default]
    Ordered,
    /// Links ordered by an EWMA ([`LATENCY_EWMA_ALPHA`]) of their observed time to first
    /// token: the latency of successful `chat` calls, and for streams the time until the first
    /// content event. Links with fewer than `min_samples` samples keep their configured
    /// position; only the sampled links are reordered, among the positions they hold. So a
    /// new chain starts in configured order, and no traffic goes to a link just to measure it:
    /// a link gets samples when it serves (e.g. as a fallback). `min_samples` of 0 counts as 1.
    LowestLatency {
        /// Successful calls a link needs before it is ordered by latency.
        min_samples: u32,
    },
    /// Links ordered by the price of the estimated tokens (the prompt estimate of
    /// [`crate::tokens::estimate_request`] plus `max_tokens`, or [`DEFAULT_OUTPUT_ESTIMATE`])
    /// at their [`Capabilities::price`], cheapest first, among the links that have what the
    /// request needs (tools, vision, JSON). Links without a known price come after the priced
    /// ones, links lacking a needed capability last (they are skipped anyway). Ties keep the
    /// configured order.
    LowestCost,
    /// The first link is drawn at random with these shares (link name, share); the rest follow
    /// in configured order. Links not named have share 0 and are never drawn first. The draw
    /// uses a small per-chain generator, seedable with [`super::ChainBuilder::seed`].
    Weighted(Vec<(String, u32)>),
    /// The configured order, except that links whose passive error rate — an EWMA
    /// ([`ERROR_EWMA_ALPHA`]) of their calls' outcomes, counting only failures charged to the
    /// vendor — reaches `threshold_pct` percent after at least `min_calls` calls move behind
    /// the others (keeping their configured order among themselves). A demoted link is still
    /// tried when the links before it fail, and every [`DEMOTION_PROBE_EVERY`]-th call keeps
    /// the configured order, so a link that recovered is seen to recover.
    DemoteErroring {
        /// The error rate, in percent, at which a link is demoted.
        threshold_pct: u8,
        /// Calls a link needs before its error rate counts.
        min_calls: u32,
    },
}

/// The weight of a new outcome in the error-rate EWMA of [`Strategy::DemoteErroring`].
pub const ERROR_EWMA_ALPHA: f64 = 0.1;

/// Every this many calls, [`Strategy::DemoteErroring`] keeps the configured order.
pub const DEMOTION_PROBE_EVERY: u64 = 20;

impl Strategy {
    /// Weighted shares from `(link name, share)` pairs.
    pub fn weighted<S: Into<String>>(shares: impl IntoIterator<Item = (S, u32)>) -> Self {
        Strategy::Weighted(shares.into_iter().map(|(n, w)| (n.into(), w)).collect())
    }

    /// The strategy's config name: `ordered`, `lowest_latency`, `lowest_cost` or `weighted`.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Ordered => "ordered",
            Strategy::LowestLatency { .. } => "lowest_latency",
            Strategy::LowestCost => "lowest_cost",
            Strategy::Weighted(_) => "weighted",
            Strategy::DemoteErroring { .. } => "demote_erroring",
        }
    }
}

/// What the chain has observed of one link's latency (see [`Strategy::LowestLatency`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkLatency {
    /// The exponentially weighted moving average of the samples.
    pub ewma: Duration,
    /// Samples taken so far.
    pub samples: u32,
}

/// The per-link latency EWMA, in microseconds as `f64` bits; `NO_SAMPLE` until the first one.
#[derive(Debug)]
pub(crate) struct LatencyCell {
    ewma_us: AtomicU64,
    samples: AtomicU32,
}

const NO_SAMPLE: u64 = u64::MAX;

impl LatencyCell {
    fn new() -> Self {
        LatencyCell {
            ewma_us: AtomicU64::new(NO_SAMPLE),
            samples: AtomicU32::new(0),
        }
    }

    /// Adds a sample (lock-free; concurrent updates are each applied once).
    pub(crate) fn observe(&self, latency: Duration) {
        let x = latency.as_secs_f64() * 1e6;
        // The closure never returns None, so this cannot fail; the result is not needed.
        let _ = self
            .ewma_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(if old == NO_SAMPLE {
                    x.to_bits()
                } else {
                    let old = f64::from_bits(old);
                    (old + LATENCY_EWMA_ALPHA * (x - old)).to_bits()
                })
            });
        // Saturating: a counter stuck at u32::MAX still means "enough samples".
        let _ = self
            .samples
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1));
    }

    /// The EWMA in microseconds when at least `min` samples were taken.
    fn ewma_if(&self, min: u32) -> Option<f64> {
        if self.samples.load(Ordering::Relaxed) < min.max(1) {
            return None;
        }
        match self.ewma_us.load(Ordering::Relaxed) {
            NO_SAMPLE => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    pub(crate) fn snapshot(&self) -> Option<LinkLatency> {
        let samples = self.samples.load(Ordering::Relaxed);
        let us = self.ewma_if(1)?;
        Some(LinkLatency {
            ewma: Duration::from_secs_f64(us.max(0.0) / 1e6),
            samples,
        })
    }
}

/// A link's passive error rate (see [`Strategy::DemoteErroring`]): an EWMA of outcomes as
/// `f64` bits, and the calls counted.
#[derive(Debug)]
pub(crate) struct ErrorCell {
    rate: AtomicU64,
    calls: AtomicU32,
}

impl ErrorCell {
    fn new() -> Self {
        ErrorCell {
            rate: AtomicU64::new(0f64.to_bits()),
            calls: AtomicU32::new(0),
        }
    }

    /// Adds one outcome (lock-free).
    pub(crate) fn observe(&self, failed: bool) {
        let x = if failed { 1.0 } else { 0.0 };
        // The closures never return None, so these cannot fail.
        let _ = self
            .rate
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                let old = f64::from_bits(old);
                Some((old + ERROR_EWMA_ALPHA * (x - old)).to_bits())
            });
        let _ = self
            .calls
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1));
    }

    /// The error rate (0 to 1) when at least `min` calls were counted.
    pub(crate) fn rate_if(&self, min: u32) -> Option<f64> {
        (self.calls.load(Ordering::Relaxed) >= min.max(1))
            .then(|| f64::from_bits(self.rate.load(Ordering::Relaxed)))
    }
}

/// The strategy as the chain runs it: names resolved to link indices, state allocated.
#[derive(Debug)]
pub(crate) enum Plan {
    Ordered,
    LowestLatency {
        min_samples: u32,
        cells: Vec<LatencyCell>,
    },
    LowestCost,
    Weighted {
        shares: Vec<u32>,
        total: u64,
        rng: SplitMix64,
    },
    DemoteErroring {
        threshold: f64,
        min_calls: u32,
        cells: Vec<ErrorCell>,
        calls: AtomicU64,
    },
}

impl Plan {
    pub(crate) fn new(
        strategy: &Strategy,
        links: &[Link],
        seed: u64,
    ) -> std::result::Result<Plan, BuildError> {
        Ok(match strategy {
            Strategy::Ordered => Plan::Ordered,
            Strategy::LowestLatency { min_samples } => Plan::LowestLatency {
                min_samples: *min_samples,
                cells: links.iter().map(|_| LatencyCell::new()).collect(),
            },
            Strategy::LowestCost => Plan::LowestCost,
            Strategy::Weighted(named) => {
                let mut shares = vec![0u32; links.len()];
                for (name, share) in named {
                    let i = links
                        .iter()
                        .position(|l| *l.model.id().name == **name)
                        .ok_or_else(|| BuildError::UnknownWeightTarget(name.clone()))?;
                    shares[i] = *share;
                }
                let total: u64 = shares.iter().map(|&s| u64::from(s)).sum();
                if total == 0 {
                    return Err(BuildError::ZeroWeights);
                }
                Plan::Weighted {
                    shares,
                    total,
                    rng: SplitMix64::seeded(seed),
                }
            }
            Strategy::DemoteErroring {
                threshold_pct,
                min_calls,
            } => Plan::DemoteErroring {
                threshold: f64::from((*threshold_pct).clamp(1, 100)) / 100.0,
                min_calls: *min_calls,
                cells: links.iter().map(|_| ErrorCell::new()).collect(),
                calls: AtomicU64::new(0),
            },
        })
    }

    /// The error-rate cell of link `i`, when the plan keeps error rates.
    pub(crate) fn error_cell(&self, i: usize) -> Option<&ErrorCell> {
        match self {
            Plan::DemoteErroring { cells, .. } => cells.get(i),
            _ => None,
        }
    }

    /// The latency cell of link `i`, when the plan samples latency.
    pub(crate) fn latency_cell(&self, i: usize) -> Option<&LatencyCell> {
        match self {
            Plan::LowestLatency { cells, .. } => cells.get(i),
            _ => None,
        }
    }

    /// The order of one call, or `None` for the configured order.
    pub(crate) fn order(&self, links: &[Link], req: &ChatRequest, needs: Needs) -> Option<Order> {
        match self {
            Plan::Ordered => None,
            Plan::LowestLatency { min_samples, cells } => {
                let mut order = Order::identity(links.len());
                // The positions held by sampled links, and those links sorted by their EWMA.
                let mut keys = [0f64; MAX_LINKS];
                let mut positions = [0u8; MAX_LINKS];
                let mut sampled = [0u8; MAX_LINKS];
                let mut n = 0;
                for (i, cell) in cells.iter().enumerate().take(MAX_LINKS) {
                    if let Some(us) = cell.ewma_if(*min_samples) {
                        keys[i] = us;
                        positions[n] = order.idx[i];
                        sampled[n] = order.idx[i];
                        n += 1;
                    }
                }
                if n < 2 {
                    return None;
                }
                insertion_sort(&mut sampled[..n], |a, b| {
                    keys[usize::from(a)].total_cmp(&keys[usize::from(b)])
                });
                for k in 0..n {
                    order.idx[usize::from(positions[k])] = sampled[k];
                }
                Some(order)
            }
            Plan::LowestCost => {
                let mut order = Order::identity(links.len());
                let prompt = u64::from(tokens::estimate_request(req));
                // (class, cost): 0 = capable and priced, 1 = capable, price unknown, 2 = lacking.
                let mut keys = [(0u8, 0f64); MAX_LINKS];
                for (i, link) in links.iter().enumerate().take(MAX_LINKS) {
                    let caps = link.model.capabilities();
                    keys[i] = if !has_needs(caps, needs) {
                        (2, 0.0)
                    } else if let Some(price) = &caps.price {
                        let output = req
                            .max_tokens
                            .unwrap_or(DEFAULT_OUTPUT_ESTIMATE)
                            .min(caps.max_output_tokens);
                        (0, price.estimate(prompt, u64::from(output)))
                    } else {
                        (1, 0.0)
                    };
                }
                let len = order.len;
                insertion_sort(&mut order.idx[..len], |a, b| {
                    let (ka, kb) = (keys[usize::from(a)], keys[usize::from(b)]);
                    ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
                });
                Some(order)
            }
            Plan::Weighted { shares, total, rng } => {
                let mut draw = rng.below(*total);
                let first = shares
                    .iter()
                    .position(|&s| {
                        let s = u64::from(s);
                        if draw < s {
                            true
                        } else {
                            draw -= s;
                            false
                        }
                    })
                    .unwrap_or(0);
                if first == 0 {
                    return None;
                }
                let mut order = Order::identity(links.len());
                // Move `first` to the front, the others keep their configured order.
                order.idx[..=first].rotate_right(1);
                Some(order)
            }
            Plan::DemoteErroring {
                threshold,
                min_calls,
                cells,
                calls,
            } => {
                if calls.fetch_add(1, Ordering::Relaxed) % DEMOTION_PROBE_EVERY == 0 {
                    return None;
                }
                let mut demoted = [false; MAX_LINKS];
                let mut any = false;
                for (i, cell) in cells.iter().enumerate().take(MAX_LINKS) {
                    demoted[i] = cell.rate_if(*min_calls).is_some_and(|r| r >= *threshold);
                    any |= demoted[i];
                }
                if !any {
                    return None;
                }
                let mut order = Order::identity(links.len());
                let len = order.len;
                insertion_sort(&mut order.idx[..len], |a, b| {
                    demoted[usize::from(a)].cmp(&demoted[usize::from(b)])
                });
                Some(order)
            }
        }
    }
}

fn has_needs(caps: &Capabilities, needs: Needs) -> bool {
    (!needs.tools || caps.tools)
        && (!needs.vision || caps.vision)
        && (!needs.json || caps.json_mode)
}

/// A stable sort of a short slice (at most [`MAX_LINKS`] elements), without allocating.
fn insertion_sort(v: &mut [u8], cmp: impl Fn(u8, u8) -> std::cmp::Ordering) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && cmp(v[j - 1], v[j]) == std::cmp::Ordering::Greater {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// A link's outside demotion switch ([`super::ChainBuilder::demotion`]): while set, calls try
/// the link after the chain's other links, whatever the strategy, until it is cleared. It
/// moves the link the way [`Strategy::DemoteErroring`] does, but on another's word (a
/// vendor's status page declaring an outage) rather than the chain's own error counts, and it
/// keeps no probe calls: a demoted link is still tried when the links before it fail.
/// Cloning shares the switch.
///
/// # Examples
///
/// ```
/// use ripcord_core::chain::Demotion;
/// let d = Demotion::default();
/// assert!(!d.set(true)); // was not demoted
/// assert!(d.is_demoted());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Demotion(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Demotion {
    /// Demotes (`true`) or restores (`false`) the link; whether it was demoted before.
    pub fn set(&self, demoted: bool) -> bool {
        self.0.swap(demoted, Ordering::SeqCst)
    }

    /// Whether the link is demoted now.
    pub fn is_demoted(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// `order` (or the configured order, for `None`) with the links whose [`Demotion`] is set
/// moved behind the others, each group keeping its order; `order` itself when none is set.
pub(crate) fn demoted(order: Option<Order>, links: &[Link]) -> Option<Order> {
    let mut flags = [false; MAX_LINKS];
    let mut any = false;
    for (i, link) in links.iter().enumerate().take(MAX_LINKS) {
        flags[i] = link.demotion.as_ref().is_some_and(Demotion::is_demoted);
        any |= flags[i];
    }
    if !any {
        return order;
    }
    let mut order = order.unwrap_or_else(|| Order::identity(links.len()));
    let len = order.len;
    insertion_sort(&mut order.idx[..len], |a, b| {
        flags[usize::from(a)].cmp(&flags[usize::from(b)])
    });
    Some(order)
}

/// The link indices of one call, in the order to try them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Order {
    idx: [u8; MAX_LINKS],
    len: usize,
}

impl Order {
    fn identity(len: usize) -> Self {
        let len = len.min(MAX_LINKS);
        let mut idx = [0u8; MAX_LINKS];
        for (i, slot) in idx.iter_mut().enumerate().take(len) {
            // MAX_LINKS is 64, so every index fits a u8.
            *slot = u8::try_from(i).unwrap_or(u8::MAX);
        }
        Order { idx, len }
    }

    /// The link indices in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.idx[..self.len].iter().map(|&i| usize::from(i))
    }

    /// The first link in this order.
    pub(crate) fn first(&self) -> usize {
        usize::from(self.idx[0])
    }
}

/// A failure domain: links in the same one tend to fail together (see
/// [`super::ChainBuilder::prefer_independent_fallbacks`]). Every cloud vendor is one domain;
/// local models form one more.
pub(crate) fn failure_domains(links: &[Link]) -> Vec<u8> {
    let mut seen: Vec<&Locality> = Vec::new();
    links
        .iter()
        .map(|l| {
            let loc = &l.model.capabilities().locality;
            let pos = seen
                .iter()
                .position(|s| same_domain(s, loc))
                .unwrap_or_else(|| {
                    seen.push(loc);
                    seen.len() - 1
                });
            u8::try_from(pos).unwrap_or(u8::MAX)
        })
        .collect()
}

fn same_domain(a: &Locality, b: &Locality) -> bool {
    match (a, b) {
        (Locality::Local, Locality::Local) => true,
        (Locality::Cloud { vendor: va, .. }, Locality::Cloud { vendor: vb, .. }) => {
            va.eq_ignore_ascii_case(vb)
        }
        _ => false,
    }
}

/// A seed for chains built without [`super::ChainBuilder::seed`]: the clock and process id.
pub(crate) fn default_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insertion_sort_is_stable() {
        let keys = [3, 1, 3, 0, 1];
        let mut v = [0u8, 1, 2, 3, 4];
        insertion_sort(&mut v, |a, b| {
            keys[usize::from(a)].cmp(&keys[usize::from(b)])
        });
        assert_eq!(v, [3, 1, 4, 0, 2]);
    }

    #[test]
    fn ewma_starts_at_the_first_sample_and_moves_by_alpha() {
        let c = LatencyCell::new();
        assert_eq!(c.snapshot(), None);
        c.observe(Duration::from_millis(100));
        assert_eq!(c.ewma_if(1), Some(100_000.0));
        c.observe(Duration::from_millis(200));
        let expected = 100_000.0 + LATENCY_EWMA_ALPHA * 100_000.0;
        assert!((c.ewma_if(2).unwrap_or(0.0) - expected).abs() < 1e-6);
        assert_eq!(c.ewma_if(3), None);
        assert_eq!(c.snapshot().map(|s| s.samples), Some(2));
    }

    #[test]
    fn concurrent_samples_are_all_counted() {
        let c = std::sync::Arc::new(LatencyCell::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = std::sync::Arc::clone(&c);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.observe(Duration::from_millis(10));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = c.snapshot().unwrap();
        assert_eq!(s.samples, 4000);
        assert!(s.ewma.abs_diff(Duration::from_millis(10)) < Duration::from_micros(1));
    }

    #[test]
    fn error_rate_moves_by_alpha_and_counts_calls() {
        let c = ErrorCell::new();
        assert_eq!(c.rate_if(1), None);
        c.observe(true);
        assert!((c.rate_if(1).unwrap_or(0.0) - ERROR_EWMA_ALPHA).abs() < 1e-12);
        c.observe(false);
        let expected = ERROR_EWMA_ALPHA * (1.0 - ERROR_EWMA_ALPHA);
        assert!((c.rate_if(2).unwrap_or(0.0) - expected).abs() < 1e-12);
        assert_eq!(c.rate_if(3), None);
    }

    #[test]
    fn splitmix_is_deterministic_and_below_is_in_range() {
        let a = SplitMix64::seeded(7);
        let b = SplitMix64::seeded(7);
        for _ in 0..1000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            assert!(x < 10);
        }
    }
}
