//! [`RedisBudgetStore`]: the accounts of `ripcord_resilience::Budget` (the one budget
//! policy), shared through Redis by every replica.
//!
//! This is a *store*, not a budget: who is charged, what a call reserves and what it costs
//! afterwards (for chat and streams alike) are the policy's, the same code as the in-process
//! budget. The store does what must be atomic, in Lua scripts against Redis server time: each
//! tenant has one hash `ripcord:v1:{scope}:budget:<tenant>` holding the current window's index
//! and the tokens used in it, expiring two windows after its last use. **Reserve** adds a
//! call's reservation if it fits under the limit, else refuses with the time until the window
//! turns; **settle** replaces the reservation with what the call used (HINCRBY of the
//! difference, if the window is still current), sent without making the call wait. Windows are
//! fixed, aligned on Redis server time (the in-process store's window slides). With a calendar
//! period ([`SharedBudgetConfig::period`]: a UTC day or month) the replica names the period and
//! when it ends from its wall clock, and the account starts again when it turns.
//!
//! Every Redis call is bounded by the `RedisState` op timeout. When Redis does not answer, the
//! reservation is decided by a [`LocalBudgetStore`] granting this replica its share of each
//! limit (`limit / replicas`); a settlement that cannot be sent leaves the reservation standing
//! in Redis (the tenant is charged what it reserved, never less).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use ripcord_core::{ChatModel, Error, Result};
use ripcord_resilience::{
    Budget, BudgetAdmit, BudgetHold, BudgetPeriod, BudgetPolicy, BudgetRefusal, BudgetStore,
    LocalBudgetStore, PeriodBudgetStore, TokioClock, WallClock, system_wall_clock,
};

use crate::state::{Background, RedisState, config_error, key};

/// KEYS: tenant. ARGV: window_ms, limit, need, and for a calendar period its index and the
/// Unix ms it ends (the replica's wall clock: months have no fixed length).
/// Returns {0,window,used} reserved, {1,wait_ms,used} does not fit.
const RESERVE: &str = "local t = redis.call('TIME')\n\
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n\
local window = tonumber(ARGV[1])\n\
local idx = math.floor(now / window)\n\
local next_ms = (idx + 1) * window\n\
if ARGV[4] then idx = tonumber(ARGV[4]) next_ms = tonumber(ARGV[5]) end\n\
local limit = tonumber(ARGV[2])\n\
local need = tonumber(ARGV[3])\n\
local used = 0\n\
if tonumber(redis.call('HGET', KEYS[1], 'w') or -1) == idx then\n\
  used = tonumber(redis.call('HGET', KEYS[1], 'used') or 0)\n\
else\n\
  redis.call('HSET', KEYS[1], 'w', string.format('%.0f', idx), 'used', 0)\n\
end\n\
redis.call('PEXPIRE', KEYS[1], window * 2)\n\
if used + need > limit then return {1, next_ms - now, used} end\n\
return {0, idx, redis.call('HINCRBY', KEYS[1], 'used', need)}\n";

/// KEYS: tenant. ARGV: window index, delta. Applies the delta if the window is still current;
/// returns the tokens used (-1: the window turned).
const SETTLE: &str = "if redis.call('HGET', KEYS[1], 'w') == ARGV[1] then\n\
  local u = redis.call('HINCRBY', KEYS[1], 'used', ARGV[2])\n\
  if u < 0 then redis.call('HSET', KEYS[1], 'used', 0) u = 0 end\n\
  return u\n\
end\n\
return -1\n";

/// How many tenants' last-seen use a store remembers before it starts over.
const SEEN_MAX: usize = 4096;

/// Per-tenant budgets shared through Redis: the one budget policy over a [`RedisBudgetStore`].
pub type SharedBudget<M> = Budget<M>;

/// Wraps `inner` in the budget policy over a [`RedisBudgetStore`] (accounts under the
/// config's scope, by default the link name).
///
/// # Errors
///
/// `InvalidRequest` naming the setting when the config cannot work.
pub fn shared_budget<M: ChatModel>(
    inner: M,
    state: RedisState,
    config: SharedBudgetConfig,
) -> Result<Budget<M>> {
    let policy = config.policy()?;
    let scope = config
        .scope
        .clone()
        .unwrap_or_else(|| inner.id().name.to_string());
    let store = RedisBudgetStore::new(&scope, state, &config)?;
    Ok(Budget::with_store(inner, policy, store))
}

/// The settings of a shared budget ([`shared_budget`]).
#[derive(Debug, Clone)]
pub struct SharedBudgetConfig {
    default_limit: u64,
    window: Duration,
    per_tenant: Vec<(String, u64)>,
    budget_anonymous: bool,
    scope: Option<String>,
    replicas: u32,
    account: Option<String>,
    period: Option<BudgetPeriod>,
}

impl Default for SharedBudgetConfig {
    fn default() -> Self {
        SharedBudgetConfig {
            default_limit: 1_000_000,
            window: Duration::from_secs(3600),
            per_tenant: Vec::new(),
            budget_anonymous: false,
            scope: None,
            replicas: 1,
            account: None,
            period: None,
        }
    }
}

impl SharedBudgetConfig {
    ripcord_core::setters! {
        /// Tokens each tenant may use per window (default 1,000,000).
        tokens_per_window(n: u64) => default_limit = n;
        /// The window (default one hour; at least 1 s).
        window(d: Duration) => window = d;
    }

    /// A different limit for one tenant.
    pub fn tenant(mut self, tenant: impl Into<String>, tokens_per_window: u64) -> Self {
        self.per_tenant.push((tenant.into(), tokens_per_window));
        self
    }

    ripcord_core::setters! {
        /// Also budget calls without a tenant, as one shared anonymous tenant (default: not).
        budget_anonymous(yes: bool) => budget_anonymous = yes;
        /// The namespace of the accounts (default: the link name). Give several links the same
        /// scope to charge a tenant once across them.
        scope(scope: impl Into<String>) => scope = Some(scope.into());
        /// How many replicas share the budget (default 1): while Redis is unreachable each
        /// replica grants `limit / replicas` locally.
        replicas(n: u32) => replicas = n;
        /// Charges every call to the one account `name`, whatever its tenant
        /// ([`BudgetPolicyBuilder::account`](ripcord_resilience::BudgetPolicyBuilder::account)).
        account(name: impl Into<String>) => account = Some(name.into());
        /// Accounts that start again each UTC day or month instead of each `window`
        /// ([`BudgetPeriod`]); the period's boundaries are read on the replica's wall clock.
        period(period: BudgetPeriod) => period = Some(period);
    }

    /// The token limit per window for a tenant.
    pub fn limit_for(&self, tenant: &str) -> u64 {
        self.per_tenant
            .iter()
            .rev()
            .find(|(t, _)| t == tenant)
            .map_or(self.default_limit, |(_, n)| *n)
    }

    fn validate(&self) -> Result<()> {
        if self.window < Duration::from_secs(1) {
            return Err(config_error(
                "shared_budget",
                "window",
                "must be at least 1 s",
            ));
        }
        if self.replicas == 0 {
            return Err(config_error(
                "shared_budget",
                "replicas",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// The policy's settings: each tenant's whole limit (shared by every replica).
    pub fn policy(&self) -> Result<BudgetPolicy> {
        self.validate()?;
        let mut b = BudgetPolicy::builder()
            .tokens_per_window(self.default_limit)
            .window(self.window)
            .budget_anonymous(self.budget_anonymous);
        for (t, n) in &self.per_tenant {
            b = b.tenant(t.clone(), *n);
        }
        if let Some(a) = &self.account {
            b = b.account(a.as_str());
        }
        b.build().map_err(Error::from)
    }
}

/// The wall clock a period's boundaries are read on.
struct Wall(WallClock);

impl std::fmt::Debug for Wall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WallClock")
    }
}

/// A [`BudgetStore`] on Redis (see the module docs).
#[derive(Debug)]
pub struct RedisBudgetStore {
    state: RedisState,
    scope: String,
    window_ms: String,
    /// A calendar period instead of the window, and the clock its boundaries are read on.
    period: Option<(BudgetPeriod, Wall)>,
    replicas: u64,
    local: Box<dyn BudgetStore>,
    reserve: Script,
    settle: Arc<Script>,
    /// Each tenant's use as Redis last reported it to this replica.
    seen: Arc<Mutex<HashMap<Arc<str>, u64>>>,
    background: Arc<Background>,
}

fn lock(m: &Mutex<HashMap<Arc<str>, u64>>) -> MutexGuard<'_, HashMap<Arc<str>, u64>> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn note_seen(m: &Mutex<HashMap<Arc<str>, u64>>, tenant: &Arc<str>, used: u64) {
    let mut seen = lock(m);
    if seen.len() >= SEEN_MAX && !seen.contains_key(tenant) {
        seen.clear();
    }
    seen.insert(tenant.clone(), used);
}

impl RedisBudgetStore {
    /// A store for the accounts under `scope` on `state`, with `config`'s window and local share.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn new(scope: &str, state: RedisState, config: &SharedBudgetConfig) -> Result<Arc<Self>> {
        config.validate()?;
        // A period's hash lives two of its longest (31 days) after its last use.
        let window = match config.period {
            None => config.window,
            Some(_) => Duration::from_secs(31 * 86_400),
        };
        let period = config.period.map(|p| (p, Wall(system_wall_clock())));
        let local: Box<dyn BudgetStore> = match &period {
            None => Box::new(LocalBudgetStore::new(config.window, Arc::new(TokioClock))),
            Some((p, clock)) => Box::new(PeriodBudgetStore::new(*p, Arc::clone(&clock.0))),
        };
        Ok(Arc::new(RedisBudgetStore {
            state,
            scope: scope.to_owned(),
            window_ms: u64::try_from(window.as_millis())
                .unwrap_or(u64::MAX)
                .to_string(),
            period,
            replicas: u64::from(config.replicas.max(1)),
            local,
            reserve: Script::new(RESERVE),
            settle: Arc::new(Script::new(SETTLE)),
            seen: Arc::new(Mutex::new(HashMap::new())),
            background: Arc::new(Background::default()),
        }))
    }

    /// Waits until the settlements sent so far have reached Redis (or timed out).
    pub async fn sync(&self) {
        self.background.idle().await;
    }

    fn key(&self, tenant: &str) -> String {
        key(&self.scope, &format!("budget:{tenant}"))
    }
}

#[async_trait]
impl BudgetStore for RedisBudgetStore {
    fn try_reserve(&self, _tenant: &str, _limit: u64, _need: u64) -> BudgetAdmit {
        BudgetAdmit::Ask
    }

    async fn reserve(&self, tenant: &str, limit: u64, need: u64) -> BudgetAdmit {
        let k = self.key(tenant);
        let mut args = vec![self.window_ms.clone(), limit.to_string(), need.to_string()];
        if let Some((period, clock)) = &self.period {
            let idx = period.index((clock.0)());
            args.push(idx.to_string());
            args.push(period.start_ms(idx + 1).to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply: Option<(i64, i64, i64)> = self.state.eval(&self.reserve, &[&k], &args).await;
        let Some((code, value, used)) = reply else {
            self.state.note_local_call();
            return self.local.try_reserve(tenant, limit / self.replicas, need);
        };
        let tenant: Arc<str> = Arc::from(tenant);
        let used = u64::try_from(used).unwrap_or(0);
        note_seen(&self.seen, &tenant, used);
        if code == 0 {
            BudgetAdmit::Held(BudgetHold {
                tenant,
                reserved: need,
                slot: value,
                shared: true,
            })
        } else {
            BudgetAdmit::Refused(BudgetRefusal {
                used,
                limit,
                retry_after: Some(Duration::from_millis(
                    u64::try_from(value).unwrap_or(0).max(1),
                )),
            })
        }
    }

    fn settle(&self, hold: BudgetHold, used: u64) {
        if !hold.shared {
            self.local.settle(hold, used);
            return;
        }
        let delta = i128::from(used) - i128::from(hold.reserved);
        if delta == 0 {
            return;
        }
        let state = self.state.clone();
        let script = self.settle.clone();
        let seen = self.seen.clone();
        let k = self.key(&hold.tenant);
        let args = [hold.slot.to_string(), delta.to_string()];
        self.background.spawn(async move {
            let now: Option<i64> = state.eval(&script, &[&k], &[&args[0], &args[1]]).await;
            if let Some(u) = now.and_then(|u| u64::try_from(u).ok()) {
                note_seen(&seen, &hold.tenant, u);
            }
        });
    }

    fn used(&self, tenant: &str) -> u64 {
        lock(&self.seen)
            .get(tenant)
            .copied()
            .unwrap_or_else(|| self.local.used(tenant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused_naming_the_setting() {
        let e = SharedBudgetConfig::default()
            .window(Duration::from_millis(10))
            .validate()
            .unwrap_err();
        assert!(e.message().contains("shared_budget.window"), "{e}");
    }

    #[test]
    fn per_tenant_limits_and_the_local_share() {
        let c = SharedBudgetConfig::default()
            .tokens_per_window(900)
            .tenant("free", 90)
            .replicas(3);
        assert_eq!(c.limit_for("free"), 90);
        assert_eq!(c.limit_for("acme"), 900);
        assert_eq!(c.policy().unwrap().limit_for("free"), 90);
    }
}
