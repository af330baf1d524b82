//! What the breaker tells the outside world: states, transitions, a listener hook and the
//! snapshot health endpoints read.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ripcord_core::ErrorKind;
use serde::Serialize;
use tokio::time::Instant;

/// The state of a circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go through; failures are counted.
    Closed,
    /// Calls are refused with `CircuitOpen` until the open duration has passed.
    Open,
    /// A bounded number of probe calls go through to test the link.
    HalfOpen,
}

impl BreakerState {
    /// The stable snake_case name (`closed`, `open`, `half_open`).
    pub const fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One state change of a breaker.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Transition {
    /// The link.
    pub link: Arc<str>,
    /// The state before.
    pub from: BreakerState,
    /// The state after.
    pub to: BreakerState,
    /// When it happened, on the breaker's clock.
    #[serde(skip)]
    pub at: Instant,
    /// When it happened, in milliseconds since the breaker was made (for JSON).
    pub at_ms: f64,
    /// For a trip: how long the breaker stays open, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_for_ms: Option<f64>,
    /// The failure that caused it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<ErrorKind>,
}

impl Transition {
    /// How long the breaker stays open after this transition, for trips.
    pub fn open_for(&self) -> Option<Duration> {
        self.open_for_ms
            .map(|ms| Duration::from_secs_f64(ms / 1000.0))
    }
}

/// Hears a breaker's transitions and refusals (for metrics, alerts, logs).
///
/// Called after the breaker's lock is released, on the task that caused the event. Keep it
/// quick and non-blocking. `()` is the no-op listener.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use ripcord_resilience::{BreakerListener, Transition};
/// #[derive(Debug, Default)]
/// struct Alerts(Mutex<Vec<String>>);
/// impl BreakerListener for Alerts {
///     fn on_transition(&self, t: &Transition) {
///         self.0.lock().unwrap().push(format!("{} {} -> {}", t.link, t.from, t.to));
///     }
/// }
/// let _listener: Arc<dyn BreakerListener> = Arc::new(Alerts::default());
/// ```
pub trait BreakerListener: Send + Sync + fmt::Debug + 'static {
    /// The breaker changed state.
    fn on_transition(&self, transition: &Transition) {
        let _ = transition;
    }

    /// The breaker refused a call; it re-admits calls after `retry_after`.
    fn on_rejected(&self, link: &str, state: BreakerState, retry_after: Duration) {
        let _ = (link, state, retry_after);
    }
}

impl BreakerListener for () {}

/// A point-in-time view of a breaker, for health endpoints and telemetry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BreakerSnapshot {
    /// The link.
    pub link: Arc<str>,
    /// The state now.
    pub state: BreakerState,
    /// While open: milliseconds until probes are admitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_remaining_ms: Option<f64>,
    /// Probe calls in flight (half-open).
    pub probes_in_flight: usize,
    /// Times the breaker tripped.
    pub trips: u64,
    /// Calls refused.
    pub rejected: u64,
    /// Successful calls recorded.
    pub successes: u64,
    /// Failed calls recorded (counted kinds only).
    pub failures: u64,
    /// Failures not counted (caller-side kinds, cancellations, late results).
    pub ignored: u64,
    /// The kind of the last counted failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<ErrorKind>,
    /// The most recent transitions, oldest first (bounded).
    pub history: Vec<Transition>,
}
