//! Shared resilience state for ripcord on Redis (issue 11).
//!
//! When ripcord runs in many processes, each learning on its own that a vendor is down — and
//! each spending its own copy of a rate limit or a tenant's budget — is wrong: the vendor sees
//! N× the limit and N× the probes. These decorators keep that state in one Redis:
//!
//! - [`RedisBreakerStore`]: a store for `ripcord_resilience::Breaker` (the one breaker
//!   policy; [`shared_breaker`] builds it): open-until, trip count and consecutive failures
//!   per link, ONE half-open probe permit across all replicas, and a leased cached view so a
//!   success never waits for Redis (staleness bound: `docs/shared-state.md`);
//! - [`SharedRateLimit`]: GCRA requests-per-minute and tokens-per-minute, evaluated atomically
//!   in one Lua script;
//! - [`SharedBudget`]: per-tenant token budgets over a fixed window.
//!
//! Every key is `ripcord:v1:{link}:…` ([`KEY_PREFIX`]) and carries a TTL. Every Redis call is
//! bounded by a small timeout ([`StateOptions::op_timeout`], 50 ms by default); when Redis
//! fails, each decorator serves calls on local state (the matching `ripcord_resilience`
//! decorator around the same model) and [`RedisState`] says so once. [`RedisState::open`]
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
//!     RedisState, SharedBreakerConfig, SharedBudget, SharedBudgetConfig, SharedRateLimit,
//!     SharedRateLimitConfig, shared_breaker,
//! };
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let state = RedisState::connect("redis://127.0.0.1:6379").await?;
//! let vendor = ScriptedModel::new("openai");
//! let breaker = shared_breaker(
//!     vendor,
//!     state.clone(),
//!     SharedBreakerConfig::default().consecutive_failures(3).open_for(Duration::from_secs(30)),
//! )?;
//! let limited = SharedRateLimit::new(
//!     breaker,
//!     state.clone(),
//!     SharedRateLimitConfig::default().rpm(500).tpm(90_000).replicas(3),
//! )?;
//! let model = SharedBudget::new(limited, state, SharedBudgetConfig::default().tokens_per_window(200_000))?;
//! let reply = model.chat(&ChatRequest::user("hi"), &Context::new().with_tenant("acme")).await?;
//! # let _ = reply;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod breaker;
mod budget;
mod rate_limit;
#[cfg(feature = "server")]
pub mod server;
mod state;

pub use breaker::{RedisBreakerStore, SharedBreaker, SharedBreakerConfig, shared_breaker};
pub use budget::{SharedBudget, SharedBudgetConfig};
pub use rate_limit::{SharedRateLimit, SharedRateLimitConfig};
pub use state::{KEY_PREFIX, RedisState, StateError, StateOptions};
