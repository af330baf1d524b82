//! # ripcord-resilience
//!
//! Policies that keep a link of a ripcord chain answering — or failing fast and honestly — when
//! its vendor struggles. Every policy is a decorator: a [`ChatModel`](ripcord_core::ChatModel)
//! wrapping a `ChatModel`, forwarding `id()` and `capabilities()`, so policies stack in any
//! order and a decorated link goes into a [`Chain`](ripcord_core::Chain) like any model.
//!
//! | policy | wrapper / settings | on refusal |
//! | --- | --- | --- |
//! | [`retry`]: backoff with full jitter, retry-after, retry budget | [`Retry`] / [`RetryPolicy`] | — |
//! | [`breaker`]: circuit breaker on `failsafe` | [`Breaker`] / [`BreakerPolicy`] | `CircuitOpen` + retry-after |
#![cfg_attr(
    feature = "rate-limit",
    doc = "| [`rate_limit`]: RPM and TPM over a [`LimitStore`] (in-process on `governor`, or shared) | [`RateLimit`] / [`RateLimitPolicy`] | `LocalRateLimited` + retry-after |"
)]
#![cfg_attr(
    not(feature = "rate-limit"),
    doc = "| `rate_limit` (feature `rate-limit`): RPM and TPM over a `LimitStore` (in-process on `governor`, or shared) | `RateLimit` / `RateLimitPolicy` | `LocalRateLimited` + retry-after |"
)]
//! | [`bulkhead`]: calls in flight, priority queue | [`Bulkhead`] / [`BulkheadPolicy`] | `BudgetExhausted` + retry-after |
//! | [`budget`]: per-tenant token budgets over a [`BudgetStore`] | [`Budget`] / [`BudgetPolicy`] | `BudgetExhausted` + retry-after |
//! | [`timeout`]: attempt, first-token and idle limits | [`Timeout`] / [`TimeoutPolicy`] | `Timeout` |
//! | [`hedge`]: race a second link when slow (opt-in) | [`Hedge`] / [`HedgePolicy`] | — |
//! | [`validate`]: JSON / schema / custom checks | [`Validate`] / [`Validator`] | `InvalidResponse` |
//! | [`cache`]: TTL + LRU response cache (opt-in) | [`Cache`] / [`CachePolicy`] | — |
//! | [`health`]: EWMA latency, error rate, breaker state | [`Health`] / [`HealthPolicy`] | — |
//! | [`pool`]: one link over several deployments of a model (balancing, exact cooldowns, ejection) | [`Pool`] / [`PoolPolicy`] | `LocalRateLimited` + retry-after |
//! | [`probe`]: active health probes (opt-in) | [`Prober`] / [`ProbePolicy`] | — |
#![cfg_attr(
    feature = "redact",
    doc = "| [`redact`]: mask personal data before cloud links (opt-in) | [`Redact`] / [`RedactPolicy`] | — |"
)]
#![cfg_attr(
    not(feature = "redact"),
    doc = "| `redact` (feature `redact`): mask personal data before cloud links (opt-in) | `Redact` / `RedactPolicy` | — |"
)]
//!
//! Refusals are made without calling the vendor and carry a `retry_after` saying when the link
//! takes calls again: the chain skips a refusing link and, when every link is cooling down,
//! waits for the earliest re-admission if the deadline allows. Every wait in this crate —
//! backoff, limiter, queue — stops at [`Context::deadline`](ripcord_core::Context::deadline)
//! and on cancellation; a wait that would overrun the deadline is not started at all.
//!
//! ## The recommended order
//!
//! [`ChatModelExt`] methods wrap inside-out, so write the innermost first. From the outside in:
//!
//! ```text
//! cache → hedge → health → breaker → budget → bulkhead → retry → rate limit → timeout → validate → redact → model
//! ```
//!
//! - **cache** outermost: a hit costs nothing and must not spend limits or move the breaker.
//! - **hedge** races two *whole* guarded links; each side keeps its own breaker and limits.
//! - **health** sees each logical call's final outcome, like the breaker, plus its refusals.
//! - **breaker** outside the retry, so it records one outcome per logical call after the
//!   retries are spent, not one per attempt; and outside the queue and limits, so
//!   an open breaker refuses at once instead of waiting for a slot.
//! - **budget** charges the tenant once per logical call.
//! - **bulkhead** bounds logical calls in flight; the queue is where priority acts.
//! - **retry** inside those: each attempt goes through everything below it again.
//! - **rate limit** inside the retry, so retries are limited like first attempts (a local limit
//!   that retries could bypass would not keep us under the vendor's), and a vendor 429 pauses
//!   the limiter before the retry waits out its retry-after.
//! - **timeout** per attempt, inside the retry (each attempt gets its own limit) and inside the
//!   breaker (a timeout is recorded as a failure rather than lost when an outer timer drops the call).
//! - **validate** innermost: a bad answer is an attempt's `InvalidResponse`, retried and
//!   counted like any failure.
//! - **redact** (opt-in) around the vendor model itself: every attempt is masked on its way
//!   out and restored on its way back, so every policy above it (validation, cache keys,
//!   logs) sees the caller's text, and only the vendor sees placeholders.
//!
//! ```
//! use std::time::Duration;
//! use ripcord_core::testing::ScriptedModel;
//! use ripcord_core::{Chain, ChatModel, ChatRequest, Context, ErrorKind};
//! use ripcord_resilience::*;
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let primary = ScriptedModel::new("openai").fail(ErrorKind::Overloaded)
//!     .with_validation(JsonValidator)
//!     .with_timeout(TimeoutPolicy::default())
//!     .with_rate_limit(RateLimitPolicy::builder().rpm(500).tpm(200_000).build()?)
//!     .with_retry(RetryPolicy::default())
//!     .with_bulkhead(BulkheadPolicy::default())
//!     .with_breaker(BreakerPolicy::default());
//! let chain = Chain::builder()
//!     .link(primary)
//!     .link(ScriptedModel::new("local").reply("Rayleigh scattering."))
//!     .static_reply("The assistant is busy right now.")
//!     .build()?;
//! let reply = chain.chat(&ChatRequest::user("Why is the sky blue?"), &Context::new()).await?;
//! assert_eq!(reply.served_by(), "local");
//! # Ok(()) }
//! ```
//!
//! ## Time
//!
//! Every policy reads time through one injectable [`Clock`]; the default [`TokioClock`]
//! follows tokio's clock, so under `tokio::time::pause` one fake time drives the breaker, the
//! limiters, the budgets and every sleep — see [`Clock`] for why `failsafe` and `governor`
//! cannot be left on their own clocks.
//!
//! ## Instrumentation
//!
//! `tracing` events only (no OpenTelemetry dependency): `ripcord.retry_scheduled` (with
//! `delay_ms` and `error.type`), `ripcord.breaker_transition` (`link`, `from`, `to`),
//! `ripcord.rate_limit_paused`, `ripcord.hedge_started`, `ripcord.hedge_won`,
//! `ripcord.validation_failed`, `ripcord.budget_exhausted`, `ripcord.probe` (`link`,
//! `outcome`, `latency_ms`, `error.type`); debug-level events for local refusals, retries
//! given up, skipped probes and `ripcord.redacted` (counts per kind, never values).
//! `ripcord-telemetry` turns them into metrics.
//!
//! ## Feature flags
//!
//! None: every policy is always compiled; the heavy parts (hedging, caching, probing,
//! redaction) are opt-in at run time by wrapping or spawning.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

#[macro_use]
mod macros;

pub mod breaker;
pub mod budget;
pub mod bulkhead;
pub mod cache;
mod clock;
mod error;
mod ext;
pub mod health;
pub mod hedge;
pub mod pool;
pub mod probe;
#[cfg(feature = "rate-limit")]
pub mod rate_limit;
#[cfg(feature = "redact")]
pub mod redact;
pub mod retry;
mod stream_util;
pub mod timeout;
pub mod validate;
mod window;

pub use breaker::{
    Admission, Breaker, BreakerHandle, BreakerListener, BreakerPolicy, BreakerPolicyBuilder,
    BreakerSnapshot, BreakerState, BreakerStore, KindAction, LocalStore, OpenBackoff, Outcome,
    StoreAdmit, Ticket, Transition,
};
pub use breaker::{
    DEFAULT_BACKGROUND_PROBE, DEFAULT_BACKGROUND_PROBE_TIMEOUT, DEFAULT_OPEN_BASE, DEFAULT_OPEN_MAX,
};
pub use budget::{
    Budget, BudgetAdmit, BudgetHold, BudgetPeriod, BudgetPolicy, BudgetPolicyBuilder,
    BudgetRefusal, BudgetStore, BudgetView, LocalBudgetStore, PeriodBudgetStore, WallClock,
    system_wall_clock,
};
pub use bulkhead::{Bulkhead, BulkheadPolicy, BulkheadPolicyBuilder, BulkheadSnapshot};
pub use cache::{Cache, CachePolicy, CachePolicyBuilder, CacheStats};
pub use clock::{Clock, SharedClock, TokioClock};
pub use error::ConfigError;
pub use ext::{ChatModelExt, EmbeddingModelExt};
pub use health::{
    Health, HealthHandle, HealthPolicy, HealthPolicyBuilder, HealthSnapshot, HealthStatus,
    ProbeSummary,
};
pub use hedge::{Hedge, HedgeDelay, HedgePolicy, HedgePolicyBuilder};
pub use pool::{
    Balance, Deployment, DeploymentSnapshot, DeploymentState, Ejection, LocalPoolStore, Pool,
    PoolBlock, PoolHandle, PoolPolicy, PoolPolicyBuilder, PoolSnapshot, PoolStore, SharedBlocks,
    UnknownBalance,
};
pub use probe::{
    ProbeOutcome, ProbePolicy, ProbePolicyBuilder, Prober, ProberBuilder, ProberCounters,
    ProberStats,
};
#[cfg(feature = "rate-limit")]
pub use rate_limit::{
    LimitKind, LimitStore, LocalLimitStore, RateLimit, RateLimitPolicy, RateLimitPolicyBuilder,
    RateLimitSnapshot, Take, Taken,
};
#[cfg(feature = "redact")]
pub use redact::{
    PiiKind, PiiRedactor, PiiRedactorBuilder, Redact, RedactPolicy, RedactPolicyBuilder, Redaction,
    Restorer,
};
pub use retry::{
    Backoff, Jitter, RandomSource, Retry, RetryBudget, RetryClass, RetryOn, RetryPolicy,
    RetryPolicyBuilder, SplitMix64,
};
pub use timeout::{Timeout, TimeoutPolicy, TimeoutPolicyBuilder};
pub use validate::{FnValidator, JsonValidator, Validate, Validator, validator_fn};
