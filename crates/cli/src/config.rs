//! The TOML configuration of the `ripcord` binary: parsing, `${ENV_VAR}` interpolation and
//! validation with errors that name the file, the line and the key.
//!
//! ```toml
//! [chain]
//! order = ["primary", "backup", "local"]   # names of providers, tried in this order
//! deadline_ms = 15000                       # one budget for the whole call
//! static_reply = "The AI service is busy; please try again in a few minutes."
//!
//! [[providers]]
//! name = "primary"
//! kind = "openai"
//! model = "gpt-4o"
//! api_key_env = "OPENAI_API_KEY"
//! [providers.retry]
//! max_attempts = 3
//! base_delay_ms = 1000
//! [providers.breaker]
//! failure_threshold = 5
//! open_ms = 60000
//!
//! [[providers]]
//! name = "local"
//! kind = "local-onnx"                       # SmolLM2 from `cargo xtask setup-model`
//! variant = "q8"                            # "q8" (default), "q4" (fastest) or "fp32"
//! threads = 2                               # default: the cores available, at most 4
//!
//! [budget]                                  # optional: tokens per tenant (gateway: x-ripcord-tenant or `user`)
//! tokens_per_window = 200000
//! window_s = 3600
//! tenants = { acme = 1000000 }
//!
//! [state]                                   # optional: share breakers and limits across replicas
//! backend = "redis"                         # "local" (default) or "redis"
//! url = "redis://:${REDIS_PASSWORD}@10.0.0.5:6379/0"
//! replicas = 3                              # each enforces 1/3 of a limit while Redis is down
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

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

/// The kinds of provider a config can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Azure OpenAI.
    AzureOpenai,
    /// DeepSeek.
    Deepseek,
    /// Zhipu GLM.
    Zhipu,
    /// Qwen on DashScope (compatible mode).
    Qwen,
    /// Moonshot / Kimi.
    Moonshot,
    /// Baidu Qianfan v2.
    Qianfan,
    /// Ollama's OpenAI-compatible endpoint.
    Ollama,
    /// vLLM's OpenAI-compatible server.
    Vllm,
    /// The local Llama on ONNX Runtime.
    LocalOnnx,
}

impl ProviderKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::AzureOpenai => "azure-openai",
            ProviderKind::Deepseek => "deepseek",
            ProviderKind::Zhipu => "zhipu",
            ProviderKind::Qwen => "qwen",
            ProviderKind::Moonshot => "moonshot",
            ProviderKind::Qianfan => "qianfan",
            ProviderKind::Ollama => "ollama",
            ProviderKind::Vllm => "vllm",
            ProviderKind::LocalOnnx => "local-onnx",
        }
    }

    /// True for kinds that work without an API key.
    pub fn key_optional(self) -> bool {
        matches!(
            self,
            ProviderKind::Ollama | ProviderKind::Vllm | ProviderKind::LocalOnnx
        )
    }
}

/// `[providers.retry]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// Attempts in all (1 = no retry).
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    /// First backoff.
    #[serde(default = "default_base_delay")]
    pub base_delay_ms: u64,
    /// Largest backoff.
    #[serde(default = "default_max_delay")]
    pub max_delay_ms: u64,
}

fn default_attempts() -> u32 {
    3
}
fn default_base_delay() -> u64 {
    1000
}
fn default_max_delay() -> u64 {
    20_000
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: default_attempts(),
            base_delay_ms: default_base_delay(),
            max_delay_ms: default_max_delay(),
        }
    }
}

/// `[providers.breaker]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerConfig {
    /// Consecutive failed calls that open the breaker.
    #[serde(default = "default_failures")]
    pub failure_threshold: u32,
    /// How long it stays open before a probe.
    #[serde(default = "default_open")]
    pub open_ms: u64,
    /// Concurrent probes in half-open.
    #[serde(default = "default_probes")]
    pub half_open_probes: u32,
}

fn default_failures() -> u32 {
    5
}
fn default_open() -> u64 {
    60_000
}
fn default_probes() -> u32 {
    1
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_threshold: default_failures(),
            open_ms: default_open(),
            half_open_probes: default_probes(),
        }
    }
}

/// `[providers.rate_limit]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Requests per minute.
    pub rpm: Option<u32>,
    /// Tokens per minute.
    pub tpm: Option<u32>,
}

/// `[providers.probe]`: opt-in active health checks for one link.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// Time between probes (jittered ±10%).
    #[serde(default = "default_probe_interval")]
    pub interval_ms: u64,
    /// Time limit of one probe.
    #[serde(default = "default_probe_timeout")]
    pub timeout_ms: u64,
    /// Probe even while the breaker is closed and the link healthy.
    #[serde(default)]
    pub probe_healthy: bool,
}

fn default_probe_interval() -> u64 {
    30_000
}
fn default_probe_timeout() -> u64 {
    5_000
}

/// `[redaction]`: opt-in masking of personal data in requests to cloud links.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionConfig {
    /// Put the original values back into the answers.
    #[serde(default = "default_true")]
    pub restore: bool,
    /// Extra patterns: `{ label = "EMPLOYEE_ID", pattern = "EMP-\\d{6}" }`.
    #[serde(default)]
    pub custom: Vec<CustomPattern>,
}

fn default_true() -> bool {
    true
}

/// A user-supplied redaction pattern.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomPattern {
    /// The placeholder label (`[LABEL_n]`).
    pub label: String,
    /// The regex.
    pub pattern: String,
}

/// `[providers.timeouts]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutsConfig {
    /// TCP + TLS connect.
    pub connect_ms: Option<u64>,
    /// Until the response headers / first token.
    pub first_token_ms: Option<u64>,
    /// Largest gap between stream events.
    pub idle_ms: Option<u64>,
}

/// One `[[providers]]` entry, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Its name (what `order` refers to).
    pub name: Spanned<String>,
    /// Which adapter.
    pub kind: ProviderKind,
    /// The model id (for local-onnx: optional, the model folder's name).
    #[serde(default)]
    pub model: Option<Spanned<String>>,
    /// Base URL override.
    #[serde(default)]
    pub base_url: Option<Spanned<String>>,
    /// The environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<Spanned<String>>,
    /// The API key itself (use `${VAR}` interpolation rather than a literal key).
    #[serde(default)]
    pub api_key: Option<Spanned<String>>,
    /// local-onnx: the model folder.
    #[serde(default)]
    pub model_dir: Option<Spanned<String>>,
    /// local-onnx: which model file (`q8` default, `q4`, `fp32`).
    #[serde(default)]
    pub variant: Option<Spanned<String>>,
    /// local-onnx: ONNX Runtime threads per session (default: the cores available, at most 4).
    #[serde(default)]
    pub threads: Option<Spanned<u32>>,
    /// azure-openai: the deployment name.
    #[serde(default)]
    pub deployment: Option<Spanned<String>>,
    /// azure-openai: the api-version.
    #[serde(default)]
    pub api_version: Option<Spanned<String>>,
    /// Time reserved for the links after this one.
    #[serde(default)]
    pub reserve_ms: u64,
    /// Retry policy (defaults apply when absent).
    #[serde(default)]
    pub retry: Option<RetryConfig>,
    /// Breaker policy (defaults apply when absent).
    #[serde(default)]
    pub breaker: Option<BreakerConfig>,
    /// Local rate limits.
    #[serde(default)]
    pub rate_limit: Option<RateLimitConfig>,
    /// Per-phase timeouts.
    #[serde(default)]
    pub timeouts: Option<TimeoutsConfig>,
    /// Active health checks.
    #[serde(default)]
    pub probe: Option<ProbeConfig>,
}

/// `[chain]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// Provider names, tried in this order.
    pub order: Vec<Spanned<String>>,
    /// One budget for the whole call.
    #[serde(default = "default_deadline")]
    pub deadline_ms: u64,
    /// The static last-resort reply.
    #[serde(default)]
    pub static_reply: Option<Spanned<String>>,
    /// Per-intent static replies.
    #[serde(default)]
    pub intent_replies: BTreeMap<String, String>,
    /// Per-error-kind routes: kind (snake_case) → provider name.
    #[serde(default)]
    pub routes: BTreeMap<Spanned<String>, Spanned<String>>,
    /// `end_with_error` (default) or `restart`.
    #[serde(default)]
    pub stream_policy: Option<Spanned<String>>,
    /// A notice attached to answers served by a fallback.
    #[serde(default)]
    pub fallback_notice: Option<String>,
    /// Link order: `ordered` (default), `lowest_latency`, `lowest_cost` or `weighted`.
    #[serde(default)]
    pub strategy: Option<Spanned<String>>,
    /// `lowest_latency`: samples a link needs before it is reordered.
    #[serde(default)]
    pub min_samples: Option<u32>,
    /// `weighted`: provider name → share of first tries.
    #[serde(default)]
    pub weights: BTreeMap<Spanned<String>, u32>,
    /// After a failure, prefer a link of another vendor / failure domain.
    #[serde(default)]
    pub independent_fallbacks: bool,
}

fn default_deadline() -> u64 {
    15_000
}

/// `[server]`: the gateway.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen address.
    #[serde(default)]
    pub listen: Option<Spanned<String>>,
    /// Environment variable holding the gateway's bearer keys, comma-separated.
    #[serde(default)]
    pub api_keys_env: Option<Spanned<String>>,
    /// Largest request body in bytes.
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
}

/// `[embeddings]`: which providers serve `POST /v1/embeddings`, and with which model.
///
/// Vectors of different models are not comparable, so every listed provider serves the same
/// `model`; the gateway falls back across them in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// Provider names (of OpenAI-compatible kinds), tried in this order.
    pub providers: Vec<Spanned<String>>,
    /// The embedding model all of them serve.
    pub model: Spanned<String>,
}

/// `[budget]`: token budgets per tenant, around the whole chain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Tokens each tenant may use per window.
    pub tokens_per_window: Spanned<u64>,
    /// The window in seconds (default 3600).
    #[serde(default)]
    pub window_s: Option<Spanned<u64>>,
    /// Per-tenant overrides: tenant → tokens per window.
    #[serde(default)]
    pub tenants: BTreeMap<String, u64>,
    /// Also budget calls without a tenant, as one shared anonymous tenant (default: not).
    #[serde(default)]
    pub anonymous: bool,
}

/// `[state]`: where breaker and rate-limit state lives (one process, or Redis shared by all
/// replicas).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// `"local"` (default) or `"redis"`.
    #[serde(default)]
    pub backend: Option<Spanned<String>>,
    /// `redis://[user:password@]host:port[/db]` (required for `redis`; may hold a password, so
    /// it is never printed).
    #[serde(default)]
    pub url: Option<Spanned<String>>,
    /// The longest one Redis operation may hold a call before it falls back to local state.
    #[serde(default)]
    pub op_timeout_ms: Option<Spanned<u64>>,
    /// The longest the connection to Redis may take.
    #[serde(default)]
    pub connect_timeout_ms: Option<Spanned<u64>>,
    /// While Redis is unreachable, how often a call tries it again.
    #[serde(default)]
    pub retry_interval_ms: Option<Spanned<u64>>,
    /// How many replicas share the limits: while Redis is unreachable each enforces its share.
    #[serde(default)]
    pub replicas: Option<Spanned<u32>>,
}

impl fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateConfig")
            .field("backend", &self.backend.as_ref().map(Spanned::get_ref))
            .field("url", &self.url.as_ref().map(|u| redact_url(u.get_ref())))
            .field(
                "op_timeout_ms",
                &self.op_timeout_ms.as_ref().map(Spanned::get_ref),
            )
            .field(
                "connect_timeout_ms",
                &self.connect_timeout_ms.as_ref().map(Spanned::get_ref),
            )
            .field(
                "retry_interval_ms",
                &self.retry_interval_ms.as_ref().map(Spanned::get_ref),
            )
            .field("replicas", &self.replicas.as_ref().map(Spanned::get_ref))
            .finish()
    }
}

/// `scheme://user:password@host…` → `scheme://[redacted]@host…`; URLs without userinfo are
/// unchanged.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://[redacted]{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// The whole file, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// The chain.
    pub chain: ChainConfig,
    /// The providers.
    #[serde(default)]
    pub providers: Vec<ProviderConfig>,
    /// The gateway.
    #[serde(default)]
    pub server: ServerConfig,
    /// Embeddings for the gateway.
    #[serde(default)]
    pub embeddings: Option<EmbeddingsConfig>,
    /// Redaction before cloud calls.
    #[serde(default)]
    pub redaction: Option<RedactionConfig>,
    /// Where resilience state lives.
    #[serde(default)]
    pub state: StateConfig,
    /// Token budgets per tenant.
    #[serde(default)]
    pub budget: Option<BudgetConfig>,
}

/// The link ordering strategy, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Strategy {
    /// The configured order.
    #[default]
    Ordered,
    /// By time to first token, once a link has `min_samples`.
    LowestLatency {
        /// Samples before a link is reordered.
        min_samples: u32,
    },
    /// By price for the estimated tokens.
    LowestCost,
    /// First link by weighted random choice.
    Weighted(Vec<(String, u32)>),
}

/// `[budget]`, resolved: tokens per tenant per window, charged once per call of the chain
/// (whichever link serves it) with the usage the vendor reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantBudget {
    /// Tokens each tenant may use per window.
    pub tokens_per_window: u64,
    /// The window in seconds.
    pub window_s: u64,
    /// Per-tenant overrides.
    pub tenants: Vec<(String, u64)>,
    /// Budget calls without a tenant too.
    pub anonymous: bool,
}

/// Where breaker and rate-limit state lives, resolved from `[state]`.
#[derive(Debug, Clone, Default)]
pub enum StateBackend {
    /// In each process (the default).
    #[default]
    Local,
    /// In one Redis shared by every replica.
    Redis(RedisSettings),
}

/// `[state] backend = "redis"`, resolved.
#[derive(Clone)]
pub struct RedisSettings {
    /// The URL, which may hold a password (never printed: see [`RedisSettings::redacted_url`]).
    pub url: secrecy::SecretString,
    /// The URL with its userinfo replaced by `[redacted]`.
    pub redacted_url: String,
    /// The longest one Redis operation may take (default 50 ms).
    pub op_timeout_ms: u64,
    /// The longest the connection may take (default 2000 ms).
    pub connect_timeout_ms: u64,
    /// How often a degraded replica tries Redis again (default 1000 ms).
    pub retry_interval_ms: u64,
    /// How many replicas share the limits (default 1).
    pub replicas: u32,
}

impl fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &self.redacted_url)
            .field("op_timeout_ms", &self.op_timeout_ms)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("retry_interval_ms", &self.retry_interval_ms)
            .field("replicas", &self.replicas)
            .finish()
    }
}

/// A provider, validated and resolved.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Its name.
    pub name: String,
    /// Which adapter.
    pub kind: ProviderKind,
    /// The model id.
    pub model: Option<String>,
    /// Base URL override.
    pub base_url: Option<String>,
    /// The API key, resolved (never printed: see [`Provider::redacted`]).
    pub api_key: Option<secrecy::SecretString>,
    /// Where the key came from, for messages (`env OPENAI_API_KEY`, `config`).
    pub key_source: Option<String>,
    /// local-onnx model folder.
    pub model_dir: Option<PathBuf>,
    /// local-onnx variant (`None`: the library's default).
    pub variant: Option<ripcord_local_onnx::Variant>,
    /// local-onnx threads per session (`None`: the library's default).
    pub threads: Option<usize>,
    /// azure deployment.
    pub deployment: Option<String>,
    /// azure api-version.
    pub api_version: Option<String>,
    /// Reserve for later links.
    pub reserve_ms: u64,
    /// Retry policy.
    pub retry: RetryConfig,
    /// Breaker policy.
    pub breaker: BreakerConfig,
    /// Rate limits.
    pub rate_limit: Option<RateLimitConfig>,
    /// Timeouts.
    pub timeouts: TimeoutsConfig,
    /// Active health checks.
    pub probe: Option<ProbeConfig>,
}

impl Provider {
    /// A one-line description with the key redacted.
    pub fn redacted(&self) -> String {
        let mut s = format!("{} ({})", self.name, self.kind.as_str());
        if let Some(m) = &self.model {
            s.push_str(&format!(" model={m}"));
        }
        if let Some(u) = &self.base_url {
            s.push_str(&format!(" base_url={u}"));
        }
        if let Some(d) = &self.model_dir {
            s.push_str(&format!(" model_dir={}", d.display()));
        }
        match &self.key_source {
            Some(src) => s.push_str(&format!(" key=[redacted] from {src}")),
            None => s.push_str(" key=none"),
        }
        s.push_str(&format!(
            " retry={}x/{}ms breaker={}/{}ms",
            self.retry.max_attempts,
            self.retry.base_delay_ms,
            self.breaker.failure_threshold,
            self.breaker.open_ms
        ));
        s
    }
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from.
    pub source: String,
    /// Providers in chain order.
    pub chain: Vec<Provider>,
    /// Deadline.
    pub deadline_ms: u64,
    /// Static reply.
    pub static_reply: Option<String>,
    /// Per-intent replies.
    pub intent_replies: BTreeMap<String, String>,
    /// Routes: kind → provider name.
    pub routes: Vec<(ripcord_core::ErrorKind, String)>,
    /// Restart streams on failure after content.
    pub stream_restart: bool,
    /// Fallback notice.
    pub fallback_notice: Option<String>,
    /// Gateway listen address.
    pub listen: Option<String>,
    /// Gateway bearer keys.
    pub gateway_keys: Vec<secrecy::SecretString>,
    /// Largest gateway request body.
    pub max_body_bytes: usize,
    /// Redaction before cloud calls, when configured.
    pub redaction: Option<RedactionConfig>,
    /// The link ordering strategy.
    pub strategy: Strategy,
    /// Prefer another vendor after a failure.
    pub independent_fallbacks: bool,
    /// Embedding providers (resolved) and their model, when configured.
    pub embeddings: Option<(Vec<Provider>, String)>,
    /// Where breaker, rate-limit and budget state lives.
    pub state: StateBackend,
    /// Token budgets per tenant, when configured.
    pub budget: Option<TenantBudget>,
    /// Notes for stderr (e.g. providers skipped for lack of a key).
    pub notes: Vec<String>,
}

/// Looks up environment variables (injectable for tests).
pub trait Env {
    /// The variable's value, if set and not empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl<F: Fn(&str) -> Option<String>> Env for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    env: &'a dyn Env,
}

impl Ctx<'_> {
    fn line_of(&self, span: &Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn err(
        &self,
        span: Option<&Range<usize>>,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            line: span.map(|s| self.line_of(s)),
            key: Some(key.to_owned()),
            message: message.into(),
        }
    }

    /// Replaces `${NAME}` with the variable's value; a missing variable is an error at the key.
    fn interpolate(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let raw = value.get_ref();
        let mut out = String::with_capacity(raw.len());
        let mut rest = raw.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.err(Some(&value.span()), key, "unterminated `${` in value"));
            };
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.err(
                    Some(&value.span()),
                    key,
                    format!("`${{{name}}}` is not a valid variable name"),
                ));
            }
            match self.env.var(name) {
                Some(v) => out.push_str(&v),
                None => {
                    return Err(self.err(
                        Some(&value.span()),
                        key,
                        format!("environment variable {name} is not set"),
                    ));
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn opt(&self, v: &Option<Spanned<String>>, key: &str) -> Result<Option<String>, ConfigError> {
        v.as_ref().map(|s| self.interpolate(s, key)).transpose()
    }
}

/// Where `cargo xtask setup-model` puts the default local model.
pub fn default_model_dir() -> PathBuf {
    ripcord_local_onnx_dir()
}

fn ripcord_local_onnx_dir() -> PathBuf {
    let cache = std::env::var_os("RIPCORD_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.cache")));
    cache.join("models").join("smollm2-135m-instruct")
}

/// Parses and validates a config text.
///
/// # Errors
///
/// A [`ConfigError`] naming the file, line and key of the first mistake.
pub fn parse(file: &str, text: &str, env: &dyn Env) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let key = e.span().and_then(|s| key_at(text, s.start));
        ConfigError {
            file: file.to_owned(),
            line,
            key,
            message: e.message().to_owned(),
        }
    })?;
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

fn resolve(cx: &Ctx<'_>, raw: RawConfig, lenient_keys: bool) -> Result<Config, ConfigError> {
    let mut notes = Vec::new();
    let mut by_name: BTreeMap<String, &ProviderConfig> = BTreeMap::new();
    for p in &raw.providers {
        let name = p.name.get_ref();
        if name.is_empty() {
            return Err(cx.err(
                Some(&p.name.span()),
                "name",
                "provider names must not be empty",
            ));
        }
        if by_name.insert(name.clone(), p).is_some() {
            return Err(cx.err(
                Some(&p.name.span()),
                "name",
                format!("provider {name:?} is defined twice"),
            ));
        }
    }
    if raw.chain.order.is_empty() {
        return Err(cx.err(None, "chain.order", "the chain needs at least one provider"));
    }
    if raw.chain.deadline_ms == 0 {
        return Err(cx.err(None, "chain.deadline_ms", "must be greater than zero"));
    }
    let mut chain = Vec::new();
    for entry in &raw.chain.order {
        let name = entry.get_ref();
        let Some(p) = by_name.get(name) else {
            let known: Vec<_> = by_name.keys().map(String::as_str).collect();
            return Err(cx.err(
                Some(&entry.span()),
                "chain.order",
                format!(
                    "unknown provider {name:?} (defined: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        };
        if chain.iter().any(|c: &Provider| &c.name == name) {
            return Err(cx.err(
                Some(&entry.span()),
                "chain.order",
                format!("provider {name:?} appears twice in the order"),
            ));
        }
        match resolve_provider(cx, p, lenient_keys)? {
            Some(provider) => chain.push(provider),
            None => notes.push(format!(
                "skipping provider {name:?}: no API key ({})",
                p.api_key_env
                    .as_ref()
                    .map_or("no key configured".to_owned(), |e| format!(
                        "{} is not set",
                        e.get_ref()
                    ))
            )),
        }
    }
    if chain.is_empty() {
        return Err(cx.err(
            None,
            "chain.order",
            "no provider in the chain is usable (all lack API keys)",
        ));
    }
    let mut routes = Vec::new();
    for (kind, target) in &raw.chain.routes {
        let k = ripcord_core::ErrorKind::parse(kind.get_ref()).ok_or_else(|| {
            cx.err(
                Some(&kind.span()),
                "chain.routes",
                format!("unknown error kind {:?}", kind.get_ref()),
            )
        })?;
        if !by_name.contains_key(target.get_ref()) {
            return Err(cx.err(
                Some(&target.span()),
                "chain.routes",
                format!("unknown provider {:?}", target.get_ref()),
            ));
        }
        routes.push((k, target.get_ref().clone()));
    }
    let stream_restart = match raw
        .chain
        .stream_policy
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span()))
    {
        None | Some(("end_with_error", _)) => false,
        Some(("restart", _)) => true,
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                "chain.stream_policy",
                format!("expected \"end_with_error\" or \"restart\", got {other:?}"),
            ));
        }
    };
    let gateway_keys = match &raw.server.api_keys_env {
        None => Vec::new(),
        Some(var) => match cx.env.var(var.get_ref()) {
            Some(v) => v
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(|k| secrecy::SecretString::from(k.to_owned()))
                .collect(),
            None => {
                return Err(cx.err(
                    Some(&var.span()),
                    "server.api_keys_env",
                    format!("environment variable {} is not set", var.get_ref()),
                ));
            }
        },
    };
    let embeddings = match &raw.embeddings {
        None => None,
        Some(e) => {
            let model = cx.interpolate(&e.model, "embeddings.model")?;
            let mut providers = Vec::new();
            for name in &e.providers {
                let Some(p) = by_name.get(name.get_ref()) else {
                    return Err(cx.err(
                        Some(&name.span()),
                        "embeddings.providers",
                        format!("unknown provider {:?}", name.get_ref()),
                    ));
                };
                if matches!(p.kind, ProviderKind::Anthropic | ProviderKind::LocalOnnx) {
                    return Err(cx.err(
                        Some(&name.span()),
                        "embeddings.providers",
                        format!(
                            "provider {:?} ({}) has no embeddings endpoint",
                            name.get_ref(),
                            p.kind.as_str()
                        ),
                    ));
                }
                if let Some(provider) = resolve_provider(cx, p, lenient_keys)? {
                    providers.push(provider);
                }
            }
            if providers.is_empty() {
                return Err(cx.err(None, "embeddings.providers", "no usable embedding provider"));
            }
            Some((providers, model))
        }
    };
    let strategy = match raw
        .chain
        .strategy
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span()))
    {
        None | Some(("ordered", _)) => Strategy::Ordered,
        Some(("lowest_latency", _)) => Strategy::LowestLatency {
            min_samples: raw.chain.min_samples.unwrap_or(5),
        },
        Some(("lowest_cost", _)) => Strategy::LowestCost,
        Some(("weighted", span)) => {
            if raw.chain.weights.is_empty() {
                return Err(cx.err(
                    Some(&span),
                    "chain.weights",
                    "strategy \"weighted\" needs a [chain.weights] table (provider = share)",
                ));
            }
            let mut shares = Vec::new();
            for (name, share) in &raw.chain.weights {
                if !chain.iter().any(|p| &p.name == name.get_ref()) {
                    return Err(cx.err(
                        Some(&name.span()),
                        "chain.weights",
                        format!("{:?} is not a provider in the chain", name.get_ref()),
                    ));
                }
                shares.push((name.get_ref().clone(), *share));
            }
            Strategy::Weighted(shares)
        }
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                "chain.strategy",
                format!("expected \"ordered\", \"lowest_latency\", \"lowest_cost\" or \"weighted\", got {other:?}"),
            ));
        }
    };
    let state = resolve_state(cx, &raw.state)?;
    let budget = raw
        .budget
        .as_ref()
        .map(|b| resolve_budget(cx, b))
        .transpose()?;
    Ok(Config {
        state,
        budget,
        strategy,
        independent_fallbacks: raw.chain.independent_fallbacks,
        redaction: raw.redaction,
        embeddings,
        source: cx.file.to_owned(),
        chain,
        deadline_ms: raw.chain.deadline_ms,
        static_reply: cx.opt(&raw.chain.static_reply, "chain.static_reply")?,
        intent_replies: raw.chain.intent_replies,
        routes,
        stream_restart,
        fallback_notice: raw.chain.fallback_notice,
        listen: cx.opt(&raw.server.listen, "server.listen")?,
        gateway_keys,
        max_body_bytes: raw.server.max_body_bytes.unwrap_or(1 << 20),
        notes,
    })
}

fn resolve_budget(cx: &Ctx<'_>, raw: &BudgetConfig) -> Result<TenantBudget, ConfigError> {
    let tokens = &raw.tokens_per_window;
    if *tokens.get_ref() == 0 {
        return Err(cx.err(
            Some(&tokens.span()),
            "budget.tokens_per_window",
            "must be at least 1",
        ));
    }
    let window_s = match &raw.window_s {
        Some(w) if *w.get_ref() == 0 => {
            return Err(cx.err(Some(&w.span()), "budget.window_s", "must be at least 1"));
        }
        Some(w) => *w.get_ref(),
        None => 3600,
    };
    Ok(TenantBudget {
        tokens_per_window: *tokens.get_ref(),
        window_s,
        tenants: raw.tenants.iter().map(|(t, n)| (t.clone(), *n)).collect(),
        anonymous: raw.anonymous,
    })
}

fn resolve_state(cx: &Ctx<'_>, raw: &StateConfig) -> Result<StateBackend, ConfigError> {
    let backend = raw.backend.as_ref();
    let is_redis = match backend.map(|b| (b.get_ref().as_str(), b.span())) {
        None | Some(("local", _)) => false,
        Some(("redis", span)) => {
            if !cfg!(feature = "redis") {
                return Err(cx.err(
                    Some(&span),
                    "state.backend",
                    "this ripcord was built without the `redis` feature; rebuild with \
                     `--features redis` (it is on by default) or use backend = \"local\"",
                ));
            }
            true
        }
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                "state.backend",
                format!("expected \"local\" or \"redis\", got {other:?}"),
            ));
        }
    };
    let positive = |v: &Option<Spanned<u64>>, key: &str, default: u64| match v {
        Some(n) if *n.get_ref() == 0 => {
            Err(cx.err(Some(&n.span()), key, "must be greater than zero"))
        }
        Some(n) => Ok(*n.get_ref()),
        None => Ok(default),
    };
    let op_timeout_ms = positive(&raw.op_timeout_ms, "state.op_timeout_ms", 50)?;
    let connect_timeout_ms = positive(&raw.connect_timeout_ms, "state.connect_timeout_ms", 2000)?;
    let retry_interval_ms = positive(&raw.retry_interval_ms, "state.retry_interval_ms", 1000)?;
    let replicas = match &raw.replicas {
        Some(n) if *n.get_ref() == 0 => {
            return Err(cx.err(Some(&n.span()), "state.replicas", "must be at least 1"));
        }
        Some(n) => *n.get_ref(),
        None => 1,
    };
    if !is_redis {
        if let Some(url) = &raw.url {
            return Err(cx.err(
                Some(&url.span()),
                "state.url",
                "a Redis URL needs backend = \"redis\" (the backend is \"local\")",
            ));
        }
        return Ok(StateBackend::Local);
    }
    let Some(url_raw) = &raw.url else {
        return Err(cx.err(
            backend.map(Spanned::span).as_ref(),
            "state.url",
            "backend \"redis\" needs `url = \"redis://host:port\"`",
        ));
    };
    let url = cx.interpolate(url_raw, "state.url")?;
    let redacted_url = redact_url(&url);
    let scheme = url.split_once("://").map(|(s, _)| s);
    match scheme {
        Some("redis" | "redis+unix" | "unix") => {}
        Some("rediss") => {
            return Err(cx.err(
                Some(&url_raw.span()),
                "state.url",
                "TLS (rediss://) is not supported by this build; use redis:// on a private \
                 network or a TLS-terminating proxy",
            ));
        }
        _ => {
            return Err(cx.err(
                Some(&url_raw.span()),
                "state.url",
                format!("expected a redis://host:port URL, got {redacted_url:?}"),
            ));
        }
    }
    Ok(StateBackend::Redis(RedisSettings {
        url: secrecy::SecretString::from(url),
        redacted_url,
        op_timeout_ms,
        connect_timeout_ms,
        retry_interval_ms,
        replicas,
    }))
}

/// `variant` and `threads`, which only a local-onnx provider takes.
fn local_settings(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
) -> Result<(Option<ripcord_local_onnx::Variant>, Option<usize>), ConfigError> {
    if p.kind != ProviderKind::LocalOnnx {
        for (key, span) in [
            ("variant", p.variant.as_ref().map(Spanned::span)),
            ("threads", p.threads.as_ref().map(Spanned::span)),
        ] {
            if let Some(span) = span {
                return Err(cx.err(
                    Some(&span),
                    key,
                    format!(
                        "`{key}` is a local-onnx setting; provider {:?} is {}",
                        p.name.get_ref(),
                        p.kind.as_str()
                    ),
                ));
            }
        }
        return Ok((None, None));
    }
    let variant = match &p.variant {
        Some(v) => Some(
            v.get_ref()
                .parse::<ripcord_local_onnx::Variant>()
                .map_err(|e| cx.err(Some(&v.span()), "variant", e.to_string()))?,
        ),
        None => None,
    };
    let threads = match &p.threads {
        Some(t) if *t.get_ref() == 0 => {
            return Err(cx.err(Some(&t.span()), "threads", "must be at least 1"));
        }
        Some(t) => Some(*t.get_ref() as usize),
        None => None,
    };
    Ok((variant, threads))
}

fn resolve_provider(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    lenient_keys: bool,
) -> Result<Option<Provider>, ConfigError> {
    let kind = p.kind;
    let model = cx.opt(&p.model, "model")?;
    if model.is_none() && kind != ProviderKind::LocalOnnx && kind != ProviderKind::AzureOpenai {
        return Err(cx.err(
            Some(&p.name.span()),
            "model",
            format!(
                "provider {:?} ({}) needs a `model`",
                p.name.get_ref(),
                kind.as_str()
            ),
        ));
    }
    let (api_key, key_source) = match (&p.api_key, &p.api_key_env) {
        (Some(k), _) => (
            Some(cx.interpolate(k, "api_key")?),
            Some("config".to_owned()),
        ),
        (None, Some(var)) => match cx.env.var(var.get_ref()) {
            Some(v) => (Some(v), Some(format!("env {}", var.get_ref()))),
            None if lenient_keys => return Ok(None),
            None => {
                return Err(cx.err(
                    Some(&var.span()),
                    "api_key_env",
                    format!(
                        "environment variable {} is not set (provider {:?})",
                        var.get_ref(),
                        p.name.get_ref()
                    ),
                ));
            }
        },
        (None, None) if kind.key_optional() => (None, None),
        (None, None) => {
            return Err(cx.err(
                Some(&p.name.span()),
                "api_key_env",
                format!(
                    "provider {:?} ({}) needs `api_key_env` or `api_key`",
                    p.name.get_ref(),
                    kind.as_str()
                ),
            ));
        }
    };
    if kind == ProviderKind::AzureOpenai && (p.deployment.is_none() || p.base_url.is_none()) {
        return Err(cx.err(
            Some(&p.name.span()),
            "deployment",
            "azure-openai needs `base_url` (the resource endpoint) and `deployment`",
        ));
    }
    if kind == ProviderKind::Vllm && p.base_url.is_none() {
        return Err(cx.err(
            Some(&p.name.span()),
            "base_url",
            "vllm has no default host: set `base_url`",
        ));
    }
    let base_url = cx.opt(&p.base_url, "base_url")?;
    if let (Some(u), Some(span)) = (&base_url, p.base_url.as_ref().map(Spanned::span))
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(cx.err(
            Some(&span),
            "base_url",
            format!("expected an http:// or https:// URL, got {u:?}"),
        ));
    }
    let model_dir = match cx.opt(&p.model_dir, "model_dir")? {
        Some(d) => Some(PathBuf::from(d)),
        None if kind == ProviderKind::LocalOnnx => Some(default_model_dir()),
        None => None,
    };
    let (variant, threads) = local_settings(cx, p)?;
    let retry = p.retry.clone().unwrap_or_default();
    if retry.max_attempts == 0 {
        return Err(cx.err(
            Some(&p.name.span()),
            "retry.max_attempts",
            "must be at least 1 (1 = no retry)",
        ));
    }
    let breaker = p.breaker.clone().unwrap_or_default();
    if breaker.failure_threshold == 0 {
        return Err(cx.err(
            Some(&p.name.span()),
            "breaker.failure_threshold",
            "must be at least 1",
        ));
    }
    Ok(Some(Provider {
        name: p.name.get_ref().clone(),
        kind,
        model,
        base_url,
        api_key: api_key.map(secrecy::SecretString::from),
        key_source,
        model_dir,
        variant,
        threads,
        deployment: cx.opt(&p.deployment, "deployment")?,
        api_version: cx.opt(&p.api_version, "api_version")?,
        reserve_ms: p.reserve_ms,
        retry,
        breaker,
        rate_limit: p.rate_limit.clone(),
        timeouts: p.timeouts.clone().unwrap_or_default(),
        probe: p.probe.clone(),
    }))
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
    let raw: RawConfig = toml::from_str(DEFAULT_CONFIG).map_err(|e| ConfigError {
        file: file.to_owned(),
        line: None,
        key: None,
        message: e.message().to_owned(),
    })?;
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

impl Config {
    /// The resolved chain, printable (keys redacted).
    pub fn describe(&self) -> String {
        let mut s = format!(
            "config: {}\nchain (deadline {} ms):\n",
            self.source, self.deadline_ms
        );
        for (i, p) in self.chain.iter().enumerate() {
            s.push_str(&format!("  {}. {}\n", i + 1, p.redacted()));
        }
        match &self.static_reply {
            Some(r) => s.push_str(&format!("  then static reply: {r:?}\n")),
            None => s.push_str("  then: no static reply (the call fails)\n"),
        }
        if let Some((providers, model)) = &self.embeddings {
            let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
            s.push_str(&format!("embeddings: {model} via {}\n", names.join(" -> ")));
        }
        for (k, t) in &self.routes {
            s.push_str(&format!("  route: {k} -> {t}\n"));
        }
        if !self.gateway_keys.is_empty() {
            s.push_str(&format!(
                "gateway keys: {} [redacted]\n",
                self.gateway_keys.len()
            ));
        }
        if let Some(b) = &self.budget {
            s.push_str(&format!(
                "budget: {} tokens per tenant per {} s ({} override(s){})\n",
                b.tokens_per_window,
                b.window_s,
                b.tenants.len(),
                if b.anonymous {
                    ", anonymous calls too"
                } else {
                    ""
                }
            ));
        }
        match &self.state {
            StateBackend::Local => s.push_str("state: local (per process)\n"),
            StateBackend::Redis(r) => s.push_str(&format!(
                "state: redis {} (op timeout {} ms, {} replica(s))\n",
                r.redacted_url, r.op_timeout_ms, r.replicas
            )),
        }
        s
    }
}
