//! The TOML configuration of the `ripcord` binary: parsing, `${ENV_VAR}` interpolation and
//! validation with errors that name the file, the line and the key.
//!
//! ```toml
//! [chain]
//! order = ["primary", "backup", "local"]   # names of providers, tried in this order
//! deadline_ms = 45000                       # time to first content, and whole non-streamed calls
//! stream_holdback_ms = 0                    # hold a stream's start this long; a failure in it falls over unseen
//! stream_max_ms = 600000                    # a stream after its first content (default 10 min)
//! min_attempt_ms = 1000                     # a link reached with less left is skipped ("deadline")
//! trim = "oldest"                           # optional: drop old turns to fit a smaller window
//! static_reply = "The AI service is busy; please try again in a few minutes."
//!
//! [[providers]]
//! name = "primary"
//! kind = "openai"
//! model = "gpt-4o"
//! api_key_env = "OPENAI_API_KEY"
//! # policy fields left out are the library's defaults (shown here; see `config::defaults`)
//! [providers.retry]
//! max_attempts = 3
//! base_delay_ms = 1000
//! retry_on = ["rate_limited", "server_error", "timeout", "network", "invalid_response"]  # the default
//! [providers.timeouts]                      # the defaults: connect 5 s, first token 30 s, idle 60 s
//! connect_ms = 5000
//! first_token_ms = 30000
//! idle_ms = 60000
//! [providers.breaker]
//! failure_threshold = 5
//! open_ms = 60000
//!
//! [[providers]]
//! name = "local"
//! kind = "local-onnx"                       # SmolLM2 from `cargo xtask setup-model`
//! variant = "q8"                            # "q8" (default), "q4" (fastest) or "fp32"
//! threads = 2                               # default: the cores available, at most 4
//! max_batch = 8                             # optional: 8 answers share one batched decode step (q8/q4)
//! device = "cpu"                            # or "cuda" (needs ONNX Runtime's GPU build)
//!
//! [budget]                                  # optional: tokens per tenant (the tenant of the caller's key)
//! tokens_per_window = 200000
//! window_s = 3600
//! tenants = { acme = 1000000 }
//!
//! [alerts]                                  # optional: alert events to a webhook, without Prometheus
//! webhook_url = "${ALERT_WEBHOOK_URL}"      # a secret: check-config shows its host only
//! format = "alertmanager"                   # or "slack"; see docs/operating.md
//!
//! [[server.keys]]                           # optional: gateway keys bound to tenants
//! tenant = "acme"
//! key_env = "ACME_GATEWAY_KEY"              # the secret stays in the environment (16+ characters)
//! routes = ["smart"]                        # optional: routes this key may use (default: all)
//! rpm = 600                                 # optional: the key's own limits
//!
//! [state]                                   # optional: share breakers and limits across replicas
//! backend = "redis"                         # "local" (default) or "redis"
//! url = "redis://:${REDIS_PASSWORD}@10.0.0.5:6379/0"
//! replicas = 3                              # each enforces 1/3 of a limit while Redis is down
//! ```
//!
//! Instead of `[chain]`, a config may name several chains, `[[routes]]`, which the gateway picks
//! by the request's `model`. A route table holds `name`, optional `aliases`, and every setting
//! `[chain]` takes (it is read as a [`ChainConfig`]). Providers are declared once and shared:
//!
//! ```toml
//! [[routes]]
//! name = "smart"
//! aliases = ["gpt-4o"]
//! order = ["primary", "backup", "local"]
//! [[routes]]
//! name = "fast"
//! order = ["local"]
//! ```

pub mod defaults;
mod describe;
mod env;
mod model;
mod pool;
mod raw;
mod raw_policies;
mod resolve;
mod resolve_alerts;
mod resolve_bedrock;
mod resolve_gateway;
mod resolve_policies;
mod resolve_provider;
pub mod resolve_status_page;
mod resolve_store;
mod route_table;

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

pub use env::{Env, ProcessEnv};
pub use model::{
    BedrockSettings, BreakerSettings, ChainSpec, Config, GatewayKey, MIN_KEY_CHARS, Provider,
    RedisSettings, RetrySettings, Route, ServerSettings, StateBackend, TenantBudget,
    VertexCredentials, VertexSettings,
};
pub use pool::{DeploymentSettings, PoolSettings};
pub use raw::{
    BreakerConfig, BudgetConfig, BulkheadConfig, ChainConfig, CustomPattern, EmbeddingsConfig,
    KeyConfig, ProbeConfig, ProviderConfig, ProviderKind, RateLimitConfig, RawConfig,
    RedactionConfig, RetryConfig, ServerConfig, StateConfig, TimeoutsConfig, redact_url,
};
pub use raw_policies::{
    AdminConfig, CacheConfig, DataUseConfig, FailureRateConfig, HedgeConfig, KeyControlsConfig,
    KindActionConfig, PriceConfig, ValidateConfig,
};
pub use resolve_alerts::{AlertsConfig, AlertsSettings};
pub use resolve_policies::{
    AdminKey, BreakerExtra, Facts, KeyControls, LinkPolicies, parse_priority, priority_name,
};
pub use resolve_store::{
    DEFAULT_FLUSH_INTERVAL_MS, DEFAULT_SPOOL_MAX_BYTES, StoreConfig, StoreSettings,
};
/// A route's link ordering, resolved: the library's own type.
pub use ripcord_core::chain::Strategy;
/// The vendors a provider's `kind` can name (`ripcord-providers`' registry).
pub use ripcord_providers::Vendor;
pub use route_table::RouteConfig;

use env::Ctx;
use resolve::resolve;

/// A configuration mistake, located in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `<built-in>`).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key the mistake is in, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// A mistake in `text` (the contents of `file`) at the byte range `span`, under `key`.
    pub fn at(
        file: &str,
        text: &str,
        span: Option<&Range<usize>>,
        key: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            file: file.to_owned(),
            line: span.map(|s| line_at(text, s.start)),
            key,
            message: message.into(),
        }
    }

    /// A TOML syntax or shape error in `text` (the contents of `file`): its line and, where
    /// that line is `key = …`, the key.
    pub fn toml(file: &str, text: &str, e: &toml::de::Error) -> Self {
        let key = e.span().and_then(|s| key_at(text, s.start));
        Self::at(file, text, e.span().as_ref(), key, e.message().trim())
    }
}

/// The 1-based line of byte `offset` in `text` (past the end: the last line).
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
/// Where `cargo xtask setup-model` (or `ripcord setup-model`) puts the default local model:
/// `<cache>/models/smollm2-135m-instruct`, the cache decided at run time
/// ([`ripcord_local_onnx::default_cache_dir`]).
pub fn default_model_dir() -> PathBuf {
    ripcord_local_onnx::default_model_dir()
}

/// Parses and validates a config text.
///
/// # Errors
///
/// A [`ConfigError`] naming the file, line and key of the first mistake.
pub fn parse(file: &str, text: &str, env: &dyn Env) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::toml(file, text, &e))?;
    let cx = Ctx { file, text, env };
    resolve(&cx, raw, false)
}

/// The key written on the line containing byte `offset`, if the line is `key = value`.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_owned())
}
/// The built-in default chain: OpenAI (if `OPENAI_API_KEY` is set) → Anthropic (if
/// `ANTHROPIC_API_KEY`) → the local Llama → a static reply. Providers without a key are skipped
/// with a note.
pub const DEFAULT_CONFIG: &str = r#"
[chain]
order = ["openai", "anthropic", "local"]
deadline_ms = 30000
static_reply = "The AI service is unavailable right now; please try again in a few minutes."

[[providers]]
name = "openai"
kind = "openai"
model = "gpt-4o"
api_key_env = "OPENAI_API_KEY"

[[providers]]
name = "anthropic"
kind = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "ANTHROPIC_API_KEY"

[[providers]]
name = "local"
kind = "local-onnx"
"#;

/// The built-in default config (providers without a key are skipped, not errors).
///
/// # Errors
///
/// Only when no provider is usable.
pub fn builtin(env: &dyn Env) -> Result<Config, ConfigError> {
    let file = "<built-in default config>";
    let raw: RawConfig =
        toml::from_str(DEFAULT_CONFIG).map_err(|e| ConfigError::toml(file, DEFAULT_CONFIG, &e))?;
    let cx = Ctx {
        file,
        text: DEFAULT_CONFIG,
        env,
    };
    resolve(&cx, raw, true)
}

/// Loads a config file, or the built-in default when `path` is `None`.
///
/// # Errors
///
/// Unreadable file, or any [`ConfigError`].
pub fn load(path: Option<&Path>, env: &dyn Env) -> Result<Config, ConfigError> {
    match path {
        None => builtin(env),
        Some(p) => {
            let file = p.display().to_string();
            let text = std::fs::read_to_string(p).map_err(|e| ConfigError {
                file: file.clone(),
                line: None,
                key: None,
                message: format!("cannot read the config file: {e}"),
            })?;
            parse(&file, &text, env)
        }
    }
}
