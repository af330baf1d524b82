//! Where the config's defaults come from.
//!
//! A setting left out of the file means "the library's default", taken from the library and
//! never written down a second time here: resolution starts from the library's own `Default`
//! ([`RetryPolicy`], [`BreakerPolicy`], [`BudgetPolicy`], `StateOptions` of `ripcord-redis`) or its
//! public default constants ([`DEFAULT_DEADLINE`], [`DEFAULT_STREAM_MAX`],
//! [`DEFAULT_MIN_ATTEMPT`]) and overrides only what the file sets, so a default changed in the
//! library changes the binary too. Settings the resolved config keeps as `Option` (a link's
//! timeouts, rate limits, bulkhead queue, probe timing, redaction's `restore`) are filled in by
//! the library's builders when the link is built.
//!
//! The binary deliberately differs from the library in these places, and only here:
//!
//! - [`LOCAL_MAX_ATTEMPTS`]: a local-onnx link without a `[providers.retry]` section makes one
//!   attempt. Its failures (a missing file, a shape mismatch, an exhausted session) do not go
//!   away by waiting, and a retry would only spend the budget of the links after it.
//! - [`BUDGET_ANONYMOUS`]: `[budget]` also budgets calls that carry no tenant, as one shared
//!   anonymous tenant. The library leaves them unbudgeted, which suits a library caller that
//!   always names its tenant; a gateway with a budget must not be unlimited for a client that
//!   simply sends no key or tenant.
//! - [`LOWEST_LATENCY_MIN_SAMPLES`]: the samples a link needs before `strategy =
//!   "lowest_latency"` reorders it. The library has no default (its
//!   [`Strategy::LowestLatency`](ripcord_core::chain::Strategy::LowestLatency) takes the number),
//!   so the binary picks one.
//! - [`DEMOTE_ERRORING_THRESHOLD_PCT`] and [`DEMOTE_ERRORING_MIN_CALLS`]: `strategy =
//!   "demote_erroring"` demotes a link whose error rate reaches 30 % after 10 calls (its
//!   `min_samples` overrides the calls); the library's
//!   [`Strategy::DemoteErroring`](ripcord_core::chain::Strategy::DemoteErroring) takes both.
//!
//! The gateway's own limits (`[server]`, [`super::ServerSettings`]) have no library counterpart.

use std::time::Duration;

use ripcord_core::chain::{DEFAULT_DEADLINE, DEFAULT_MIN_ATTEMPT, DEFAULT_STREAM_MAX};
use ripcord_resilience::{BreakerPolicy, BudgetPolicy, RetryPolicy};

use super::model::{BreakerSettings, RetrySettings};

/// Attempts of a local-onnx link that has no `[providers.retry]` section (the library's
/// default is several: see the [module docs](self) for why the binary differs).
pub const LOCAL_MAX_ATTEMPTS: u32 = 1;

/// Whether `[budget]` budgets calls without a tenant when `anonymous` is left out (the
/// library's default is not to: see the [module docs](self)).
pub const BUDGET_ANONYMOUS: bool = true;

/// `strategy = "lowest_latency"`: samples a link needs before it is reordered, when
/// `min_samples` is left out (the library has no default: see the [module docs](self)).
pub const LOWEST_LATENCY_MIN_SAMPLES: u32 = 5;

/// `strategy = "demote_erroring"`: the error rate, in percent, at which a link moves behind the
/// others (the library has no default: see the [module docs](self)).
pub const DEMOTE_ERRORING_THRESHOLD_PCT: u8 = 30;

/// `strategy = "demote_erroring"`: calls a link needs before its error rate counts, when
/// `min_samples` is left out.
pub const DEMOTE_ERRORING_MIN_CALLS: u32 = 10;

/// `[server] max_body_bytes` left out: the largest request body the gateway reads (1 MiB).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// A duration in whole milliseconds, as the config spells it.
pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `[chain]` / `[[routes]]` timing left out: the chain's own defaults, in milliseconds
/// (deadline, stream bound, least useful attempt).
pub(super) fn chain_ms() -> (u64, u64, u64) {
    (
        ms(DEFAULT_DEADLINE),
        ms(DEFAULT_STREAM_MAX),
        ms(DEFAULT_MIN_ATTEMPT),
    )
}

/// `[budget] window_s` left out: the budget layer's default window, in seconds.
pub(super) fn budget_window_s() -> u64 {
    BudgetPolicy::default().window().as_secs()
}

/// The shared state's timing left out (`op_timeout_ms`, `connect_timeout_ms`,
/// `retry_interval_ms`): `ripcord-redis`'s defaults; `None` in a build without Redis.
#[cfg(feature = "redis")]
pub(super) fn redis_ms() -> Option<(u64, u64, u64)> {
    let d = ripcord_redis::StateOptions::default();
    Some((
        ms(d.op_timeout),
        ms(d.connect_timeout),
        ms(d.retry_interval),
    ))
}

/// The shared state's timing left out: `None` in a build without Redis.
#[cfg(not(feature = "redis"))]
pub(super) fn redis_ms() -> Option<(u64, u64, u64)> {
    None
}

impl Default for RetrySettings {
    /// The library's retry defaults ([`RetryPolicy::default`]).
    fn default() -> Self {
        let lib = RetryPolicy::default();
        let backoff = lib.backoff();
        RetrySettings {
            max_attempts: lib.max_attempts(),
            base_delay_ms: ms(backoff.base),
            max_delay_ms: ms(backoff.cap),
            retry_on: lib.retry_on(),
        }
    }
}

impl Default for BreakerSettings {
    /// The library's breaker defaults ([`BreakerPolicy::default`]).
    fn default() -> Self {
        let lib = BreakerPolicy::default();
        let mut spells = lib.open().iter();
        let first = spells.next().map_or(u64::MAX, ms);
        // The spell sequence reaches its cap within 32 doublings.
        let longest = spells.take(32).map(ms).max().unwrap_or(first).max(first);
        BreakerSettings {
            // A default breaker counts consecutive failures; the library's fallback when it
            // does not (a rate-only breaker) is not a default a config can ask for.
            failure_threshold: lib.consecutive_failures().unwrap_or(u32::MAX),
            open_ms: first,
            open_max_ms: longest,
            background_probe_ms: lib.background_probe().map(ms),
            half_open_probes: u32::try_from(lib.max_probes()).unwrap_or(u32::MAX),
        }
    }
}
