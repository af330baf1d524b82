//! Where tenants' budget accounts live: the [`BudgetStore`] trait, and the in-process store.
//!
//! The budget *policy* — which tenant a call is charged to, what it reserves (prompt estimate
//! plus `max_tokens`), the refusal and its message, what a call is charged afterwards (reported
//! usage, the estimate, the prompt of a failure the vendor may have processed, the first link's
//! share of a restarted stream) — is written once, in [`Budget`](super::Budget). A store does
//! what must be atomic: reserve tokens in a tenant's account if they fit under its limit, and
//! settle a reservation with what the call used. [`LocalBudgetStore`] keeps the accounts in this
//! process (the default); `ripcord-redis` supplies a store that shares them across replicas.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::SharedClock;
use crate::window::Window;

const BUCKETS: usize = 60;
/// The table is first pruned of idle accounts when it holds this many.
const PRUNE_AT: usize = 4096;
/// Most accounts the in-process store keeps by default (about 1.5 KiB each: 60 buckets).
pub const DEFAULT_MAX_ACCOUNTS: usize = 32_768;

/// A reservation in a tenant's account, settled once with what the call used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetHold {
    /// The tenant.
    pub tenant: Arc<str>,
    /// Tokens reserved.
    pub reserved: u64,
    /// Where in the account the reservation went (a store's own mark: a bucket, a window).
    pub slot: i64,
    /// Whether a shared store took it (`false`: its local fallback did).
    pub shared: bool,
}

/// Why a reservation did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetRefusal {
    /// Tokens the tenant used (or holds) in the window.
    pub used: u64,
    /// The limit the store enforced.
    pub limit: u64,
    /// When enough of the window will have passed for the reservation to fit.
    pub retry_after: Option<Duration>,
}

/// What the fast path of a reservation decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetAdmit {
    /// Reserved.
    Held(BudgetHold),
    /// Does not fit.
    Refused(BudgetRefusal),
    /// The store must ask elsewhere: await [`BudgetStore::reserve`].
    Ask,
}

/// Tenants' accounts: what must be atomic (see the module docs).
///
/// Every method but [`reserve`](BudgetStore::reserve) is synchronous and must not block on I/O:
/// `settle` is called from a stream's end.
#[async_trait]
pub trait BudgetStore: Send + Sync + fmt::Debug + 'static {
    /// Reserves `need` tokens in `tenant`'s account if its window's use stays within `limit`;
    /// without waiting, or [`BudgetAdmit::Ask`].
    fn try_reserve(&self, tenant: &str, limit: u64, need: u64) -> BudgetAdmit;

    /// As [`try_reserve`](BudgetStore::try_reserve), waiting on the store (bounded by its own
    /// timeouts); never [`BudgetAdmit::Ask`].
    async fn reserve(&self, tenant: &str, limit: u64, need: u64) -> BudgetAdmit;

    /// Replaces a reservation with the tokens the call used.
    fn settle(&self, hold: BudgetHold, used: u64);

    /// Tokens `tenant` used (or holds) in the current window, as this store knows it without
    /// waiting.
    fn used(&self, tenant: &str) -> u64;
}

/// The in-process store: one sliding window (60 buckets) per tenant, in a bounded table.
///
/// A call costs O(1) in the number of accounts. The table is pruned of idle accounts (nothing
/// used in the window) only when it has doubled since the last prune, so the cost of a prune is
/// spread over the calls that grew it. It never holds more than its capacity
/// ([`DEFAULT_MAX_ACCOUNTS`] unless set with [`LocalBudgetStore::with_capacity`]): when it is
/// full of live accounts, the quarter that used least in the window is evicted at once (each
/// forgets what it used, so it may spend up to its limit again), and a warning with the count is
/// logged.
#[derive(Debug)]
pub struct LocalBudgetStore {
    clock: SharedClock,
    window: Duration,
    max_accounts: usize,
    map: Mutex<Accounts>,
}

/// The table and when it is next pruned.
#[derive(Debug, Default)]
struct Accounts {
    map: HashMap<Arc<str>, Window>,
    prune_at: usize,
    evicted: u64,
}

impl Accounts {
    /// Prunes (and, when full of live accounts, evicts) once the table reached `prune_at`.
    fn make_room(&mut self, now: tokio::time::Instant, max: usize) {
        if self.map.len() < self.prune_at.min(max) {
            return;
        }
        self.map.retain(|_, w| w.sum(now, 0) > 0);
        let low = max - max / 4;
        if self.map.len() > low {
            let mut by_use: Vec<(i64, Arc<str>)> = self
                .map
                .iter()
                .map(|(k, w)| (w.sum(now, 0), Arc::clone(k)))
                .collect();
            let evict = by_use.len() - low;
            by_use.select_nth_unstable_by_key(evict - 1, |(used, _)| *used);
            for (_, k) in by_use.iter().take(evict) {
                self.map.remove(k);
            }
            self.evicted += evict as u64;
            tracing::warn!(
                target: "ripcord::budget",
                evicted = evict,
                evicted_total = self.evicted,
                max_accounts = max,
                "the budget account table is full of live accounts: the least-used ones were evicted (they may spend their budget again)"
            );
        }
        self.prune_at = self.map.len().saturating_mul(2).max(PRUNE_AT).min(max);
    }
}

impl LocalBudgetStore {
    /// Empty accounts over `window`, on `clock`, at most [`DEFAULT_MAX_ACCOUNTS`] of them.
    pub fn new(window: Duration, clock: SharedClock) -> Self {
        LocalBudgetStore::with_capacity(window, clock, DEFAULT_MAX_ACCOUNTS)
    }

    /// Empty accounts over `window`, on `clock`, at most `max_accounts` (at least 4) of them.
    pub fn with_capacity(window: Duration, clock: SharedClock, max_accounts: usize) -> Self {
        LocalBudgetStore {
            clock,
            window,
            max_accounts: max_accounts.max(4),
            map: Mutex::new(Accounts {
                prune_at: PRUNE_AT,
                ..Accounts::default()
            }),
        }
    }

    /// Accounts in the table now.
    pub fn accounts(&self) -> usize {
        self.lock().map.len()
    }

    /// Live accounts evicted so far because the table was full.
    pub fn evicted(&self) -> u64 {
        self.lock().evicted
    }

    fn lock(&self) -> MutexGuard<'_, Accounts> {
        match self.map.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

#[async_trait]
impl BudgetStore for LocalBudgetStore {
    fn try_reserve(&self, tenant: &str, limit: u64, need: u64) -> BudgetAdmit {
        let now = self.clock.now();
        let limit_i = i64::try_from(limit).unwrap_or(i64::MAX);
        let need_i = i64::try_from(need).unwrap_or(i64::MAX);
        let mut accounts = self.lock();
        if !accounts.map.contains_key(tenant) {
            accounts.make_room(now, self.max_accounts);
        }
        let map = &mut accounts.map;
        let key: Arc<str> = match map.get_key_value(tenant) {
            Some((k, _)) => k.clone(),
            None => Arc::from(tenant),
        };
        let w = map
            .entry(key.clone())
            .or_insert_with(|| Window::new(now, self.window, BUCKETS));
        let used = w.sum(now, 0);
        if used.saturating_add(need_i) > limit_i {
            let retry_after =
                (need_i <= limit_i).then(|| w.time_until_at_most(now, 0, limit_i - need_i));
            return BudgetAdmit::Refused(BudgetRefusal {
                used: u64::try_from(used).unwrap_or(0),
                limit,
                retry_after,
            });
        }
        let bucket = w.add(now, 0, need_i);
        BudgetAdmit::Held(BudgetHold {
            tenant: key,
            reserved: need,
            slot: i64::try_from(bucket).unwrap_or(i64::MAX),
            shared: false,
        })
    }

    async fn reserve(&self, tenant: &str, limit: u64, need: u64) -> BudgetAdmit {
        self.try_reserve(tenant, limit, need)
    }

    fn settle(&self, hold: BudgetHold, used: u64) {
        let used = i64::try_from(used).unwrap_or(i64::MAX);
        let reserved = i64::try_from(hold.reserved).unwrap_or(i64::MAX);
        if let Some(w) = self.lock().map.get_mut(&hold.tenant) {
            w.add_at(u64::try_from(hold.slot).unwrap_or(0), 0, used - reserved);
        }
    }

    fn used(&self, tenant: &str) -> u64 {
        let now = self.clock.now();
        self.lock()
            .map
            .get(tenant)
            .map_or(0, |w| u64::try_from(w.sum(now, 0)).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TokioClock;

    fn store(max: usize) -> LocalBudgetStore {
        LocalBudgetStore::with_capacity(Duration::from_secs(60), Arc::new(TokioClock), max)
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_never_outgrows_its_capacity_and_evicts_the_least_used() {
        let s = store(1000);
        // One heavy tenant, then many light ones.
        assert!(matches!(
            s.try_reserve("heavy", 1_000_000, 5_000),
            BudgetAdmit::Held(_)
        ));
        for i in 0..5000 {
            assert!(matches!(
                s.try_reserve(&format!("t{i}"), 1_000_000, 1),
                BudgetAdmit::Held(_)
            ));
            assert!(s.accounts() <= 1000);
        }
        assert!(s.evicted() > 0);
        assert_eq!(s.used("heavy"), 5_000, "the heaviest account is kept");
    }

    #[tokio::test(start_paused = true)]
    async fn idle_accounts_are_pruned_before_any_live_one_is_evicted() {
        let s = store(10_000);
        for i in 0..5000 {
            let _ = s.try_reserve(&format!("old{i}"), 1_000_000, 1);
        }
        tokio::time::advance(Duration::from_secs(61)).await;
        for i in 0..5000 {
            let _ = s.try_reserve(&format!("new{i}"), 1_000_000, 1);
        }
        assert_eq!(s.evicted(), 0);
        assert!(s.accounts() <= 5000 + PRUNE_AT, "{}", s.accounts());
    }
}
