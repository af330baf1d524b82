//! [`ChatModelExt`]: wrap any `ChatModel` in a policy with one method call.

use ripcord_core::{ChatModel, EmbeddingModel};

use crate::breaker::{Breaker, BreakerPolicy};
use crate::budget::{Budget, BudgetPolicy};
use crate::bulkhead::{Bulkhead, BulkheadPolicy};
use crate::cache::{Cache, CachePolicy};
use crate::health::{Health, HealthPolicy};
use crate::hedge::{Hedge, HedgePolicy};
#[cfg(feature = "rate-limit")]
use crate::rate_limit::{RateLimit, RateLimitPolicy};
#[cfg(feature = "redact")]
use crate::redact::{Redact, RedactPolicy};
use crate::retry::{Retry, RetryPolicy};
use crate::timeout::{Timeout, TimeoutPolicy};
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
///     .with_timeout(TimeoutPolicy::default())
///     .with_rate_limit(RateLimitPolicy::builder().rpm(500).tpm(200_000).build()?)
///     .with_retry(RetryPolicy::default())
///     .with_bulkhead(BulkheadPolicy::default())
///     .with_breaker(BreakerPolicy::default());
/// let reply = link.chat(&ChatRequest::user("hi"), &Context::new()).await?;
/// assert_eq!(reply.text(), "ok");
/// # Ok(()) }
/// ```
pub trait ChatModelExt: ChatModel + Sized {
    /// Retries failed calls ([`crate::retry`]).
    fn with_retry(self, policy: RetryPolicy) -> Retry<Self> {
        Retry::new(self, policy)
    }

    /// Guards the model with a circuit breaker ([`crate::breaker`]).
    fn with_breaker(self, policy: BreakerPolicy) -> Breaker<Self> {
        Breaker::new(self, policy)
    }

    /// Applies local RPM / TPM limits ([`crate::rate_limit`]; feature `rate-limit`).
    #[cfg(feature = "rate-limit")]
    fn with_rate_limit(self, policy: RateLimitPolicy) -> RateLimit<Self> {
        RateLimit::new(self, policy)
    }

    /// Bounds calls in flight behind a priority queue ([`crate::bulkhead`]).
    fn with_bulkhead(self, policy: BulkheadPolicy) -> Bulkhead<Self> {
        Bulkhead::new(self, policy)
    }

    /// Charges calls to per-tenant token budgets ([`crate::budget`]).
    fn with_budget(self, policy: BudgetPolicy) -> Budget<Self> {
        Budget::new(self, policy)
    }

    /// Applies per-attempt time limits and stream guards ([`crate::timeout`]).
    fn with_timeout(self, policy: TimeoutPolicy) -> Timeout<Self> {
        Timeout::new(self, policy)
    }

    /// Races `hedge` against this model when it is slow ([`crate::hedge`]).
    fn with_hedge<H: ChatModel>(self, hedge: H, policy: HedgePolicy) -> Hedge<Self, H> {
        Hedge::new(self, hedge, policy)
    }

    /// Checks every answer ([`crate::validate`]).
    fn with_validation<V: Validator>(self, validator: V) -> Validate<Self, V> {
        Validate::new(self, validator)
    }

    /// Caches answers ([`crate::cache`]).
    fn with_cache(self, policy: CachePolicy) -> Cache<Self> {
        Cache::new(self, policy)
    }

    /// Tracks the model's health passively ([`crate::health`]).
    fn with_health(self, policy: HealthPolicy) -> Health<Self> {
        Health::new(self, policy)
    }

    /// Masks personal data before a cloud link and restores it in answers ([`crate::redact`];
    /// feature `redact`).
    #[cfg(feature = "redact")]
    fn with_redaction(self, policy: RedactPolicy) -> Redact<Self> {
        Redact::new(self, policy)
    }
}

impl<M: ChatModel> ChatModelExt for M {}

/// Policy constructors for every [`EmbeddingModel`]: retry and a circuit breaker, with every
/// attempt recorded in [`EmbeddingResponse::attempts`](ripcord_core::EmbeddingResponse::attempts).
///
/// The names differ from [`ChatModelExt`]'s, so an adapter that is both a chat and an embedding
/// model (OpenAI, Gemini) takes either with both traits imported.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::{Context, EmbeddingModel, EmbeddingRequest, EmbeddingChain};
/// use ripcord_resilience::{BreakerPolicy, EmbeddingModelExt, RetryPolicy};
/// # use ripcord_core::{async_trait, EmbeddingResponse, ModelId, Result};
/// # #[derive(Debug)] struct Endpoint(ModelId);
/// # #[async_trait] impl EmbeddingModel for Endpoint {
/// #   fn embedding_id(&self) -> &ModelId { &self.0 }
/// #   async fn embed(&self, r: &EmbeddingRequest, _: &Context) -> Result<EmbeddingResponse> {
/// #     Ok(EmbeddingResponse::new(vec![vec![0.0; 3]; r.inputs.len()], "m")) } }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<()> {
/// let link = Endpoint(ModelId::new("us", "text-embedding-3-small"))
///     .with_embedding_retry(RetryPolicy::default())
///     .with_embedding_breaker(BreakerPolicy::default());
/// let chain = EmbeddingChain::builder().link(link).build().unwrap();
/// let resp = chain.embed(&EmbeddingRequest::new(vec!["hello".into()]), &Context::new()).await?;
/// assert_eq!(resp.attempts.len(), 1);
/// # Ok(()) }
/// ```
pub trait EmbeddingModelExt: EmbeddingModel + Sized {
    /// Retries failed calls ([`crate::retry`]); attempts are recorded on the response.
    fn with_embedding_retry(self, policy: RetryPolicy) -> Retry<Self> {
        Retry::new(self, policy)
    }

    /// Guards the model with a circuit breaker ([`crate::breaker`]).
    fn with_embedding_breaker(self, policy: BreakerPolicy) -> Breaker<Self> {
        Breaker::for_embeddings(self, policy)
    }
}

impl<M: EmbeddingModel> EmbeddingModelExt for M {}
