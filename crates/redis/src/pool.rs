//! [`RedisPoolStore`]: a pool's cooldowns, ejections and outages shared through Redis, so a
//! deployment one replica saw throttled, failing or broken is left alone by every replica.
//!
//! Per deployment `d` of the pool's link, three keys, each expiring when its block ends:
//!
//! - `ripcord:v1:{link}:pool:d:cool` — a cooldown, `PX` the vendor's wait. A shorter wait never
//!   shortens a longer one already set (the script compares `PTTL`s).
//! - `ripcord:v1:{link}:pool:d:eject` — an error-rate ejection, `PX` its length, which the
//!   script takes from `…:pool:d:ejections`, the count of ejections in a row across replicas
//!   (`INCR`; `ejection_time(n)` = base × n up to the maximum). The count expires the maximum
//!   ejection after the ejection it counted ended, so a deployment that stays clean that long
//!   starts over at the base length.
//! - `ripcord:v1:{link}:pool:d:out` — out of service (the value names why), until a probe, an
//!   operator or an answered trial call `DEL`s it; it carries a one-day TTL so that a key
//!   nobody lifts does not outlive its purpose.
//!
//! Times left are `PTTL`s, measured by Redis: replicas' clocks never meet. A replica reads all
//! of its pool's keys in one script call before it picks a deployment, at most once per
//! [`SharedPoolConfig::view_ttl`] (one read in flight at a time; the others use the view
//! already merged); so a block set elsewhere reaches it within `view_ttl`, and a block it sets
//! itself holds locally at once. A write is sent (and awaited, bounded by the op timeout)
//! right after the failure that caused it, before the call moves to another deployment.
//!
//! When Redis does not answer, the pool goes on with its own view (fail-open), and the
//! `RedisState` counts the call as served on local state (or the write as unsent).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use ripcord_core::ErrorKind;
use ripcord_resilience::{PoolBlock, PoolStore, SharedBlocks};

use crate::state::{RedisState, key};

/// The longest an outage key lives without being lifted (one day).
const OUT_TTL_MS: u64 = 86_400_000;

/// KEYS: cool. ARGV: ms. Sets the cooldown unless a longer one stands; returns its PTTL.
const COOL: &str = "local left = redis.call('PTTL', KEYS[1])\n\
local ms = tonumber(ARGV[1])\n\
if left < ms then redis.call('SET', KEYS[1], '1', 'PX', ms) return ms end\n\
return left\n";

/// KEYS: eject, ejections. ARGV: base_ms, max_ms. Counts the ejection and sets it for
/// min(base × n, max); returns {ms, n}.
const EJECT: &str = "local n = redis.call('INCR', KEYS[2])\n\
local ms = math.min(tonumber(ARGV[1]) * n, tonumber(ARGV[2]))\n\
local left = redis.call('PTTL', KEYS[1])\n\
if left < ms then redis.call('SET', KEYS[1], '1', 'PX', ms) else ms = left end\n\
redis.call('PEXPIRE', KEYS[2], ms + tonumber(ARGV[2]))\n\
return {ms, n}\n";

/// KEYS: per deployment cool, eject, ejections, out. Returns per deployment
/// {cool PTTL, eject PTTL, ejections, out reason or ''}.
const READ: &str = "local out = {}\n\
for i = 1, #KEYS, 4 do\n\
  local reason = redis.call('GET', KEYS[i + 3]) or ''\n\
  local n = tonumber(redis.call('GET', KEYS[i + 2]) or 0)\n\
  out[#out + 1] = {redis.call('PTTL', KEYS[i]), redis.call('PTTL', KEYS[i + 1]), n, reason}\n\
end\n\
return out\n";

/// The settings of a [`RedisPoolStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedPoolConfig {
    /// How long a replica's merged view of the store serves picks before the next pick reads
    /// Redis again (default 100 ms; zero: every pick reads). The bound on how late a block set
    /// by another replica is seen.
    pub view_ttl: Duration,
}

impl Default for SharedPoolConfig {
    fn default() -> Self {
        SharedPoolConfig {
            view_ttl: Duration::from_millis(100),
        }
    }
}

/// A [`PoolStore`] on Redis (see the module docs).
#[derive(Debug)]
pub struct RedisPoolStore {
    state: RedisState,
    link: String,
    view_ttl_ms: u64,
    epoch: std::time::Instant,
    /// Milliseconds since `epoch` when the last read was sent (`u64::MAX`: never).
    read_at: AtomicU64,
    /// One read in flight at a time.
    flight: tokio::sync::Mutex<()>,
    cool: Script,
    eject: Script,
    read: Script,
}

impl RedisPoolStore {
    /// A store for the pool of `link` on `state`.
    pub fn new(link: &str, state: RedisState, config: SharedPoolConfig) -> Arc<Self> {
        Arc::new(RedisPoolStore {
            state,
            link: link.to_owned(),
            view_ttl_ms: u64::try_from(config.view_ttl.as_millis()).unwrap_or(u64::MAX),
            epoch: std::time::Instant::now(),
            read_at: AtomicU64::new(u64::MAX),
            flight: tokio::sync::Mutex::new(()),
            cool: Script::new(COOL),
            eject: Script::new(EJECT),
            read: Script::new(READ),
        })
    }

    fn key(&self, deployment: &str, what: &str) -> String {
        key(&self.link, &format!("pool:{deployment}:{what}"))
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The merged view is recent enough to pick from.
    fn fresh(&self) -> bool {
        let at = self.read_at.load(Ordering::Acquire);
        at != u64::MAX && self.now_ms().saturating_sub(at) < self.view_ttl_ms
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A `PTTL` reply as time left (`-2`: no key, `-1`: no expiry, both "no block").
fn left(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

#[async_trait]
impl PoolStore for RedisPoolStore {
    fn is_shared(&self) -> bool {
        true
    }

    async fn publish(&self, deployment: &str, block: PoolBlock) -> Option<Duration> {
        let reply = match block {
            PoolBlock::Cooldown(wait) => {
                let k = self.key(deployment, "cool");
                let arg = ms(wait).to_string();
                let left: Option<i64> = self.state.eval(&self.cool, &[&k], &[&arg]).await;
                left.and_then(|l| u64::try_from(l).ok())
            }
            PoolBlock::Ejection(ej) => {
                let k = [
                    self.key(deployment, "eject"),
                    self.key(deployment, "ejections"),
                ];
                let args = [
                    ms(ej.base_ejection).to_string(),
                    ms(ej.max_ejection).to_string(),
                ];
                let reply: Option<(i64, i64)> = self
                    .state
                    .eval(&self.eject, &[&k[0], &k[1]], &[&args[0], &args[1]])
                    .await;
                reply.and_then(|(l, _)| u64::try_from(l).ok())
            }
            PoolBlock::Out(kind) => {
                let mut cmd = redis::cmd("SET");
                cmd.arg(self.key(deployment, "out"))
                    .arg(kind.as_str())
                    .arg("PX")
                    .arg(OUT_TTL_MS);
                let done: Option<String> = self.state.query(&cmd).await;
                done.map(|_| 0)
            }
            // A block this store does not know: it holds on this replica only.
            _ => None,
        };
        if reply.is_none() {
            self.state.note_unsent_write();
        }
        reply.map(Duration::from_millis)
    }

    async fn read(&self, deployments: &[Arc<str>]) -> Option<Vec<SharedBlocks>> {
        if self.fresh() {
            return None;
        }
        let _one = self.flight.lock().await;
        if self.fresh() {
            // Another call read meanwhile: its view is merged already.
            return None;
        }
        self.read_at.store(self.now_ms(), Ordering::Release);
        let keys: Vec<String> = deployments
            .iter()
            .flat_map(|d| ["cool", "eject", "ejections", "out"].map(|what| self.key(d, what)))
            .collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply: Option<Vec<(i64, i64, i64, String)>> =
            self.state.eval(&self.read, &keys, &[]).await;
        let Some(rows) = reply else {
            self.state.note_local_call();
            return None;
        };
        Some(
            rows.into_iter()
                .map(|(cool, eject, n, out)| {
                    SharedBlocks::new(
                        left(cool),
                        left(eject),
                        u32::try_from(n).unwrap_or(u32::MAX),
                        // An outage whose reason this version does not know still holds.
                        (!out.is_empty())
                            .then(|| ErrorKind::parse(&out).unwrap_or(ErrorKind::Auth)),
                    )
                })
                .collect(),
        )
    }

    async fn clear(&self, deployment: &str) {
        let mut cmd = redis::cmd("DEL");
        for what in ["cool", "eject", "out"] {
            cmd.arg(self.key(deployment, what));
        }
        let done: Option<i64> = self.state.query(&cmd).await;
        if done.is_none() {
            self.state.note_unsent_write();
        }
    }
}
