//! [`RetryPolicy`]: the retry policy's settings, and the constructor of [`Retry`] wrappers.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use ripcord_core::ChatModel;

use super::Retry;
use super::backoff::{Backoff, Jitter, RandomSource, SplitMix64};
use super::budget::{BudgetState, RetryBudget};
use super::retry_on::RetryOn;
use crate::clock::{SharedClock, default_clock};
use crate::error::ConfigError;

/// The retry policy: how many attempts, how long between them, and the retry budget.
///
/// Defaults (what [`RetryPolicy::default`] gives): 3 attempts, exponential backoff from 1 s
/// capped at 20 s with full jitter, vendor retry-after honoured up to 60 s, and a retry budget
/// of 20 % extra load (at least 10 retries per 10 s).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::{Jitter, RetryPolicy};
/// let policy = RetryPolicy::builder()
///     .max_attempts(4)
///     .base_delay(Duration::from_millis(200))
///     .max_delay(Duration::from_secs(5))
///     .jitter(Jitter::Decorrelated)
///     .seed(7)
///     .build()?;
/// assert_eq!(policy.max_attempts(), 4);
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub(crate) max_attempts: NonZeroU32,
    pub(crate) backoff: Backoff,
    pub(crate) max_retry_after: Duration,
    pub(crate) budget: Option<RetryBudget>,
    pub(crate) retry_on: RetryOn,
    pub(crate) rng: Arc<dyn RandomSource>,
    pub(crate) clock: SharedClock,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: NonZeroU32::MIN.saturating_add(2),
            backoff: Backoff {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(20),
                jitter: Jitter::Full,
            },
            max_retry_after: Duration::from_secs(60),
            budget: Some(RetryBudget::default()),
            retry_on: RetryOn::default(),
            rng: Arc::new(SplitMix64::from_entropy()),
            clock: default_clock(),
        }
    }
}

impl RetryPolicy {
    /// A builder starting from the defaults.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder {
            policy: RetryPolicy::default(),
            max_attempts: 3,
        }
    }

    /// Wraps a model.
    pub fn wrap<M: ChatModel>(&self, model: M) -> Retry<M> {
        Retry::new(model, self.clone())
    }

    /// Attempts per call, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.get()
    }

    /// The backoff between attempts.
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// The failure classes retried on the same link.
    pub fn retry_on(&self) -> RetryOn {
        self.retry_on
    }

    /// The longest vendor retry-after waited for.
    pub fn max_retry_after(&self) -> std::time::Duration {
        self.max_retry_after
    }

    /// The retry budget, if any.
    pub fn retry_budget(&self) -> Option<RetryBudget> {
        self.budget
    }

    pub(crate) fn budget_state(&self) -> Option<BudgetState> {
        self.budget.map(|b| BudgetState::new(b, self.clock.clone()))
    }
}

/// Builds a [`RetryPolicy`]; validation happens in [`RetryPolicyBuilder::build`].
#[derive(Debug, Clone)]
pub struct RetryPolicyBuilder {
    policy: RetryPolicy,
    max_attempts: u32,
}

impl RetryPolicyBuilder {
    ripcord_core::setters! {
        /// Attempts per call, the first included (default 3; 1 disables retries).
        ///
        /// Only the classes of [`RetryPolicyBuilder::retry_on`] are retried on the same link; by
        /// default `rate_limited` (429), `server_error` (500, 502, 504), `timeout`, `network` and
        /// `invalid_response`. An `overloaded` answer — 503, Anthropic's 529 — is **not** retried by
        /// default, where vendor SDKs retry it: a chain falls to its next link at once instead. On a
        /// link with no fallback, add it:
        ///
        /// ```
        /// use ripcord_resilience::{RetryClass, RetryOn, RetryPolicy};
        /// let on = RetryOn::default().with(RetryClass::Overloaded);
        /// let policy = RetryPolicy::builder().max_attempts(3).retry_on(on).build()?;
        /// assert!(policy.retry_on().contains(RetryClass::Overloaded));
        /// # Ok::<(), ripcord_resilience::ConfigError>(())
        /// ```
        max_attempts(n: u32) => max_attempts = n;

        /// The first backoff delay before jitter (default 1 s).
        base_delay(d: Duration) => policy.backoff.base = d;

        /// The largest backoff delay (default 20 s).
        max_delay(d: Duration) => policy.backoff.cap = d;

        /// The jitter (default [`Jitter::Full`]).
        jitter(j: Jitter) => policy.backoff.jitter = j;

        /// A vendor's retry-after longer than this is not waited for: the call gives up at once so
        /// the chain falls back (default 60 s). The call's deadline applies too.
        max_retry_after(d: Duration) => policy.max_retry_after = d;

        /// The failure classes retried on the same link (default [`RetryOn::default`]: not a
        /// silent link, not an overloaded one).
        retry_on(on: RetryOn) => policy.retry_on = on;

        /// The retry budget (default [`RetryBudget::default`]).
        budget(b: RetryBudget) => policy.budget = Some(b);

        /// No retry budget: only the attempt count limits retries.
        no_budget() => policy.budget = None;

        /// Seeds the jitter with a fixed seed (reproducible tests).
        seed(seed: u64) => policy.rng = Arc::new(SplitMix64::seeded(seed));

        /// Uses this random source for jitter.
        rng(rng: Arc<dyn RandomSource>) => policy.rng = rng;

        /// Uses this clock for the retry budget's window (default [`crate::TokioClock`]).
        clock(clock: SharedClock) => policy.clock = clock;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for zero attempts, a zero base delay, a cap below the base, or a budget
    /// with a negative / non-finite ratio or a zero window.
    pub fn build(self) -> Result<RetryPolicy, ConfigError> {
        let mut policy = self.policy;
        policy.max_attempts = NonZeroU32::new(self.max_attempts).ok_or_else(|| {
            ConfigError::new(
                "retry",
                "max_attempts",
                "must be at least 1 (the first attempt)",
            )
        })?;
        if policy.backoff.base.is_zero() {
            return Err(ConfigError::new(
                "retry",
                "base_delay",
                "must be greater than zero",
            ));
        }
        if policy.backoff.cap < policy.backoff.base {
            return Err(ConfigError::new(
                "retry",
                "max_delay",
                format!(
                    "must be at least base_delay ({:?}), got {:?}",
                    policy.backoff.base, policy.backoff.cap
                ),
            ));
        }
        if let Some(b) = policy.budget {
            if !b.ratio.is_finite() || b.ratio < 0.0 {
                return Err(ConfigError::new(
                    "retry",
                    "budget.ratio",
                    format!("must be a finite number >= 0, got {}", b.ratio),
                ));
            }
            if b.window.is_zero() {
                return Err(ConfigError::new(
                    "retry",
                    "budget.window",
                    "must be greater than zero",
                ));
            }
        }
        Ok(policy)
    }
}
