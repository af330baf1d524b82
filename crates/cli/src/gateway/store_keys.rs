//! Keys kept in the store (`[store] keys = true`, issue 38), beside the config file's keys.
//!
//! One [`KeyDirectory`] per process reads every key from the database at start and again every
//! `keys_poll_ms` (default 1 s), and at once on the replica where an admin endpoint changed one.
//! That is the bound on how soon a replica sees a key made, changed, rotated or revoked: one
//! poll interval plus one query. Expiry and a rotation's grace period are checked against the
//! clock at every request, so they end on time whatever the poll. While the database is
//! unreachable the directory keeps the keys it last read (and says so once); nothing can change
//! them meanwhile, since every change goes through the database.
//!
//! Each gateway build (`StoreKeys`, one per [`GatewayState`](super::GatewayState)) turns the
//! directory's keys into accepted keys with their routes, limits and budget, the first time
//! a request needs them after a change; a key whose row did not change keeps its limiter.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ripcord_core::ChatModel;
use ripcord_store::{Store, StoreError, StoredKey};
use tokio::sync::watch;

use super::{GatewayRoute, Key};
use crate::config::{GatewayKey, KeyControls};

type MakeLimited =
    dyn Fn(&GatewayKey, Option<u64>) -> Result<Option<Arc<dyn ChatModel>>, String> + Send + Sync;

/// What a gateway build makes of a store key's limits: the model behind its `rpm`/`tpm` and
/// budget (`None` for a key without any).
#[derive(Clone)]
pub struct KeyLimiter(Arc<MakeLimited>);

impl KeyLimiter {
    /// A limiter that makes a key's model with `f` (its settings as a config key, its budget).
    pub fn new(
        f: impl Fn(&GatewayKey, Option<u64>) -> Result<Option<Arc<dyn ChatModel>>, String>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        KeyLimiter(Arc::new(f))
    }
}

impl std::fmt::Debug for KeyLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyLimiter")
    }
}

/// The budget account of store key `id`'s own budget (`budget_tokens`).
pub fn budget_account(id: &str) -> String {
    format!("key:{id}")
}

/// The store's keys as last read.
#[derive(Debug)]
struct Snapshot {
    generation: u64,
    keys: Vec<StoredKey>,
}

/// Reads the store's keys and keeps every gateway build up to date (see the module docs).
#[derive(Debug, Clone)]
pub struct KeyDirectory {
    store: Store,
    tx: Arc<watch::Sender<Arc<Snapshot>>>,
    rx: watch::Receiver<Arc<Snapshot>>,
    _poller: Arc<Poller>,
}

#[derive(Debug)]
struct Poller(tokio::task::JoinHandle<()>);

impl Drop for Poller {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl KeyDirectory {
    /// Reads the keys once (the gateway does not start without them), then every `every`.
    ///
    /// # Errors
    ///
    /// The store's error when the first read fails.
    pub async fn start(store: Store, every: Duration) -> Result<KeyDirectory, StoreError> {
        let keys = store.keys().await?;
        let (tx, rx) = watch::channel(Arc::new(Snapshot {
            generation: 1,
            keys,
        }));
        let tx = Arc::new(tx);
        let poll_tx = Arc::clone(&tx);
        let poll_store = store.clone();
        let task = tokio::spawn(async move {
            let mut down = false;
            loop {
                tokio::time::sleep(every).await;
                match poll_store.keys().await {
                    Ok(keys) => {
                        if down {
                            tracing::info!(
                                target: "ripcord::keys",
                                "the store answers again: its keys are read every {} ms",
                                every.as_millis()
                            );
                        }
                        down = false;
                        publish(&poll_tx, keys);
                    }
                    Err(e) if !down => {
                        down = true;
                        tracing::warn!(
                            target: "ripcord::keys",
                            error = %e,
                            "the store's keys could not be read: serving with the keys read last"
                        );
                    }
                    Err(_) => {}
                }
            }
        });
        Ok(KeyDirectory {
            store,
            tx,
            rx,
            _poller: Arc::new(Poller(task)),
        })
    }

    /// Reads the keys now (after an admin change on this replica).
    pub async fn refresh(&self) {
        match self.store.keys().await {
            Ok(keys) => publish(&self.tx, keys),
            Err(e) => {
                tracing::warn!(target: "ripcord::keys", error = %e, "could not read the store's keys");
            }
        }
    }

    /// How many keys the directory holds, revoked ones too.
    pub fn len(&self) -> usize {
        self.rx.borrow().keys.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn publish(tx: &watch::Sender<Arc<Snapshot>>, keys: Vec<StoredKey>) {
    tx.send_if_modified(|cur| {
        if cur.keys == keys {
            return false;
        }
        *cur = Arc::new(Snapshot {
            generation: cur.generation + 1,
            keys,
        });
        true
    });
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The accepted keys of one generation.
struct Accepted {
    generation: u64,
    /// Each key's row and what the gateway made of it.
    keys: Vec<(StoredKey, Arc<Key>)>,
    /// Every digest that may authenticate (current and previous secrets) → index in `keys`.
    by_digest: HashMap<[u8; 32], usize>,
}

/// One gateway build's view of the directory.
pub(crate) struct StoreKeys {
    directory: KeyDirectory,
    limiter: KeyLimiter,
    accepted: Mutex<Arc<Accepted>>,
}

impl StoreKeys {
    pub(crate) fn new(directory: KeyDirectory, limiter: KeyLimiter) -> Self {
        StoreKeys {
            directory,
            limiter,
            accepted: Mutex::new(Arc::new(Accepted {
                generation: 0,
                keys: Vec::new(),
                by_digest: HashMap::new(),
            })),
        }
    }

    pub(crate) fn directory(&self) -> &KeyDirectory {
        &self.directory
    }

    /// The live key whose secret (or previous secret, within its grace) has this digest.
    pub(super) fn find(&self, digest: &[u8; 32], routes: &[GatewayRoute]) -> Option<Arc<Key>> {
        let accepted = self.current(routes);
        let &i = accepted.by_digest.get(digest)?;
        let (row, key) = accepted.keys.get(i)?;
        row.digests_at(now_ms())
            .any(|d| &d == digest)
            .then(|| Arc::clone(key))
    }

    /// The accepted keys of the directory's latest generation (made now when it changed).
    fn current(&self, routes: &[GatewayRoute]) -> Arc<Accepted> {
        let snapshot = Arc::clone(&self.directory.rx.borrow());
        let mut accepted = match self.accepted.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if accepted.generation == snapshot.generation {
            return Arc::clone(&accepted);
        }
        let before: HashMap<&str, &(StoredKey, Arc<Key>)> = accepted
            .keys
            .iter()
            .map(|pair| (pair.0.id.as_str(), pair))
            .collect();
        let mut keys = Vec::with_capacity(snapshot.keys.len());
        let mut by_digest = HashMap::new();
        for row in &snapshot.keys {
            if row.revoked_ms.is_some() {
                continue;
            }
            let key = match before.get(row.id.as_str()) {
                Some((old, key)) if old.settings == row.settings => Arc::clone(key),
                _ => match self.make(row, routes) {
                    Ok(k) => Arc::new(k),
                    Err(e) => {
                        tracing::warn!(target: "ripcord::keys", key = %row.id, "this store key is not accepted: {e}");
                        continue;
                    }
                },
            };
            let i = keys.len();
            by_digest.insert(row.digest, i);
            if let Some((d, _)) = row.previous {
                by_digest.insert(d, i);
            }
            keys.push((row.clone(), key));
        }
        let next = Arc::new(Accepted {
            generation: snapshot.generation,
            keys,
            by_digest,
        });
        *accepted = Arc::clone(&next);
        next
    }

    fn make(&self, row: &StoredKey, routes: &[GatewayRoute]) -> Result<Key, String> {
        let s = &row.settings;
        let route_indexes = s.routes.as_ref().map(|names| {
            names
                .iter()
                .filter_map(|n| routes.iter().position(|r| &r.name == n))
                .collect::<Vec<_>>()
        });
        let as_config = GatewayKey {
            tenant: s.tenant.clone(),
            source: format!("store {}", row.id),
            secret: secrecy::SecretString::from(String::new()),
            routes: route_indexes.clone(),
            sub_tenants: false,
            rpm: s.rpm,
            tpm: s.tpm,
            controls: KeyControls::default(),
        };
        let limited = (self.limiter.0)(&as_config, s.budget_tokens)?;
        Ok(Key {
            digest: row.digest,
            label: Arc::from(row.id.as_str()),
            tenant: s.tenant.as_deref().map(Arc::from),
            routes: route_indexes,
            sub_tenants: false,
            limited,
            controls: KeyControls::default(),
        })
    }
}
