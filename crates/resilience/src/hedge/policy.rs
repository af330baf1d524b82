//! [`HedgePolicy`]: when to hedge, and the constructor of [`Hedge`] wrappers.

use std::time::Duration;

use ripcord_core::ChatModel;

use super::Hedge;
use crate::error::ConfigError;

/// How long the primary runs alone before the hedge starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HedgeDelay {
    /// A fixed delay.
    Fixed(Duration),
    /// The primary's observed 95th-percentile latency (over its last 128 successes); `initial`
    /// until `min_samples` successes were seen.
    P95 {
        /// The delay before enough samples exist.
        initial: Duration,
        /// Successes needed before the percentile is used.
        min_samples: usize,
    },
}

/// Hedging settings. Hedging is opt-in: it spends a second call to cut tail latency.
///
/// Default ([`HedgePolicy::default`]): hedge after the primary's p95 latency, 2 s until 20
/// samples were seen, and at most 10% extra calls ([`HedgePolicyBuilder::max_extra_percent`]).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::{HedgeDelay, HedgePolicy};
/// let fixed = HedgePolicy::builder().delay(HedgeDelay::Fixed(Duration::from_millis(800))).build()?;
/// assert_eq!(fixed.hedge_delay(), HedgeDelay::Fixed(Duration::from_millis(800)));
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HedgePolicy {
    pub(crate) delay: HedgeDelay,
    pub(crate) max_extra_percent: u32,
}

impl Default for HedgePolicy {
    fn default() -> Self {
        HedgePolicy {
            delay: HedgeDelay::P95 {
                initial: Duration::from_secs(2),
                min_samples: 20,
            },
            max_extra_percent: 10,
        }
    }
}

impl HedgePolicy {
    /// Wraps a primary and the model to race against it.
    pub fn wrap<P: ChatModel, H: ChatModel>(&self, primary: P, hedge: H) -> Hedge<P, H> {
        Hedge::new(primary, hedge, *self)
    }

    /// The delay setting.
    pub fn hedge_delay(&self) -> HedgeDelay {
        self.delay
    }

    /// The hedge budget: extra calls as a percentage of the primary's.
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_resilience::HedgePolicy;
    /// assert_eq!(HedgePolicy::default().max_extra_percent(), 10);
    /// ```
    pub fn max_extra_percent(&self) -> u32 {
        self.max_extra_percent
    }
}

policy_builder!(HedgePolicyBuilder => HedgePolicy);

impl HedgePolicyBuilder {
    ripcord_core::setters! {
        /// When the hedge starts.
        delay(d: HedgeDelay) => policy.delay = d;

        /// The hedge budget: hedges may add at most this percentage of extra calls over the
        /// primary's calls (plus one, so the first slow call can be hedged). Default 10; 100 hedges
        /// every slow call. A vendor in trouble is slow for everyone, and hedging every call to it
        /// would double the load on the hedge just when it is needed most.
        max_extra_percent(pct: u32) => policy.max_extra_percent = pct;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a p95 delay needing zero samples, or a budget over 100%.
    pub fn build(self) -> Result<HedgePolicy, ConfigError> {
        if let HedgeDelay::P95 { min_samples: 0, .. } = self.policy.delay {
            return Err(ConfigError::new(
                "hedge",
                "delay.min_samples",
                "must be at least 1",
            ));
        }
        if self.policy.max_extra_percent > 100 {
            return Err(ConfigError::new(
                "hedge",
                "max_extra_percent",
                "must be 0 to 100",
            ));
        }
        Ok(self.policy)
    }
}
