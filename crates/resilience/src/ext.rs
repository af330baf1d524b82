//! [`ChatModelExt`]: wrap any `ChatModel` in a policy with one method call.

use ripcord_core::ChatModel;

use crate::breaker::{Breaker, BreakerLayer};
use crate::budget::{Budget, BudgetLayer};
use crate::bulkhead::{Bulkhead, BulkheadLayer};
use crate::cache::{Cache, CacheLayer};
use crate::health::{Health, HealthLayer};
use crate::hedge::{Hedge, HedgeLayer};
use crate::rate_limit::{RateLimit, RateLimitLayer};
use crate::redact::{Redact, RedactLayer};
use crate::retry::{Retry, RetryLayer};
use crate::timeout::{Timeout, TimeoutLayer};
use crate::validate::{Validate, Validator};

/// Policy constructors for every [`ChatModel`].
///
/// Each method wraps `self` in one decorator, which is itself a `ChatModel`, so calls chain.
/// Methods apply inside-out: the first call wraps the model directly. See the
/// [crate docs](crate) for the recommended order.
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_resilience::*;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let link = ScriptedModel::new("openai")
///     .with_timeout(TimeoutLayer::default())
///     .with_rate_limit(RateLimitLayer::builder().rpm(500).tpm(200_000).build()?)
///     .with_retry(RetryLayer::default())
///     .with_bulkhead(BulkheadLayer::default())
///     .with_breaker(BreakerLayer::default());
/// let reply = link.chat(&ChatRequest::user("hi"), &Context::new()).await?;
/// assert_eq!(reply.text(), "ok");
/// # Ok(()) }
/// ```
pub trait ChatModelExt: ChatModel + Sized {
    /// Retries failed calls ([`crate::retry`]).
    fn with_retry(self, layer: RetryLayer) -> Retry<Self> {
        Retry::new(self, layer)
    }

    /// Guards the model with a circuit breaker ([`crate::breaker`]).
    fn with_breaker(self, layer: BreakerLayer) -> Breaker<Self> {
        Breaker::new(self, layer)
    }

    /// Applies local RPM / TPM limits ([`crate::rate_limit`]).
    fn with_rate_limit(self, layer: RateLimitLayer) -> RateLimit<Self> {
        RateLimit::new(self, layer)
    }

    /// Bounds calls in flight behind a priority queue ([`crate::bulkhead`]).
    fn with_bulkhead(self, layer: BulkheadLayer) -> Bulkhead<Self> {
        Bulkhead::new(self, layer)
    }

    /// Charges calls to per-tenant token budgets ([`crate::budget`]).
    fn with_budget(self, layer: BudgetLayer) -> Budget<Self> {
        Budget::new(self, layer)
    }

    /// Applies per-attempt time limits and stream guards ([`crate::timeout`]).
    fn with_timeout(self, layer: TimeoutLayer) -> Timeout<Self> {
        Timeout::new(self, layer)
    }

    /// Races `hedge` against this model when it is slow ([`crate::hedge`]).
    fn with_hedge<H: ChatModel>(self, hedge: H, layer: HedgeLayer) -> Hedge<Self, H> {
        Hedge::new(self, hedge, layer)
    }

    /// Checks every answer ([`crate::validate`]).
    fn with_validation<V: Validator>(self, validator: V) -> Validate<Self, V> {
        Validate::new(self, validator)
    }

    /// Caches answers ([`crate::cache`]).
    fn with_cache(self, layer: CacheLayer) -> Cache<Self> {
        Cache::new(self, layer)
    }

    /// Tracks the model's health passively ([`crate::health`]).
    fn with_health(self, layer: HealthLayer) -> Health<Self> {
        Health::new(self, layer)
    }

    /// Masks personal data before a cloud link and restores it in answers ([`crate::redact`]).
    fn with_redaction(self, layer: RedactLayer) -> Redact<Self> {
        Redact::new(self, layer)
    }
}

impl<M: ChatModel> ChatModelExt for M {}
