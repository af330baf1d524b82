//! [`HealthPolicy`]: the health tracker's settings, and the constructor of [`Health`] wrappers.

use ripcord_core::ChatModel;

use super::Health;
use crate::breaker::BreakerHandle;
use crate::error::ConfigError;

/// Passive health settings.
///
/// Defaults ([`HealthPolicy::default`]): EWMA weight 0.2 for the newest sample; degraded at a
/// 20 % error rate, unhealthy at 50 %; no breaker attached.
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_resilience::{BreakerPolicy, ChatModelExt, HealthPolicy};
/// let guarded = ScriptedModel::new("primary").with_breaker(BreakerPolicy::default());
/// let policy = HealthPolicy::builder().alpha(0.1).breaker(guarded.handle()).build()?;
/// let model = guarded.with_health(policy);
/// assert!(model.snapshot().breaker.is_some());
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct HealthPolicy {
    pub(crate) alpha: f64,
    pub(crate) degraded_error_rate: f64,
    pub(crate) unhealthy_error_rate: f64,
    pub(crate) breaker: Option<BreakerHandle>,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            alpha: 0.2,
            degraded_error_rate: 0.2,
            unhealthy_error_rate: 0.5,
            breaker: None,
        }
    }
}

impl HealthPolicy {
    /// Wraps a model; every wrapper gets its own tracker.
    pub fn wrap<M: ChatModel>(&self, model: M) -> Health<M> {
        Health::new(model, self.clone())
    }
}

policy_builder!(HealthPolicyBuilder => HealthPolicy);

impl HealthPolicyBuilder {
    ripcord_core::setters! {
        /// The weight of the newest sample in the moving averages, in (0, 1] (default 0.2).
        alpha(a: f64) => policy.alpha = a;

        /// The error rate from which the link reads as degraded (default 0.2).
        degraded_error_rate(r: f64) => policy.degraded_error_rate = r;

        /// The error rate from which the link reads as unhealthy (default 0.5).
        unhealthy_error_rate(r: f64) => policy.unhealthy_error_rate = r;

        /// Includes this breaker's state in the snapshots.
        breaker(handle: BreakerHandle) => policy.breaker = Some(handle);
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for an alpha outside (0, 1] or thresholds outside [0, 1] or out of order.
    pub fn build(self) -> Result<HealthPolicy, ConfigError> {
        let l = self.policy;
        if !(l.alpha > 0.0 && l.alpha <= 1.0) {
            return Err(ConfigError::new(
                "health",
                "alpha",
                format!("must be in (0, 1], got {}", l.alpha),
            ));
        }
        let in_unit = |r: f64| (0.0..=1.0).contains(&r);
        if !in_unit(l.degraded_error_rate) || !in_unit(l.unhealthy_error_rate) {
            return Err(ConfigError::new(
                "health",
                "error_rate",
                "thresholds must be in [0, 1]",
            ));
        }
        if l.degraded_error_rate > l.unhealthy_error_rate {
            return Err(ConfigError::new(
                "health",
                "degraded_error_rate",
                format!(
                    "{} is above unhealthy_error_rate {}",
                    l.degraded_error_rate, l.unhealthy_error_rate
                ),
            ));
        }
        Ok(l)
    }
}
