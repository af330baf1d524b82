//! A pooled provider's link: one adapter per deployment, each inside its own rate limit and
//! breaker, balanced by a [`Pool`].

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::{ChatModel, Result};
use ripcord_resilience::{
    BreakerPolicy, ChatModelExt, Deployment, Pool, PoolHandle, PoolPolicy, RateLimitPolicy,
};

use super::adapters::{Clients, adapter};
use super::config_error;
use super::state::StateStore;
use crate::config::{PoolSettings, Provider};

/// The pool of `p`'s deployments, undecorated at the link level (the caller adds the link's
/// health, breaker and bulkhead around it, and no retry: the pool makes the attempts), and
/// its handle for the status pages. On shared state (`[state] backend = "redis"`) its
/// cooldowns, ejections and outages go through a `RedisPoolStore`, so every replica leaves a
/// deployment alone that one of them cooled down or ejected.
pub(super) fn pooled(
    p: &Provider,
    pool: &PoolSettings,
    clients: &Clients,
    state: &dyn StateStore,
) -> Result<(Arc<dyn ChatModel>, PoolHandle)> {
    let mut deployments = Vec::with_capacity(pool.deployments.len());
    for d in &pool.deployments {
        let mut dp = p.clone();
        dp.pool = None;
        if let Some(u) = &d.base_url {
            dp.base_url = Some(u.clone());
        }
        if let Some(k) = &d.api_key {
            dp.api_key = Some(k.clone());
        }
        if let Some(name) = &d.deployment {
            dp.deployment = Some(name.clone());
        }
        let mut model = adapter(&dp, clients).map_err(|e| {
            let message = format!("deployment {:?}: {}", d.name, e.message());
            e.with_message(message)
        })?;
        // Its own quota: a spent limit refuses at once, and the pool asks another deployment.
        if d.rpm.is_some() || d.tpm.is_some() {
            let mut b = RateLimitPolicy::builder().max_wait(Duration::ZERO);
            if let Some(rpm) = d.rpm {
                b = b.rpm(rpm);
            }
            if let Some(tpm) = d.tpm {
                b = b.tpm(tpm);
            }
            model = Arc::new(model.with_rate_limit(b.build().map_err(config_error)?));
        }
        // Its own breaker, with the provider's settings.
        let breaker = BreakerPolicy::builder()
            .consecutive_failures(p.breaker.failure_threshold)
            .open(super::decorate::open_spells(p))
            .background_probe(p.breaker.background_probe_ms.map(Duration::from_millis))
            .max_probes(p.breaker.half_open_probes.max(1) as usize)
            .build()
            .map_err(config_error)?;
        let model: Arc<dyn ChatModel> = Arc::new(model.with_breaker(breaker));
        let mut dep = Deployment::from_arc(d.name.clone(), model).weight(d.weight);
        if let Some(r) = &d.region {
            dep = dep.region(r.clone());
        }
        if let Some(n) = d.rpm {
            dep = dep.rpm(n);
        }
        if let Some(n) = d.tpm {
            dep = dep.tpm(n);
        }
        deployments.push(dep);
    }
    let policy = PoolPolicy::builder()
        .strategy(pool.balance)
        .build()
        .map_err(config_error)?;
    let pool = Pool::new(p.name.clone(), deployments, policy).map_err(config_error)?;
    let pool = state.pool(pool, &p.name);
    let handle = pool.handle();
    Ok((Arc::new(pool), handle))
}
