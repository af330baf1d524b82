//! A sliding window of counters in time buckets, read through the crate's clock.
//!
//! Used by the breaker's failure-rate policy, the retry budget and the tenant budgets. A window
//! of length `W` is split into `N` buckets of `W / N`; a sum covers the buckets of the last `W`
//! (so it forgets in steps of one bucket). Each bucket holds two counters (`[calls, failures]`,
//! `[calls, retries]`, or `[tokens, _]`).

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    index: u64,
    values: [i64; 2],
}

/// Counters over a sliding time window.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    start: Instant,
    bucket_len: Duration,
    buckets: Vec<Bucket>,
}

impl Window {
    /// A window of `len` split into `buckets` buckets (at least one; the bucket length is at
    /// least one microsecond).
    pub(crate) fn new(start: Instant, len: Duration, buckets: usize) -> Self {
        let n = buckets.max(1);
        let bucket_len = (len / u32::try_from(n).unwrap_or(u32::MAX)).max(Duration::from_micros(1));
        Window {
            start,
            bucket_len,
            buckets: vec![Bucket::default(); n],
        }
    }

    fn index(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.start);
        u64::try_from(since.as_nanos() / self.bucket_len.as_nanos().max(1)).unwrap_or(u64::MAX)
    }

    fn n(&self) -> u64 {
        self.buckets.len() as u64
    }

    /// Adds `v` to counter `k` (0 or 1) at `now`; returns the bucket index it landed in.
    pub(crate) fn add(&mut self, now: Instant, k: usize, v: i64) -> u64 {
        let idx = self.index(now);
        let n = self.n();
        let b = &mut self.buckets[(idx % n) as usize];
        if b.index != idx {
            *b = Bucket {
                index: idx,
                values: [0, 0],
            };
        }
        if let Some(slot) = b.values.get_mut(k) {
            *slot = slot.saturating_add(v);
        }
        idx
    }

    /// Adds `v` to counter `k` of the bucket `idx` if that bucket is still in the window
    /// (reconciling an earlier reservation); otherwise does nothing.
    pub(crate) fn add_at(&mut self, idx: u64, k: usize, v: i64) {
        let n = self.n();
        let b = &mut self.buckets[(idx % n) as usize];
        if b.index == idx
            && let Some(slot) = b.values.get_mut(k)
        {
            *slot = slot.saturating_add(v);
        }
    }

    /// The sum of counter `k` over the window ending at `now`.
    pub(crate) fn sum(&self, now: Instant, k: usize) -> i64 {
        let idx = self.index(now);
        let oldest = idx.saturating_sub(self.n() - 1);
        self.buckets
            .iter()
            .filter(|b| b.index >= oldest && b.index <= idx)
            .map(|b| b.values.get(k).copied().unwrap_or(0))
            .sum()
    }

    /// How long until the sum of counter `k` drops to at most `limit` as buckets expire (zero
    /// when it already is).
    pub(crate) fn time_until_at_most(&self, now: Instant, k: usize, limit: i64) -> Duration {
        let mut sum = self.sum(now, k);
        if sum <= limit {
            return Duration::ZERO;
        }
        let idx = self.index(now);
        let oldest = idx.saturating_sub(self.n() - 1);
        let mut live: Vec<&Bucket> = self
            .buckets
            .iter()
            .filter(|b| b.index >= oldest && b.index <= idx)
            .collect();
        live.sort_by_key(|b| b.index);
        for b in live {
            sum -= b.values.get(k).copied().unwrap_or(0);
            if sum <= limit {
                // Bucket `b.index` leaves the window when the index reaches `b.index + n`.
                let expires = self.start
                    + self.bucket_len * u32::try_from(b.index + self.n()).unwrap_or(u32::MAX);
                return expires.saturating_duration_since(now);
            }
        }
        self.bucket_len * u32::try_from(self.n()).unwrap_or(u32::MAX)
    }

    /// Clears every bucket.
    pub(crate) fn reset(&mut self) {
        for b in &mut self.buckets {
            *b = Bucket::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_forget_old_buckets_and_predict_expiry() {
        let t0 = Instant::now();
        let mut w = Window::new(t0, Duration::from_secs(10), 10);
        w.add(t0, 0, 5);
        w.add(t0 + Duration::from_secs(3), 0, 7);
        assert_eq!(w.sum(t0 + Duration::from_secs(3), 0), 12);
        // The first bucket (0..1 s) leaves the window at 10 s.
        assert_eq!(
            w.time_until_at_most(t0 + Duration::from_secs(4), 0, 7),
            Duration::from_secs(6)
        );
        assert_eq!(w.sum(t0 + Duration::from_secs(10), 0), 7);
        assert_eq!(w.sum(t0 + Duration::from_secs(14), 0), 0);
        let idx = w.add(t0 + Duration::from_secs(14), 1, 3);
        w.add_at(idx, 1, -2);
        assert_eq!(w.sum(t0 + Duration::from_secs(14), 1), 1);
        w.reset();
        assert_eq!(w.sum(t0 + Duration::from_secs(14), 1), 0);
    }
}
