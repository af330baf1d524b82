//! Budgets over calendar periods: an account that starts again at each UTC day or month.
//!
//! [`PeriodBudgetStore`] is a [`BudgetStore`] whose accounts hold what a tenant used in the
//! current period and are emptied when the period turns (at 00:00 UTC, or on the 1st of the
//! month), where the in-process store's sliding window lets old use leak out bucket by bucket. A
//! refusal's `retry_after` is the time until the next period begins. Periods are read from a
//! wall clock ([`WallClock`], Unix milliseconds), which tests replace.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::calendar::{civil_from_days, days_from_civil};

use super::store::{BudgetAdmit, BudgetHold, BudgetRefusal, BudgetStore, DEFAULT_MAX_ACCOUNTS};

const DAY_MS: i64 = 86_400_000;

/// A calendar period of a budget, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetPeriod {
    /// From 00:00 UTC to the next.
    Day,
    /// From the 1st of the month, 00:00 UTC, to the next 1st.
    Month,
}

impl BudgetPeriod {
    /// The number of the period holding `unix_ms` (days or months since 1970).
    pub fn index(self, unix_ms: i64) -> i64 {
        let day = unix_ms.div_euclid(DAY_MS);
        match self {
            BudgetPeriod::Day => day,
            BudgetPeriod::Month => {
                let (y, m, _) = civil_from_days(day);
                (y - 1970) * 12 + i64::from(m) - 1
            }
        }
    }

    /// When period `index` begins, Unix ms.
    pub fn start_ms(self, index: i64) -> i64 {
        match self {
            BudgetPeriod::Day => index.saturating_mul(DAY_MS),
            BudgetPeriod::Month => {
                let y = 1970 + index.div_euclid(12);
                let m = u32::try_from(index.rem_euclid(12)).unwrap_or(0) + 1;
                days_from_civil(y, m, 1).saturating_mul(DAY_MS)
            }
        }
    }

    /// When the period holding `unix_ms` began.
    pub fn start_of(self, unix_ms: i64) -> i64 {
        self.start_ms(self.index(unix_ms))
    }

    /// How long from `unix_ms` until the next period begins.
    pub fn until_next(self, unix_ms: i64) -> Duration {
        let next = self.start_ms(self.index(unix_ms) + 1);
        Duration::from_millis(u64::try_from(next - unix_ms).unwrap_or(0))
    }
}

/// Now, in Unix milliseconds.
pub type WallClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system's clock.
#[expect(
    clippy::disallowed_methods,
    reason = "a calendar period is wall time; this is the one default reading, and every store takes a WallClock that tests replace"
)]
pub fn system_wall_clock() -> WallClock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    })
}

/// Accounts that start again each [`BudgetPeriod`] (see the module docs). At most
/// [`DEFAULT_MAX_ACCOUNTS`] accounts: accounts of past periods go first, then, when the table is
/// full of this period's, the quarter that used least (a warning says so).
pub struct PeriodBudgetStore {
    period: BudgetPeriod,
    clock: WallClock,
    max_accounts: usize,
    map: Mutex<HashMap<Arc<str>, (i64, u64)>>,
}

impl fmt::Debug for PeriodBudgetStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeriodBudgetStore")
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

impl PeriodBudgetStore {
    /// Empty accounts over `period`, read on `clock`.
    pub fn new(period: BudgetPeriod, clock: WallClock) -> Self {
        PeriodBudgetStore {
            period,
            clock,
            max_accounts: DEFAULT_MAX_ACCOUNTS,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, (i64, u64)>> {
        match self.map.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn make_room(&self, map: &mut HashMap<Arc<str>, (i64, u64)>, now: i64) {
        if map.len() < self.max_accounts {
            return;
        }
        map.retain(|_, (p, _)| *p == now);
        if map.len() >= self.max_accounts {
            let mut by_use: Vec<(u64, Arc<str>)> =
                map.iter().map(|(k, (_, u))| (*u, Arc::clone(k))).collect();
            by_use.sort_unstable_by_key(|(u, _)| *u);
            let evict = map.len() / 4;
            for (_, k) in by_use.iter().take(evict) {
                map.remove(k);
            }
            tracing::warn!(
                target: "ripcord::budget",
                evicted = evict,
                max_accounts = self.max_accounts,
                "the period budget table is full: the least-used accounts were evicted (they may spend their budget again)"
            );
        }
    }
}

#[async_trait]
impl BudgetStore for PeriodBudgetStore {
    fn try_reserve(&self, tenant: &str, limit: u64, need: u64) -> BudgetAdmit {
        let now_ms = (self.clock)();
        let now = self.period.index(now_ms);
        let mut map = self.lock();
        if !map.contains_key(tenant) {
            self.make_room(&mut map, now);
        }
        let key: Arc<str> = match map.get_key_value(tenant) {
            Some((k, _)) => Arc::clone(k),
            None => Arc::from(tenant),
        };
        let account = map.entry(Arc::clone(&key)).or_insert((now, 0));
        if account.0 != now {
            *account = (now, 0);
        }
        if account.1.saturating_add(need) > limit {
            return BudgetAdmit::Refused(BudgetRefusal {
                used: account.1,
                limit,
                retry_after: (need <= limit).then(|| self.period.until_next(now_ms)),
            });
        }
        account.1 += need;
        BudgetAdmit::Held(BudgetHold {
            tenant: key,
            reserved: need,
            slot: now,
            shared: false,
        })
    }

    async fn reserve(&self, tenant: &str, limit: u64, need: u64) -> BudgetAdmit {
        self.try_reserve(tenant, limit, need)
    }

    fn settle(&self, hold: BudgetHold, used: u64) {
        if let Some(account) = self.lock().get_mut(&hold.tenant) {
            // A reservation of a period that has turned was emptied with it.
            if account.0 == hold.slot {
                account.1 = account.1.saturating_sub(hold.reserved).saturating_add(used);
            }
        }
    }

    fn used(&self, tenant: &str) -> u64 {
        let now = self.period.index((self.clock)());
        self.lock()
            .get(tenant)
            .filter(|(p, _)| *p == now)
            .map_or(0, |(_, u)| *u)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;

    /// 2026-12-31T23:59:00Z.
    const NYE: i64 = 1_798_761_540_000;

    #[test]
    fn days_and_months_begin_at_midnight_utc() {
        let p = BudgetPeriod::Day;
        assert_eq!(p.start_of(NYE), NYE - 23 * 3_600_000 - 59 * 60_000);
        assert_eq!(p.until_next(NYE), Duration::from_secs(60));
        let m = BudgetPeriod::Month;
        // 2026-12-01T00:00:00Z, and 2027-01-01 one minute after NYE.
        assert_eq!(m.start_of(NYE), 1_796_083_200_000);
        assert_eq!(m.until_next(NYE), Duration::from_secs(60));
        assert_eq!(m.index(0), 0);
        assert_eq!(m.index(NYE), (2026 - 1970) * 12 + 11);
        // Every month start round-trips, leap years included.
        for i in 0..1200 {
            assert_eq!(m.index(m.start_ms(i)), i);
            assert_eq!(m.index(m.start_ms(i) - 1), i - 1);
        }
        // 2024-02-29 is in February.
        let feb29 = 1_709_164_800_000;
        assert_eq!(m.index(feb29), (2024 - 1970) * 12 + 1);
    }

    #[test]
    fn an_account_starts_again_when_the_period_turns() {
        let now = Arc::new(AtomicI64::new(NYE));
        let clock_now = Arc::clone(&now);
        let store = PeriodBudgetStore::new(
            BudgetPeriod::Day,
            Arc::new(move || clock_now.load(Ordering::SeqCst)),
        );
        let BudgetAdmit::Held(hold) = store.try_reserve("acme", 100, 80) else {
            panic!("the first reservation fits");
        };
        store.settle(hold, 70);
        assert_eq!(store.used("acme"), 70);
        let BudgetAdmit::Refused(r) = store.try_reserve("acme", 100, 40) else {
            panic!("70 + 40 > 100");
        };
        assert_eq!(r.retry_after, Some(Duration::from_secs(60)));
        // A reservation held across midnight is settled into nothing.
        let BudgetAdmit::Held(late) = store.try_reserve("acme", 100, 20) else {
            panic!("70 + 20 fits");
        };
        now.store(NYE + 60_000, Ordering::SeqCst);
        assert_eq!(store.used("acme"), 0, "a new day");
        store.settle(late, 20);
        assert_eq!(store.used("acme"), 0);
        assert!(matches!(
            store.try_reserve("acme", 100, 100),
            BudgetAdmit::Held(_)
        ));
    }
}
