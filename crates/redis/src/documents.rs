//! [`RedisDocuments`]: small documents shared by every replica, each with a time to live (the
//! gateway's stored responses, so any replica continues any conversation).
//!
//! A document is one Redis string under `ripcord:v1:doc:<kind>:<id>`, written with `SET … PX`
//! and read with `GET`. Every operation is bounded by the state's op timeout and degrades like
//! the policies' stores do: a failure or a timeout answers "not written" / "not found" and the
//! caller keeps its own copy; nothing waits on a Redis that is down.

use std::time::Duration;

use crate::state::{KEY_PREFIX, RedisState};

/// Documents of one kind on Redis.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> Result<(), ripcord_redis::StateError> {
/// use std::time::Duration;
/// use ripcord_redis::{RedisDocuments, RedisState};
/// let state = RedisState::connect("redis://127.0.0.1:6379").await?;
/// let docs = RedisDocuments::new(state, "responses");
/// docs.put("resp_1", br#"{"hello":"world"}"#, Duration::from_secs(60)).await;
/// assert!(docs.get("resp_1").await.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisDocuments {
    state: RedisState,
    prefix: String,
}

impl RedisDocuments {
    /// Documents of `kind` (a short name, part of every key) on `state`.
    pub fn new(state: RedisState, kind: &str) -> Self {
        RedisDocuments {
            state,
            prefix: format!("{KEY_PREFIX}:doc:{kind}:"),
        }
    }

    fn key(&self, id: &str) -> String {
        format!("{}{id}", self.prefix)
    }

    /// Writes `bytes` under `id`, expiring after `ttl` (at least 1 ms); `false` when Redis
    /// did not take it.
    pub async fn put(&self, id: &str, bytes: &[u8], ttl: Duration) -> bool {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(id)).arg(bytes).arg("PX").arg(ms);
        self.state.query::<()>(&cmd).await.is_some()
    }

    /// The document under `id`; `None` when there is none, it expired, or Redis did not answer.
    pub async fn get(&self, id: &str) -> Option<Vec<u8>> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.key(id));
        self.state.query::<Option<Vec<u8>>>(&cmd).await.flatten()
    }

    /// Deletes `id`; `true` when Redis said it was there.
    pub async fn delete(&self, id: &str) -> bool {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.key(id));
        self.state.query::<u64>(&cmd).await.is_some_and(|n| n > 0)
    }
}
