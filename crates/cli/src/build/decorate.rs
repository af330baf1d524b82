//! The policies around each link (health, breaker, bulkhead, retry, rate limit), the tenant
//! budgets around the routes, and each gateway key's own limits.

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::{ChatModel, Result};
use ripcord_resilience::{
    BreakerPolicy, BulkheadPolicy, ChatModelExt, HealthHandle, HealthPolicy, OpenBackoff,
    ProbePolicy, Prober, RedactPolicy, RetryPolicy,
};

use super::state::{Limits, LocalState, StateStore};
use super::{BuildHooks, config_error};
use crate::config::{GatewayKey, Provider, ProviderKind, TenantBudget};
use crate::routing::KeyScope;

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
    state: &dyn StateStore,
    deadline_ms: u64,
) -> Result<Decorated> {
    let local = p.kind == ProviderKind::LocalOnnx;
    // An in-process model is each replica's own: its breaker and limits stay local.
    let state: &dyn StateStore = if local { &LocalState } else { state };
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
        let limits = Limits {
            rpm: rl.rpm,
            tpm: rl.tpm,
            pause_429: rl.pause_429_ms.map(Duration::from_millis),
            refuse_at_once: false,
        };
        model = state.rate_limited(model, &limits)?;
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
    // The same spells for the in-process breaker and the shared one: the first `open_ms`,
    // doubling on every re-trip without a close, up to `open_max_ms`.
    let spells = open_spells(p);
    let breaker_policy = BreakerPolicy::builder()
        .consecutive_failures(p.breaker.failure_threshold)
        .open(spells)
        .background_probe(p.breaker.background_probe_ms.map(Duration::from_millis))
        .max_probes(p.breaker.half_open_probes.max(1) as usize);
    let mut breaker_policy = super::policies::breaker_rules(&p.policies, breaker_policy);
    if let Some(l) = &hooks.breaker_listener {
        breaker_policy = breaker_policy.listener(Arc::clone(l));
    }
    // The same breaker on either store, so `/readyz`, the listener and the active prober see
    // the one that decides.
    let breaker = state.breaker(model, breaker_policy, Duration::from_millis(deadline_ms))?;
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

/// The provider's open spells: `open_ms` first, doubling on every re-trip without a close in
/// between up to `open_max_ms` (a constant spell when the two are equal).
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

/// A store key's model: its own budget of `budget_tokens` per `window_s` (charged to the
/// account `key:<id>`, inside the tenants' budget), under its `rpm`/`tpm` limits; `None` for a
/// key without any.
pub(super) fn store_key_limited(
    key: &GatewayKey,
    budget_tokens: Option<u64>,
    (window_s, period): (u64, Option<ripcord_resilience::BudgetPeriod>),
    model: &Arc<dyn ChatModel>,
    state: &dyn StateStore,
    accounts: &Arc<dyn ripcord_resilience::BudgetStore>,
) -> Result<Option<Arc<dyn ChatModel>>> {
    let Some(tokens) = budget_tokens else {
        return key_limited(key, model, state);
    };
    let id = key.source.strip_prefix("store ").unwrap_or(&key.source);
    let account = crate::gateway::store_keys::budget_account(id);
    let budgeted: Arc<dyn ChatModel> = if !state.is_shared() {
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
        state
            .budgeted(Arc::clone(model), &b, &account, Some(&account), None)?
            .0
    };
    Ok(Some(match key_limited(key, &budgeted, state)? {
        Some(limited) => limited,
        None => Arc::new(KeyScope::new(&key.label(), budgeted)),
    }))
}

/// A key's own `rpm`/`tpm` around the gateway's model, refusing at once (never waiting) so the
/// client gets its 429 before any vendor is called; kept where the state is.
pub(super) fn key_limited(
    key: &GatewayKey,
    model: &Arc<dyn ChatModel>,
    state: &dyn StateStore,
) -> Result<Option<Arc<dyn ChatModel>>> {
    if key.rpm.is_none() && key.tpm.is_none() {
        return Ok(None);
    }
    let scoped: Arc<dyn ChatModel> = Arc::new(KeyScope::new(&key.label(), Arc::clone(model)));
    let limits = Limits {
        rpm: key.rpm,
        tpm: key.tpm,
        pause_429: None,
        refuse_at_once: true,
    };
    state.rate_limited(scoped, &limits).map(Some)
}
