//! [`RedisLimitStore`]: the buckets of `ripcord_resilience::RateLimit` (the one limiter
//! policy), shared through Redis by every replica.
//!
//! This is a *store*, not a limiter: what a call reserves, how long it may wait, what pauses
//! the link and what a call is charged are the policy's, the same code as the in-process
//! limiter. The store does what must be atomic, in Lua scripts against Redis server time:
//!
//! - **take**: GCRA requests-per-minute and tokens-per-minute cells, charged in one script only
//!   when both (and no pause) admit the call. Keys: `ripcord:v1:{link}:rl:rpm` and `…:rl:tpm`,
//!   each holding the GCRA theoretical arrival time in µs and expiring when it has passed;
//! - **settle**: the difference between what a call reserved and what it used moves the TPM
//!   cell's arrival time (a credit never further back than now), sent without making the call
//!   wait;
//! - **pause**: a vendor 429 pauses the link for every replica (`…:rl:pause`, expiring with the
//!   pause, never shortened).
//!
//! # Leases: the success path does not wait for Redis
//!
//! A try that finds no lease asks the script for a *block*: `lease_block` request cells
//! (default: the RPM burst / (16 × replicas), at most 64) and as many tokens (the TPM burst /
//! (16 × replicas), or the call's own reservation if larger), charged in Redis at once. The
//! rest of the block is spent by later calls in this process without Redis, for at most
//! `lease_ttl` (default 1 s) after the ask was sent; what is left then is dropped. When the
//! block does not fit, the call asks for exactly its own cells.
//!
//! A call that leaves a live block at or below a quarter of `lease_block` starts one
//! background ask for the next block (one per store at a time), so a steady stream of calls
//! does not wait for Redis when a block runs out; while that next block is held, the current
//! one is spent first. A replica thus holds at most `lease_block + lease_block / 4` unspent
//! cells.
//!
//! # Settlements are coalesced
//!
//! What calls used beyond (or short of) their reservations is summed in this process and sent
//! as one delta: with the next ask for cells, or by one background write at most
//! `settle_every` (default 20 ms) after the first unsent settlement — at once when the sum
//! charges more tokens than were reserved. [`RedisLimitStore::sync`] sends it now. The bounds
//! this buys are in `docs/shared-state.md`.
//!
//! # When Redis fails
//!
//! Every Redis call is bounded by the `RedisState` op timeout. When Redis does not answer, the
//! try is decided by a [`LocalLimitStore`] enforcing this replica's share of the limit
//! (`limit / replicas`), and a settlement or pause that cannot be sent is kept there.

use std::time::Duration;

use ripcord_core::{ChatModel, Error, Result};
use ripcord_resilience::{RateLimit, RateLimitPolicy, RateLimitPolicyBuilder};

use crate::state::{RedisState, config_error};

mod store;

pub use store::RedisLimitStore;

/// A rate limit whose buckets are shared through Redis: the one limiter policy over a
/// [`RedisLimitStore`].
pub type SharedRateLimit<M> = RateLimit<M>;

/// Wraps `inner` in the limiter policy over a [`RedisLimitStore`] for its link (`id().name`
/// names the shared cells).
///
/// # Errors
///
/// `InvalidRequest` naming the setting when the config cannot work.
pub fn shared_rate_limit<M: ChatModel>(
    inner: M,
    state: RedisState,
    config: SharedRateLimitConfig,
) -> Result<RateLimit<M>> {
    let policy = config.policy()?;
    let store = RedisLimitStore::new(&inner.id().name, state, &config)?;
    Ok(RateLimit::with_store(inner, policy, store))
}

/// The settings of a shared rate limit ([`shared_rate_limit`]): the policy's own settings
/// (a `ripcord_resilience::RateLimitPolicyBuilder`: rates across all replicas, bursts, waits,
/// pauses), and what only sharing adds (replicas, leases).
#[derive(Debug, Clone)]
pub struct SharedRateLimitConfig {
    policy: RateLimitPolicyBuilder,
    replicas: u32,
    lease_block: Option<u64>,
    lease_ttl: Duration,
    settle_every: Duration,
}

impl Default for SharedRateLimitConfig {
    fn default() -> Self {
        SharedRateLimitConfig {
            policy: RateLimitPolicy::builder(),
            replicas: 1,
            lease_block: None,
            lease_ttl: Duration::from_secs(1),
            settle_every: Duration::from_millis(20),
        }
    }
}

impl SharedRateLimitConfig {
    /// Changes the policy's settings (`RateLimitPolicyBuilder`): rates are across all replicas.
    pub fn with_policy(
        mut self,
        f: impl FnOnce(RateLimitPolicyBuilder) -> RateLimitPolicyBuilder,
    ) -> Self {
        self.policy = f(self.policy);
        self
    }

    /// Requests per minute across all replicas (`RateLimitPolicyBuilder::rpm`).
    pub fn rpm(self, n: u32) -> Self {
        self.with_policy(|b| b.rpm(n))
    }

    /// Requests that may go at once (`RateLimitPolicyBuilder::rpm_burst`).
    pub fn rpm_burst(self, n: u32) -> Self {
        self.with_policy(|b| b.rpm_burst(n))
    }

    /// Tokens per minute across all replicas (`RateLimitPolicyBuilder::tpm`).
    pub fn tpm(self, n: u32) -> Self {
        self.with_policy(|b| b.tpm(n))
    }

    /// Tokens that may go at once (`RateLimitPolicyBuilder::tpm_burst`).
    pub fn tpm_burst(self, n: u32) -> Self {
        self.with_policy(|b| b.tpm_burst(n))
    }

    /// The longest a call waits for capacity (`RateLimitPolicyBuilder::max_wait`).
    pub fn max_wait(self, d: Duration) -> Self {
        self.with_policy(|b| b.max_wait(d))
    }

    /// The longest a vendor 429 pauses the link for every replica (default 5 minutes; zero
    /// turns pausing off).
    pub fn max_pause(self, d: Duration) -> Self {
        self.with_policy(|b| b.max_pause(d).pause_on_429(!d.is_zero()))
    }

    /// The pause after a vendor 429 that names no retry-after (`RateLimitPolicyBuilder::default_pause`).
    pub fn default_pause(self, d: Duration) -> Self {
        self.with_policy(|b| b.default_pause(d))
    }

    ripcord_core::setters! {
        /// How many replicas share the limit (default 1): while Redis is unreachable each replica
        /// enforces `limit / replicas` locally, so together they stay near the limit.
        replicas(n: u32) => replicas = n;
        /// Request cells leased per Redis call (default: the RPM burst / (16 × replicas), between
        /// 1 and 64; 1 turns leases off). See the module docs for the bound.
        lease_block(n: u64) => lease_block = Some(n);
        /// How long a lease may be spent (default 1 s).
        lease_ttl(d: Duration) => lease_ttl = d;
        /// The longest a settlement (what a call used beyond or short of its reservation) waits
        /// in this process to be sent with others (default 20 ms; zero sends each at once). A
        /// settlement that charges more than was reserved is sent at once, and any ask for cells
        /// carries what is waiting. See the module docs.
        settle_every(d: Duration) => settle_every = d;
    }

    /// The policy's settings: the whole limit (shared by every replica), the wait, the pause.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn policy(&self) -> Result<RateLimitPolicy> {
        let policy = self.policy.clone().build().map_err(Error::from)?;
        let bad = |s, r| Err(config_error("shared_rate_limit", s, r));
        if self.lease_block == Some(0) {
            return bad("lease_block", "must be at least 1");
        }
        if self.replicas == 0 {
            return bad("replicas", "must be at least 1");
        }
        Ok(policy)
    }

    /// (request cells, tokens) per lease.
    fn blocks(&self, policy: &RateLimitPolicy) -> (u64, u64) {
        let share = |burst: Option<u32>| {
            u64::from(burst.unwrap_or(0)) / (16 * u64::from(self.replicas.max(1)))
        };
        let requests = self
            .lease_block
            .unwrap_or_else(|| share(policy.rpm_burst()).clamp(1, 64))
            .max(1);
        let tokens = if requests > 1 {
            share(policy.tpm_burst())
        } else {
            0
        };
        (requests, tokens)
    }
}

/// One cell's GCRA parameters: emission interval in µs and burst.
fn cell(per_minute: Option<u32>, burst: Option<u32>) -> (u64, u64) {
    match per_minute {
        Some(n) => (
            60_000_000 / u64::from(n).max(1),
            u64::from(burst.unwrap_or(n)),
        ),
        None => (0, 0),
    }
}

/// Tokens a lease of `block` requests charges when the call asking for it costs `cost`: the
/// block's requests at this call's cost, at most the configured `share`, at least the call's
/// own cost, and never more than the TPM burst `tb` holds (unless the call alone needs more,
/// which the script refuses). A block sized by the share alone charges the shared TPM far more
/// than its requests spend, drains it, and sends every later call to Redis.
fn lease_tokens(cost: u64, block: u64, share: u64, tb: u64) -> u64 {
    cost.saturating_mul(block)
        .min(share)
        .max(cost)
        .min(tb.max(cost))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_charges_tokens_for_its_own_requests() {
        // 64 requests of 80 tokens under a share of 3.75 M: 5 120 tokens, not the share.
        assert_eq!(lease_tokens(80, 64, 3_750_000, 60_000_000), 5_120);
        // Capped at the share, but never below the call's own cost.
        assert_eq!(lease_tokens(80, 64, 1_000, 60_000_000), 1_000);
        assert_eq!(lease_tokens(80, 64, 10, 60_000_000), 80);
        // Never more than the burst, unless the call alone is larger.
        assert_eq!(lease_tokens(80, 64, 10_000, 2_000), 2_000);
        assert_eq!(lease_tokens(5_000, 64, 10_000, 2_000), 5_000);
        assert_eq!(lease_tokens(u64::MAX, 2, u64::MAX, 0), u64::MAX);
    }

    #[test]
    fn bad_settings_are_refused_naming_the_setting() {
        let base = SharedRateLimitConfig::default;
        for (config, setting) in [
            (base().rpm(0), "rate_limit.rpm"),
            (base().replicas(0), "shared_rate_limit.replicas"),
            (base().lease_block(0), "lease_block"),
        ] {
            let e = config.policy().unwrap_err();
            assert!(e.message().contains(setting), "{setting}: {e}");
        }
    }

    #[test]
    fn the_policy_gets_the_whole_limit_and_each_replica_falls_back_to_its_share() {
        let policy = SharedRateLimitConfig::default()
            .rpm(90)
            .tpm(3)
            .policy()
            .unwrap();
        assert_eq!(policy.rpm(), Some(90));
        let local = policy.share(3);
        assert_eq!(local.rpm(), Some(30));
        assert_eq!(local.tpm(), Some(1));
    }

    #[test]
    fn lease_blocks_scale_with_the_burst_and_stay_off_for_small_limits() {
        let blocks = |c: SharedRateLimitConfig| c.blocks(&c.policy().unwrap());
        assert_eq!(
            blocks(SharedRateLimitConfig::default().rpm(10).replicas(3)),
            (1, 0)
        );
        let big = SharedRateLimitConfig::default().rpm(60_000).tpm(1_600_000);
        assert_eq!(blocks(big.clone()), (64, 100_000));
        assert_eq!(
            blocks(SharedRateLimitConfig::default().rpm(960).replicas(3)).0,
            20
        );
        assert_eq!(blocks(big.lease_block(1)), (1, 0));
    }

    #[test]
    fn gcra_cells_are_emission_intervals_in_microseconds() {
        assert_eq!(cell(Some(60), None), (1_000_000, 60));
        assert_eq!(cell(Some(600), Some(5)), (100_000, 5));
        assert_eq!(cell(None, Some(5)), (0, 0));
    }
}
