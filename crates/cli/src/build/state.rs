//! Where the links' state lives — breakers, rate limits, budgets, pools — as one choice made
//! when the chain is built: [`StateStore`]. The build code asks it for each policy and never
//! asks which store it is; [`LocalState`] keeps everything in this process, and with the
//! `redis` feature [`super::state_redis::RedisStore`] shares it with every replica.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ripcord_core::{ChatModel, Result};
use ripcord_resilience::{
    Breaker, BreakerPolicyBuilder, BudgetPolicy, BudgetStore, BudgetView, ChatModelExt, Pool,
    RateLimitPolicy, RateLimitPolicyBuilder,
};
use serde_json::{Value, json};

use super::config_error;
use crate::config::{Config, StateBackend, TenantBudget};

/// A link's or a key's RPM/TPM limits, as the config states them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Limits {
    pub(super) rpm: Option<u32>,
    pub(super) tpm: Option<u32>,
    /// The pause after a vendor 429 without `Retry-After` (`pause_429_ms`).
    pub(super) pause_429: Option<Duration>,
    /// Refuse at once instead of waiting for a turn, and never pause on a 429 (a key's limit:
    /// the client gets its 429 before any vendor is called).
    pub(super) refuse_at_once: bool,
}

impl Limits {
    /// The in-process limiter for these limits.
    fn local(&self) -> Result<RateLimitPolicy> {
        let mut b = RateLimitPolicy::builder();
        if self.refuse_at_once {
            b = b.max_wait(Duration::ZERO).pause_on_429(false);
        }
        use RateLimitPolicyBuilder as B;
        let b = self.apply(b, B::default_pause, B::rpm, B::tpm);
        b.build().map_err(config_error)
    }

    /// Sets the pause and the limits these limits state on a limiter's builder `b`, through
    /// its setters (the in-process limiter's or the shared one's).
    pub(super) fn apply<B>(
        &self,
        mut b: B,
        pause: fn(B, Duration) -> B,
        rpm: fn(B, u32) -> B,
        tpm: fn(B, u32) -> B,
    ) -> B {
        if let Some(d) = self.pause_429 {
            b = pause(b, d);
        }
        if let Some(n) = self.rpm {
            b = rpm(b, n);
        }
        if let Some(n) = self.tpm {
            b = tpm(b, n);
        }
        b
    }
}

/// Where the policies of a build keep their state.
pub(super) trait StateStore: Send + Sync + std::fmt::Debug {
    /// True when the state is shared with other replicas.
    fn is_shared(&self) -> bool;

    /// `model` behind the breaker `policy` builds; `deadline` is the call deadline, which
    /// bounds a shared half-open probe (its permit expires with it).
    fn breaker(
        &self,
        model: Arc<dyn ChatModel>,
        policy: BreakerPolicyBuilder,
        deadline: Duration,
    ) -> Result<Breaker<Arc<dyn ChatModel>>>;

    /// `model` under `limits`.
    fn rate_limited(
        &self,
        model: Arc<dyn ChatModel>,
        limits: &Limits,
    ) -> Result<Arc<dyn ChatModel>>;

    /// `model` inside the budget `b` (accounts under `scope`, every call charged to `account`
    /// when one is named), with a view of its accounts; `keep`: the accounts of the build this
    /// one replaces, kept when this store holds them itself.
    fn budgeted(
        &self,
        model: Arc<dyn ChatModel>,
        b: &TenantBudget,
        scope: &str,
        account: Option<&str>,
        keep: Option<Arc<dyn BudgetStore>>,
    ) -> Result<(Arc<dyn ChatModel>, BudgetView)>;

    /// A pool with its deployments' state kept here.
    fn pool(&self, pool: Pool, name: &str) -> Pool;

    /// Where state lives and whether it is reachable, for `/readyz`.
    fn report(&self) -> Value;

    /// Whether the shared store answers (waits for its first connection); `None` for state in
    /// this process, which always does.
    fn ready(&self) -> BoxFuture<'_, Option<bool>>;

    /// The Redis state underneath, when it is Redis.
    #[cfg(feature = "redis")]
    fn redis(&self) -> Option<&ripcord_redis::RedisState> {
        None
    }
}

/// Every policy's state in this process.
#[derive(Debug, Default)]
pub(super) struct LocalState;

impl StateStore for LocalState {
    fn is_shared(&self) -> bool {
        false
    }

    fn breaker(
        &self,
        model: Arc<dyn ChatModel>,
        policy: BreakerPolicyBuilder,
        _deadline: Duration,
    ) -> Result<Breaker<Arc<dyn ChatModel>>> {
        Ok(model.with_breaker(policy.build().map_err(config_error)?))
    }

    fn rate_limited(
        &self,
        model: Arc<dyn ChatModel>,
        limits: &Limits,
    ) -> Result<Arc<dyn ChatModel>> {
        Ok(Arc::new(model.with_rate_limit(limits.local()?)))
    }

    fn budgeted(
        &self,
        model: Arc<dyn ChatModel>,
        b: &TenantBudget,
        _scope: &str,
        account: Option<&str>,
        keep: Option<Arc<dyn BudgetStore>>,
    ) -> Result<(Arc<dyn ChatModel>, BudgetView)> {
        let mut policy = BudgetPolicy::builder()
            .tokens_per_window(b.tokens_per_window)
            .window(Duration::from_secs(b.window_s))
            .budget_anonymous(b.anonymous);
        for (t, n) in &b.tenants {
            policy = policy.tenant(t.clone(), *n);
        }
        if let Some(a) = account {
            policy = policy.account(a);
        }
        let policy = policy.build().map_err(config_error)?;
        let budget = match (keep, b.period) {
            (Some(store), _) => ripcord_resilience::Budget::with_store(model, policy, store),
            (None, None) => model.with_budget(policy),
            (None, Some(period)) => ripcord_resilience::Budget::with_store(
                model,
                policy,
                Arc::new(ripcord_resilience::PeriodBudgetStore::new(
                    period,
                    ripcord_resilience::system_wall_clock(),
                )),
            ),
        };
        let view = budget.view();
        Ok((Arc::new(budget), view))
    }

    fn pool(&self, pool: Pool, _name: &str) -> Pool {
        pool
    }

    fn report(&self) -> Value {
        json!({"backend": "local"})
    }

    fn ready(&self) -> BoxFuture<'_, Option<bool>> {
        Box::pin(std::future::ready(None))
    }
}

/// The store `[state]` asks for (opened lazily: no I/O yet).
///
/// # Errors
///
/// A Redis URL that cannot be used, or `backend = "redis"` in a build without the `redis`
/// feature.
pub(super) fn open(config: &Config) -> Result<Arc<dyn StateStore>> {
    match &config.state {
        StateBackend::Local => Ok(Arc::new(LocalState)),
        #[cfg(feature = "redis")]
        StateBackend::Redis(r) => Ok(Arc::new(super::state_redis::RedisStore::open(r)?)),
        #[cfg(not(feature = "redis"))]
        StateBackend::Redis(_) => Err(config_error(
            "[state] backend = \"redis\" needs ripcord built with the `redis` feature",
        )),
    }
}
