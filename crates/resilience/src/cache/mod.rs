//! An in-memory response cache: TTL plus LRU, keyed by the canonical request.
//!
//! The key is the request serialised as JSON with object keys sorted at every level (so two
//! equal requests built in different orders share an entry), prefixed by the tenant unless
//! turned off. Only full-quality answers are stored: a degraded answer (a fallback served it)
//! or the static last-resort reply is never cached — caching it would keep serving the
//! degraded answer after the primary recovered. Answers cut by the content filter are not
//! cached either.
//!
//! Streams are served from the cache as a replay, and stored when they finish normally.

mod policy;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, FinishReason, Result,
    StreamEvent, stream,
};
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

pub use policy::{CachePolicy, CachePolicyBuilder};

use crate::stream_util::{End, Observed, StreamObserver};

/// A model with a response cache in front of it.
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_resilience::{CachePolicy, ChatModelExt};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let model = ScriptedModel::new("primary").reply("42").with_cache(CachePolicy::default());
/// let req = ChatRequest::user("The answer?");
/// model.chat(&req, &Context::new()).await.unwrap();
/// model.chat(&req, &Context::new()).await.unwrap();
/// assert_eq!(model.get_ref().calls(), 1);
/// assert_eq!(model.stats().hits, 1);
/// # }
/// ```
#[derive(Debug)]
pub struct Cache<M> {
    inner: M,
    policy: CachePolicy,
    store: Arc<Store>,
}

/// Counters of a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct CacheStats {
    /// Answers served from the cache.
    pub hits: u64,
    /// Calls that went to the model.
    pub misses: u64,
    /// Entries stored now.
    pub entries: usize,
    /// Entries evicted to stay within capacity.
    pub evictions: u64,
}

#[derive(Debug)]
struct Entry {
    resp: ChatResponse,
    expires: Instant,
    tick: u64,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<Arc<str>, Entry>,
    /// Recency order: tick → key (the smallest tick is the least recently used).
    order: BTreeMap<u64, Arc<str>>,
    tick: u64,
}

#[derive(Debug)]
struct Store {
    ttl: std::time::Duration,
    capacity: usize,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl Store {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn get(&self, key: &str, now: Instant) -> Option<ChatResponse> {
        let mut s = self.lock();
        let inner = &mut *s;
        let hit = match inner.map.get_mut(key) {
            Some(e) if e.expires > now => {
                inner.tick += 1;
                if let Some(k) = inner.order.remove(&e.tick) {
                    inner.order.insert(inner.tick, k);
                }
                e.tick = inner.tick;
                Some(e.resp.clone())
            }
            Some(_) => {
                if let Some((k, e)) = inner.map.remove_entry(key) {
                    inner.order.remove(&e.tick);
                    drop(k);
                }
                None
            }
            None => None,
        };
        match hit {
            Some(_) => self.hits.fetch_add(1, Ordering::Relaxed),
            None => self.misses.fetch_add(1, Ordering::Relaxed),
        };
        hit
    }

    fn put(&self, key: Arc<str>, resp: ChatResponse, now: Instant) {
        let mut s = self.lock();
        let inner = &mut *s;
        if let Some(old) = inner.map.remove(&key) {
            inner.order.remove(&old.tick);
        }
        while inner.map.len() >= self.capacity {
            let Some((_, victim)) = inner.order.pop_first() else {
                break;
            };
            inner.map.remove(&victim);
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        inner.tick += 1;
        let tick = inner.tick;
        inner.order.insert(tick, key.clone());
        inner.map.insert(
            key,
            Entry {
                resp,
                expires: now + self.ttl,
                tick,
            },
        );
    }
}

/// Writes `v` as JSON with every object's keys sorted.
fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            out.push('{');
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(&Value::String(k.clone()), out);
                out.push(':');
                if let Some(x) = map.get(k) {
                    canonical_json(x, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// The cache key of a request: `tenant \n canonical JSON`.
pub(crate) fn cache_key(req: &ChatRequest, tenant: Option<&str>) -> Option<String> {
    let value = serde_json::to_value(req).ok()?;
    let mut key = String::with_capacity(256);
    key.push_str(tenant.unwrap_or(""));
    key.push('\n');
    canonical_json(&value, &mut key);
    Some(key)
}

fn cacheable(resp: &ChatResponse) -> bool {
    !resp.provenance.degraded
        && !resp.provenance.static_reply
        && !matches!(resp.finish_reason, FinishReason::ContentFilter)
}

impl<M: ChatModel> Cache<M> {
    /// Wraps `inner` with an empty cache.
    pub fn new(inner: M, policy: CachePolicy) -> Self {
        let store = Arc::new(Store {
            ttl: policy.ttl,
            capacity: policy.capacity,
            inner: Mutex::new(Inner::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        });
        Cache {
            inner,
            policy,
            store,
        }
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, mutably.
    pub fn get_mut(&mut self) -> &mut M {
        &mut self.inner
    }

    /// Unwraps the model.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// Hit, miss and eviction counts.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.store.hits.load(Ordering::Relaxed),
            misses: self.store.misses.load(Ordering::Relaxed),
            entries: self.store.lock().map.len(),
            evictions: self.store.evictions.load(Ordering::Relaxed),
        }
    }

    /// Drops every entry.
    pub fn clear(&self) {
        let mut s = self.store.lock();
        s.map.clear();
        s.order.clear();
    }

    fn key(&self, req: &ChatRequest, ctx: &Context) -> Option<Arc<str>> {
        let tenant = if self.policy.per_tenant {
            ctx.tenant()
        } else {
            None
        };
        cache_key(req, tenant).map(Arc::from)
    }

    fn hit(&self, key: &str) -> Option<ChatResponse> {
        let mut resp = self.store.get(key, self.policy.clock.now())?;
        // Nothing was attempted for this answer.
        resp.provenance.attempts.clear();
        tracing::debug!(ripcord.link = %self.inner.id().name, message = ripcord_core::telemetry::event::CACHE_HIT);
        Some(resp)
    }
}

/// Assembles a streamed answer and stores it when it finishes normally.
struct CacheObserver {
    store: Arc<Store>,
    clock: crate::SharedClock,
    key: Option<Arc<str>>,
    collector: stream::Collector,
}

impl StreamObserver for CacheObserver {
    fn on_item(&mut self, item: Result<StreamEvent>) -> Result<StreamEvent> {
        if let Ok(ev) = &item {
            self.collector.push(ev.clone());
        }
        item
    }

    fn on_end(&mut self, end: End<'_>) {
        if let (End::Finished, Some(key)) = (end, self.key.take()) {
            let collector = std::mem::take(&mut self.collector);
            if let Ok(resp) = collector.finish()
                && cacheable(&resp)
            {
                self.store.put(key, resp, self.clock.now());
            }
        }
    }
}

#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Cache<M> {
    // `bounds_itself` forwards to this model: a cache hit returns at once.
    inner_model!(inner: M);

    /// Deliberately `None`: a hit can serve a request the inner model would refuse, and the
    /// refusal hook does not see the request to look it up.
    fn decorated_refusal(&self, _ctx: &Context) -> Option<Error> {
        None
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let key = self.key(req, ctx);
        if let Some(resp) = key.as_deref().and_then(|k| self.hit(k)) {
            return Ok(resp);
        }
        let resp = self.inner.chat(req, ctx).await?;
        if let Some(key) = key
            && cacheable(&resp)
        {
            self.store.put(key, resp.clone(), self.policy.clock.now());
        }
        Ok(resp)
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let key = self.key(req, ctx);
        if let Some(resp) = key.as_deref().and_then(|k| self.hit(k)) {
            return Ok(stream::from_response(resp));
        }
        let s = self.inner.stream(req, ctx).await?;
        Ok(Observed::boxed(
            s,
            CacheObserver {
                store: self.store.clone(),
                clock: self.policy.clock.clone(),
                key,
                collector: stream::Collector::new(),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use ripcord_core::{ChatRequest, ResponseFormat};
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_canonical_and_per_tenant() {
        let a = ChatRequest::user("x").with_response_format(ResponseFormat::JsonSchema {
            name: "s".into(),
            schema: json!({"b": 1, "a": {"d": 2, "c": 3}}),
            strict: false,
        });
        let key = cache_key(&a, Some("t1")).unwrap();
        assert!(key.contains(r#"{"a":{"c":3,"d":2},"b":1}"#), "{key}");
        assert_ne!(key, cache_key(&a, Some("t2")).unwrap());
        assert_ne!(key, cache_key(&ChatRequest::user("y"), Some("t1")).unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_and_lru_evict() {
        let store = Store {
            ttl: std::time::Duration::from_secs(10),
            capacity: 2,
            inner: Mutex::new(Inner::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        };
        let now = Instant::now();
        store.put("a".into(), ChatResponse::new("A"), now);
        store.put("b".into(), ChatResponse::new("B"), now);
        assert!(store.get("a", now).is_some()); // a is now more recent than b
        store.put("c".into(), ChatResponse::new("C"), now);
        assert!(store.get("b", now).is_none()); // b was least recently used
        assert!(store.get("a", now).is_some());
        assert!(
            store
                .get("a", now + std::time::Duration::from_secs(11))
                .is_none()
        ); // expired
        assert_eq!(store.evictions.load(Ordering::Relaxed), 1);
    }
}
