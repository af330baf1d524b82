//! The opt-in link policies and a provider's facts, applied around the links `decorate`
//! builds: what the file says about the vendor (`data_region`, `price`) on the adapter, output
//! validation inside the retry and the breaker (a rejected answer is the link's
//! `invalid_response` failure, retried, counted, then the next link), the breaker's extra rules,
//! the response cache outside the whole link (a hit never touches the breaker or the limits),
//! and hedging between two built links.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ripcord_core::{Capabilities, ChatModel, Locality, Result};
use ripcord_resilience::{BreakerPolicyBuilder, ChatModelExt, JsonValidator};

use super::config_error;
use crate::config::{Config, LinkPolicies, Provider};

/// A model whose capabilities carry what the file says about it (its vendor's facts, its
/// window or output cap): everything else forwards.
#[derive(Debug)]
pub(super) struct WithCaps {
    pub(super) inner: Arc<dyn ChatModel>,
    pub(super) caps: Capabilities,
}

impl ripcord_core::Decorator for WithCaps {
    type Inner = Arc<dyn ChatModel>;
    fn inner(&self) -> &Arc<dyn ChatModel> {
        &self.inner
    }
    fn decorated_capabilities(&self) -> &Capabilities {
        &self.caps
    }
}

/// `model` with the provider's `data_region` (the region its locality names, which
/// `x-ripcord-locality: region=…` matches) and `price` (what cost-ordered chains and reports
/// use), when the file states them. A local model stays local whatever the file says.
pub(super) fn with_facts(p: &Provider, model: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
    let facts = &p.policies.facts;
    if facts.data_region.is_none() && facts.price.is_none() {
        return model;
    }
    let mut caps = model.capabilities().clone();
    if let Some(region) = &facts.data_region
        && let Locality::Cloud { vendor, .. } = &caps.locality
    {
        caps = caps
            .clone()
            .with_locality(Locality::cloud_in(vendor.clone(), region.clone()));
    }
    if let Some(price) = facts.price {
        caps = caps.with_price(price);
    }
    Arc::new(WithCaps { inner: model, caps })
}

/// `model` checked by the JSON validator when `[providers.validate]` asks for it (placed
/// inside the retry and the breaker by the caller).
pub(super) fn validated(p: &LinkPolicies, model: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
    if p.validate_json {
        Arc::new(model.with_validation(JsonValidator))
    } else {
        model
    }
}

/// The breaker's extra rules (`failure_rate`, `success_threshold`, `kinds`) on its builder.
pub(super) fn breaker_rules(p: &LinkPolicies, mut b: BreakerPolicyBuilder) -> BreakerPolicyBuilder {
    let extra = &p.breaker;
    if let Some((threshold, window_ms, min_calls)) = extra.failure_rate {
        b = b.failure_rate(threshold, Duration::from_millis(window_ms), min_calls);
    }
    b = b.success_threshold(extra.success_threshold);
    for (kind, action) in &extra.kinds {
        b = b.kind(*kind, *action);
    }
    b
}

/// The whole link inside its response cache, when `[providers.cache]` asks for one.
pub(super) fn cached(p: &LinkPolicies, link: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
    match &p.cache {
        Some(c) => Arc::new(link.with_cache(c.clone())),
        None => link,
    }
}

/// Replaces each hedged provider's link by the race of it against its `with` provider's link
/// (each as `decorate` built it, so both keep their own breaker and limits).
///
/// # Errors
///
/// A `with` that names no provider of the config.
pub(super) fn hedged<'a>(
    config: &'a Config,
    links: &mut BTreeMap<&'a str, Arc<dyn ChatModel>>,
) -> Result<()> {
    let decorated = links.clone();
    for p in &config.chain {
        let Some((with, policy)) = &p.policies.hedge else {
            continue;
        };
        let (Some(primary), Some(hedge)) =
            (decorated.get(p.name.as_str()), decorated.get(with.as_str()))
        else {
            return Err(config_error(format!(
                "provider {:?}: [providers.hedge] with = {with:?} names no provider of this config",
                p.name
            )));
        };
        let race = Arc::clone(primary).with_hedge(Arc::clone(hedge), *policy);
        links.insert(p.name.as_str(), Arc::new(race));
    }
    Ok(())
}
