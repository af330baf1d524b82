//! Stored responses of the Responses door (`store: true`): what `previous_response_id`
//! continues from, and what `GET /v1/responses/{id}` and `/input_items` read back.
//!
//! Bounds: in process, at most `max_bytes` of stored documents and each at most `ttl` old; a
//! put that would pass the byte bound evicts the oldest documents first, so the store never
//! grows past it (a document larger than the whole bound is not stored, and the put says so).
//! With `[state] backend = "redis"` every document is also written to Redis with the same
//! `ttl`, so any replica continues any conversation; a replica reads its own memory first and
//! Redis second, and while Redis is unreachable the conversation continues on the replica that
//! has it.
//!
//! Ownership: a document remembers the tenant whose call created it (`""` for anonymous
//! callers) and is only visible to that tenant: another tenant's `previous_response_id` or
//! `GET` finds nothing, exactly as for an id that never existed.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ripcord_core::Message;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

/// The default byte bound of the in-process store (64 MiB).
pub(crate) const DEFAULT_MAX_BYTES: usize = 64 << 20;

/// The default age bound of a stored response (OpenAI keeps them 30 days; a gateway's memory
/// is not an archive).
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// One stored response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredResponse {
    /// The tenant whose call created it (`""`: anonymous).
    pub(crate) owner: String,
    /// The Responses object as it was answered.
    pub(crate) response: Value,
    /// The request's input items, each with its id (for `/input_items`).
    pub(crate) input_items: Vec<Value>,
    /// The conversation up to and including this response's output, as ripcord messages
    /// (without the request's `instructions`, which a continuation does not inherit).
    pub(crate) history: Vec<Message>,
}

/// Where documents also go when the gateway shares state through Redis.
#[async_trait::async_trait]
pub(crate) trait SharedDocuments: Send + Sync + std::fmt::Debug {
    /// Writes `bytes` under `id` for `ttl`; false when it could not.
    async fn put(&self, id: &str, bytes: Vec<u8>, ttl: Duration) -> bool;
    /// The document under `id`, when there is one and Redis answered.
    async fn get(&self, id: &str) -> Option<Vec<u8>>;
    /// Deletes `id`; true when it was there.
    async fn delete(&self, id: &str) -> bool;
}

#[cfg(feature = "redis")]
#[async_trait::async_trait]
impl SharedDocuments for ripcord_redis::RedisDocuments {
    async fn put(&self, id: &str, bytes: Vec<u8>, ttl: Duration) -> bool {
        ripcord_redis::RedisDocuments::put(self, id, &bytes, ttl).await
    }

    async fn get(&self, id: &str) -> Option<Vec<u8>> {
        ripcord_redis::RedisDocuments::get(self, id).await
    }

    async fn delete(&self, id: &str) -> bool {
        ripcord_redis::RedisDocuments::delete(self, id).await
    }
}

#[derive(Debug)]
struct Entry {
    doc: Arc<StoredResponse>,
    bytes: usize,
    /// Which put wrote it: an id stored again leaves its older place in the order behind.
    seq: u64,
}

#[derive(Debug, Default)]
struct Inner {
    docs: HashMap<String, Entry>,
    /// Ids oldest first, with the put that wrote them and when (an id deleted or stored again
    /// keeps its stale place here until it reaches the front, where it is passed over).
    order: VecDeque<(String, u64, Instant)>,
    bytes: usize,
    seq: u64,
}

impl Inner {
    /// Removes `id` when the entry is the one put number `seq` wrote.
    fn remove_if(&mut self, id: &str, seq: u64) {
        if self.docs.get(id).is_some_and(|e| e.seq == seq)
            && let Some(e) = self.docs.remove(id)
        {
            self.bytes -= e.bytes;
        }
    }
}

/// The store of the Responses door.
#[derive(Debug)]
pub(crate) struct ResponseStore {
    inner: Mutex<Inner>,
    max_bytes: usize,
    ttl: Duration,
    shared: Option<Arc<dyn SharedDocuments>>,
}

/// Why a document was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotStored {
    /// Larger than the store's whole byte bound.
    TooLarge,
}

impl ResponseStore {
    /// A store bounded by `max_bytes` and `ttl`, also writing through `shared` when given.
    pub(crate) fn new(
        max_bytes: usize,
        ttl: Duration,
        shared: Option<Arc<dyn SharedDocuments>>,
    ) -> Self {
        ResponseStore {
            inner: Mutex::new(Inner::default()),
            max_bytes,
            ttl,
            shared,
        }
    }

    /// Bytes stored in process now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.inner.lock().map_or(0, |i| i.bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that
        // matters more than losing the store, so a poisoned lock is taken as it is.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stores `doc` under `id`, evicting the oldest documents to stay within the byte bound.
    ///
    /// # Errors
    ///
    /// [`NotStored::TooLarge`] when the document alone passes the bound.
    pub(crate) async fn put(&self, id: &str, doc: StoredResponse) -> Result<(), NotStored> {
        let bytes = serde_json::to_vec(&doc).unwrap_or_default();
        let size = bytes.len() + id.len();
        if size > self.max_bytes {
            return Err(NotStored::TooLarge);
        }
        let now = Instant::now();
        {
            let mut inner = self.lock();
            Self::expire(&mut inner, now, self.ttl);
            if let Some(old) = inner.docs.remove(id) {
                inner.bytes -= old.bytes;
            }
            while inner.bytes + size > self.max_bytes {
                let Some((oldest, seq, _)) = inner.order.pop_front() else {
                    break;
                };
                inner.remove_if(&oldest, seq);
            }
            inner.seq += 1;
            let seq = inner.seq;
            inner.bytes += size;
            inner.order.push_back((id.to_owned(), seq, now));
            inner.docs.insert(
                id.to_owned(),
                Entry {
                    doc: Arc::new(doc),
                    bytes: size,
                    seq,
                },
            );
        }
        if let Some(shared) = &self.shared {
            // Redis failing is not the caller's problem: the document is kept here.
            shared.put(id, bytes, self.ttl).await;
        }
        Ok(())
    }

    /// Drops documents older than `ttl` from the front of the order.
    fn expire(inner: &mut Inner, now: Instant, ttl: Duration) {
        while let Some((id, seq, at)) = inner.order.front() {
            let stale = now.saturating_duration_since(*at) > ttl;
            let gone = inner.docs.get(id).is_none_or(|e| e.seq != *seq);
            if !stale && !gone {
                break;
            }
            if let Some((id, seq, _)) = inner.order.pop_front() {
                inner.remove_if(&id, seq);
            }
        }
    }

    /// The document `id`, when it exists, is younger than `ttl` and belongs to `owner`.
    pub(crate) async fn get(&self, id: &str, owner: &str) -> Option<Arc<StoredResponse>> {
        let now = Instant::now();
        let local = {
            let mut inner = self.lock();
            Self::expire(&mut inner, now, self.ttl);
            inner.docs.get(id).map(|e| Arc::clone(&e.doc))
        };
        let doc = match local {
            Some(d) => Some(d),
            None => match &self.shared {
                Some(shared) => shared
                    .get(id)
                    .await
                    .and_then(|b| serde_json::from_slice::<StoredResponse>(&b).ok())
                    .map(Arc::new),
                None => None,
            },
        };
        doc.filter(|d| d.owner == owner)
    }

    /// Deletes `id` when it belongs to `owner`; true when it did.
    pub(crate) async fn delete(&self, id: &str, owner: &str) -> bool {
        if self.get(id, owner).await.is_none() {
            return false;
        }
        {
            let mut inner = self.lock();
            if let Some(e) = inner.docs.remove(id) {
                inner.bytes -= e.bytes;
            }
        }
        if let Some(shared) = &self.shared {
            shared.delete(id).await;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(owner: &str, text: &str) -> StoredResponse {
        StoredResponse {
            owner: owner.to_owned(),
            response: json!({"id": "x", "output_text": text}),
            input_items: vec![json!({"type": "message", "role": "user", "content": text})],
            history: vec![Message::user(text)],
        }
    }

    #[tokio::test]
    async fn a_document_is_only_visible_to_its_owner() {
        let s = ResponseStore::new(1 << 20, DEFAULT_TTL, None);
        s.put("resp_1", doc("acme", "hi")).await.unwrap();
        assert!(s.get("resp_1", "acme").await.is_some());
        assert!(s.get("resp_1", "other").await.is_none());
        assert!(s.get("resp_1", "").await.is_none());
        assert!(!s.delete("resp_1", "other").await);
        assert!(s.delete("resp_1", "acme").await);
        assert!(s.get("resp_1", "acme").await.is_none());
        assert_eq!(s.bytes(), 0);
    }

    #[tokio::test]
    async fn a_full_store_evicts_the_oldest_and_never_passes_its_bound() {
        let one = serde_json::to_vec(&doc("t", &"a".repeat(100)))
            .unwrap()
            .len()
            + 6;
        let s = ResponseStore::new(one * 3, DEFAULT_TTL, None);
        for i in 0..10 {
            s.put(&format!("resp_{i}"), doc("t", &"a".repeat(100)))
                .await
                .unwrap();
            assert!(s.bytes() <= one * 3, "{} > {}", s.bytes(), one * 3);
        }
        assert!(
            s.get("resp_0", "t").await.is_none(),
            "the oldest went first"
        );
        assert!(s.get("resp_9", "t").await.is_some());
        assert!(s.get("resp_7", "t").await.is_some());
        let huge = doc("t", &"a".repeat(one * 4));
        assert_eq!(s.put("resp_big", huge).await, Err(NotStored::TooLarge));
    }

    #[tokio::test(start_paused = true)]
    async fn documents_expire_after_their_ttl() {
        let s = ResponseStore::new(1 << 20, Duration::from_secs(60), None);
        s.put("resp_1", doc("t", "hi")).await.unwrap();
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(s.get("resp_1", "t").await.is_some());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(s.get("resp_1", "t").await.is_none());
        assert_eq!(s.bytes(), 0);
    }
}
