//! The decorated chains the rows call: every link with the recommended stack.

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::chain::Strategy;
use ripcord_core::{Chain, ChatModel};
use ripcord_providers::HttpClient;
use ripcord_resilience::{
    BreakerHandle, BreakerPolicy, BulkheadPolicy, ChatModelExt, Deployment, Pool, PoolPolicy,
    ProbePolicy, Prober, RateLimitPolicy, RedactPolicy, RetryPolicy,
};

use super::wire::{http_client, openai};
pub(super) fn rate_limit() -> Result<RateLimitPolicy, String> {
    RateLimitPolicy::builder()
        .rpm(1_000_000_000)
        .tpm(4_000_000_000)
        .build()
        .map_err(|e| e.to_string())
}

pub(super) fn bulkhead() -> Result<BulkheadPolicy, String> {
    BulkheadPolicy::builder()
        .max_in_flight(256)
        .max_queue(1024)
        .build()
        .map_err(|e| e.to_string())
}

/// A model with the full stack; returns it and its breaker's handle.
pub(crate) fn decorate<M: ChatModel + 'static>(
    model: M,
    breaker: BreakerPolicy,
) -> Result<(Arc<dyn ChatModel>, BreakerHandle), String> {
    let b = model
        .with_rate_limit(rate_limit()?)
        .with_retry(RetryPolicy::default())
        .with_bulkhead(bulkhead()?)
        .with_breaker(breaker);
    let handle = b.handle();
    Ok((Arc::new(b), handle))
}

/// A breaker that never trips during the run (its bookkeeping still runs on every call).
pub(super) fn never_trips() -> Result<BreakerPolicy, String> {
    BreakerPolicy::builder()
        .consecutive_failures(u32::MAX)
        .build()
        .map_err(|e| e.to_string())
}

/// A breaker that trips on the first failure and stays open for the whole run.
pub(crate) fn trips_at_once() -> Result<BreakerPolicy, String> {
    BreakerPolicy::builder()
        .consecutive_failures(1)
        .open_for(Duration::from_secs(24 * 3600))
        .build()
        .map_err(|e| e.to_string())
}

/// Issue 10's options on top of the 3-link chain (all off for the plain rows).
#[derive(Default)]
pub(super) struct Extras {
    pub(super) strategy: Option<Strategy>,
    pub(super) redact: bool,
    pub(super) probe: bool,
}

/// A three-link chain: `first` on `first_url`, then two links on `ok_url`.
pub(super) fn chain(
    first_url: &str,
    first_breaker: BreakerPolicy,
    ok_url: &str,
) -> Result<(Chain, BreakerHandle), String> {
    chain_with(first_url, first_breaker, ok_url, Extras::default()).map(|(c, h, _)| (c, h))
}

/// [`chain`] with a link-order strategy, redaction on every link, or an active prober on link 1
/// (returned: it probes for as long as it is kept).
pub(super) fn chain_with(
    first_url: &str,
    first_breaker: BreakerPolicy,
    ok_url: &str,
    extras: Extras,
) -> Result<(Chain, BreakerHandle, Option<Prober>), String> {
    let client = http_client()?;
    let adapter = |url: &str, name: &str| -> Result<Arc<dyn ChatModel>, String> {
        let a = openai(url, name, Some(&client))?;
        Ok(if extras.redact {
            let policy = RedactPolicy::builder().build().map_err(|e| e.to_string())?;
            Arc::new(policy.wrap(a))
        } else {
            Arc::new(a)
        })
    };
    let first = adapter(first_url, "primary")?;
    let prober = if extras.probe {
        let policy = ProbePolicy::builder()
            .interval(Duration::from_millis(200))
            .timeout(Duration::from_millis(100))
            .probe_healthy(true)
            .build()
            .map_err(|e| e.to_string())?;
        Some(Prober::builder(Arc::clone(&first), policy).spawn())
    } else {
        None
    };
    let (primary, handle) = decorate(first, first_breaker)?;
    let (secondary, _) = decorate(adapter(ok_url, "secondary")?, BreakerPolicy::default())?;
    let (tertiary, _) = decorate(adapter(ok_url, "tertiary")?, BreakerPolicy::default())?;
    let mut b = Chain::builder()
        .link_arc(primary)
        .link_arc(secondary)
        .link_arc(tertiary)
        .deadline(Duration::from_secs(30));
    if let Some(s) = extras.strategy {
        b = b.strategy(s);
    }
    let chain = b.build().map_err(|e| format!("chain: {e}"))?;
    Ok((chain, handle, prober))
}

/// [`chain`] with link 1 a pool of three deployments of one model on `first_url` (the default
/// `p2c_peak_ewma` balance), each with its own breaker; the pool takes the link's rate limit,
/// bulkhead and breaker, and no retry (the pool makes the link's attempts itself, as
/// `ripcord-cli` builds a pooled provider).
pub(super) fn pool_chain(first_url: &str, ok_url: &str) -> Result<Chain, String> {
    let client = http_client()?;
    let mut deployments = Vec::with_capacity(3);
    for region in ["east", "west", "north"] {
        let adapter = openai(first_url, "primary", Some(&client))?;
        let model: Arc<dyn ChatModel> = Arc::new(adapter.with_breaker(BreakerPolicy::default()));
        deployments.push(Deployment::from_arc(region, model).region(region));
    }
    let policy = PoolPolicy::builder().build().map_err(|e| e.to_string())?;
    let pool = Pool::new("primary", deployments, policy).map_err(|e| e.to_string())?;
    let primary: Arc<dyn ChatModel> = Arc::new(
        pool.with_rate_limit(rate_limit()?)
            .with_bulkhead(bulkhead()?)
            .with_breaker(BreakerPolicy::default()),
    );
    behind(primary, ok_url, &client)
}

/// A chain row's chain: `primary` (link 1, built by the row), then the two links on `ok_url`
/// every chain row has behind it.
pub(super) fn behind(
    primary: Arc<dyn ChatModel>,
    ok_url: &str,
    client: &HttpClient,
) -> Result<Chain, String> {
    let (secondary, _) = decorate(
        openai(ok_url, "secondary", Some(client))?,
        BreakerPolicy::default(),
    )?;
    let (tertiary, _) = decorate(
        openai(ok_url, "tertiary", Some(client))?,
        BreakerPolicy::default(),
    )?;
    Chain::builder()
        .link_arc(primary)
        .link_arc(secondary)
        .link_arc(tertiary)
        .deadline(Duration::from_secs(30))
        .build()
        .map_err(|e| format!("chain: {e}"))
}
