//! The policies around each link (health, breaker, bulkhead, retry, rate limit), the tenant
//! budgets around the routes, and each gateway key's own limits.

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::{ChatModel, Result};
use ripcord_resilience::{
    BreakerPolicy, BudgetPolicy, BudgetView, BulkheadPolicy, ChatModelExt, HealthHandle,
    HealthPolicy, OpenBackoff, ProbePolicy, Prober, RateLimitPolicy, RedactPolicy, RetryPolicy,
};

use super::{BuildHooks, Shared, config_error};
use crate::config::{GatewayKey, Provider, ProviderKind, TenantBudget};
use crate::routing::KeyScope;
#[cfg(feature = "redis")]
use ripcord_redis::{
    RedisBreakerStore, SharedBreakerConfig, SharedBudgetConfig, SharedRateLimitConfig,
    shared_budget, shared_rate_limit,
};

/// A decorated link, its health handle, its active prober and its breaker's handle.
pub(super) type Decorated = (
    Arc<dyn ChatModel>,
    HealthHandle,
    Option<Prober>,
    ripcord_resilience::BreakerHandle,
);

/// Wraps an adapter in the configured policies; returns the decorated link, its health handle,
/// its prober and its breaker's handle.
pub(super) fn decorate(
    p: &Provider,
    base: Arc<dyn ChatModel>,
    hooks: &BuildHooks,
    redact: Option<&RedactPolicy>,
    shared: Shared<'_>,
    deadline_ms: u64,
) -> Result<Decorated> {
    let local = p.kind == ProviderKind::LocalOnnx;
    // An in-process model is each replica's own: its breaker and limits stay local.
    let shared = if local { None } else { shared };
    // One attempt span per wire attempt, inside retry: the HTTP adapters record their own;
    // the in-process model gets the tracing wrapper.
    let traced: Arc<dyn ChatModel> = if local {
        Arc::new(ripcord_core::telemetry::TracedModel::new(
            base,
            ripcord_core::telemetry::provider::LOCAL_ONNX,
        ))
    } else {
        base
    };
    // Redaction masks what goes to cloud links (local ones pass through untouched).
    let base: Arc<dyn ChatModel> = match redact {
        Some(policy) => Arc::new(policy.wrap(Arc::clone(&traced))),
        None => Arc::clone(&traced),
    };
    let mut model: Arc<dyn ChatModel> = match &hooks.around_adapter {
        Some(w) => w(&p.name, base),
        None => base,
    };
    if let Some(rl) = &p.rate_limit {
        model = rate_limited(model, rl, shared)?;
    }
    // Inside the retry and the breaker: a rejected answer is retried, counted, then falls over.
    model = super::policies::validated(&p.policies, model);
    if let Some(retry) = retry_policy(p)? {
        model = Arc::new(model.with_retry(retry));
    }
    if let Some(bh) = &p.bulkhead {
        // Outside the retry (a retry keeps its slot), inside the breaker (an open breaker
        // refuses without queueing; a full bulkhead is a local refusal it never counts).
        let mut b = BulkheadPolicy::builder().max_in_flight(bh.max_in_flight);
        if let Some(n) = bh.max_queue {
            b = b.max_queue(n);
        }
        if let Some(ms) = bh.max_queue_wait_ms {
            b = b.max_queue_wait(Duration::from_millis(ms));
        }
        model = Arc::new(model.with_bulkhead(b.build().map_err(config_error)?));
    }
    if let Some(w) = &hooks.inside_breaker {
        model = w(&p.name, model);
    }
    // One probe permit across all replicas on shared state, so `half_open_probes` applies
    // to local breakers only; a shared probe is bounded by the call's deadline, and its
    // permit expires with it.
    #[cfg(not(feature = "redis"))]
    let _ = deadline_ms;
    // The same spells for the in-process breaker and the shared one: the first `open_ms`,
    // doubling on every re-trip without a close, up to `open_max_ms`.
    let spells = open_spells(p);
    let breaker_policy = BreakerPolicy::builder()
        .consecutive_failures(p.breaker.failure_threshold)
        .open(spells)
        .background_probe(p.breaker.background_probe_ms.map(Duration::from_millis))
        .max_probes(p.breaker.half_open_probes.max(1) as usize);
    let mut breaker_policy = super::policies::breaker_rules(&p.policies, breaker_policy);
    #[cfg(feature = "redis")]
    if shared.is_some() {
        breaker_policy = breaker_policy.probe_timeout(Duration::from_millis(deadline_ms.max(1)));
    }
    if let Some(l) = &hooks.breaker_listener {
        breaker_policy = breaker_policy.listener(Arc::clone(l));
    }
    let breaker_policy = breaker_policy.build().map_err(config_error)?;
    // The same breaker either way; on shared state its store is Redis, so `/readyz`, the
    // listener and the active prober see the shared breaker.
    #[cfg(feature = "redis")]
    let breaker = match shared {
        Some((state, _)) => {
            let config = SharedBreakerConfig::default()
                .consecutive_failures(p.breaker.failure_threshold)
                .open(spells)
                .probe_timeout(Duration::from_millis(deadline_ms.max(1)));
            let link = model.id().name.clone();
            let store = RedisBreakerStore::new(&link, state.clone(), &config, &breaker_policy)?;
            ripcord_resilience::Breaker::with_store(model, breaker_policy, store)
        }
        None => model.with_breaker(breaker_policy),
    };
    #[cfg(not(feature = "redis"))]
    let breaker = {
        let _ = shared;
        model.with_breaker(breaker_policy)
    };
    let health_policy = HealthPolicy::builder()
        .breaker(breaker.handle())
        .build()
        .map_err(config_error)?;
    let breaker_handle = breaker.handle();
    let health = breaker.with_health(health_policy);
    let handle = health.handle();
    // Probes go to the undecorated adapter, so they reach the vendor while the breaker
    // refuses callers, and never count in callers' latency.
    let prober = match &p.probe {
        None => None,
        Some(cfg) => Some(
            Prober::builder(traced, probe_policy(cfg)?)
                .breaker(breaker_handle.clone())
                .health(handle.clone())
                .spawn(),
        ),
    };
    // The cache is outside the whole link: a hit touches neither the breaker nor the limits.
    let link = super::policies::cached(&p.policies, Arc::new(health));
    Ok((link, handle, prober, breaker_handle))
}

/// The provider's open spells: `open_ms` first, doubling on every re-trip without a close in
/// between up to `open_max_ms` (a constant spell when the two are equal).
/// `[providers.retry]` as a policy, or `None` when the link makes one attempt: a local link
/// without the section already resolved to one (see `config::defaults`), and a pool makes its
/// own attempts, each to another deployment first.
pub(super) fn retry_policy(p: &Provider) -> Result<Option<RetryPolicy>> {
    let attempts = if p.pool.is_some() {
        1
    } else {
        p.retry.max_attempts
    };
    if attempts <= 1 {
        return Ok(None);
    }
    RetryPolicy::builder()
        .retry_on(p.retry.retry_on)
        .max_attempts(attempts)
        .base_delay(Duration::from_millis(p.retry.base_delay_ms))
        .max_delay(Duration::from_millis(
            p.retry.max_delay_ms.max(p.retry.base_delay_ms),
        ))
        .build()
        .map(Some)
        .map_err(config_error)
}

pub(super) fn open_spells(p: &Provider) -> OpenBackoff {
    let first = Duration::from_millis(p.breaker.open_ms);
    let longest = Duration::from_millis(p.breaker.open_max_ms.max(p.breaker.open_ms));
    if longest > first {
        OpenBackoff::Exponential {
            base: first,
            max: longest,
        }
    } else {
        OpenBackoff::Constant(first)
    }
}

/// The provider's `[providers.rate_limit]` around `model`: shared through Redis when the state
/// is, else local to this process.
fn rate_limited(
    model: Arc<dyn ChatModel>,
    rl: &crate::config::RateLimitConfig,
    shared: Shared<'_>,
) -> Result<Arc<dyn ChatModel>> {
    #[cfg(feature = "redis")]
    if let Some((state, replicas)) = shared {
        let mut c = SharedRateLimitConfig::default().replicas(replicas);
        if let Some(ms) = rl.pause_429_ms {
            c = c.default_pause(Duration::from_millis(ms));
        }
        if let Some(rpm) = rl.rpm {
            c = c.rpm(rpm);
        }
        if let Some(tpm) = rl.tpm {
            c = c.tpm(tpm);
        }
        return Ok(Arc::new(shared_rate_limit(model, state.clone(), c)?));
    }
    #[cfg(not(feature = "redis"))]
    let _ = shared;
    let mut b = RateLimitPolicy::builder();
    if let Some(ms) = rl.pause_429_ms {
        b = b.default_pause(Duration::from_millis(ms));
    }
    if let Some(rpm) = rl.rpm {
        b = b.rpm(rpm);
    }
    if let Some(tpm) = rl.tpm {
        b = b.tpm(tpm);
    }
    Ok(Arc::new(
        model.with_rate_limit(b.build().map_err(config_error)?),
    ))
}

/// `model` inside `[budget]`: charged once per call whichever link serves it, shared through
/// Redis (one account per tenant for every replica, under `scope`) when the state is; with a
/// view of its accounts (for `/metrics`).
pub(super) fn budgeted(
    model: Arc<dyn ChatModel>,
    b: &TenantBudget,
    scope: &str,
    account: Option<&str>,
    shared: Shared<'_>,
) -> Result<(Arc<dyn ChatModel>, BudgetView)> {
    let window = Duration::from_secs(b.window_s);
    #[cfg(feature = "redis")]
    if let Some((state, replicas)) = shared {
        let mut c = SharedBudgetConfig::default()
            .tokens_per_window(b.tokens_per_window)
            .window(window)
            .budget_anonymous(b.anonymous)
            .scope(scope)
            .replicas(replicas);
        for (t, n) in &b.tenants {
            c = c.tenant(t.clone(), *n);
        }
        if let Some(a) = account {
            c = c.account(a);
        }
        if let Some(p) = b.period {
            c = c.period(p);
        }
        let budget = shared_budget(model, state.clone(), c)?;
        let view = budget.view();
        return Ok((Arc::new(budget), view));
    }
    #[cfg(not(feature = "redis"))]
    let _ = (shared, scope);
    let mut policy = BudgetPolicy::builder()
        .tokens_per_window(b.tokens_per_window)
        .window(window)
        .budget_anonymous(b.anonymous);
    for (t, n) in &b.tenants {
        policy = policy.tenant(t.clone(), *n);
    }
    if let Some(a) = account {
        policy = policy.account(a);
    }
    let policy = policy.build().map_err(config_error)?;
    let budget = match b.period {
        None => model.with_budget(policy),
        Some(period) => ripcord_resilience::Budget::with_store(
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

fn probe_policy(cfg: &crate::config::ProbeConfig) -> Result<ProbePolicy> {
    let mut b = ProbePolicy::builder().probe_healthy(cfg.probe_healthy);
    if let Some(ms) = cfg.interval_ms {
        b = b.interval(Duration::from_millis(ms));
    }
    if let Some(ms) = cfg.timeout_ms {
        b = b.timeout(Duration::from_millis(ms));
    }
    b.build().map_err(config_error)
}

/// A key's own `rpm`/`tpm` around the gateway's model, refusing at once (never waiting) so the
/// client gets its 429 before any vendor is called; shared through Redis when the state is.
/// A store key's model: its own budget of `budget_tokens` per `window_s` (charged to the
/// account `key:<id>`, inside the tenants' budget), under its `rpm`/`tpm` limits; `None` for a
/// key without any.
pub(super) fn store_key_limited(
    key: &GatewayKey,
    budget_tokens: Option<u64>,
    (window_s, period): (u64, Option<ripcord_resilience::BudgetPeriod>),
    model: &Arc<dyn ChatModel>,
    shared: Shared<'_>,
    accounts: &Arc<dyn ripcord_resilience::BudgetStore>,
) -> Result<Option<Arc<dyn ChatModel>>> {
    let Some(tokens) = budget_tokens else {
        return key_limited(key, model, shared);
    };
    let id = key.source.strip_prefix("store ").unwrap_or(&key.source);
    let account = crate::gateway::store_keys::budget_account(id);
    let budgeted: Arc<dyn ChatModel> = if shared.is_none() {
        // In this process: one store for every store key's account, which outlives a key's
        // change (its limiter is rebuilt, not what it spent) and is charged from the ledger at
        // start.
        let policy = ripcord_resilience::BudgetPolicy::builder()
            .tokens_per_window(tokens)
            .window(Duration::from_secs(window_s))
            .budget_anonymous(true)
            .account(account.as_str())
            .build()
            .map_err(config_error)?;
        Arc::new(ripcord_resilience::Budget::with_store(
            Arc::clone(model),
            policy,
            Arc::clone(accounts),
        ))
    } else {
        let b = TenantBudget {
            tokens_per_window: tokens,
            window_s,
            period,
            tenants: Vec::new(),
            anonymous: true,
        };
        budgeted(Arc::clone(model), &b, &account, Some(&account), shared)?.0
    };
    Ok(Some(match key_limited(key, &budgeted, shared)? {
        Some(limited) => limited,
        None => Arc::new(KeyScope::new(&key.label(), budgeted)),
    }))
}

pub(super) fn key_limited(
    key: &GatewayKey,
    model: &Arc<dyn ChatModel>,
    shared: Shared<'_>,
) -> Result<Option<Arc<dyn ChatModel>>> {
    if key.rpm.is_none() && key.tpm.is_none() {
        return Ok(None);
    }
    let scoped = KeyScope::new(&key.label(), Arc::clone(model));
    #[cfg(feature = "redis")]
    if let Some((state, replicas)) = shared {
        let mut c = SharedRateLimitConfig::default()
            .replicas(replicas)
            .max_wait(Duration::ZERO)
            .max_pause(Duration::ZERO);
        if let Some(rpm) = key.rpm {
            c = c.rpm(rpm);
        }
        if let Some(tpm) = key.tpm {
            c = c.tpm(tpm);
        }
        return Ok(Some(Arc::new(shared_rate_limit(scoped, state.clone(), c)?)));
    }
    #[cfg(not(feature = "redis"))]
    let _ = shared;
    let mut b = RateLimitPolicy::builder()
        .max_wait(Duration::ZERO)
        .pause_on_429(false);
    if let Some(rpm) = key.rpm {
        b = b.rpm(rpm);
    }
    if let Some(tpm) = key.tpm {
        b = b.tpm(tpm);
    }
    Ok(Some(Arc::new(
        scoped.with_rate_limit(b.build().map_err(config_error)?),
    )))
}
