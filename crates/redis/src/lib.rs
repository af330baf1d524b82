//! Shared resilience state for ripcord on Redis (issue 11).
//!
//! When ripcord runs in many processes, each learning on its own that a vendor is down — and
//! each spending its own copy of a rate limit or a tenant's budget — is wrong: the vendor sees
//! N× the limit and N× the probes. These stores keep that state in one Redis, under the one
//! breaker, limiter and budget policy of `ripcord_resilience`:
//!
//! - [`RedisBreakerStore`]: a store for `ripcord_resilience::Breaker` (the one breaker
//!   policy; [`shared_breaker`] builds it): open-until, trip count and consecutive failures
//!   per link, ONE half-open probe permit across all replicas, and a leased cached view so a
//!   success never waits for Redis (staleness bound: `docs/shared-state.md`);
//! - [`RedisLimitStore`]: a store for `ripcord_resilience::RateLimit` (the one limiter
//!   policy; [`shared_rate_limit`] builds it): GCRA requests-per-minute and tokens-per-minute
//!   cells taken atomically in one Lua script, leased in blocks spent locally;
//! - [`RedisBudgetStore`]: a store for `ripcord_resilience::Budget` (the one budget policy;
//!   [`shared_budget`] builds it): per-tenant token accounts over a fixed window;
//! - [`RedisPoolStore`]: a store for `ripcord_resilience::Pool`: each deployment's cooldown,
//!   error-rate ejection (with the count that grows it) and outage, as keys expiring when the
//!   block ends, so no replica sends to a deployment another one cooled down or ejected.
//!
//! Every key is `ripcord:v1:{link}:…` ([`KEY_PREFIX`]) and carries a TTL. Every Redis call is
//! bounded by a small timeout ([`StateOptions::op_timeout`], 50 ms by default); when Redis
//! fails, each store decides on local state (the matching `ripcord_resilience` in-process
//! store, with this replica's share of a limit) and [`RedisState`] says so once. [`RedisState::open`]
//! connects lazily in the background, so a replica starts (on local state) while Redis is
//! down; [`RedisState::connect`] insists on reaching it first.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use ripcord_core::testing::ScriptedModel;
//! use ripcord_core::{ChatModel, ChatRequest, Context};
//! use ripcord_redis::{
//!     RedisState, SharedBreakerConfig, SharedBudgetConfig, SharedRateLimitConfig,
//!     shared_breaker, shared_budget, shared_rate_limit,
//! };
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let state = RedisState::connect("redis://127.0.0.1:6379").await?;
//! let vendor = ScriptedModel::new("openai");
//! let breaker = shared_breaker(
//!     vendor,
//!     state.clone(),
//!     SharedBreakerConfig::default().consecutive_failures(3).open_for(Duration::from_secs(30)),
//! )?;
//! let limited = shared_rate_limit(
//!     breaker,
//!     state.clone(),
//!     SharedRateLimitConfig::default().rpm(500).tpm(90_000).replicas(3),
//! )?;
//! let model = shared_budget(limited, state, SharedBudgetConfig::default().tokens_per_window(200_000))?;
//! let reply = model.chat(&ChatRequest::user("hi"), &Context::new().with_tenant("acme")).await?;
//! # let _ = reply;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod breaker;
mod budget;
mod documents;
mod pool;
mod rate_limit;
#[cfg(feature = "server")]
pub mod server;
mod state;

pub use breaker::{RedisBreakerStore, SharedBreaker, SharedBreakerConfig, shared_breaker};
pub use budget::{RedisBudgetStore, SharedBudget, SharedBudgetConfig, shared_budget};
pub use documents::RedisDocuments;
pub use pool::{RedisPoolStore, SharedPoolConfig};
pub use rate_limit::{RedisLimitStore, SharedRateLimit, SharedRateLimitConfig, shared_rate_limit};
pub use state::{KEY_PREFIX, RedisState, StateError, StateOptions};
