//! [`CachePolicy`]: the response cache's settings, and the constructor of [`Cache`] wrappers.

use std::time::Duration;

use ripcord_core::ChatModel;

use super::Cache;
use crate::clock::{SharedClock, default_clock};
use crate::error::ConfigError;

/// Response cache settings. Caching is opt-in.
///
/// Defaults ([`CachePolicy::default`]): entries live 5 minutes, at most 1024 entries (least
/// recently used evicted first), keys include the tenant so tenants never see each other's
/// answers.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::CachePolicy;
/// let policy = CachePolicy::builder().ttl(Duration::from_secs(60)).capacity(10_000).build()?;
/// assert_eq!(policy.capacity(), 10_000);
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct CachePolicy {
    pub(crate) ttl: Duration,
    pub(crate) capacity: usize,
    pub(crate) per_tenant: bool,
    pub(crate) clock: SharedClock,
}

impl Default for CachePolicy {
    fn default() -> Self {
        CachePolicy {
            ttl: Duration::from_secs(300),
            capacity: 1024,
            per_tenant: true,
            clock: default_clock(),
        }
    }
}

impl CachePolicy {
    /// Wraps a model; every wrapper gets its own store.
    pub fn wrap<M: ChatModel>(&self, model: M) -> Cache<M> {
        Cache::new(model, self.clone())
    }

    /// The most entries kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How long an entry lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether the tenant is part of the key.
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_resilience::CachePolicy;
    /// assert!(CachePolicy::default().per_tenant());
    /// ```
    pub fn per_tenant(&self) -> bool {
        self.per_tenant
    }
}

policy_builder!(CachePolicyBuilder => CachePolicy);

impl CachePolicyBuilder {
    ripcord_core::setters! {
        /// How long an entry lives (default 5 minutes).
        ttl(d: Duration) => policy.ttl = d;

        /// The most entries kept (default 1024).
        capacity(n: usize) => policy.capacity = n;

        /// Whether the tenant is part of the key (default true). Turn it off only when answers
        /// never depend on who asks.
        per_tenant(yes: bool) => policy.per_tenant = yes;

        /// Uses this clock (default [`crate::TokioClock`]).
        clock(clock: SharedClock) => policy.clock = clock;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a zero TTL or a zero capacity.
    pub fn build(self) -> Result<CachePolicy, ConfigError> {
        if self.policy.ttl.is_zero() {
            return Err(ConfigError::new(
                "cache",
                "ttl",
                "must be greater than zero",
            ));
        }
        if self.policy.capacity == 0 {
            return Err(ConfigError::new("cache", "capacity", "must be at least 1"));
        }
        Ok(self.policy)
    }
}
