//! [`SharedRateLimit`]: GCRA requests-per-minute and tokens-per-minute shared through Redis.
//!
//! One Lua script (run with EVALSHA, falling back to EVAL) checks both cells atomically against
//! Redis server time and charges them only when both admit the call. Keys:
//! `ripcord:v1:{link}:rl:rpm` and `…:rl:tpm`, each holding the GCRA theoretical arrival time
//! in µs and expiring when that time has passed. A refused call waits for its cell when the
//! wait fits within `max_wait` and its deadline; otherwise it fails with
//! [`ErrorKind::LocalRateLimited`] and a `retry_after`. Tokens are charged up front (prompt
//! estimate + `max_tokens`, or the model's largest output) and not refunded. A vendor 429
//! with a retry-after pauses the link for every replica (`…:rl:pause`, expiring with the pause).
//!
//! # Leases: the success path does not wait for Redis
//!
//! A call that finds no lease asks the script for a *block*: `lease_block` request cells
//! (default: the RPM burst / (16 × replicas), at most 64) and as many tokens (the TPM burst /
//! (16 × replicas), or the call's own cost if larger), charged in Redis at once. The rest of the
//! block is spent by later calls in this process without Redis, for at most `lease_ttl`
//! (default 1 s); what is left then is dropped. When the block does not fit, the call asks for
//! exactly its own cells, as without leases. The bound this buys: the shared cells are charged
//! *before* any call spends them, so a shared RPM/TPM never overshoots the GCRA limit; what a
//! lease costs is capacity charged but unspent (at most one block per replica per `lease_ttl`),
//! and calls spent from a lease while another replica's vendor 429 pauses the link (at most one
//! block per replica, within `lease_ttl`; this replica's own 429 drops its lease at once).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind,
    ModelId, Result, tokens,
};
use ripcord_resilience::{RateLimit, RateLimitLayer};

use crate::state::{RedisState, config_error, key, tag};

/// KEYS: rpm, tpm, pause. ARGV: rpm_interval_us, rpm_burst, tpm_interval_us, tpm_burst, tokens,
/// requests (more than one: a lease of a block of cells, spent locally).
/// Returns {0,0} admitted, {1,wait_us} refused for now, {2,0} larger than the TPM burst.
const GCRA: &str = "local paused = redis.call('PTTL', KEYS[3])\n\
if paused > 0 then return {1, paused * 1000} end\n\
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
local tokens = tonumber(ARGV[5])\n\
if tonumber(ARGV[3]) > 0 and tokens > tonumber(ARGV[4]) then return {2, 0} end\n\
local r_new, r_wait = check(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[6]))\n\
local t_new, t_wait = check(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tokens)\n\
local wait = math.max(r_wait, t_wait)\n\
if wait > 0 then return {1, math.ceil(wait)} end\n\
if r_new then redis.call('SET', KEYS[1], string.format('%.0f', r_new), 'PX', math.ceil((r_new - now) / 1000) + 1) end\n\
if t_new then redis.call('SET', KEYS[2], string.format('%.0f', t_new), 'PX', math.ceil((t_new - now) / 1000) + 1) end\n\
return {0, 0}\n";

/// KEYS: pause. ARGV: ms. Pauses the link for all replicas, never shortening a pause.
const PAUSE: &str = "local cur = redis.call('PTTL', KEYS[1])\n\
if cur < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end\n\
return 0\n";

/// The settings of a [`SharedRateLimit`].
#[derive(Debug, Clone)]
pub struct SharedRateLimitConfig {
    rpm: Option<u32>,
    rpm_burst: Option<u32>,
    tpm: Option<u32>,
    tpm_burst: Option<u32>,
    max_wait: Duration,
    max_pause: Duration,
    replicas: u32,
    lease_block: Option<u64>,
    lease_ttl: Duration,
}

impl Default for SharedRateLimitConfig {
    fn default() -> Self {
        SharedRateLimitConfig {
            rpm: None,
            rpm_burst: None,
            tpm: None,
            tpm_burst: None,
            max_wait: Duration::from_secs(10),
            max_pause: Duration::from_secs(300),
            replicas: 1,
            lease_block: None,
            lease_ttl: Duration::from_secs(1),
        }
    }
}

impl SharedRateLimitConfig {
    /// Requests per minute across all replicas.
    pub fn rpm(mut self, n: u32) -> Self {
        self.rpm = Some(n);
        self
    }

    /// Requests that may go at once after a quiet spell (default: the whole minute's worth).
    pub fn rpm_burst(mut self, n: u32) -> Self {
        self.rpm_burst = Some(n);
        self
    }

    /// Tokens per minute across all replicas.
    pub fn tpm(mut self, n: u32) -> Self {
        self.tpm = Some(n);
        self
    }

    /// Tokens that may go at once (default: the whole minute's worth).
    pub fn tpm_burst(mut self, n: u32) -> Self {
        self.tpm_burst = Some(n);
        self
    }

    /// The longest a call waits for capacity (default 10 s; never past its deadline).
    pub fn max_wait(mut self, d: Duration) -> Self {
        self.max_wait = d;
        self
    }

    /// The longest a vendor 429's retry-after pauses the link for every replica (default
    /// 5 minutes; zero turns the shared pause off).
    pub fn max_pause(mut self, d: Duration) -> Self {
        self.max_pause = d;
        self
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

    /// (request cells, tokens) per lease.
    fn blocks(&self) -> (u64, u64) {
        let share = |burst: u64| burst / (16 * u64::from(self.replicas.max(1)));
        let (_, rb) = cell(self.rpm, self.rpm_burst);
        let (_, tb) = cell(self.tpm, self.tpm_burst);
        let requests = self
            .lease_block
            .unwrap_or_else(|| share(rb).clamp(1, 64))
            .max(1);
        let tokens = if requests > 1 { share(tb) } else { 0 };
        (requests, tokens)
    }

    fn validate(&self) -> Result<()> {
        let bad = |s, r| Err(config_error("shared_rate_limit", s, r));
        if self.lease_block == Some(0) {
            return bad("lease_block", "must be at least 1");
        }
        for (name, v) in [
            ("rpm", self.rpm),
            ("rpm_burst", self.rpm_burst),
            ("tpm", self.tpm),
            ("tpm_burst", self.tpm_burst),
        ] {
            if v == Some(0) {
                return bad(name, "must be at least 1");
            }
        }
        if self.replicas == 0 {
            return bad("replicas", "must be at least 1");
        }
        Ok(())
    }

    fn local_layer(&self) -> Result<RateLimitLayer> {
        let share = |n: u32| (n / self.replicas).max(1);
        let mut b = RateLimitLayer::builder().max_wait(self.max_wait);
        if let Some(n) = self.rpm {
            b = b.rpm(share(n));
        }
        if let Some(n) = self.rpm_burst {
            b = b.rpm_burst(share(n));
        }
        if let Some(n) = self.tpm {
            b = b.tpm(share(n));
        }
        if let Some(n) = self.tpm_burst {
            b = b.tpm_burst(share(n));
        }
        b.build().map_err(Error::from)
    }
}

/// A GCRA rate limit shared through Redis by every replica (see the module docs).
///
/// While Redis is unreachable it serves calls through a local
/// `ripcord_resilience::RateLimit` enforcing each replica's share of the limit.
#[derive(Debug)]
pub struct SharedRateLimit<M> {
    inner: Arc<M>,
    local: RateLimit<Arc<M>>,
    state: RedisState,
    config: SharedRateLimitConfig,
    script: Script,
    pause: Script,
    keys: [String; 3],
    lease: Mutex<Lease>,
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

impl<M: ChatModel> SharedRateLimit<M> {
    /// Wraps `inner`; its link name (`id().name`) names the shared cells.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn new(inner: M, state: RedisState, config: SharedRateLimitConfig) -> Result<Self> {
        config.validate()?;
        let local = config.local_layer()?;
        let inner = Arc::new(inner);
        let link = inner.id().name.clone();
        Ok(SharedRateLimit {
            local: local.layer(inner.clone()),
            inner,
            state,
            config,
            script: Script::new(GCRA),
            pause: Script::new(PAUSE),
            keys: [
                key(&link, "rl:rpm"),
                key(&link, "rl:tpm"),
                key(&link, "rl:pause"),
            ],
            lease: Mutex::new(NO_LEASE),
        })
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The local fallback limiter (used while Redis is unreachable).
    pub fn local(&self) -> &RateLimit<Arc<M>> {
        &self.local
    }

    fn refusal(&self, message: String, after: Option<Duration>) -> Error {
        let mut e = Error::new(ErrorKind::LocalRateLimited, message);
        if let Some(after) = after {
            e = e.with_retry_after(after);
        }
        tag(e, self.inner.id())
    }

    /// A vendor 429 with a retry-after pauses the link for every replica.
    async fn pause_on_429(&self, e: &Error) {
        if e.kind() != ErrorKind::RateLimited || self.config.max_pause.is_zero() {
            return;
        }
        let Some(after) = e.retry_after() else {
            return;
        };
        // This replica stops spending its lease at once.
        *self.lease_guard() = NO_LEASE;
        let ms = after
            .min(self.config.max_pause)
            .as_millis()
            .max(1)
            .to_string();
        let _: Option<i64> = self.state.eval(&self.pause, &[&self.keys[2]], &[&ms]).await;
        tracing::info!(link = %self.inner.id().name, pause_ms = %ms, "ripcord.shared_rate_limit_paused");
    }

    fn lease_guard(&self) -> std::sync::MutexGuard<'_, Lease> {
        match self.lease.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Spends one request and `cost` tokens from the lease, if it holds them.
    fn spend(&self, cost: u64, tpm: bool) -> bool {
        let mut l = self.lease_guard();
        let live = l.until.is_some_and(|u| tokio::time::Instant::now() < u);
        if !live || l.requests == 0 || (tpm && l.tokens < cost) {
            return false;
        }
        l.requests -= 1;
        if tpm {
            l.tokens -= cost;
        }
        true
    }

    /// `Ok(true)`: admitted on Redis; `Ok(false)`: Redis is down, use the local limiter.
    async fn acquire(&self, req: &ChatRequest, ctx: &Context) -> Result<bool> {
        ctx.check().map_err(|e| tag(e, self.inner.id()))?;
        let output = req
            .max_tokens
            .unwrap_or(self.inner.capabilities().max_output_tokens);
        let cost = u64::from(tokens::estimate_request(req)) + u64::from(output);
        let (ri, rb) = cell(self.config.rpm, self.config.rpm_burst);
        let (ti, tb) = cell(self.config.tpm, self.config.tpm_burst);
        if self.spend(cost, ti > 0) {
            return Ok(true);
        }
        let (block, block_tokens) = self.config.blocks();
        if block > 1 {
            let tokens = block_tokens.max(cost).min(tb.max(cost));
            let args = [ri, rb, ti, tb, tokens, block].map(|v| v.to_string());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let reply: Option<(i64, i64)> = self
                .state
                .eval(
                    &self.script,
                    &[&self.keys[0], &self.keys[1], &self.keys[2]],
                    &args,
                )
                .await;
            match reply {
                None => return Ok(false),
                Some((0, _)) => {
                    *self.lease_guard() = Lease {
                        requests: block - 1,
                        tokens: tokens - cost,
                        until: Some(tokio::time::Instant::now() + self.config.lease_ttl),
                    };
                    return Ok(true);
                }
                // The block does not fit: ask for exactly this call's cells.
                Some(_) => {}
            }
        }
        let args = [ri, rb, ti, tb, cost, 1].map(|v| v.to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = tokio::time::Instant::now();
        loop {
            let reply: Option<(i64, i64)> = self
                .state
                .eval(
                    &self.script,
                    &[&self.keys[0], &self.keys[1], &self.keys[2]],
                    &args,
                )
                .await;
            let Some((code, wait_us)) = reply else {
                return Ok(false);
            };
            match code {
                0 => return Ok(true),
                2 => {
                    return Err(self.refusal(
                        format!(
                            "the request needs {cost} tokens, more than the shared TPM burst of {tb}"
                        ),
                        None,
                    ));
                }
                _ => {}
            }
            let wait = Duration::from_micros(u64::try_from(wait_us).unwrap_or(0).max(1));
            let now = tokio::time::Instant::now();
            let waited = now.duration_since(started);
            let fits_deadline = ctx.deadline().is_none_or(|d| now + wait < d);
            if waited + wait > self.config.max_wait || !fits_deadline {
                tracing::info!(link = %self.inner.id().name, "ripcord.shared_rate_limited");
                return Err(self.refusal(
                    format!(
                        "shared rate limit reached; capacity in {} ms",
                        wait.as_millis()
                    ),
                    Some(wait),
                ));
            }
            tokio::select! {
                biased;
                () = ctx.cancellation().cancelled() => {
                    return Err(tag(Error::cancelled(), self.inner.id()));
                }
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for SharedRateLimit<M> {
    fn id(&self) -> &ModelId {
        self.inner.id()
    }

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        if self.acquire(req, ctx).await? {
            let result = self.inner.chat(req, ctx).await;
            if let Err(e) = &result {
                self.pause_on_429(e).await;
            }
            result
        } else {
            self.state.note_local_call();
            self.local.chat(req, ctx).await
        }
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        if self.acquire(req, ctx).await? {
            let result = self.inner.stream(req, ctx).await;
            if let Err(e) = &result {
                self.pause_on_429(e).await;
            }
            result
        } else {
            self.state.note_local_call();
            self.local.stream(req, ctx).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused_naming_the_setting() {
        let e = SharedRateLimitConfig::default()
            .rpm(0)
            .validate()
            .unwrap_err();
        assert!(e.message().contains("shared_rate_limit.rpm"), "{e}");
        let e = SharedRateLimitConfig::default()
            .replicas(0)
            .validate()
            .unwrap_err();
        assert!(e.message().contains("replicas"), "{e}");
    }

    #[test]
    fn each_replica_falls_back_to_its_share_of_the_limit() {
        let c = SharedRateLimitConfig::default().rpm(90).tpm(3).replicas(3);
        let local = c.local_layer().unwrap();
        assert_eq!(local.rpm(), Some(30));
        assert_eq!(local.tpm(), Some(1));
    }

    #[test]
    fn lease_blocks_scale_with_the_burst_and_stay_off_for_small_limits() {
        let small = SharedRateLimitConfig::default().rpm(10).replicas(3);
        assert_eq!(small.blocks(), (1, 0));
        let big = SharedRateLimitConfig::default().rpm(60_000).tpm(1_600_000);
        assert_eq!(big.blocks(), (64, 100_000));
        let three = SharedRateLimitConfig::default().rpm(960).replicas(3);
        assert_eq!(three.blocks().0, 20);
        assert_eq!(big.clone().lease_block(1).blocks(), (1, 0));
        assert!(big.lease_block(0).validate().is_err());
    }

    #[test]
    fn gcra_cells_are_emission_intervals_in_microseconds() {
        assert_eq!(cell(Some(60), None), (1_000_000, 60));
        assert_eq!(cell(Some(600), Some(5)), (100_000, 5));
        assert_eq!(cell(None, Some(5)), (0, 0));
    }
}
