//! The old names of renamed types, deprecated and kept for one release.
//!
//! Kept in this file so the rename script (which skips files named `renamed.rs`) can be
//! re-run over other branches without touching them.

/// The old name of [`BreakerPolicy`](crate::BreakerPolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `BreakerPolicy`")]
pub type BreakerLayer = crate::BreakerPolicy;

/// The old name of [`BreakerPolicyBuilder`](crate::BreakerPolicyBuilder): it builds a `BreakerPolicy`.
#[deprecated(note = "renamed to `BreakerPolicyBuilder`")]
pub type BreakerBuilder = crate::BreakerPolicyBuilder;

/// The old name of [`BudgetPolicy`](crate::BudgetPolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `BudgetPolicy`")]
pub type BudgetLayer = crate::BudgetPolicy;

/// The old name of [`BudgetPolicyBuilder`](crate::BudgetPolicyBuilder): it builds a `BudgetPolicy`.
#[deprecated(note = "renamed to `BudgetPolicyBuilder`")]
pub type BudgetBuilder = crate::BudgetPolicyBuilder;

/// The old name of [`BulkheadPolicy`](crate::BulkheadPolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `BulkheadPolicy`")]
pub type BulkheadLayer = crate::BulkheadPolicy;

/// The old name of [`BulkheadPolicyBuilder`](crate::BulkheadPolicyBuilder): it builds a `BulkheadPolicy`.
#[deprecated(note = "renamed to `BulkheadPolicyBuilder`")]
pub type BulkheadBuilder = crate::BulkheadPolicyBuilder;

/// The old name of [`CachePolicy`](crate::CachePolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `CachePolicy`")]
pub type CacheLayer = crate::CachePolicy;

/// The old name of [`CachePolicyBuilder`](crate::CachePolicyBuilder): it builds a `CachePolicy`.
#[deprecated(note = "renamed to `CachePolicyBuilder`")]
pub type CacheBuilder = crate::CachePolicyBuilder;

/// The old name of [`HealthPolicy`](crate::HealthPolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `HealthPolicy`")]
pub type HealthLayer = crate::HealthPolicy;

/// The old name of [`HealthPolicyBuilder`](crate::HealthPolicyBuilder): it builds a `HealthPolicy`.
#[deprecated(note = "renamed to `HealthPolicyBuilder`")]
pub type HealthBuilder = crate::HealthPolicyBuilder;

/// The old name of [`HedgePolicy`](crate::HedgePolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `HedgePolicy`")]
pub type HedgeLayer = crate::HedgePolicy;

/// The old name of [`HedgePolicyBuilder`](crate::HedgePolicyBuilder): it builds a `HedgePolicy`.
#[deprecated(note = "renamed to `HedgePolicyBuilder`")]
pub type HedgeBuilder = crate::HedgePolicyBuilder;

/// The old name of [`ProbePolicy`](crate::ProbePolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `ProbePolicy`")]
pub type ProbeLayer = crate::ProbePolicy;

/// The old name of [`ProbePolicyBuilder`](crate::ProbePolicyBuilder): it builds a `ProbePolicy`.
#[deprecated(note = "renamed to `ProbePolicyBuilder`")]
pub type ProbeBuilder = crate::ProbePolicyBuilder;

/// The old name of [`RateLimitPolicy`](crate::RateLimitPolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `RateLimitPolicy`")]
pub type RateLimitLayer = crate::RateLimitPolicy;

/// The old name of [`RateLimitPolicyBuilder`](crate::RateLimitPolicyBuilder): it builds a `RateLimitPolicy`.
#[deprecated(note = "renamed to `RateLimitPolicyBuilder`")]
pub type RateLimitBuilder = crate::RateLimitPolicyBuilder;

/// The old name of [`RedactPolicy`](crate::RedactPolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `RedactPolicy`")]
pub type RedactLayer = crate::RedactPolicy;

/// The old name of [`RedactPolicyBuilder`](crate::RedactPolicyBuilder): it builds a `RedactPolicy`.
#[deprecated(note = "renamed to `RedactPolicyBuilder`")]
pub type RedactBuilder = crate::RedactPolicyBuilder;

/// The old name of [`RetryPolicy`](crate::RetryPolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `RetryPolicy`")]
pub type RetryLayer = crate::RetryPolicy;

/// The old name of [`RetryPolicyBuilder`](crate::RetryPolicyBuilder): it builds a `RetryPolicy`.
#[deprecated(note = "renamed to `RetryPolicyBuilder`")]
pub type RetryBuilder = crate::RetryPolicyBuilder;

/// The old name of [`TimeoutPolicy`](crate::TimeoutPolicy): a policy's settings, not a tower layer.
#[deprecated(note = "renamed to `TimeoutPolicy`")]
pub type TimeoutLayer = crate::TimeoutPolicy;

/// The old name of [`TimeoutPolicyBuilder`](crate::TimeoutPolicyBuilder): it builds a `TimeoutPolicy`.
#[deprecated(note = "renamed to `TimeoutPolicyBuilder`")]
pub type TimeoutBuilder = crate::TimeoutPolicyBuilder;

/// The old name of [`PiiRedactor`](crate::PiiRedactor): it masks personal data; the telemetry exporter scrubs API keys with its own `SecretScrubber`.
#[deprecated(note = "renamed to `PiiRedactor`")]
pub type Redactor = crate::PiiRedactor;

/// The old name of [`PiiRedactorBuilder`](crate::PiiRedactorBuilder): it builds a `PiiRedactor`.
#[deprecated(note = "renamed to `PiiRedactorBuilder`")]
pub type RedactorBuilder = crate::PiiRedactorBuilder;

#[cfg(test)]
mod tests {
    #![allow(deprecated)]

    use std::any::TypeId;

    /// Code written against the old names keeps compiling and means the same types.
    #[test]
    fn the_old_names_are_the_new_types() {
        assert_eq!(
            TypeId::of::<super::BreakerLayer>(),
            TypeId::of::<crate::BreakerPolicy>()
        );
        assert_eq!(
            TypeId::of::<super::BreakerBuilder>(),
            TypeId::of::<crate::BreakerPolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::BudgetLayer>(),
            TypeId::of::<crate::BudgetPolicy>()
        );
        assert_eq!(
            TypeId::of::<super::BudgetBuilder>(),
            TypeId::of::<crate::BudgetPolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::BulkheadLayer>(),
            TypeId::of::<crate::BulkheadPolicy>()
        );
        assert_eq!(
            TypeId::of::<super::BulkheadBuilder>(),
            TypeId::of::<crate::BulkheadPolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::CacheLayer>(),
            TypeId::of::<crate::CachePolicy>()
        );
        assert_eq!(
            TypeId::of::<super::CacheBuilder>(),
            TypeId::of::<crate::CachePolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::HealthLayer>(),
            TypeId::of::<crate::HealthPolicy>()
        );
        assert_eq!(
            TypeId::of::<super::HealthBuilder>(),
            TypeId::of::<crate::HealthPolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::HedgeLayer>(),
            TypeId::of::<crate::HedgePolicy>()
        );
        assert_eq!(
            TypeId::of::<super::HedgeBuilder>(),
            TypeId::of::<crate::HedgePolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::ProbeLayer>(),
            TypeId::of::<crate::ProbePolicy>()
        );
        assert_eq!(
            TypeId::of::<super::ProbeBuilder>(),
            TypeId::of::<crate::ProbePolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::RateLimitLayer>(),
            TypeId::of::<crate::RateLimitPolicy>()
        );
        assert_eq!(
            TypeId::of::<super::RateLimitBuilder>(),
            TypeId::of::<crate::RateLimitPolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::RedactLayer>(),
            TypeId::of::<crate::RedactPolicy>()
        );
        assert_eq!(
            TypeId::of::<super::RedactBuilder>(),
            TypeId::of::<crate::RedactPolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::RetryLayer>(),
            TypeId::of::<crate::RetryPolicy>()
        );
        assert_eq!(
            TypeId::of::<super::RetryBuilder>(),
            TypeId::of::<crate::RetryPolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::TimeoutLayer>(),
            TypeId::of::<crate::TimeoutPolicy>()
        );
        assert_eq!(
            TypeId::of::<super::TimeoutBuilder>(),
            TypeId::of::<crate::TimeoutPolicyBuilder>()
        );
        assert_eq!(
            TypeId::of::<super::Redactor>(),
            TypeId::of::<crate::PiiRedactor>()
        );
        assert_eq!(
            TypeId::of::<super::RedactorBuilder>(),
            TypeId::of::<crate::PiiRedactorBuilder>()
        );
    }
}
