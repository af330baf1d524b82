//! [`SharedBreakerConfig`] and [`shared_breaker`]: the settings of a breaker on Redis.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ripcord_core::{ChatModel, Error, ErrorKind, Result};
use ripcord_resilience::{Breaker, BreakerListener, BreakerPolicy, KindAction, OpenBackoff};

use super::RedisBreakerStore;
use crate::state::{RedisState, config_error};

/// The settings of a shared breaker; see the module docs for the semantics.
#[derive(Debug, Clone)]
pub struct SharedBreakerConfig {
    pub(super) consecutive_failures: u32,
    pub(super) open: OpenBackoff,
    pub(super) probe_timeout: Duration,
    pub(super) half_open_retry_hint: Duration,
    pub(super) state_ttl: Duration,
    pub(super) lease_calls: u64,
    pub(super) lease_ttl: Duration,
    kinds: BTreeMap<ErrorKind, KindAction>,
    listener: Option<Arc<dyn BreakerListener>>,
}

impl Default for SharedBreakerConfig {
    fn default() -> Self {
        SharedBreakerConfig {
            consecutive_failures: 5,
            open: OpenBackoff::Constant(Duration::from_secs(60)),
            probe_timeout: Duration::from_secs(30),
            half_open_retry_hint: Duration::from_secs(1),
            state_ttl: Duration::from_secs(600),
            lease_calls: 32,
            lease_ttl: Duration::from_millis(100),
            kinds: BTreeMap::new(),
            listener: None,
        }
    }
}

impl SharedBreakerConfig {
    ripcord_core::setters! {
        /// Trips after `n` consecutive counted failures across all replicas (default 5).
        consecutive_failures(n: u32) => consecutive_failures = n;
    }

    /// The same open spell after every trip: shorthand for
    /// [`open`](Self::open)`(OpenBackoff::Constant(d))` (the default is a constant 60 s).
    pub fn open_for(self, d: Duration) -> Self {
        self.open(OpenBackoff::Constant(d))
    }

    ripcord_core::setters! {
        /// How long the breaker stays open after each trip, as the in-process breaker's
        /// `BreakerPolicyBuilder::open`: with `OpenBackoff::Exponential { base, max }` the first
        /// trip opens for `base` and every re-trip without a close in between (a failed half-open
        /// probe, on any replica) doubles it, up to `max`; a close starts again at `base`. The
        /// streak of trips is counted in Redis, in the same script that trips (see the module
        /// docs).
        open(spells: OpenBackoff) => open = spells;
    }

    /// The first open spell and the longest one (equal for a constant spell).
    pub(super) fn spells(&self) -> (Duration, Duration) {
        match self.open {
            OpenBackoff::Exponential { base, max } => (base, max.max(base)),
            OpenBackoff::Constant(d) => (d, d),
            // A kind this version does not know: its first spell, constant.
            other => {
                let first = other.iter().next().unwrap_or(Duration::from_secs(60));
                (first, first)
            }
        }
    }

    ripcord_core::setters! {
        /// The longest a half-open probe may take; also the TTL of the probe permit (default 30 s).
        probe_timeout(d: Duration) => probe_timeout = d;
        /// The `retry_after` of a call refused because another replica's probe is out (default
        /// 1 s, as the local breaker's).
        half_open_retry_hint(d: Duration) => half_open_retry_hint = d;
        /// How long breaker state lingers without activity: the failure counter's TTL, and how
        /// long half-open is remembered after open-until (default 10 min; then it reads closed).
        state_ttl(d: Duration) => state_ttl = d;
        /// The staleness bound in calls: at most this many admissions from the cached view per
        /// state read (default 32; see the module docs).
        lease_calls(n: u64) => lease_calls = n;
        /// The staleness bound in time: the cached view admits for at most this long after the
        /// last state read was sent (default 100 ms).
        lease_ttl(d: Duration) => lease_ttl = d;
    }

    /// Overrides what failures of `kind` do (as in `ripcord_resilience::BreakerPolicyBuilder::kind`).
    pub fn kind(mut self, kind: ErrorKind, action: KindAction) -> Self {
        self.kinds.insert(kind, action);
        self
    }

    ripcord_core::setters! {
        /// Reports this replica's view of the shared breaker's transitions.
        listener(listener: Arc<dyn BreakerListener>) => listener = Some(listener);
    }

    /// The policy's settings as a `BreakerPolicy` (what counts, probe limits, the listener).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn policy(&self) -> Result<BreakerPolicy> {
        self.validate()?;
        let mut b = BreakerPolicy::builder()
            .consecutive_failures(self.consecutive_failures)
            .open(self.open)
            .probe_timeout(self.probe_timeout)
            .half_open_retry_hint(self.half_open_retry_hint);
        for (k, a) in &self.kinds {
            b = b.kind(*k, *a);
        }
        if let Some(l) = &self.listener {
            b = b.listener(Arc::clone(l));
        }
        b.build().map_err(Error::from)
    }

    pub(super) fn validate(&self) -> Result<()> {
        let bad = |s, r| Err(config_error("shared_breaker", s, r));
        if self.consecutive_failures == 0 {
            return bad("consecutive_failures", "must be at least 1");
        }
        let (first, longest) = self.spells();
        if let OpenBackoff::Exponential { base, max } = self.open
            && max < base
        {
            return bad(
                "open",
                "the longest spell (max) must be at least the first (base)",
            );
        }
        for (name, d) in [
            ("open_for", first),
            ("open_max", longest),
            ("probe_timeout", self.probe_timeout),
            ("half_open_retry_hint", self.half_open_retry_hint),
            ("state_ttl", self.state_ttl),
            ("lease_ttl", self.lease_ttl),
        ] {
            if d < Duration::from_millis(1) {
                return bad(name, "must be at least 1 ms");
            }
        }
        if self.lease_calls == 0 {
            return bad("lease_calls", "must be at least 1");
        }
        Ok(())
    }
}

/// `ripcord_resilience::Breaker` over a [`RedisBreakerStore`] for `inner`'s link.
///
/// # Errors
///
/// `InvalidRequest` naming the setting when the config cannot work.
pub fn shared_breaker<M: ChatModel>(
    inner: M,
    state: RedisState,
    config: SharedBreakerConfig,
) -> Result<Breaker<M>> {
    let policy = config.policy()?;
    let store = RedisBreakerStore::new(&inner.id().name, state, &config, &policy)?;
    Ok(Breaker::with_store(inner, policy, store))
}

/// A shared breaker: the resilience crate's breaker over the Redis store.
pub type SharedBreaker<M> = Breaker<M>;

pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn dur(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
