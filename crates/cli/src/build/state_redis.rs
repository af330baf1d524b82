//! [`RedisStore`]: `[state] backend = "redis"` — every replica's breakers, limits, budgets and
//! pools share their state through Redis (`ripcord-redis`), each falling back to local state
//! while Redis is unreachable.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ripcord_core::{ChatModel, Result};
use ripcord_redis::{
    RedisBreakerStore, RedisState, SharedBreakerConfig, SharedBudgetConfig, SharedRateLimitConfig,
    StateOptions, shared_budget, shared_rate_limit,
};
use ripcord_resilience::{Breaker, BreakerPolicyBuilder, BudgetView, Pool};
use serde_json::{Value, json};

use super::config_error;
use super::state::{Limits, StateStore};
use crate::config::{RedisSettings, TenantBudget};

/// State shared through Redis by `replicas` replicas.
#[derive(Debug)]
pub(super) struct RedisStore {
    state: RedisState,
    replicas: u32,
}

impl RedisStore {
    /// Opens (lazily: no I/O) the Redis `[state]` names, and starts following whether it
    /// answers (so `/readyz` sees Redis go and come back without a call to find out).
    pub(super) fn open(r: &RedisSettings) -> Result<RedisStore> {
        use secrecy::ExposeSecret;
        let options = StateOptions {
            op_timeout: Duration::from_millis(r.op_timeout_ms),
            connect_timeout: Duration::from_millis(r.connect_timeout_ms),
            retry_interval: Duration::from_millis(r.retry_interval_ms),
        };
        // StateError never repeats the URL, so the password cannot leak through it.
        let state = RedisState::open(r.url.expose_secret(), options)
            .map_err(|e| config_error(format!("[state] {}: {e}", r.redacted_url)))?;
        let _ = state.spawn_reprobe();
        Ok(RedisStore {
            state,
            replicas: r.replicas,
        })
    }
}

impl StateStore for RedisStore {
    fn is_shared(&self) -> bool {
        true
    }

    /// One probe permit across all replicas, so `half_open_probes` applies to local breakers
    /// only; a shared probe is bounded by the call's deadline, and its permit expires with it.
    fn breaker(
        &self,
        model: Arc<dyn ChatModel>,
        policy: BreakerPolicyBuilder,
        deadline: Duration,
    ) -> Result<Breaker<Arc<dyn ChatModel>>> {
        let probe = deadline.max(Duration::from_millis(1));
        let policy = policy.probe_timeout(probe).build().map_err(config_error)?;
        // The same threshold and open spells as the in-process breaker would have.
        let mut config = SharedBreakerConfig::default()
            .open(policy.open())
            .probe_timeout(probe);
        if let Some(n) = policy.consecutive_failures() {
            config = config.consecutive_failures(n);
        }
        let link = model.id().name.clone();
        let store = RedisBreakerStore::new(&link, self.state.clone(), &config, &policy)?;
        Ok(Breaker::with_store(model, policy, store))
    }

    fn rate_limited(
        &self,
        model: Arc<dyn ChatModel>,
        limits: &Limits,
    ) -> Result<Arc<dyn ChatModel>> {
        let mut c = SharedRateLimitConfig::default().replicas(self.replicas);
        if limits.refuse_at_once {
            c = c.max_wait(Duration::ZERO).max_pause(Duration::ZERO);
        }
        use SharedRateLimitConfig as C;
        let c = limits.apply(c, C::default_pause, C::rpm, C::tpm);
        Ok(Arc::new(shared_rate_limit(model, self.state.clone(), c)?))
    }

    /// One account per tenant for every replica, under `scope`; the accounts live in Redis,
    /// so a rebuild finds them there (`_keep` is the in-process fallback's, left to start anew).
    fn budgeted(
        &self,
        model: Arc<dyn ChatModel>,
        b: &TenantBudget,
        scope: &str,
        account: Option<&str>,
        _keep: Option<Arc<dyn ripcord_resilience::BudgetStore>>,
    ) -> Result<(Arc<dyn ChatModel>, BudgetView)> {
        let mut c = SharedBudgetConfig::default()
            .tokens_per_window(b.tokens_per_window)
            .window(Duration::from_secs(b.window_s))
            .budget_anonymous(b.anonymous)
            .scope(scope)
            .replicas(self.replicas);
        for (t, n) in &b.tenants {
            c = c.tenant(t.clone(), *n);
        }
        if let Some(a) = account {
            c = c.account(a);
        }
        if let Some(p) = b.period {
            c = c.period(p);
        }
        let budget = shared_budget(model, self.state.clone(), c)?;
        let view = budget.view();
        Ok((Arc::new(budget), view))
    }

    fn pool(&self, pool: Pool, name: &str) -> Pool {
        pool.with_store(ripcord_redis::RedisPoolStore::new(
            name,
            self.state.clone(),
            ripcord_redis::SharedPoolConfig::default(),
        ))
    }

    fn report(&self) -> Value {
        json!({
            "backend": "redis",
            "degraded": self.state.is_degraded(),
            "degradations": self.state.degradations(),
            "local_calls": self.state.local_calls(),
        })
    }

    fn ready(&self) -> BoxFuture<'_, Option<bool>> {
        Box::pin(async move { Some(self.state.ready().await) })
    }

    fn redis(&self) -> Option<&RedisState> {
        Some(&self.state)
    }
}
