//! [`RedisLimitStore`]: the GCRA cells in Redis, the leased blocks spent locally, the next
//! block asked for ahead of time, and the coalesced settlements (see the parent module docs).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use ripcord_core::Result;
use ripcord_resilience::{LimitKind, LimitStore, LocalLimitStore, Take, Taken};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{SharedRateLimitConfig, cell, lease_tokens};
use crate::state::{Background, RedisState, key};

/// KEYS: rpm, tpm, pause. ARGV: rpm_interval_us, rpm_burst, tpm_interval_us, tpm_burst, tokens,
/// requests (more than one: a lease of a block of cells, spent locally), settle (tokens this
/// replica's calls used beyond their reservations since its last write, negative when short;
/// applied to the TPM cell first, as `SETTLE` does, whatever the answer).
/// Returns {0,0,0} taken, {1,wait_us,limit} refused for now (limit 0 pause, 1 tokens,
/// 2 requests).
const GCRA: &str = "local t = redis.call('TIME')\n\
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n\
local settle = tonumber(ARGV[7])\n\
if settle ~= 0 and tonumber(ARGV[3]) > 0 then\n\
  local tat = tonumber(redis.call('GET', KEYS[2]) or now)\n\
  if tat < now then tat = now end\n\
  tat = tat + tonumber(ARGV[3]) * settle\n\
  if tat <= now then redis.call('DEL', KEYS[2])\n\
  else redis.call('SET', KEYS[2], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1) end\n\
end\n\
local paused = redis.call('PTTL', KEYS[3])\n\
if paused > 0 then return {1, paused * 1000, 0} end\n\
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

/// KEYS: tpm. ARGV: tpm_interval_us, delta tokens. Moves the TPM cell by what calls used
/// beyond (or short of) their reservations; a credit never goes further back than now.
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

/// Cells leased from Redis and not spent yet.
#[derive(Debug, Clone, Copy)]
struct Lease {
    requests: u64,
    tokens: u64,
    until: Option<Instant>,
}

const NO_LEASE: Lease = Lease {
    requests: 0,
    tokens: 0,
    until: None,
};

impl Lease {
    fn live(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u)
    }

    fn holds(&self, now: Instant, requests: u64, tokens: u64) -> bool {
        self.live(now) && self.requests >= requests && self.tokens >= tokens
    }
}

/// The blocks this replica holds: the one being spent and the one asked for ahead of it.
#[derive(Debug)]
struct Leases {
    current: Lease,
    next: Lease,
    /// An ask for the next block is in flight.
    asking: bool,
    /// Redis refused the last ask ahead (the limit is near): no other until a call asks.
    ahead_refused: bool,
}

/// What the store and its background writes share.
#[derive(Debug)]
struct Inner {
    state: RedisState,
    local: LocalLimitStore,
    rpm: (u64, u64),
    tpm: (u64, u64),
    blocks: (u64, u64),
    lease_ttl: Duration,
    settle_every: Duration,
    keys: [String; 3],
    take: Script,
    settle: Script,
    pause: Script,
    leases: Mutex<Leases>,
    /// Tokens used beyond reservations (negative: short of them) not yet sent to Redis.
    unsent: AtomicI64,
    /// A background write of `unsent` is scheduled.
    flush_scheduled: AtomicBool,
    /// Wakes the scheduled write before its delay (a debit, or `sync`).
    flush_now: Notify,
    background: Arc<Background>,
}

/// A [`LimitStore`] on Redis (see the module docs).
#[derive(Debug)]
pub struct RedisLimitStore {
    inner: Arc<Inner>,
}

impl RedisLimitStore {
    /// A store for `link` on `state`, with `config`'s limits, leases and local share.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn new(link: &str, state: RedisState, config: &SharedRateLimitConfig) -> Result<Arc<Self>> {
        let policy = config.policy()?;
        Ok(Arc::new(RedisLimitStore {
            inner: Arc::new(Inner {
                local: LocalLimitStore::new(&policy.share(config.replicas)),
                state,
                rpm: cell(policy.rpm(), policy.rpm_burst()),
                tpm: cell(policy.tpm(), policy.tpm_burst()),
                blocks: config.blocks(&policy),
                lease_ttl: config.lease_ttl,
                settle_every: config.settle_every,
                keys: [
                    key(link, "rl:rpm"),
                    key(link, "rl:tpm"),
                    key(link, "rl:pause"),
                ],
                take: Script::new(GCRA),
                settle: Script::new(SETTLE),
                pause: Script::new(PAUSE),
                leases: Mutex::new(Leases {
                    current: NO_LEASE,
                    next: NO_LEASE,
                    asking: false,
                    ahead_refused: false,
                }),
                unsent: AtomicI64::new(0),
                flush_scheduled: AtomicBool::new(false),
                flush_now: Notify::new(),
                background: Arc::new(Background::default()),
            }),
        }))
    }

    /// Sends the settlements waiting in this process now, and waits until everything sent so
    /// far (settlements, pauses, asks ahead) has reached Redis (or timed out).
    pub async fn sync(&self) {
        let inner = &self.inner;
        if inner.flush_scheduled.load(Ordering::SeqCst) {
            inner.flush_now.notify_one();
        }
        inner.background.idle().await;
    }
}

impl Inner {
    fn leases(&self) -> MutexGuard<'_, Leases> {
        self.leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Spends `take` from a leased block, if one holds it; starts the ask for the next block
    /// when this one runs low.
    fn spend(self: &Arc<Self>, take: Take) -> bool {
        let now = Instant::now();
        let tokens = u64::from(take.tokens);
        let requests = u64::from(take.request);
        let mut l = self.leases();
        if !l.current.holds(now, requests, tokens) {
            if !l.next.holds(now, requests, tokens) {
                return false;
            }
            l.current = l.next;
            l.next = NO_LEASE;
        }
        l.current.requests -= requests;
        l.current.tokens -= tokens;
        let (block, _) = self.blocks;
        let low = l.current.requests <= block / 4;
        if low && !l.asking && !l.ahead_refused && !l.next.live(now) {
            l.asking = true;
            drop(l);
            self.ask_ahead(tokens);
        }
        true
    }

    /// One background ask for the next block, priced at `cost` tokens a call.
    fn ask_ahead(self: &Arc<Self>, cost: u64) {
        let me = Arc::clone(self);
        let sent = self.background.spawn(async move {
            let (block, block_tokens) = me.blocks;
            let (_, tb) = me.tpm;
            let tokens = if tb > 0 {
                lease_tokens(cost.min(tb), block, block_tokens, tb)
            } else {
                0
            };
            let sent_at = Instant::now();
            let reply = me.ask(block, tokens).await;
            let mut l = me.leases();
            l.asking = false;
            match reply {
                // Kept unless a pause began meanwhile (see `pause`).
                Some((0, _, _)) if me.local.paused_for().is_none() => {
                    l.next = Lease {
                        requests: block,
                        tokens,
                        until: Some(sent_at + me.lease_ttl),
                    };
                }
                Some((0, _, _)) => {}
                Some((_, wait_us, 0)) => {
                    // Another replica's vendor 429: stop spending at once.
                    l.current = NO_LEASE;
                    l.next = NO_LEASE;
                    drop(l);
                    me.local.pause(micros(wait_us));
                }
                Some(_) => l.ahead_refused = true,
                None => {}
            }
        });
        if !sent {
            self.leases().asking = false;
        }
    }

    /// A reservation larger than the TPM burst was charged the burst: the rest is owed, as
    /// the in-process store keeps it (the bucket then refills for longer).
    fn owe(self: &Arc<Self>, take: Take, charged: u64) {
        let rest = u64::from(take.tokens).saturating_sub(charged);
        if self.tpm.1 > 0 && rest > 0 {
            self.settle(i64::try_from(rest).unwrap_or(i64::MAX));
        }
    }

    /// One script call for `requests` cells and `tokens` tokens, carrying the settlements
    /// waiting here: `None` when Redis failed (the settlements are then kept locally).
    async fn ask(&self, requests: u64, tokens: u64) -> Option<(i64, i64, i64)> {
        let (ri, rb) = self.rpm;
        let (ti, tb) = self.tpm;
        let settle = if ti > 0 {
            self.unsent.swap(0, Ordering::SeqCst)
        } else {
            0
        };
        let args = [ri, rb, ti, tb, tokens, requests].map(|v| v.to_string());
        let settle_arg = settle.to_string();
        let args = [
            &*args[0],
            &args[1],
            &args[2],
            &args[3],
            &args[4],
            &args[5],
            &settle_arg,
        ];
        let keys = [&*self.keys[0], &*self.keys[1], &*self.keys[2]];
        let reply = self.state.eval(&self.take, &keys, &args).await;
        if reply.is_none() && settle != 0 {
            self.state.note_unsent_write();
            self.local.settle(settle);
        }
        reply
    }

    /// Adds a settlement to the ones waiting, and makes sure a write will send them.
    fn settle(self: &Arc<Self>, delta: i64) {
        let (ti, _) = self.tpm;
        if ti == 0 || delta == 0 {
            return;
        }
        let sum = self.unsent.fetch_add(delta, Ordering::SeqCst) + delta;
        if self.flush_scheduled.swap(true, Ordering::SeqCst) {
            if sum > 0 {
                self.flush_now.notify_one();
            }
            return;
        }
        let me = Arc::clone(self);
        let delay = if sum > 0 {
            Duration::ZERO
        } else {
            self.settle_every
        };
        let sent = self.background.spawn(async move {
            if !delay.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = me.flush_now.notified() => {}
                }
            }
            // Cleared before the sum is taken: a settlement added after this schedules its
            // own write.
            me.flush_scheduled.store(false, Ordering::SeqCst);
            let delta = me.unsent.swap(0, Ordering::SeqCst);
            if delta == 0 {
                return;
            }
            let (ti, _) = me.tpm;
            let args = [ti.to_string(), delta.to_string()];
            let sent: Option<i64> = me
                .state
                .eval(&me.settle, &[&me.keys[1]], &[&args[0], &args[1]])
                .await;
            if sent.is_none() {
                me.state.note_unsent_write();
                me.local.settle(delta);
            }
        });
        if !sent {
            // No runtime to write from: kept on the local share.
            self.flush_scheduled.store(false, Ordering::SeqCst);
            let delta = self.unsent.swap(0, Ordering::SeqCst);
            self.local.settle(delta);
        }
    }
}

fn micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0).max(1))
}

#[async_trait]
impl LimitStore for RedisLimitStore {
    fn try_take(&self, take: Take) -> Taken {
        let inner = &self.inner;
        if let Some(p) = inner.local.paused_for() {
            return Taken::Wait {
                after: p,
                limit: LimitKind::Pause,
                tokens_taken: false,
            };
        }
        if inner.spend(take) {
            Taken::All
        } else {
            Taken::Ask
        }
    }

    async fn take(&self, take: Take) -> Taken {
        let inner = &self.inner;
        let (_, tb) = inner.tpm;
        // A reservation larger than the burst takes the whole bucket (the policy settles the
        // rest afterwards), as the in-process store does.
        let cost = if tb > 0 {
            u64::from(take.tokens).min(tb)
        } else {
            0
        };
        let requests = u64::from(take.request);
        let (block, block_tokens) = inner.blocks;
        if block > 1 && requests == 1 {
            let tokens = if tb > 0 {
                lease_tokens(cost, block, block_tokens, tb)
            } else {
                0
            };
            let sent_at = Instant::now();
            match inner.ask(block, tokens).await {
                None => {
                    inner.state.note_local_call();
                    return inner.local.try_take(take);
                }
                Some((0, _, _)) => {
                    inner.owe(take, cost);
                    let mut l = inner.leases();
                    l.current = Lease {
                        requests: block - 1,
                        tokens: tokens - cost,
                        until: Some(sent_at + inner.lease_ttl),
                    };
                    l.ahead_refused = false;
                    return Taken::All;
                }
                // The block does not fit: ask for exactly this call's cells.
                Some(_) => {}
            }
        }
        match inner.ask(requests, cost).await {
            None => {
                inner.state.note_local_call();
                inner.local.try_take(take)
            }
            Some((0, _, _)) => {
                inner.owe(take, cost);
                Taken::All
            }
            Some((_, wait_us, limit)) => {
                let after = micros(wait_us);
                let limit = match limit {
                    0 => {
                        // Another replica's vendor 429: this replica waits it out locally.
                        self.inner.local.pause(after);
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
        self.inner.settle(delta);
    }

    fn pause(&self, d: Duration) {
        let inner = &self.inner;
        // This replica waits the pause out locally and stops spending its leases at once
        // (paused first: an ask ahead that lands after this sees the pause and keeps nothing).
        inner.local.pause(d);
        {
            let mut l = inner.leases();
            l.current = NO_LEASE;
            l.next = NO_LEASE;
        }
        let me = Arc::clone(inner);
        let ms = d.as_millis().max(1).to_string();
        inner.background.spawn(async move {
            let sent: Option<i64> = me.state.eval(&me.pause, &[&me.keys[2]], &[&ms]).await;
            if sent.is_none() {
                // Paused here already; the other replicas see it only at Redis.
                me.state.note_unsent_write();
            }
        });
    }

    fn paused_for(&self) -> Option<Duration> {
        self.inner.local.paused_for()
    }

    fn balance(&self) -> i64 {
        self.inner.local.balance()
    }
}
