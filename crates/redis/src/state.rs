//! [`RedisState`]: the shared connection, bounded Redis calls, and the degraded flag.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, Script};
use ripcord_core::{Error, ErrorKind, ModelId};

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
/// `tracing::warn!` says so (not one per request) and [`RedisState::degradations`] counts it.
/// While degraded, calls skip Redis entirely except for one try per
/// [`StateOptions::retry_interval`]; the connection manager reconnects, and the first Redis
/// operation that succeeds again clears the flag (with one `tracing::info!`).
#[derive(Clone)]
pub struct RedisState {
    shared: Arc<Shared>,
}

struct Shared {
    conn: ConnectionManager,
    op_timeout: Duration,
    retry_interval: Duration,
    epoch: std::time::Instant,
    /// Milliseconds since `epoch` before which a degraded handle does not try Redis.
    retry_at: AtomicU64,
    degraded: AtomicBool,
    degradations: AtomicU64,
    local_calls: AtomicU64,
}

impl fmt::Debug for RedisState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL (and any password in it) is deliberately not kept nor shown.
        f.debug_struct("RedisState")
            .field("op_timeout", &self.shared.op_timeout)
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
        if options.op_timeout.is_zero() || options.connect_timeout.is_zero() {
            return Err(StateError::new(
                "op_timeout and connect_timeout must be greater than zero",
            ));
        }
        let client = redis::Client::open(url)
            .map_err(|e| StateError::new(format!("invalid redis URL: {}", e.category())))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(options.connect_timeout)
            .set_response_timeout(options.connect_timeout)
            .set_number_of_retries(1)
            .set_max_delay(200);
        let conn = tokio::time::timeout(
            options.connect_timeout,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| StateError::new("connecting timed out"))?
        .map_err(|e| StateError::new(format!("cannot connect: {e}")))?;
        Ok(RedisState {
            shared: Arc::new(Shared {
                conn,
                op_timeout: options.op_timeout,
                retry_interval: options.retry_interval,
                epoch: std::time::Instant::now(),
                retry_at: AtomicU64::new(0),
                degraded: AtomicBool::new(false),
                degradations: AtomicU64::new(0),
                local_calls: AtomicU64::new(0),
            }),
        })
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

    /// Runs a Lua script (EVALSHA, falling back to EVAL on NOSCRIPT), bounded by the op
    /// timeout. `None` means Redis failed: the caller uses its local state.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
    ) -> Option<T> {
        if self.is_degraded() && self.now_ms() < self.shared.retry_at.load(Ordering::Relaxed) {
            return None;
        }
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        for a in args {
            inv.arg(*a);
        }
        let mut conn = self.shared.conn.clone();
        match tokio::time::timeout(self.shared.op_timeout, inv.invoke_async::<T>(&mut conn)).await {
            Ok(Ok(v)) => {
                self.healthy();
                Some(v)
            }
            Ok(Err(e)) => {
                self.failed(e.category());
                None
            }
            Err(_) => {
                self.failed("operation timed out");
                None
            }
        }
    }

    fn healthy(&self) {
        if self.shared.degraded.swap(false, Ordering::Relaxed) {
            tracing::info!("ripcord.redis_state_restored: shared state on Redis is back");
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.shared.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn failed(&self, why: &str) {
        let retry = u64::try_from(self.shared.retry_interval.as_millis()).unwrap_or(u64::MAX);
        self.shared
            .retry_at
            .store(self.now_ms().saturating_add(retry), Ordering::Relaxed);
        if !self.shared.degraded.swap(true, Ordering::Relaxed) {
            self.shared.degradations.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                reason = why,
                "ripcord.redis_state_degraded: Redis unreachable, using local state until it is back"
            );
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

/// Tags an error with the link it came from, unless it already names one.
pub(crate) fn tag(e: Error, id: &ModelId) -> Error {
    if e.provider().is_some() {
        e
    } else {
        e.with_provider(id.name.clone(), id.model.clone())
    }
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
    fn keys_are_namespaced_versioned_and_hash_tagged() {
        assert_eq!(
            key("openai", "breaker:open"),
            "ripcord:v1:{openai}:breaker:open"
        );
        assert_eq!(key("a{b}", "x"), "ripcord:v1:{a_b_}:x");
    }
}
