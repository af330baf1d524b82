//! Alerts as data: one `ripcord.alert` event per link and error kind per interval.
//!
//! Some failures are not weather but a broken setup an operator must fix: a revoked key
//! (`auth`), an exhausted quota or balance (`quota_exhausted`), a key or region the vendor
//! refuses (`permission_denied`, `region_blocked`) — the kinds whose
//! [`ErrorKind::needs_alert`] is true. Waiting does not fix them, and the chain quietly falls
//! back, so without an alert nobody notices until the bill or the fallback's quality does.
//!
//! Why an [`AlertGate`]: a revoked key fails *every* request, and one event per request would
//! bury the signal (and a pager) under thousands of copies. The gate lets the first failure of
//! a (link, kind) pair through at once, then at most one more per interval, and the next event
//! says how many were held back in between (`ripcord.alert.suppressed`). Each pair has its own
//! window, so a second link's outage or a second kind on the same link is never hidden behind
//! the first.
//!
//! The gate reads tokio's clock, so tests drive it with `tokio::time::pause`. Its memory is one
//! entry per (link, kind) pair that ever alerted: bounded by links × alert kinds.
//!
//! Every [`Chain`](crate::Chain) reports its links' failures to [`AlertGate::global`] unless
//! given its own gate ([`ChainBuilder::alert_gate`](crate::ChainBuilder::alert_gate)); a
//! provider shared by two chains (two gateway routes) therefore alerts once, not once per
//! route. `ripcord-telemetry` counts the events as the `ripcord.alerts` metric.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use ripcord_core::alert::AlertGate;
//! use ripcord_core::ErrorKind;
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let gate = AlertGate::new(Duration::from_secs(60));
//! assert_eq!(gate.admit("primary", ErrorKind::Auth), Some(0)); // the first one: at once
//! assert_eq!(gate.admit("primary", ErrorKind::Auth), None); // held back
//! assert_eq!(gate.admit("backup", ErrorKind::Auth), Some(0)); // another link: its own window
//! assert_eq!(gate.admit("primary", ErrorKind::Overloaded), None); // not an alert kind
//! # }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ErrorKind;

/// The event's message (what `ripcord-telemetry` and log readers match on).
pub const EVENT: &str = "ripcord.alert";
/// The event field with how many alert-kind failures of the pair were held back since the last
/// event.
pub const SUPPRESSED: &str = "ripcord.alert.suppressed";

/// The default interval between two events of one (link, kind) pair.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
struct Window {
    last: Instant,
    suppressed: u64,
}

/// Rate-limits alert events: one per (link, kind) per interval. See the [module docs](self).
#[derive(Debug)]
pub struct AlertGate {
    interval: Duration,
    windows: Mutex<HashMap<(Arc<str>, ErrorKind), Window>>,
}

impl Default for AlertGate {
    fn default() -> Self {
        AlertGate::new(DEFAULT_INTERVAL)
    }
}

impl AlertGate {
    /// A gate letting one event per (link, kind) through every `interval`.
    pub fn new(interval: Duration) -> Self {
        AlertGate {
            interval,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// The process-wide gate every chain uses by default ([`DEFAULT_INTERVAL`]).
    pub fn global() -> Arc<AlertGate> {
        static GLOBAL: OnceLock<Arc<AlertGate>> = OnceLock::new();
        Arc::clone(GLOBAL.get_or_init(|| Arc::new(AlertGate::default())))
    }

    /// The interval between two events of one pair.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Whether a failure of `kind` at `link` should be announced now: `Some(n)` with the
    /// number of failures of this pair held back since its last event, or `None` (held back,
    /// or `kind` is not an alert kind).
    pub fn admit(&self, link: &str, kind: ErrorKind) -> Option<u64> {
        if !kind.needs_alert() {
            return None;
        }
        let now = Instant::now();
        let mut windows = match self.windows.lock() {
            Ok(w) => w,
            Err(poisoned) => poisoned.into_inner(),
        };
        let key: (Arc<str>, ErrorKind) = (Arc::from(link), kind);
        match windows.get_mut(&key) {
            Some(w) if now.saturating_duration_since(w.last) < self.interval => {
                w.suppressed += 1;
                None
            }
            Some(w) => {
                let held = w.suppressed;
                *w = Window {
                    last: now,
                    suppressed: 0,
                };
                Some(held)
            }
            None => {
                windows.insert(
                    key,
                    Window {
                        last: now,
                        suppressed: 0,
                    },
                );
                Some(0)
            }
        }
    }

    /// Emits the `ripcord.alert` event (level WARN; `ripcord.link`, `error.type`,
    /// `ripcord.alert.suppressed`) for a failure of `kind` at `link` when the gate admits it;
    /// returns whether it did.
    pub fn observe(&self, link: &str, kind: ErrorKind) -> bool {
        let Some(suppressed) = self.admit(link, kind) else {
            return false;
        };
        tracing::warn!(
            ripcord.link = link,
            error.type = kind.as_str(),
            ripcord.alert.suppressed = suppressed,
            message = EVENT
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_event_per_link_and_kind_per_interval() {
        let gate = AlertGate::new(Duration::from_secs(60));
        assert_eq!(gate.admit("primary", ErrorKind::QuotaExhausted), Some(0));
        for _ in 0..999 {
            assert_eq!(gate.admit("primary", ErrorKind::QuotaExhausted), None);
        }
        // Other kinds and links have their own windows.
        assert_eq!(gate.admit("primary", ErrorKind::Auth), Some(0));
        assert_eq!(gate.admit("backup", ErrorKind::QuotaExhausted), Some(0));
        tokio::time::sleep(Duration::from_millis(59_999)).await;
        assert_eq!(gate.admit("primary", ErrorKind::QuotaExhausted), None);
        tokio::time::sleep(Duration::from_millis(1)).await;
        // The next event says how many were held back (999 + the one just above).
        assert_eq!(gate.admit("primary", ErrorKind::QuotaExhausted), Some(1000));
        assert_eq!(gate.admit("primary", ErrorKind::QuotaExhausted), None);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(gate.admit("primary", ErrorKind::QuotaExhausted), Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn only_alert_kinds_pass() {
        let gate = AlertGate::new(Duration::from_secs(1));
        for k in ErrorKind::ALL {
            assert_eq!(gate.admit("l", k).is_some(), k.needs_alert(), "{k}");
        }
        for k in [
            ErrorKind::Auth,
            ErrorKind::QuotaExhausted,
            ErrorKind::PermissionDenied,
            ErrorKind::RegionBlocked,
        ] {
            assert!(k.needs_alert(), "{k}");
        }
    }
}
