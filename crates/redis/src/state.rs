//! [`RedisState`]: the shared connection, bounded Redis calls, and the degraded flag.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, Script};
use ripcord_core::{Error, ErrorKind};
use tokio::sync::Notify;

/// The key prefix: every key this crate writes starts with it (namespaced and versioned).
pub const KEY_PREFIX: &str = "ripcord:v1";

/// Connection settings for [`RedisState::connect_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateOptions {
    /// The longest one Redis operation may take before the caller falls back to local state
    /// (default 50 ms).
    pub op_timeout: Duration,
    /// The longest the first connection may take (default 2 s).
    pub connect_timeout: Duration,
    /// While Redis is unreachable, how often a call tries it again; calls in between go
    /// straight to local state without waiting on Redis (default 1 s).
    pub retry_interval: Duration,
}

impl Default for StateOptions {
    fn default() -> Self {
        StateOptions {
            op_timeout: Duration::from_millis(50),
            connect_timeout: Duration::from_secs(2),
            retry_interval: Duration::from_secs(1),
        }
    }
}

/// Why [`RedisState::connect`] failed.
#[derive(Debug)]
pub struct StateError {
    reason: String,
}

impl StateError {
    fn new(reason: impl Into<String>) -> Self {
        StateError {
            reason: reason.into(),
        }
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "redis state: {}", self.reason)
    }
}

impl std::error::Error for StateError {}

/// A shared handle on one Redis (cheap to clone), used by every shared decorator of a process.
///
/// Every operation is bounded by [`StateOptions::op_timeout`]; when one fails or times out the
/// handle turns *degraded*: the decorators serve calls on their local fallback state, a single
/// `tracing::warn!` event `ripcord.state_degraded` says so (not one per request) and
/// [`RedisState::degradations`] counts it; `ripcord-telemetry` turns the event into the
/// OpenTelemetry counter `ripcord.state.degradations` and the gauge `ripcord.state.degraded`.
/// While degraded, calls skip Redis entirely except for one try per
/// [`StateOptions::retry_interval`]; the connection manager reconnects, and the first Redis
/// operation that succeeds again clears the flag (with one `ripcord.state_restored` event).
///
/// [`RedisState::connect`] needs Redis up front; [`RedisState::open`] does not: it connects in
/// the background on first use, so a replica starts (on local state) while Redis is down.
#[derive(Clone)]
pub struct RedisState {
    shared: Arc<Shared>,
}

struct Shared {
    client: redis::Client,
    manager_config: ConnectionManagerConfig,
    connect_timeout: Duration,
    /// Set once the first connection is made; the manager reconnects by itself afterwards.
    conn: OnceLock<ConnectionManager>,
    /// A background connection attempt is running.
    connecting: AtomicBool,
    /// Woken when a connection attempt ends.
    attempt_done: Notify,
    op_timeout: Duration,
    retry_interval: Duration,
    epoch: std::time::Instant,
    /// Milliseconds since `epoch` before which a degraded handle does not try Redis.
    retry_at: AtomicU64,
    degraded: AtomicBool,
    degradations: AtomicU64,
    local_calls: AtomicU64,
    unsent_writes: AtomicU64,
    /// Failed operations so far: a reply only marks Redis healthy when none failed after
    /// its request was sent.
    failures: AtomicU64,
}

impl fmt::Debug for RedisState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL (and any password in it) is deliberately not shown.
        f.debug_struct("RedisState")
            .field("op_timeout", &self.shared.op_timeout)
            .field("connected", &self.shared.conn.get().is_some())
            .field("degraded", &self.is_degraded())
            .field("degradations", &self.degradations())
            .finish_non_exhaustive()
    }
}

impl RedisState {
    /// Connects to `url` (`redis://host:port[/db]`) with default [`StateOptions`].
    ///
    /// # Errors
    ///
    /// [`StateError`] when the URL is malformed or the server does not answer in time.
    pub async fn connect(url: &str) -> Result<Self, StateError> {
        Self::connect_with(url, StateOptions::default()).await
    }

    /// Connects to `url` with explicit options.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the URL is malformed, an option is zero, or the server does not
    /// answer within `connect_timeout`.
    pub async fn connect_with(url: &str, options: StateOptions) -> Result<Self, StateError> {
        let state = Self::open(url, options)?;
        let shared = &state.shared;
        let conn = tokio::time::timeout(
            options.connect_timeout,
            ConnectionManager::new_with_config(
                shared.client.clone(),
                shared.manager_config.clone(),
            ),
        )
        .await
        .map_err(|_| StateError::new("connecting timed out"))?
        .map_err(|e| StateError::new(format!("cannot connect: {e}")))?;
        let _ = shared.conn.set(conn);
        Ok(state)
    }

    /// A handle on `url` that connects lazily: no I/O happens here, and Redis being down is
    /// not an error. The first operation starts connecting in the background (each waits at
    /// most `op_timeout` for it); until the connection is up, calls run on local state, and a
    /// failed attempt degrades the handle (one warning) and is retried after
    /// `retry_interval`. Operations need a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the URL is malformed or an option is zero.
    pub fn open(url: &str, options: StateOptions) -> Result<Self, StateError> {
        if options.op_timeout.is_zero() || options.connect_timeout.is_zero() {
            return Err(StateError::new(
                "op_timeout and connect_timeout must be greater than zero",
            ));
        }
        let client = redis::Client::open(url)
            .map_err(|e| StateError::new(format!("invalid redis URL: {}", e.category())))?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(options.connect_timeout)
            .set_response_timeout(options.connect_timeout)
            .set_number_of_retries(1)
            .set_max_delay(200);
        Ok(RedisState {
            shared: Arc::new(Shared {
                client,
                manager_config,
                connect_timeout: options.connect_timeout,
                conn: OnceLock::new(),
                connecting: AtomicBool::new(false),
                attempt_done: Notify::new(),
                op_timeout: options.op_timeout,
                retry_interval: options.retry_interval,
                epoch: std::time::Instant::now(),
                retry_at: AtomicU64::new(0),
                degraded: AtomicBool::new(false),
                degradations: AtomicU64::new(0),
                local_calls: AtomicU64::new(0),
                unsent_writes: AtomicU64::new(0),
                failures: AtomicU64::new(0),
            }),
        })
    }

    /// Makes sure a connection is up, waiting at most `connect_timeout` for it; `true` when
    /// Redis answers a `PING`. Starting a replica with it connects before the first request
    /// (and shows whether Redis is reachable); it never fails the caller.
    pub async fn ready(&self) -> bool {
        let limit = self.shared.connect_timeout;
        let attempt = async {
            let seen = self.shared.failures.load(Ordering::Acquire);
            let conn = self.connection(limit).await?;
            let mut conn = conn;
            let ping: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
            match ping {
                Ok(_) => {
                    self.shared.answered(seen);
                    Some(())
                }
                Err(e) => {
                    self.shared.failed(e.category());
                    None
                }
            }
        };
        match tokio::time::timeout(limit, attempt).await {
            Ok(r) => r.is_some(),
            Err(_) => {
                self.shared.failed("operation timed out");
                false
            }
        }
    }

    /// Starts the background re-probe, when called inside a Tokio runtime: every
    /// `retry_interval` (held between 100 ms and 5 s) a `PING` bounded like [`Self::ready`],
    /// so [`Self::is_degraded`] (and a gateway's `/readyz`) follows Redis going away and
    /// coming back without waiting for a call to find out. The task holds no strong
    /// reference: it ends once every clone of this handle is dropped. Returns `None` outside
    /// a runtime (nothing is started).
    pub fn spawn_reprobe(&self) -> Option<tokio::task::JoinHandle<()>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let every = self
            .shared
            .retry_interval
            .clamp(Duration::from_millis(100), Duration::from_secs(5));
        let weak = Arc::downgrade(&self.shared);
        Some(runtime.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is at once; the caller's own first use connects.
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                let _ = RedisState { shared }.ready().await;
            }
        }))
    }

    /// Deletes every key of `link` (`ripcord:v1:{link}:*`: its breaker, rate-limit and other
    /// shared state), so it starts over for every replica. For harnesses that run one scenario
    /// after another on one Redis (`cargo xtask chaos`); it scans, so it is not for the request
    /// path. Returns the keys deleted, or `None` when Redis did not answer.
    pub async fn forget_link(&self, link: &str) -> Option<u64> {
        const FORGET: &str = "local n = 0\n\
local cursor = '0'\n\
repeat\n\
  local r = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 256)\n\
  cursor = r[1]\n\
  for _, k in ipairs(r[2]) do redis.call('DEL', k); n = n + 1 end\n\
until cursor == '0'\n\
return n\n";
        // The link's name is matched literally: glob characters in it are escaped.
        let literal: String = link
            .chars()
            .flat_map(|c| {
                let escape = matches!(c, '*' | '?' | '[' | ']' | '\\');
                escape.then_some('\\').into_iter().chain([c])
            })
            .collect();
        let pattern = key(&literal, "*");
        let n: Option<i64> = self.eval(&Script::new(FORGET), &[], &[&pattern]).await;
        n.map(|n| u64::try_from(n).unwrap_or(0))
    }

    /// Whether the last Redis operation failed (the decorators are on local state).
    pub fn is_degraded(&self) -> bool {
        self.shared.degraded.load(Ordering::Relaxed)
    }

    /// How many times Redis became unreachable (each outage counts once).
    pub fn degradations(&self) -> u64 {
        self.shared.degradations.load(Ordering::Relaxed)
    }

    /// Calls served on local fallback state so far.
    pub fn local_calls(&self) -> u64 {
        self.shared.local_calls.load(Ordering::Relaxed)
    }

    pub(crate) fn note_local_call(&self) {
        self.shared.local_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes sent without making a call wait (a limiter's summed settlements or a pause)
    /// that Redis did not take; what they carried was kept on this replica's local state.
    pub fn unsent_writes(&self) -> u64 {
        self.shared.unsent_writes.load(Ordering::Relaxed)
    }

    pub(crate) fn note_unsent_write(&self) {
        self.shared.unsent_writes.fetch_add(1, Ordering::Relaxed);
    }

    /// The connection, starting one in the background when there is none yet and waiting at
    /// most `wait` for it. `None`: not connected (yet).
    async fn connection(&self, wait: Duration) -> Option<ConnectionManager> {
        if let Some(c) = self.shared.conn.get() {
            return Some(c.clone());
        }
        // Created before the attempt can end, so its wake-up cannot be missed.
        let done = self.shared.attempt_done.notified();
        if !self.shared.connecting.swap(true, Ordering::AcqRel) {
            let shared = Arc::clone(&self.shared);
            tokio::spawn(async move {
                let attempt = tokio::time::timeout(
                    shared.connect_timeout,
                    ConnectionManager::new_with_config(
                        shared.client.clone(),
                        shared.manager_config.clone(),
                    ),
                )
                .await;
                match attempt {
                    Ok(Ok(conn)) => {
                        let _ = shared.conn.set(conn);
                        // Callers that gave up waiting went local; the next one uses Redis.
                        shared.retry_at.store(0, Ordering::Relaxed);
                        shared.healthy();
                    }
                    Ok(Err(e)) => shared.failed(e.category()),
                    Err(_) => shared.failed("connecting timed out"),
                }
                shared.connecting.store(false, Ordering::Release);
                shared.attempt_done.notify_waiters();
            });
        }
        if self.shared.conn.get().is_none() {
            let _ = tokio::time::timeout(wait, done).await;
        }
        let conn = self.shared.conn.get().cloned();
        if conn.is_none() {
            // Still connecting (or refused): later calls go straight to local state until the
            // attempt succeeds or `retry_interval` passes, instead of each waiting again.
            self.shared.failed("not connected");
        }
        conn
    }

    /// Runs one command, bounded by the op timeout. `None` means Redis failed (the handle
    /// degrades as for any operation) or is skipped while degraded.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Option<T> {
        self.bounded(|mut conn| async move { cmd.query_async::<T>(&mut conn).await })
            .await
    }

    /// Runs a Lua script (EVALSHA, falling back to EVAL on NOSCRIPT), bounded by the op
    /// timeout. `None` means Redis failed: the caller uses its local state.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
    ) -> Option<T> {
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        for a in args {
            inv.arg(*a);
        }
        self.bounded(|mut conn| async move { inv.invoke_async::<T>(&mut conn).await })
            .await
    }

    /// Runs `op` on the connection within the op timeout (connecting included), keeping the
    /// degraded flag: skipped while degraded until the retry time, a failure or a timeout
    /// degrades, an answer heals.
    async fn bounded<T, F, Fut>(&self, op: F) -> Option<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let shared = &self.shared;
        if self.is_degraded() && shared.now_ms() < shared.retry_at.load(Ordering::Relaxed) {
            return None;
        }
        let started = tokio::time::Instant::now();
        let seen = shared.failures.load(Ordering::Acquire);
        let conn = self.connection(shared.op_timeout).await?;
        let left = shared.op_timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, op(conn)).await {
            Ok(Ok(v)) => {
                shared.answered(seen);
                Some(v)
            }
            Ok(Err(e)) => {
                shared.failed(e.category());
                None
            }
            Err(_) => {
                shared.failed("operation timed out");
                None
            }
        }
    }
}

impl Shared {
    fn healthy(&self) {
        if self.degraded.swap(false, Ordering::Relaxed) {
            tracing::info!(
                backend = "redis",
                detail = "shared state on Redis is back",
                message = ripcord_core::telemetry::event::STATE_RESTORED
            );
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A reply to a request sent when `seen` operations had failed. A reply sent before a
    /// failure can be read after it (the server answered, then went away): it does not mean
    /// Redis is back, and must not clear the degraded state the failure set.
    fn answered(&self, seen: u64) {
        if self.failures.load(Ordering::Acquire) == seen {
            self.healthy();
        }
    }

    fn failed(&self, why: &str) {
        self.failures.fetch_add(1, Ordering::AcqRel);
        let retry = u64::try_from(self.retry_interval.as_millis()).unwrap_or(u64::MAX);
        self.retry_at
            .store(self.now_ms().saturating_add(retry), Ordering::Relaxed);
        if !self.degraded.swap(true, Ordering::Relaxed) {
            self.degradations.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                backend = "redis",
                reason = why,
                detail = "Redis unreachable, using local state until it is back",
                message = ripcord_core::telemetry::event::STATE_DEGRADED
            );
        }
    }
}

/// Redis writes a store sends without making the call wait (settlements, pauses): each runs
/// in its own task, bounded by the op timeout; [`Background::idle`] waits for the ones in
/// flight (tests, and a replica that wants its writes out before it stops).
#[derive(Debug, Default)]
pub(crate) struct Background {
    pending: AtomicU64,
    done: Notify,
}

impl Background {
    /// Runs `write` in a task; `false` when there is no runtime to run it on (the caller keeps
    /// the change locally instead).
    pub(crate) fn spawn<F>(self: &Arc<Self>, write: F) -> bool
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        self.pending.fetch_add(1, Ordering::AcqRel);
        let me = Arc::clone(self);
        rt.spawn(async move {
            write.await;
            me.pending.fetch_sub(1, Ordering::AcqRel);
            me.done.notify_waiters();
        });
        true
    }

    /// Waits until no write is in flight.
    pub(crate) async fn idle(&self) {
        loop {
            let done = self.done.notified();
            if self.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            done.await;
        }
    }
}

/// `ripcord:v1:{link}:<what>`: the link is a Redis Cluster hash tag, so all keys of a link
/// share one slot (the scripts touch several at once). Braces in a name are replaced.
pub(crate) fn key(link: &str, what: &str) -> String {
    let clean: String = link
        .chars()
        .map(|c| if c == '{' || c == '}' { '_' } else { c })
        .collect();
    format!("{KEY_PREFIX}:{{{clean}}}:{what}")
}

/// A configuration error of a shared decorator, as a core error.
pub(crate) fn config_error(policy: &str, setting: &str, reason: &str) -> Error {
    Error::new(
        ErrorKind::InvalidRequest,
        format!("invalid policy: {policy}.{setting}: {reason}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_sent_before_a_failure_does_not_end_the_degraded_state() {
        let state = RedisState::open("redis://127.0.0.1:9", StateOptions::default()).unwrap();
        let shared = &state.shared;
        let sent = shared.failures.load(Ordering::Acquire);
        shared.failed("connection refused");
        assert!(state.is_degraded());
        // The late reply to the request sent before the failure.
        shared.answered(sent);
        assert!(state.is_degraded());
        // A reply to a request sent after it: Redis is back.
        shared.answered(shared.failures.load(Ordering::Acquire));
        assert!(!state.is_degraded());
        assert_eq!(state.degradations(), 1);
    }

    #[test]
    fn keys_are_namespaced_versioned_and_hash_tagged() {
        assert_eq!(
            key("openai", "breaker:open"),
            "ripcord:v1:{openai}:breaker:open"
        );
        assert_eq!(key("a{b}", "x"), "ripcord:v1:{a_b_}:x");
    }
}
