//! [`BulkheadPolicy`]: the bulkhead's settings, and the constructor of [`Bulkhead`] wrappers.

use std::time::Duration;

use ripcord_core::ChatModel;

use super::Bulkhead;
use crate::error::ConfigError;

/// The default bound on a queued call's wait.
pub const DEFAULT_MAX_QUEUE_WAIT: Duration = Duration::from_secs(1);

/// The bulkhead's settings.
///
/// Defaults ([`BulkheadPolicy::default`]): 32 calls in flight, 256 waiting, a queued call waits
/// at most 1 s ([`DEFAULT_MAX_QUEUE_WAIT`]), and never into the part of its deadline the call
/// itself needs.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::BulkheadPolicy;
/// let policy = BulkheadPolicy::builder()
///     .max_in_flight(4)
///     .max_queue(100)
///     .max_queue_wait(Duration::from_secs(2))
///     .build()?;
/// assert_eq!(policy.max_in_flight(), 4);
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BulkheadPolicy {
    pub(crate) max_in_flight: usize,
    pub(crate) max_queue: usize,
    pub(crate) max_queue_wait: Option<Duration>,
}

impl Default for BulkheadPolicy {
    fn default() -> Self {
        BulkheadPolicy {
            max_in_flight: 32,
            max_queue: 256,
            max_queue_wait: Some(DEFAULT_MAX_QUEUE_WAIT),
        }
    }
}

impl BulkheadPolicy {
    /// Wraps a model; every wrapper gets its own slots.
    pub fn wrap<M: ChatModel>(&self, model: M) -> Bulkhead<M> {
        Bulkhead::new(model, self.clone())
    }

    /// The bound on calls in flight.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }
}

policy_builder!(BulkheadPolicyBuilder => BulkheadPolicy);

impl BulkheadPolicyBuilder {
    ripcord_core::setters! {
        /// Calls in flight at once (default 32).
        max_in_flight(n: usize) => policy.max_in_flight = n;

        /// Calls waiting at once (default 256; 0 refuses whenever all slots are taken).
        max_queue(n: usize) => policy.max_queue = n;

        /// The longest a call waits in the queue before `BudgetExhausted` (default
        /// [`DEFAULT_MAX_QUEUE_WAIT`], 1 s).
        max_queue_wait(d: Duration) => policy.max_queue_wait = Some(d);

        /// Lets a queued call wait as long as its deadline allows (no queue-wait bound).
        no_queue_wait_limit() => policy.max_queue_wait = None;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for zero calls in flight or a zero queue wait.
    pub fn build(self) -> Result<BulkheadPolicy, ConfigError> {
        if self.policy.max_in_flight == 0 {
            return Err(ConfigError::new(
                "bulkhead",
                "max_in_flight",
                "must be at least 1",
            ));
        }
        if self.policy.max_queue_wait.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new(
                "bulkhead",
                "max_queue_wait",
                "must be greater than zero (use max_queue(0) to never queue)",
            ));
        }
        Ok(self.policy)
    }
}
