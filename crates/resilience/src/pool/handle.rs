//! [`PoolHandle`]: a pool's snapshot for status pages, and the operator's and the probe's
//! ways to put a deployment back into service.

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::Context;
use ripcord_core::telemetry::event;
use serde::Serialize;
use tokio::time::Instant;

use super::Shared;
use super::deployment::{DeploymentSnapshot, DeploymentState};
use super::policy::Balance;
use super::store::Spread;

/// A cheap handle on a pool: its snapshot, reinstatement and probes (the CLI's status pages
/// and admin actions hold one).
#[derive(Debug, Clone)]
pub struct PoolHandle {
    shared: Arc<Shared>,
}

/// A point-in-time view of a pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PoolSnapshot {
    /// The pool's link name.
    pub link: Arc<str>,
    /// Its strategy.
    pub strategy: Balance,
    /// Every deployment, in declaration order.
    pub deployments: Vec<DeploymentSnapshot>,
}

impl PoolSnapshot {
    /// Deployments taking calls now.
    pub fn available(&self) -> usize {
        self.deployments
            .iter()
            .filter(|d| d.state == DeploymentState::Available)
            .count()
    }
}

impl PoolHandle {
    /// The pool's link name.
    pub fn link(&self) -> &str {
        &self.shared.link
    }

    /// A point-in-time view of every deployment.
    pub fn snapshot(&self) -> PoolSnapshot {
        let now = self.shared.policy.clock.now();
        let decay = self.shared.policy.ewma_decay;
        let deployments = self
            .shared
            .slots
            .iter()
            .map(|slot| {
                let h = slot.health();
                let left = h
                    .blocked(now)
                    .until()
                    .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
                DeploymentSnapshot {
                    name: slot.spec.name.clone(),
                    region: slot.spec.region.clone(),
                    state: h.state(now),
                    in_flight: slot.in_flight(),
                    latency_ewma_ms: h.ewma.measured.then(|| h.ewma.decayed(now, decay) / 1e6),
                    cooldown_left_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
                    out_reason: h.out,
                    ejections: h.ejections,
                    successes: h.successes,
                    failures: h.failures,
                    weight: slot.spec.weight,
                    rpm: slot.spec.rpm,
                    tpm: slot.spec.tpm,
                }
            })
            .collect();
        PoolSnapshot {
            link: self.shared.link.clone(),
            strategy: self.shared.policy.strategy,
            deployments,
        }
    }

    /// Puts a deployment back into service (an operator's word): clears its outage, cooldown
    /// and ejection. Returns false when no deployment has that name.
    pub fn reinstate(&self, name: &str) -> bool {
        let Some(i) = self.shared.slots.iter().position(|s| &*s.spec.name == name) else {
            return false;
        };
        {
            let mut h = self.shared.slots[i].health();
            h.out = None;
            h.out_shared = false;
            h.cooldown_until = None;
            h.ejected_until = None;
        }
        // Every replica: the store's blocks go too (sent without waiting).
        self.shared.spread_later(
            i,
            Spread {
                back: true,
                ..Spread::default()
            },
        );
        tracing::info!(ripcord.link = %self.shared.link, ripcord.deployment = name, by = "operator", message = event::POOL_REINSTATED);
        true
    }

    /// Runs the liveness check ([`ChatModel::liveness`](ripcord_core::ChatModel::liveness)) of every out-of-service deployment
    /// that has one and reinstates those that pass; returns the names reinstated.
    pub async fn probe(&self, ctx: &Context) -> Vec<Arc<str>> {
        let mut back = Vec::new();
        for slot in &self.shared.slots {
            if slot.health().out.is_none() {
                continue;
            }
            let Some(check) = slot.spec.model.liveness() else {
                continue;
            };
            if check.check(ctx).await.is_ok() {
                {
                    let mut h = slot.health();
                    h.out = None;
                    h.out_shared = false;
                }
                if self.shared.store.is_shared() {
                    self.shared.store.clear(&slot.spec.name).await;
                }
                tracing::info!(ripcord.link = %self.shared.link, ripcord.deployment = %slot.spec.name, by = "probe", message = event::POOL_REINSTATED);
                back.push(slot.spec.name.clone());
            }
        }
        back
    }

    /// Records the outcome of a call served from outside the pool's own loop (a Redis-shared
    /// cooldown, say): cools `name` down until `until`. Returns false for an unknown name.
    pub fn cool_until(&self, name: &str, until: Instant) -> bool {
        match self.shared.slots.iter().find(|s| &*s.spec.name == name) {
            Some(slot) => {
                slot.health().cool_until(until);
                true
            }
            None => false,
        }
    }
}

impl PoolHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        PoolHandle { shared }
    }
}
