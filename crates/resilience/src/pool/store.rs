//! [`PoolStore`]: where a pool's cooldowns, ejections and outages are shared with the other
//! replicas of a deployment of ripcord.
//!
//! The pool's own per-deployment record (in flight, latency, windows, the blocks themselves)
//! stays in the process: it is what balancing reads on every pick, and no pick waits for a
//! network. A store only *spreads* the blocks: a replica that cools a deployment down for the
//! vendor's `Retry-After`, ejects it for its error rate or takes it out of service publishes
//! that, and every replica merges what the store holds into its own record before it picks.
//! [`LocalPoolStore`] (the default) shares nothing: the pool behaves as one process.
//! `ripcord_redis::RedisPoolStore` keeps the blocks in Redis, each key expiring when its block
//! ends.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::ErrorKind;

use super::Shared;
use super::policy::Ejection;

/// A block one replica puts on a deployment, for every replica to honour.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum PoolBlock {
    /// Cooling down for this long (the vendor's wait, never shortened by a later, shorter one).
    Cooldown(Duration),
    /// Ejected for its error rate. The store counts ejections in a row across replicas and
    /// picks the length from that count (`ejection.ejection_time(n)`), so the interval grows
    /// whichever replica saw the failures.
    Ejection(Ejection),
    /// Out of service for this reason until a probe, an operator or a trial call that succeeds
    /// brings it back.
    Out(ErrorKind),
}

/// What a store holds for one deployment, time left measured when it was read.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SharedBlocks {
    /// Time left of its cooldown.
    pub cooldown_left: Option<Duration>,
    /// Time left of its ejection.
    pub ejected_left: Option<Duration>,
    /// Ejections in a row, across replicas.
    pub ejections: u32,
    /// Why it is out of service, when it is.
    pub out: Option<ErrorKind>,
}

impl SharedBlocks {
    /// A record with these fields (stores outside this crate build it with this).
    pub fn new(
        cooldown_left: Option<Duration>,
        ejected_left: Option<Duration>,
        ejections: u32,
        out: Option<ErrorKind>,
    ) -> Self {
        SharedBlocks {
            cooldown_left,
            ejected_left,
            ejections,
            out,
        }
    }
}

/// Where a pool's blocks are shared (see the module docs).
///
/// Every method must give up quickly when its backend does not answer: the pool then goes on
/// with its own record alone (fail-open to the local view).
#[async_trait]
pub trait PoolStore: Send + Sync + fmt::Debug {
    /// False for a store that shares nothing: the pool then never calls the others.
    fn is_shared(&self) -> bool;

    /// Publishes a block on `deployment`. Returns the length the store settled on (for an
    /// ejection, from the shared count), or `None` when the store did not take it (the block
    /// then holds on this replica only).
    async fn publish(&self, deployment: &str, block: PoolBlock) -> Option<Duration>;

    /// What the store holds for `deployments` (in that order), when this replica's copy is due
    /// for a refresh; `None` when it is not due, or the store did not answer.
    async fn read(&self, deployments: &[Arc<str>]) -> Option<Vec<SharedBlocks>>;

    /// Lifts every block of `deployment` (an operator, a probe or a trial call put it back).
    async fn clear(&self, deployment: &str);
}

/// The store that shares nothing: every replica keeps its own view (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalPoolStore;

#[async_trait]
impl PoolStore for LocalPoolStore {
    fn is_shared(&self) -> bool {
        false
    }

    async fn publish(&self, _deployment: &str, _block: PoolBlock) -> Option<Duration> {
        None
    }

    async fn read(&self, _deployments: &[Arc<str>]) -> Option<Vec<SharedBlocks>> {
        None
    }

    async fn clear(&self, _deployment: &str) {}
}

impl Shared {
    /// Merges the store's view into each deployment's record, if the store has a fresh one.
    /// Blocks only ever lengthen here: a block this replica set itself stands.
    pub(crate) async fn refresh(&self) {
        if !self.store.is_shared() {
            return;
        }
        let Some(view) = self.store.read(&self.names).await else {
            return;
        };
        let now = self.now();
        for (slot, blocks) in self.slots.iter().zip(view) {
            let mut h = slot.health();
            if let Some(left) = blocks.cooldown_left {
                h.cool_until(now + left);
            }
            if let Some(left) = blocks.ejected_left {
                let until = now + left;
                h.ejected_until = Some(h.ejected_until.map_or(until, |t| t.max(until)));
            }
            h.ejections = h.ejections.max(blocks.ejections);
            match blocks.out {
                Some(kind) if h.out.is_none() => {
                    h.out = Some(kind);
                    h.out_shared = true;
                    h.recheck_at = self.policy.out_recheck.map(|d| now + d);
                }
                Some(_) => {}
                None if h.out_shared => {
                    // Another replica put it back (a probe, an operator, a trial call).
                    h.out = None;
                    h.out_shared = false;
                    h.recheck_at = None;
                }
                None => {}
            }
        }
    }

    /// Tells the store what a booked outcome set on slot `i`, merging the lengths it settled
    /// on (an ejection's, from the shared count).
    pub(crate) async fn spread(&self, i: usize, spread: Spread) {
        if !self.store.is_shared() || spread.is_empty() {
            return;
        }
        let name = &self.slots[i].spec.name;
        if spread.back {
            self.store.clear(name).await;
        }
        if let Some(wait) = spread.cool
            && let Some(settled) = self.store.publish(name, PoolBlock::Cooldown(wait)).await
        {
            let now = self.now();
            self.slots[i].health().cool_until(now + settled);
        }
        if let Some(ej) = spread.eject
            && let Some(settled) = self.store.publish(name, PoolBlock::Ejection(ej)).await
        {
            let now = self.now();
            let mut h = self.slots[i].health();
            let until = now + settled;
            h.ejected_until = Some(h.ejected_until.map_or(until, |t| t.max(until)));
        }
        if let Some(kind) = spread.out
            && self
                .store
                .publish(name, PoolBlock::Out(kind))
                .await
                .is_some()
        {
            let mut h = self.slots[i].health();
            h.out_shared = h.out.is_some();
        }
    }

    /// [`Shared::spread`] without waiting, for paths that cannot await (a stream's end).
    pub(crate) fn spread_later(self: &Arc<Self>, i: usize, spread: Spread) {
        if !self.store.is_shared() || spread.is_empty() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let me = Arc::clone(self);
            rt.spawn(async move { me.spread(i, spread).await });
        }
    }
}

/// What a booked outcome asks the store to spread.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Spread {
    /// A cooldown this long began.
    pub(crate) cool: Option<Duration>,
    /// It was ejected under these settings.
    pub(crate) eject: Option<Ejection>,
    /// It went out of service for this reason.
    pub(crate) out: Option<ErrorKind>,
    /// It came back into service.
    pub(crate) back: bool,
}

impl Spread {
    pub(crate) fn is_empty(&self) -> bool {
        self.cool.is_none() && self.eject.is_none() && self.out.is_none() && !self.back
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
