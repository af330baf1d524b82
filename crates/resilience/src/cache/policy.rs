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
    /// A builder starting from the defaults.
    pub fn builder() -> CachePolicyBuilder {
        CachePolicyBuilder {
            policy: CachePolicy::default(),
        }
    }

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

/// Builds a [`CachePolicy`]; validation happens in [`CachePolicyBuilder::build`].
#[derive(Debug, Clone)]
pub struct CachePolicyBuilder {
    policy: CachePolicy,
}

impl CachePolicyBuilder {
    /// How long an entry lives (default 5 minutes).
    pub fn ttl(mut self, d: Duration) -> Self {
        self.policy.ttl = d;
        self
    }

    /// The most entries kept (default 1024).
    pub fn capacity(mut self, n: usize) -> Self {
        self.policy.capacity = n;
        self
    }

    /// Whether the tenant is part of the key (default true). Turn it off only when answers
    /// never depend on who asks.
    pub fn per_tenant(mut self, yes: bool) -> Self {
        self.policy.per_tenant = yes;
        self
    }

    /// Uses this clock (default [`crate::TokioClock`]).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.policy.clock = clock;
        self
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
