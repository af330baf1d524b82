//! [`PoolObserver`]: what a pool's stream tells its deployment when it ends (an answer, a
//! failure that counts in the ejection window, or a consumer that stopped reading), and the
//! in-flight count it holds until then.

use std::time::Duration;

use ripcord_core::{Result, StreamEvent};
use tokio::time::Instant;

use super::counts_for_ejection;
use super::deployment::InFlight;
use super::store::Spread;
use crate::stream_util::{End, StreamObserver};

/// Reports a pool stream's end to its deployment and holds its in-flight count until then.
pub(super) struct PoolObserver {
    pub(super) guard: InFlight,
    pub(super) started: Instant,
    pub(super) first: Option<Duration>,
    pub(super) tokens: u64,
}

impl StreamObserver for PoolObserver {
    fn on_item(&mut self, item: Result<StreamEvent>) -> Result<StreamEvent> {
        if let Ok(StreamEvent::Usage { usage }) = &item {
            self.tokens = usage.total_tokens();
        }
        item
    }

    fn on_content(&mut self) {
        let shared = &self.guard.0;
        self.first = Some(shared.now().saturating_duration_since(self.started));
    }

    fn on_end(&mut self, end: End<'_>) {
        let shared = &self.guard.0;
        let i = self.guard.1;
        let latency = self
            .first
            .unwrap_or_else(|| shared.now().saturating_duration_since(self.started));
        match end {
            End::Finished => {
                let spread = shared.on_success(i, shared.now(), latency, self.tokens);
                shared.spread_later(i, spread);
            }
            // A consumer that stopped reading says nothing about the deployment.
            End::Dropped => {}
            End::Failed(e) => {
                if counts_for_ejection(e)
                    && let Some(ej) = shared.policy.ejection
                {
                    let now = shared.now();
                    let mut h = shared.slots[i].health();
                    h.failures += 1;
                    if h.count(true, now, &ej) {
                        drop(h);
                        if shared.maybe_eject(i, now, &ej) {
                            shared.spread_later(
                                i,
                                Spread {
                                    eject: Some(ej),
                                    ..Spread::default()
                                },
                            );
                        }
                    }
                }
            }
        }
    }
}
