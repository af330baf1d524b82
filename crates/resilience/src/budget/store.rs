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
const PRUNE_AT: usize = 4096;

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

/// The in-process store: one sliding window (60 buckets) per tenant, pruned of idle tenants.
#[derive(Debug)]
pub struct LocalBudgetStore {
    clock: SharedClock,
    window: Duration,
    map: Mutex<HashMap<Arc<str>, Window>>,
}

impl LocalBudgetStore {
    /// Empty accounts over `window`, on `clock`.
    pub fn new(window: Duration, clock: SharedClock) -> Self {
        LocalBudgetStore {
            clock,
            window,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Window>> {
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
        let mut map = self.lock();
        if map.len() >= PRUNE_AT {
            map.retain(|_, w| w.sum(now, 0) > 0);
        }
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
        if let Some(w) = self.lock().get_mut(&hold.tenant) {
            w.add_at(u64::try_from(hold.slot).unwrap_or(0), 0, used - reserved);
        }
    }

    fn used(&self, tenant: &str) -> u64 {
        let now = self.clock.now();
        self.lock()
            .get(tenant)
            .map_or(0, |w| u64::try_from(w.sum(now, 0)).unwrap_or(0))
    }
}
