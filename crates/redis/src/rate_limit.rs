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
//! `lease_ttl` (default 1 s); what is left then is dropped. When the block does not fit, the
//! call asks for exactly its own cells. The bound this buys is in `docs/shared-state.md`.
//!
//! # When Redis fails
//!
//! Every Redis call is bounded by the `RedisState` op timeout. When Redis does not answer, the
//! try is decided by a [`LocalLimitStore`] enforcing this replica's share of the limit
//! (`limit / replicas`), and a settlement or pause that cannot be sent is kept there.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use ripcord_core::{ChatModel, Error, Result};
use ripcord_resilience::{
    LimitKind, LimitStore, LocalLimitStore, RateLimit, RateLimitPolicy, RateLimitPolicyBuilder,
    Take, Taken,
};

use crate::state::{Background, RedisState, config_error, key};

/// KEYS: rpm, tpm, pause. ARGV: rpm_interval_us, rpm_burst, tpm_interval_us, tpm_burst, tokens,
/// requests (more than one: a lease of a block of cells, spent locally).
/// Returns {0,0,0} taken, {1,wait_us,limit} refused for now (limit 0 pause, 1 tokens,
/// 2 requests).
const GCRA: &str = "local paused = redis.call('PTTL', KEYS[3])\n\
if paused > 0 then return {1, paused * 1000, 0} end\n\
local t = redis.call('TIME')\n\
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n\
local function check(key, interval, burst, cost)\n\
  if interval == 0 or cost == 0 then return nil, 0 end\n\
  local tat = tonumber(redis.call('GET', key) or now)\n\
  if tat < now then tat = now end\n\
  local new_tat = tat + interval * cost\n\
  local allow_at = new_tat - interval * burst\n\
  if allow_at > now then return nil, allow_at - now end\n\
  return new_tat, 0\n\
end\n\
local r_new, r_wait = check(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[6]))\n\
local t_new, t_wait = check(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))\n\
if t_wait > 0 and t_wait >= r_wait then return {1, math.ceil(t_wait), 1} end\n\
if r_wait > 0 then return {1, math.ceil(r_wait), 2} end\n\
if r_new then redis.call('SET', KEYS[1], string.format('%.0f', r_new), 'PX', math.ceil((r_new - now) / 1000) + 1) end\n\
if t_new then redis.call('SET', KEYS[2], string.format('%.0f', t_new), 'PX', math.ceil((t_new - now) / 1000) + 1) end\n\
return {0, 0, 0}\n";

/// KEYS: tpm. ARGV: tpm_interval_us, delta tokens. Moves the TPM cell by what a call used
/// beyond (or short of) its reservation; a credit never goes further back than now.
const SETTLE: &str = "local t = redis.call('TIME')\n\
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n\
local tat = tonumber(redis.call('GET', KEYS[1]) or now)\n\
if tat < now then tat = now end\n\
tat = tat + tonumber(ARGV[1]) * tonumber(ARGV[2])\n\
if tat <= now then redis.call('DEL', KEYS[1]) return 0 end\n\
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)\n\
return 0\n";

/// KEYS: pause. ARGV: ms. Pauses the link for all replicas, never shortening a pause.
const PAUSE: &str = "local cur = redis.call('PTTL', KEYS[1])\n\
if cur < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end\n\
return 0\n";

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
    let layer = config.layer()?;
    let store = RedisLimitStore::new(&inner.id().name, state, &config)?;
    Ok(RateLimit::with_store(inner, layer, store))
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
}

impl Default for SharedRateLimitConfig {
    fn default() -> Self {
        SharedRateLimitConfig {
            policy: RateLimitPolicy::builder(),
            replicas: 1,
            lease_block: None,
            lease_ttl: Duration::from_secs(1),
        }
    }
}

impl SharedRateLimitConfig {
    /// Changes the policy's settings (`RateLimitPolicyBuilder`): rates are across all replicas.
    pub fn policy(
        mut self,
        f: impl FnOnce(RateLimitPolicyBuilder) -> RateLimitPolicyBuilder,
    ) -> Self {
        self.policy = f(self.policy);
        self
    }

    /// Requests per minute across all replicas (`RateLimitPolicyBuilder::rpm`).
    pub fn rpm(self, n: u32) -> Self {
        self.policy(|b| b.rpm(n))
    }

    /// Requests that may go at once (`RateLimitPolicyBuilder::rpm_burst`).
    pub fn rpm_burst(self, n: u32) -> Self {
        self.policy(|b| b.rpm_burst(n))
    }

    /// Tokens per minute across all replicas (`RateLimitPolicyBuilder::tpm`).
    pub fn tpm(self, n: u32) -> Self {
        self.policy(|b| b.tpm(n))
    }

    /// Tokens that may go at once (`RateLimitPolicyBuilder::tpm_burst`).
    pub fn tpm_burst(self, n: u32) -> Self {
        self.policy(|b| b.tpm_burst(n))
    }

    /// The longest a call waits for capacity (`RateLimitPolicyBuilder::max_wait`).
    pub fn max_wait(self, d: Duration) -> Self {
        self.policy(|b| b.max_wait(d))
    }

    /// The longest a vendor 429 pauses the link for every replica (default 5 minutes; zero
    /// turns pausing off).
    pub fn max_pause(self, d: Duration) -> Self {
        self.policy(|b| b.max_pause(d).pause_on_429(!d.is_zero()))
    }

    /// The pause after a vendor 429 that names no retry-after (`RateLimitPolicyBuilder::default_pause`).
    pub fn default_pause(self, d: Duration) -> Self {
        self.policy(|b| b.default_pause(d))
    }

    /// How many replicas share the limit (default 1): while Redis is unreachable each replica
    /// enforces `limit / replicas` locally, so together they stay near the limit.
    pub fn replicas(mut self, n: u32) -> Self {
        self.replicas = n;
        self
    }

    /// Request cells leased per Redis call (default: the RPM burst / (16 × replicas), between
    /// 1 and 64; 1 turns leases off). See the module docs for the bound.
    pub fn lease_block(mut self, n: u64) -> Self {
        self.lease_block = Some(n);
        self
    }

    /// How long a lease may be spent (default 1 s).
    pub fn lease_ttl(mut self, d: Duration) -> Self {
        self.lease_ttl = d;
        self
    }

    /// The policy's settings: the whole limit (shared by every replica), the wait, the pause.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn layer(&self) -> Result<RateLimitPolicy> {
        let layer = self.policy.clone().build().map_err(Error::from)?;
        let bad = |s, r| Err(config_error("shared_rate_limit", s, r));
        if self.lease_block == Some(0) {
            return bad("lease_block", "must be at least 1");
        }
        if self.replicas == 0 {
            return bad("replicas", "must be at least 1");
        }
        Ok(layer)
    }

    /// (request cells, tokens) per lease.
    fn blocks(&self, layer: &RateLimitPolicy) -> (u64, u64) {
        let share = |burst: Option<u32>| {
            u64::from(burst.unwrap_or(0)) / (16 * u64::from(self.replicas.max(1)))
        };
        let requests = self
            .lease_block
            .unwrap_or_else(|| share(layer.rpm_burst()).clamp(1, 64))
            .max(1);
        let tokens = if requests > 1 {
            share(layer.tpm_burst())
        } else {
            0
        };
        (requests, tokens)
    }
}

/// Cells leased from Redis and not spent yet.
#[derive(Debug, Clone, Copy)]
struct Lease {
    requests: u64,
    tokens: u64,
    until: Option<tokio::time::Instant>,
}

const NO_LEASE: Lease = Lease {
    requests: 0,
    tokens: 0,
    until: None,
};

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

/// A [`LimitStore`] on Redis (see the module docs).
#[derive(Debug)]
pub struct RedisLimitStore {
    state: RedisState,
    local: LocalLimitStore,
    rpm: (u64, u64),
    tpm: (u64, u64),
    blocks: (u64, u64),
    lease_ttl: Duration,
    keys: Arc<[String; 3]>,
    take: Script,
    settle: Arc<Script>,
    pause: Arc<Script>,
    lease: Mutex<Lease>,
    background: Arc<Background>,
}

impl RedisLimitStore {
    /// A store for `link` on `state`, with `config`'s limits, leases and local share.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn new(link: &str, state: RedisState, config: &SharedRateLimitConfig) -> Result<Arc<Self>> {
        let layer = config.layer()?;
        Ok(Arc::new(RedisLimitStore {
            local: LocalLimitStore::new(&layer.share(config.replicas)),
            state,
            rpm: cell(layer.rpm(), layer.rpm_burst()),
            tpm: cell(layer.tpm(), layer.tpm_burst()),
            blocks: config.blocks(&layer),
            lease_ttl: config.lease_ttl,
            keys: Arc::new([
                key(link, "rl:rpm"),
                key(link, "rl:tpm"),
                key(link, "rl:pause"),
            ]),
            take: Script::new(GCRA),
            settle: Arc::new(Script::new(SETTLE)),
            pause: Arc::new(Script::new(PAUSE)),
            lease: Mutex::new(NO_LEASE),
            background: Arc::new(Background::default()),
        }))
    }

    /// Waits until the settlements and pauses sent so far have reached Redis (or timed out).
    pub async fn sync(&self) {
        self.background.idle().await;
    }

    fn lease_guard(&self) -> std::sync::MutexGuard<'_, Lease> {
        match self.lease.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Spends `take` from the lease, if it holds it.
    fn spend(&self, take: Take) -> bool {
        let mut l = self.lease_guard();
        let live = l.until.is_some_and(|u| tokio::time::Instant::now() < u);
        let tokens = u64::from(take.tokens);
        let requests = u64::from(take.request);
        if !live || l.requests < requests || l.tokens < tokens {
            return false;
        }
        l.requests -= requests;
        l.tokens -= tokens;
        true
    }

    /// A reservation larger than the TPM burst was charged the burst: the rest is owed, as
    /// the in-process store keeps it (the bucket then refills for longer).
    fn owe(&self, take: Take, charged: u64) {
        let rest = u64::from(take.tokens).saturating_sub(charged);
        if self.tpm.1 > 0 && rest > 0 {
            self.settle(i64::try_from(rest).unwrap_or(i64::MAX));
        }
    }

    /// One script call for `requests` cells and `tokens` tokens: `None` when Redis failed.
    async fn ask(&self, requests: u64, tokens: u64) -> Option<(i64, i64, i64)> {
        let (ri, rb) = self.rpm;
        let (ti, tb) = self.tpm;
        let args = [ri, rb, ti, tb, tokens, requests].map(|v| v.to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let keys = [&*self.keys[0], &*self.keys[1], &*self.keys[2]];
        self.state.eval(&self.take, &keys, &args).await
    }
}

#[async_trait]
impl LimitStore for RedisLimitStore {
    fn try_take(&self, take: Take) -> Taken {
        if let Some(p) = self.local.paused_for() {
            return Taken::Wait {
                after: p,
                limit: LimitKind::Pause,
                tokens_taken: false,
            };
        }
        if self.spend(take) {
            Taken::All
        } else {
            Taken::Ask
        }
    }

    async fn take(&self, take: Take) -> Taken {
        let (_, tb) = self.tpm;
        // A reservation larger than the burst takes the whole bucket (the policy settles the
        // rest afterwards), as the in-process store does.
        let cost = if tb > 0 {
            u64::from(take.tokens).min(tb)
        } else {
            0
        };
        let requests = u64::from(take.request);
        let (block, block_tokens) = self.blocks;
        if block > 1 && requests == 1 {
            let tokens = if tb > 0 {
                lease_tokens(cost, block, block_tokens, tb)
            } else {
                0
            };
            match self.ask(block, tokens).await {
                None => {
                    self.state.note_local_call();
                    return self.local.try_take(take);
                }
                Some((0, _, _)) => {
                    self.owe(take, cost);
                    *self.lease_guard() = Lease {
                        requests: block - 1,
                        tokens: tokens - cost,
                        until: Some(tokio::time::Instant::now() + self.lease_ttl),
                    };
                    return Taken::All;
                }
                // The block does not fit: ask for exactly this call's cells.
                Some(_) => {}
            }
        }
        match self.ask(requests, cost).await {
            None => {
                self.state.note_local_call();
                self.local.try_take(take)
            }
            Some((0, _, _)) => {
                self.owe(take, cost);
                Taken::All
            }
            Some((_, wait_us, limit)) => {
                let after = Duration::from_micros(u64::try_from(wait_us).unwrap_or(0).max(1));
                let limit = match limit {
                    0 => {
                        // Another replica's vendor 429: this replica waits it out locally.
                        self.local.pause(after);
                        LimitKind::Pause
                    }
                    1 => LimitKind::Tokens,
                    _ => LimitKind::Requests,
                };
                Taken::Wait {
                    after,
                    limit,
                    tokens_taken: false,
                }
            }
        }
    }

    fn settle(&self, delta: i64) {
        let (ti, _) = self.tpm;
        if ti == 0 || delta == 0 {
            return;
        }
        let state = self.state.clone();
        let script = self.settle.clone();
        let keys = self.keys.clone();
        let args = [ti.to_string(), delta.to_string()];
        let sent = self.background.spawn(async move {
            let _: Option<i64> = state
                .eval(&script, &[&keys[1]], &[&args[0], &args[1]])
                .await;
        });
        if !sent {
            self.local.settle(delta);
        }
    }

    fn pause(&self, d: Duration) {
        // This replica stops spending its lease at once, and waits the pause out locally.
        *self.lease_guard() = NO_LEASE;
        self.local.pause(d);
        let state = self.state.clone();
        let script = self.pause.clone();
        let keys = self.keys.clone();
        let ms = d.as_millis().max(1).to_string();
        self.background.spawn(async move {
            let _: Option<i64> = state.eval(&script, &[&keys[2]], &[&ms]).await;
        });
    }

    fn paused_for(&self) -> Option<Duration> {
        self.local.paused_for()
    }

    fn balance(&self) -> i64 {
        self.local.balance()
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
        let e = SharedRateLimitConfig::default().rpm(0).layer().unwrap_err();
        assert!(e.message().contains("rate_limit.rpm"), "{e}");
        let e = SharedRateLimitConfig::default()
            .replicas(0)
            .layer()
            .unwrap_err();
        assert!(e.message().contains("shared_rate_limit.replicas"), "{e}");
        let e = SharedRateLimitConfig::default()
            .lease_block(0)
            .layer()
            .unwrap_err();
        assert!(e.message().contains("lease_block"), "{e}");
    }

    #[test]
    fn the_policy_gets_the_whole_limit_and_each_replica_falls_back_to_its_share() {
        let layer = SharedRateLimitConfig::default()
            .rpm(90)
            .tpm(3)
            .layer()
            .unwrap();
        assert_eq!(layer.rpm(), Some(90));
        let local = layer.share(3);
        assert_eq!(local.rpm(), Some(30));
        assert_eq!(local.tpm(), Some(1));
    }

    #[test]
    fn lease_blocks_scale_with_the_burst_and_stay_off_for_small_limits() {
        let blocks = |c: SharedRateLimitConfig| c.blocks(&c.layer().unwrap());
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
