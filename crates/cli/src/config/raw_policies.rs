//! The config file's shapes for the opt-in link policies (`[providers.cache]`,
//! `[providers.validate]`, `[providers.hedge]`), the breaker's extra rules, a provider's facts
//! (`data_region`, `data_use`, `price`), a key's per-request controls and the degradation
//! notice, as written: what serde reads, before any validation. A field left out is the
//! library's default, filled in by [`super::resolve_policies`].

use serde::Deserialize;
use toml::Spanned;

/// `[providers.cache]`: answers of this link kept and served again for the same request
/// (defaults: [`CachePolicy::default`](ripcord_resilience::CachePolicy)).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// How long an answer is kept, in ms.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// The most answers kept (least recently used evicted first).
    #[serde(default)]
    pub capacity: Option<usize>,
    /// Whether the tenant is part of the key (turn off only when answers never depend on who
    /// asks).
    #[serde(default)]
    pub per_tenant: Option<bool>,
}

/// `[providers.validate]`: answers of this link are checked, and one that fails is the link's
/// `invalid_response` failure (retried, counted by the breaker, then the next link).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateConfig {
    /// JSON-mode and JSON-schema requests must be answered with JSON (matching the schema),
    /// and tool-call arguments must be JSON objects
    /// ([`JsonValidator`](ripcord_resilience::JsonValidator)); default true.
    #[serde(default)]
    pub json: Option<bool>,
}

/// `[providers.hedge]`: race a second provider when this one is slow (defaults:
/// [`HedgePolicy::default`](ripcord_resilience::HedgePolicy)).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HedgeConfig {
    /// The provider raced against this one.
    pub with: Spanned<String>,
    /// A fixed delay before the hedge starts, in ms (instead of the primary's p95 latency).
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// The p95 delay's value until enough samples exist, in ms.
    #[serde(default)]
    pub initial_delay_ms: Option<u64>,
    /// Successes needed before the p95 latency is used.
    #[serde(default)]
    pub min_samples: Option<usize>,
    /// Hedges may add at most this percentage of extra calls (0 to 100).
    #[serde(default)]
    pub max_extra_percent: Option<u32>,
}

/// `[providers.breaker.failure_rate]`: trip when a share of the recent calls failed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureRateConfig {
    /// The failing share that trips (0 < t ≤ 1).
    pub threshold: f64,
    /// The window the share is measured over, in ms.
    pub window_ms: u64,
    /// Calls the window must hold before the share counts.
    pub min_calls: u32,
}

/// What one error kind does to the breaker (`[providers.breaker.kinds]`): `"ignore"`,
/// `"count"`, or `{ trip_for_ms = N }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum KindActionConfig {
    /// `"ignore"` or `"count"`.
    Word(String),
    /// Trips at once for this long.
    Trip {
        /// How long it stays open, in ms.
        trip_for_ms: u64,
    },
}

/// `data_use = { train = false, retain_days = 0 }`: what the vendor may do with the data of
/// requests sent to this provider, as its terms (or the account's settings) say.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataUseConfig {
    /// Whether the vendor may train on the data.
    #[serde(default)]
    pub train: Option<bool>,
    /// How many days the vendor keeps the data (0: not kept).
    #[serde(default)]
    pub retain_days: Option<u32>,
}

/// `price = { input_per_mtok = 2.5, output_per_mtok = 10.0 }`: USD per million tokens,
/// overriding the built-in table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Per million input tokens.
    pub input_per_mtok: f64,
    /// Per million output tokens.
    pub output_per_mtok: f64,
    /// Per million cached input tokens (default: the input price).
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
}

/// The per-request control headers a gateway key's client may send (`controls` of
/// `[[server.keys]]`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyControlsConfig {
    /// Which of `locality`, `retry_safe`, `priority`, `intent` the client may set (default:
    /// all).
    #[serde(default)]
    pub allow: Option<Vec<Spanned<String>>>,
    /// The highest `x-ripcord-priority` it may ask for (`low`, `normal`, `high`; default
    /// `high`).
    #[serde(default)]
    pub max_priority: Option<Spanned<String>>,
}

/// `[server.admin]`: the operator endpoints (`POST /admin/…`), behind their own key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// The environment variable holding the admin key (never a tenant's key).
    pub key_env: Spanned<String>,
    /// Serve the admin endpoints on this address instead of the gateway's port (e.g. an
    /// operators' network clients cannot reach).
    #[serde(default)]
    pub listen: Option<Spanned<String>>,
}
