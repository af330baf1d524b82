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
//!
//! [budget]                                  # optional: tokens per tenant (the tenant of the caller's key)
//! tokens_per_window = 200000
//! window_s = 3600
//! tenants = { acme = 1000000 }
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
    /// The failure classes retried on the same link (`rate_limited`, `overloaded`,
    /// `server_error`, `timeout`, `silent`, `network`, `invalid_response`). Default: all but
    /// `silent` (no response byte within the first-token limit) and `overloaded`, which fall
    /// to the next link at once.
    #[serde(default)]
    pub retry_on: Option<Vec<String>>,
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
            retry_on: None,
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
    /// The pause after a vendor 429 without Retry-After (default 1000).
    #[serde(default)]
    pub pause_429_ms: Option<u64>,
}

/// `[providers.bulkhead]`: a bound on calls in flight to one link, with a short queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkheadConfig {
    /// Calls in flight at once.
    pub max_in_flight: usize,
    /// Calls waiting at once (default 256).
    #[serde(default)]
    pub max_queue: Option<usize>,
    /// The longest a call waits for a slot before the chain moves on (default 1000).
    #[serde(default)]
    pub max_queue_wait_ms: Option<u64>,
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
    /// Unparseable stream events one stream may skip before it fails (default 3).
    pub max_skipped_events: Option<u32>,
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
    /// A bound on calls in flight.
    #[serde(default)]
    pub bulkhead: Option<BulkheadConfig>,
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
    /// The budget for getting an answer: time to a stream's first content, and whole
    /// non-streamed calls.
    #[serde(default = "default_deadline")]
    pub deadline_ms: u64,
    /// The bound of a stream after its first content (default 10 minutes).
    #[serde(default = "default_stream_max")]
    pub stream_max_ms: u64,
    /// The least budget an attempt needs to be useful (default 1 s).
    #[serde(default = "default_min_attempt")]
    pub min_attempt_ms: u64,
    /// Hold a stream's first part this long before committing it to the client: a cut, stall
    /// or in-band error within it falls over to the next link unseen (default 0).
    #[serde(default)]
    pub stream_holdback_ms: u64,
    /// A prompt too large for a link's window: `none` (skip the link, default) or `oldest`
    /// (drop the oldest non-system turns to fit).
    #[serde(default)]
    pub trim: Option<Spanned<String>>,
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
    // Leaves the next link 15 s after a first link's 30 s first-token timeout.
    45_000
}

fn default_stream_max() -> u64 {
    600_000
}

fn default_min_attempt() -> u64 {
    1_000
}

/// One `[[routes]]` entry: a named chain clients pick with the request's `model`.
///
/// Every `[chain]` setting may appear in a route (the rest of the table is read as a
/// [`ChainConfig`]), so a knob added to `[chain]` is a route knob too.
#[derive(Debug, Clone)]
pub struct RouteConfig {
    /// What clients send as `model`.
    pub name: Spanned<String>,
    /// More names for the same route.
    pub aliases: Vec<Spanned<String>>,
    /// The route's chain settings (`order`, `deadline_ms`, `static_reply`, …).
    pub chain: ChainConfig,
}

impl<'de> Deserialize<'de> for RouteConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RouteVisitor)
    }
}

struct RouteVisitor;

impl<'de> serde::de::Visitor<'de> for RouteVisitor {
    type Value = RouteConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a [[routes]] table with `name` and `order`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RouteConfig, A::Error> {
        let mut own = RouteKeys {
            map,
            name: None,
            aliases: Vec::new(),
        };
        // The chain settings are read through a view of the table without the route's own
        // keys; serde's derive then checks them (unknown keys included) exactly as for
        // `[chain]`, and toml's spans survive because each value is read from toml directly.
        let chain =
            ChainConfig::deserialize(serde::de::value::MapAccessDeserializer::new(&mut own))?;
        let name = own
            .name
            .ok_or_else(|| serde::de::Error::missing_field("name"))?;
        Ok(RouteConfig {
            name,
            aliases: own.aliases,
            chain,
        })
    }
}

/// A route table seen as its chain settings: `name` and `aliases` are taken out on the way.
struct RouteKeys<A> {
    map: A,
    name: Option<Spanned<String>>,
    aliases: Vec<Spanned<String>>,
}

impl<'de, A: serde::de::MapAccess<'de>> serde::de::MapAccess<'de> for &mut RouteKeys<A> {
    type Error = A::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        use serde::de::IntoDeserializer;
        loop {
            let Some(key) = self.map.next_key::<String>()? else {
                return Ok(None);
            };
            match key.as_str() {
                "name" => {
                    if self.name.is_some() {
                        return Err(serde::de::Error::duplicate_field("name"));
                    }
                    self.name = Some(self.map.next_value()?);
                }
                "aliases" => self.aliases = self.map.next_value()?,
                k if !chain_fields().contains(&k) => {
                    // Refused while reading its value, so the error carries the key's line.
                    let never = self.map.next_value_seed(UnknownRouteKey(key))?;
                    match never {}
                }
                _ => return seed.deserialize(key.into_deserializer()).map(Some),
            }
        }
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// The keys a route table takes besides the chain settings.
const ROUTE_KEYS: &[&str] = &["name", "aliases"];

/// The keys `[chain]` takes: serde's own list for [`ChainConfig`], so it follows the struct.
fn chain_fields() -> &'static [&'static str] {
    /// A deserializer that only records the field names a struct asks for.
    struct Capture(Option<&'static [&'static str]>);

    impl<'de> serde::Deserializer<'de> for &mut Capture {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom(
                "only struct field names are captured",
            ))
        }

        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(fields);
            Err(serde::de::Error::custom("captured"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    static FIELDS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
    FIELDS.get_or_init(|| {
        let mut c = Capture(None);
        let _ = ChainConfig::deserialize(&mut c);
        c.0.unwrap_or(&[])
    })
}

/// The value of a key a route table does not take: deserializing it is the error.
struct UnknownRouteKey(String);

impl<'de> serde::de::DeserializeSeed<'de> for UnknownRouteKey {
    type Value = std::convert::Infallible;

    fn deserialize<D: serde::Deserializer<'de>>(self, _: D) -> Result<Self::Value, D::Error> {
        let mut expected: Vec<&str> = ROUTE_KEYS.to_vec();
        expected.extend_from_slice(chain_fields());
        Err(serde::de::Error::custom(format!(
            "unknown field `{}` in a [[routes]] entry, expected one of {}",
            self.0,
            expected
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

/// One `[[server.keys]]` entry: a gateway key bound to a tenant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// The tenant every request authenticated by this key is charged to.
    pub tenant: Spanned<String>,
    /// The environment variable holding the key (the secret never sits in the file).
    pub key_env: Spanned<String>,
    /// Routes (names or aliases) this key may use; absent = all.
    #[serde(default)]
    pub routes: Option<Vec<Spanned<String>>>,
    /// Let the client narrow the tenant (`x-ripcord-tenant` or the body's `user`) to one of its
    /// own end users; the budget is then charged at both levels.
    #[serde(default)]
    pub sub_tenants: bool,
    /// Requests per minute this key may send.
    #[serde(default)]
    pub rpm: Option<Spanned<u32>>,
    /// Tokens per minute this key may use.
    #[serde(default)]
    pub tpm: Option<Spanned<u32>>,
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
    /// Gateway keys bound to tenants.
    #[serde(default)]
    pub keys: Vec<KeyConfig>,
    /// Longest wait for a request's header block, in ms (default 10 000).
    #[serde(default)]
    pub header_timeout_ms: Option<u64>,
    /// Longest wait for a request's whole body, in ms (default 30 000).
    #[serde(default)]
    pub body_timeout_ms: Option<u64>,
    /// How long an idle keep-alive connection is kept open, in ms (default 60 000).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// Most connections open at once (default 1024); more wait in the listen backlog.
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// On shutdown, how long in-flight requests may finish before they are cut, in ms
    /// (default 30 000).
    #[serde(default)]
    pub shutdown_grace_ms: Option<u64>,
    /// Chat calls served at once per route (default 256).
    #[serde(default)]
    pub max_concurrency: Option<usize>,
    /// Chat calls waiting for a slot per route (default 256); beyond it, an immediate 503.
    #[serde(default)]
    pub max_queue: Option<usize>,
    /// Put the full failure detail (links, models, vendor messages) in client-facing errors.
    #[serde(default)]
    pub expose_errors: bool,
    /// Serve `GET /metrics` on this address instead of the gateway's port.
    #[serde(default)]
    pub metrics_listen: Option<Spanned<String>>,
}

/// The resolved `[server]` limits of the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    /// Longest wait for a request's header block.
    pub header_timeout: std::time::Duration,
    /// Longest wait for a request's whole body.
    pub body_timeout: std::time::Duration,
    /// How long an idle keep-alive connection is kept.
    pub idle_timeout: std::time::Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// The drain deadline on shutdown.
    pub shutdown_grace: std::time::Duration,
    /// Chat calls served at once per route.
    pub max_concurrency: usize,
    /// Chat calls waiting for a slot per route.
    pub max_queue: usize,
    /// Full failure detail in client-facing errors.
    pub expose_errors: bool,
    /// A separate address for `GET /metrics`.
    pub metrics_listen: Option<String>,
}

impl Default for ServerSettings {
    fn default() -> Self {
        use std::time::Duration;
        ServerSettings {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            shutdown_grace: Duration::from_secs(30),
            max_concurrency: 256,
            max_queue: 256,
            expose_errors: false,
            metrics_listen: None,
        }
    }
}

fn resolve_server(cx: &Ctx<'_>, raw: &ServerConfig) -> Result<ServerSettings, ConfigError> {
    use std::time::Duration;
    let d = ServerSettings::default();
    let ms = |v: Option<u64>, key: &str, default: Duration| match v {
        None => Ok(default),
        Some(0) => Err(cx.err(
            None,
            &format!("server.{key}"),
            "must be at least 1 (milliseconds)",
        )),
        Some(n) => Ok(Duration::from_millis(n)),
    };
    let count = |v: Option<usize>, key: &str, default: usize, min: usize| match v {
        None => Ok(default),
        Some(n) if n < min => Err(cx.err(
            None,
            &format!("server.{key}"),
            format!("must be at least {min}"),
        )),
        Some(n) => Ok(n),
    };
    Ok(ServerSettings {
        header_timeout: ms(raw.header_timeout_ms, "header_timeout_ms", d.header_timeout)?,
        body_timeout: ms(raw.body_timeout_ms, "body_timeout_ms", d.body_timeout)?,
        idle_timeout: ms(raw.idle_timeout_ms, "idle_timeout_ms", d.idle_timeout)?,
        max_connections: count(raw.max_connections, "max_connections", d.max_connections, 1)?,
        shutdown_grace: ms(raw.shutdown_grace_ms, "shutdown_grace_ms", d.shutdown_grace)?,
        max_concurrency: count(raw.max_concurrency, "max_concurrency", d.max_concurrency, 1)?,
        max_queue: count(raw.max_queue, "max_queue", d.max_queue, 0)?,
        expose_errors: raw.expose_errors,
        metrics_listen: cx.opt(&raw.metrics_listen, "server.metrics_listen")?,
    })
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
    /// Also budget calls without a tenant, as one shared anonymous tenant (default: yes).
    #[serde(default)]
    pub anonymous: Option<bool>,
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
    /// The chain, when the config has a single one.
    #[serde(default)]
    pub chain: Option<ChainConfig>,
    /// Named chains (`[[routes]]`), picked by the request's `model`.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
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
    /// A bound on calls in flight.
    pub bulkhead: Option<BulkheadConfig>,
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

    /// Every effective setting of the link — timeouts, reserve, retry, breaker, stream
    /// tolerance — with the defaults filled in, as `check-config` prints it.
    pub fn effective(&self) -> String {
        let retry_on = self
            .retry
            .retry_on
            .as_ref()
            .and_then(|on| ripcord_resilience::RetryOn::parse(on).ok())
            .unwrap_or_default();
        let mut s = format!(
            "retry: {} attempts, backoff {}..{} ms (full jitter; a 429 without retry-after waits at least {} ms), retry_on {retry_on}
             breaker: opens after {} failures, for {} ms
             reserve: {} ms kept for the links after this one",
            self.retry.max_attempts,
            self.retry.base_delay_ms,
            self.retry.max_delay_ms.max(self.retry.base_delay_ms),
            self.retry.base_delay_ms / 2,
            self.breaker.failure_threshold,
            self.breaker.open_ms,
            self.reserve_ms,
        );
        if self.kind != ProviderKind::LocalOnnx {
            let d = ripcord_providers::Timeouts::default();
            let t = &self.timeouts;
            let ms = |d: std::time::Duration| d.as_millis();
            s.push_str(&format!(
                "\ntimeouts: connect {} ms, first token {} ms, stream idle {} ms; up to {} unparseable stream events skipped",
                t.connect_ms.map_or(ms(d.connect), u128::from),
                t.first_token_ms.map_or(ms(d.first_token), u128::from),
                t.idle_ms.map_or(ms(d.stream_idle), u128::from),
                t.max_skipped_events.unwrap_or(d.max_skipped_events),
            ));
        }
        s
    }
}

/// One chain's settings, resolved (from `[chain]` or one `[[routes]]` entry).
#[derive(Debug, Clone)]
pub struct ChainSpec {
    /// Provider names, in order (providers skipped for lack of a key are left out).
    pub order: Vec<String>,
    /// Deadline (to first content, and of whole non-streamed calls).
    pub deadline_ms: u64,
    /// The bound of a stream after its first content.
    pub stream_max_ms: u64,
    /// The least useful attempt budget.
    pub min_attempt_ms: u64,
    /// How long a stream's first part is held before it is committed.
    pub stream_holdback_ms: u64,
    /// Trim the oldest turns to fit a link's window.
    pub trim_oldest: bool,
    /// Static reply.
    pub static_reply: Option<String>,
    /// Per-intent replies.
    pub intent_replies: BTreeMap<String, String>,
    /// Per-error-kind fallbacks: kind → provider name.
    pub routes: Vec<(ripcord_core::ErrorKind, String)>,
    /// Restart streams on failure after content.
    pub stream_restart: bool,
    /// Fallback notice.
    pub fallback_notice: Option<String>,
    /// The link ordering strategy.
    pub strategy: Strategy,
    /// Prefer another vendor after a failure.
    pub independent_fallbacks: bool,
}

/// A route: a named chain over the shared providers.
#[derive(Debug, Clone)]
pub struct Route {
    /// Its name (what clients send as `model`); `ripcord` for a config with only `[chain]`.
    pub name: String,
    /// More names for it.
    pub aliases: Vec<String>,
    /// Its chain.
    pub spec: ChainSpec,
}

impl Route {
    /// True when `model` is this route's name or one of its aliases.
    pub fn answers_to(&self, model: &str) -> bool {
        self.name == model || self.aliases.iter().any(|a| a == model)
    }
}

/// A gateway key, resolved: who it is, and what it may do. The secret is never printed.
#[derive(Clone)]
pub struct GatewayKey {
    /// The tenant its requests are charged to; `None` for `api_keys_env` keys.
    pub tenant: Option<String>,
    /// Where the secret came from (`env ACME_GATEWAY_KEY`).
    pub source: String,
    /// The secret.
    pub secret: secrecy::SecretString,
    /// Indexes into [`Config::routes`] this key may use; `None` = all.
    pub routes: Option<Vec<usize>>,
    /// Whether the client may name a sub-tenant.
    pub sub_tenants: bool,
    /// Requests per minute.
    pub rpm: Option<u32>,
    /// Tokens per minute.
    pub tpm: Option<u32>,
}

impl GatewayKey {
    /// A stable, secret-free label: `tenant` (or `untenanted`) and the variable it came from.
    pub fn label(&self) -> String {
        format!(
            "{}@{}",
            self.tenant.as_deref().unwrap_or("untenanted"),
            self.source.trim_start_matches("env ")
        )
    }
}

impl fmt::Debug for GatewayKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayKey")
            .field("tenant", &self.tenant)
            .field("source", &self.source)
            .field("secret", &"[redacted]")
            .field("routes", &self.routes)
            .field("sub_tenants", &self.sub_tenants)
            .field("rpm", &self.rpm)
            .field("tpm", &self.tpm)
            .finish()
    }
}

/// The shortest gateway key accepted.
pub const MIN_KEY_CHARS: usize = 16;

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from.
    pub source: String,
    /// Every provider some route uses, each once, in order of first use. Routes refer to them
    /// by name and share them: one breaker, one limiter, one health record per provider.
    pub chain: Vec<Provider>,
    /// The routes, in file order; the first is the default (`ripcord chat` without `--route`).
    pub routes: Vec<Route>,
    /// True for a config with only `[chain]`: its one route answers any `model`.
    pub any_model: bool,
    /// Gateway listen address.
    pub listen: Option<String>,
    /// Gateway keys (`[[server.keys]]`, then those of `api_keys_env`).
    pub gateway_keys: Vec<GatewayKey>,
    /// Largest gateway request body.
    pub max_body_bytes: usize,
    /// The gateway's connection, timeout, shedding and error-detail settings.
    pub server: ServerSettings,
    /// Redaction before cloud calls, when configured.
    pub redaction: Option<RedactionConfig>,
    /// Embedding providers (resolved) and their model, when configured.
    pub embeddings: Option<(Vec<Provider>, String)>,
    /// Where breaker, rate-limit and budget state lives.
    pub state: StateBackend,
    /// Token budgets per tenant, when configured.
    pub budget: Option<TenantBudget>,
    /// Notes for stderr (e.g. providers skipped for lack of a key).
    pub notes: Vec<String>,
}

impl Config {
    /// The default route (the first; a resolved config always has one).
    pub fn default_route(&self) -> Option<&Route> {
        self.routes.first()
    }

    /// The index of the route answering to `model` (a name or an alias).
    pub fn route_index(&self, model: &str) -> Option<usize> {
        self.routes.iter().position(|r| r.answers_to(model))
    }

    /// A provider by name.
    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.chain.iter().find(|p| p.name == name)
    }

    /// Every name clients may send as `model`: each route's name, then its aliases.
    pub fn model_names(&self) -> Vec<String> {
        self.routes
            .iter()
            .flat_map(|r| std::iter::once(r.name.clone()).chain(r.aliases.iter().cloned()))
            .collect()
    }
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
    let mut used = Used {
        by_name,
        resolved: BTreeMap::new(),
        order: Vec::new(),
        lenient_keys,
    };
    let (routes, any_model) = match (&raw.chain, raw.routes.is_empty()) {
        (Some(_), false) => {
            let span = raw.routes.first().map(|r| r.name.span());
            return Err(cx.err(
                span.as_ref(),
                "routes",
                "a config has either one `[chain]` or named `[[routes]]`, not both: move the \
                 [chain] settings into a [[routes]] entry",
            ));
        }
        (None, true) => {
            return Err(cx.err(
                None,
                "chain",
                "the config needs a `[chain]` (one chain) or `[[routes]]` (named chains)",
            ));
        }
        (Some(chain), true) => {
            let spec = resolve_chain(cx, chain, "chain", None, &mut used, &mut notes)?;
            let route = Route {
                name: "ripcord".to_owned(),
                aliases: Vec::new(),
                spec,
            };
            (vec![route], true)
        }
        (None, false) => (
            resolve_routes(cx, &raw.routes, &mut used, &mut notes)?,
            false,
        ),
    };
    let gateway_keys = resolve_keys(cx, &raw.server, &routes, any_model)?;
    let embeddings = match &raw.embeddings {
        None => None,
        Some(e) => {
            let model = cx.interpolate(&e.model, "embeddings.model")?;
            let mut providers = Vec::new();
            for name in &e.providers {
                let Some(p) = used.by_name.get(name.get_ref()) else {
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
    let state = resolve_state(cx, &raw.state)?;
    let budget = raw
        .budget
        .as_ref()
        .map(|b| resolve_budget(cx, b))
        .transpose()?;
    Ok(Config {
        state,
        budget,
        redaction: raw.redaction,
        embeddings,
        source: cx.file.to_owned(),
        chain: used.order,
        routes,
        any_model,
        listen: cx.opt(&raw.server.listen, "server.listen")?,
        gateway_keys,
        max_body_bytes: raw.server.max_body_bytes.unwrap_or(1 << 20),
        server: resolve_server(cx, &raw.server)?,
        notes,
    })
}

/// The providers routes refer to: each resolved once, on first use, and kept in that order.
struct Used<'a> {
    by_name: BTreeMap<String, &'a ProviderConfig>,
    /// name → the provider, or `None` when it was skipped (no key, built-in config only).
    resolved: BTreeMap<String, Option<usize>>,
    order: Vec<Provider>,
    lenient_keys: bool,
}

impl Used<'_> {
    /// Resolves `name` (once); `None` when it is skipped for lack of a key.
    fn get(
        &mut self,
        cx: &Ctx<'_>,
        p: &ProviderConfig,
        notes: &mut Vec<String>,
    ) -> Result<Option<usize>, ConfigError> {
        let name = p.name.get_ref();
        if let Some(r) = self.resolved.get(name) {
            return Ok(*r);
        }
        let r = match resolve_provider(cx, p, self.lenient_keys)? {
            Some(provider) => {
                self.order.push(provider);
                Some(self.order.len() - 1)
            }
            None => {
                notes.push(format!(
                    "skipping provider {name:?}: no API key ({})",
                    p.api_key_env
                        .as_ref()
                        .map_or("no key configured".to_owned(), |e| format!(
                            "{} is not set",
                            e.get_ref()
                        ))
                ));
                None
            }
        };
        self.resolved.insert(name.clone(), r);
        Ok(r)
    }
}

/// `[[routes]]`: unique names and aliases, each route's chain resolved.
fn resolve_routes(
    cx: &Ctx<'_>,
    raw: &[RouteConfig],
    used: &mut Used<'_>,
    notes: &mut Vec<String>,
) -> Result<Vec<Route>, ConfigError> {
    // Every name a client may send, and the route it belongs to.
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    for r in raw {
        let name = r.name.get_ref();
        if name.trim().is_empty() {
            return Err(cx.err(
                Some(&r.name.span()),
                "routes.name",
                "route names must not be empty",
            ));
        }
        if let Some(owner) = names.insert(name, name) {
            let what = if owner == name {
                format!("route {name:?} is defined twice")
            } else {
                format!("route name {name:?} is already an alias of route {owner:?}")
            };
            return Err(cx.err(Some(&r.name.span()), "routes.name", what));
        }
    }
    for r in raw {
        let name = r.name.get_ref();
        for alias in &r.aliases {
            let a = alias.get_ref();
            if a.trim().is_empty() {
                return Err(cx.err(
                    Some(&alias.span()),
                    "routes.aliases",
                    format!("route {name:?}: aliases must not be empty"),
                ));
            }
            if let Some(owner) = names.insert(a, name) {
                let what = if owner == a {
                    format!("route {name:?}: alias {a:?} is the name of route {owner:?}")
                } else {
                    format!("route {name:?}: alias {a:?} is already an alias of route {owner:?}")
                };
                return Err(cx.err(Some(&alias.span()), "routes.aliases", what));
            }
        }
    }
    let mut routes = Vec::with_capacity(raw.len());
    for r in raw {
        let spec = resolve_chain(cx, &r.chain, "routes", Some(r.name.get_ref()), used, notes)?;
        routes.push(Route {
            name: r.name.get_ref().clone(),
            aliases: r.aliases.iter().map(|a| a.get_ref().clone()).collect(),
            spec,
        });
    }
    Ok(routes)
}

/// One chain's settings (`[chain]`, or a route's under key prefix `routes`).
fn resolve_chain(
    cx: &Ctx<'_>,
    raw: &ChainConfig,
    prefix: &str,
    route: Option<&str>,
    used: &mut Used<'_>,
    notes: &mut Vec<String>,
) -> Result<ChainSpec, ConfigError> {
    let key = |k: &str| format!("{prefix}.{k}");
    let msg = |m: String| match route {
        Some(r) => format!("route {r:?}: {m}"),
        None => m,
    };
    if raw.order.is_empty() {
        return Err(cx.err(
            None,
            &key("order"),
            msg("the chain needs at least one provider".to_owned()),
        ));
    }
    if raw.deadline_ms == 0 {
        return Err(cx.err(
            None,
            &key("deadline_ms"),
            msg("must be greater than zero".to_owned()),
        ));
    }
    if raw.stream_max_ms == 0 {
        return Err(cx.err(
            None,
            &key("stream_max_ms"),
            msg("must be greater than zero".to_owned()),
        ));
    }
    let mut order: Vec<String> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for entry in &raw.order {
        let name = entry.get_ref();
        let Some(p) = used.by_name.get(name).copied() else {
            let known: Vec<_> = used.by_name.keys().map(String::as_str).collect();
            return Err(cx.err(
                Some(&entry.span()),
                &key("order"),
                msg(format!(
                    "unknown provider {name:?} (defined: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )),
            ));
        };
        if seen.contains(&name.as_str()) {
            return Err(cx.err(
                Some(&entry.span()),
                &key("order"),
                msg(format!("provider {name:?} appears twice in the order")),
            ));
        }
        seen.push(name);
        if used.get(cx, p, notes)?.is_some() {
            order.push(name.clone());
        }
    }
    if order.is_empty() {
        return Err(cx.err(
            None,
            &key("order"),
            msg("no provider in the chain is usable (all lack API keys)".to_owned()),
        ));
    }
    let mut routes = Vec::new();
    for (kind, target) in &raw.routes {
        let k = ripcord_core::ErrorKind::parse(kind.get_ref()).ok_or_else(|| {
            cx.err(
                Some(&kind.span()),
                &key("routes"),
                msg(format!("unknown error kind {:?}", kind.get_ref())),
            )
        })?;
        if !used.by_name.contains_key(target.get_ref()) {
            return Err(cx.err(
                Some(&target.span()),
                &key("routes"),
                msg(format!("unknown provider {:?}", target.get_ref())),
            ));
        }
        routes.push((k, target.get_ref().clone()));
    }
    let stream_restart = match raw
        .stream_policy
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span()))
    {
        None | Some(("end_with_error", _)) => false,
        Some(("restart", _)) => true,
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                &key("stream_policy"),
                msg(format!(
                    "expected \"end_with_error\" or \"restart\", got {other:?}"
                )),
            ));
        }
    };
    let trim_oldest = match raw.trim.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
        None | Some(("none", _)) => false,
        Some(("oldest", _)) => true,
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                &key("trim"),
                msg(format!("expected \"none\" or \"oldest\", got {other:?}")),
            ));
        }
    };
    let strategy = match raw
        .strategy
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span()))
    {
        None | Some(("ordered", _)) => Strategy::Ordered,
        Some(("lowest_latency", _)) => Strategy::LowestLatency {
            min_samples: raw.min_samples.unwrap_or(5),
        },
        Some(("lowest_cost", _)) => Strategy::LowestCost,
        Some(("weighted", span)) => {
            if raw.weights.is_empty() {
                return Err(cx.err(
                    Some(&span),
                    &key("weights"),
                    msg(
                        "strategy \"weighted\" needs a weights table (provider = share)".to_owned(),
                    ),
                ));
            }
            let mut shares = Vec::new();
            for (name, share) in &raw.weights {
                if !order.iter().any(|p| p == name.get_ref()) {
                    return Err(cx.err(
                        Some(&name.span()),
                        &key("weights"),
                        msg(format!(
                            "{:?} is not a provider in the chain",
                            name.get_ref()
                        )),
                    ));
                }
                shares.push((name.get_ref().clone(), *share));
            }
            Strategy::Weighted(shares)
        }
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                &key("strategy"),
                msg(format!("expected \"ordered\", \"lowest_latency\", \"lowest_cost\" or \"weighted\", got {other:?}")),
            ));
        }
    };
    Ok(ChainSpec {
        order,
        deadline_ms: raw.deadline_ms,
        stream_max_ms: raw.stream_max_ms,
        min_attempt_ms: raw.min_attempt_ms,
        stream_holdback_ms: raw.stream_holdback_ms,
        trim_oldest,
        static_reply: cx.opt(&raw.static_reply, &key("static_reply"))?,
        intent_replies: raw.intent_replies.clone(),
        routes,
        stream_restart,
        fallback_notice: raw.fallback_notice.clone(),
        strategy,
        independent_fallbacks: raw.independent_fallbacks,
    })
}

/// `[[server.keys]]` and `api_keys_env`: every key set, long enough, and distinct.
fn resolve_keys(
    cx: &Ctx<'_>,
    server: &ServerConfig,
    routes: &[Route],
    any_model: bool,
) -> Result<Vec<GatewayKey>, ConfigError> {
    let mut keys: Vec<GatewayKey> = Vec::new();
    // The span each key was declared at, for the duplicate check.
    let mut spans = Vec::new();
    let short = |var: &str, n: usize| {
        format!(
            "the key in {var} is {n} characters long; gateway keys need at least {MIN_KEY_CHARS} \
             (generate one with `openssl rand -hex 32`)"
        )
    };
    for k in &server.keys {
        let tenant = k.tenant.get_ref().trim();
        if tenant.is_empty() || tenant.len() > 256 {
            return Err(cx.err(
                Some(&k.tenant.span()),
                "server.keys.tenant",
                "a tenant is 1 to 256 characters",
            ));
        }
        let var = k.key_env.get_ref();
        let Some(secret) = cx.env.var(var) else {
            return Err(cx.err(
                Some(&k.key_env.span()),
                "server.keys.key_env",
                format!("environment variable {var} is not set (the key of tenant {tenant:?})"),
            ));
        };
        let secret = secret.trim().to_owned();
        let n = secret.chars().count();
        if n < MIN_KEY_CHARS {
            return Err(cx.err(
                Some(&k.key_env.span()),
                "server.keys.key_env",
                short(var, n),
            ));
        }
        let allowed = match &k.routes {
            None => None,
            Some(_) if any_model => {
                return Err(cx.err(
                    Some(&k.tenant.span()),
                    "server.keys.routes",
                    "`routes` on a key needs named [[routes]] in the config (this one has a single [chain])",
                ));
            }
            Some(list) => {
                let mut idx = Vec::new();
                for r in list {
                    let Some(i) = routes.iter().position(|x| x.answers_to(r.get_ref())) else {
                        let known: Vec<&str> = routes.iter().map(|x| x.name.as_str()).collect();
                        return Err(cx.err(
                            Some(&r.span()),
                            "server.keys.routes",
                            format!(
                                "unknown route {:?} (routes: {})",
                                r.get_ref(),
                                known.join(", ")
                            ),
                        ));
                    };
                    if !idx.contains(&i) {
                        idx.push(i);
                    }
                }
                Some(idx)
            }
        };
        let positive = |v: &Option<Spanned<u32>>, key: &str| match v {
            Some(n) if *n.get_ref() == 0 => Err(cx.err(Some(&n.span()), key, "must be at least 1")),
            Some(n) => Ok(Some(*n.get_ref())),
            None => Ok(None),
        };
        keys.push(GatewayKey {
            tenant: Some(tenant.to_owned()),
            source: format!("env {var}"),
            secret: secrecy::SecretString::from(secret),
            routes: allowed,
            sub_tenants: k.sub_tenants,
            rpm: positive(&k.rpm, "server.keys.rpm")?,
            tpm: positive(&k.tpm, "server.keys.tpm")?,
        });
        spans.push(k.key_env.span());
    }
    if let Some(var) = &server.api_keys_env {
        let name = var.get_ref();
        let Some(v) = cx.env.var(name) else {
            return Err(cx.err(
                Some(&var.span()),
                "server.api_keys_env",
                format!("environment variable {name} is not set"),
            ));
        };
        for (i, k) in v
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .enumerate()
        {
            let n = k.chars().count();
            if n < MIN_KEY_CHARS {
                return Err(cx.err(
                    Some(&var.span()),
                    "server.api_keys_env",
                    short(&format!("{name} (key {} of the list)", i + 1), n),
                ));
            }
            keys.push(GatewayKey {
                tenant: None,
                source: format!("env {name}"),
                secret: secrecy::SecretString::from(k.to_owned()),
                routes: None,
                sub_tenants: false,
                rpm: None,
                tpm: None,
            });
            spans.push(var.span());
        }
    }
    {
        use secrecy::ExposeSecret;
        for (i, k) in keys.iter().enumerate() {
            if let Some(j) = keys[..i]
                .iter()
                .position(|o| o.secret.expose_secret() == k.secret.expose_secret())
            {
                let other = &keys[j];
                return Err(cx.err(
                    spans.get(i),
                    "server.keys.key_env",
                    format!(
                        "the key in {} is the same secret as the key in {} (tenant {}); every \
                         gateway key must be distinct, or the tenant of a request is ambiguous",
                        k.source.trim_start_matches("env "),
                        other.source.trim_start_matches("env "),
                        other.tenant.as_deref().unwrap_or("none"),
                    ),
                ));
            }
        }
    }
    Ok(keys)
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
        anonymous: raw.anonymous.unwrap_or(true),
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
    if let Some(on) = &retry.retry_on
        && let Err(e) = ripcord_resilience::RetryOn::parse(on)
    {
        return Err(cx.err(Some(&p.name.span()), "retry.retry_on", e.to_string()));
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
        bulkhead: p.bulkhead.clone(),
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
    /// Why `serve` cannot run this config, if it cannot: `stream_policy = "restart"` asks the
    /// chain to restart a failed stream on the next link and tell its consumer to discard what
    /// it showed — but a gateway's client already has the response headers and part of the
    /// first answer, and the OpenAI wire has no way to say "discard". Serving it would call the
    /// backup and throw its answer away. `stream_holdback_ms` is the gateway's way to fall over
    /// mid-stream without the client seeing it.
    pub fn serve_refusal(&self) -> Option<String> {
        let restart: Vec<&str> = self
            .routes
            .iter()
            .filter(|r| r.spec.stream_restart)
            .map(|r| r.name.as_str())
            .collect();
        if restart.is_empty() {
            return None;
        }
        Some(format!(
            "{}: stream_policy = \"restart\" cannot be served: a client of `serve` already has the headers and part of the first answer, so the restarted answer would be thrown away; use stream_policy = \"end_with_error\" with stream_holdback_ms to fall over mid-stream before the client sees anything",
            if self.any_model {
                "[chain]".to_owned()
            } else {
                format!(
                    "route {}",
                    restart
                        .iter()
                        .map(|r| format!("{r:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ))
    }

    /// The resolved routes, providers and keys, printable (secrets redacted).
    pub fn describe(&self) -> String {
        let mut s = format!("config: {}\n", self.source);
        let numbered = |s: &mut String, spec: &ChainSpec| {
            for (i, name) in spec.order.iter().enumerate() {
                let line = self
                    .provider(name)
                    .map_or_else(|| name.clone(), Provider::redacted);
                s.push_str(&format!("  {}. {line}\n", i + 1));
                if let Some(p) = self.provider(name) {
                    for l in p.effective().lines() {
                        s.push_str(&format!("       {l}\n"));
                    }
                }
            }
            s.push_str(&format!(
                "  streams: first content within the deadline ({} ms), then bounded by stream_max {} ms; hold-back {} ms; after commit: {}\n",
                spec.deadline_ms,
                spec.stream_max_ms,
                spec.stream_holdback_ms,
                if spec.stream_restart {
                    "restart on the next link (library and `chat` only: `serve` refuses it)"
                } else {
                    "end with the error"
                },
            ));
            match &spec.static_reply {
                Some(r) => s.push_str(&format!("  then static reply: {r:?}\n")),
                None => s.push_str("  then: no static reply (the call fails)\n"),
            }
            for (k, t) in &spec.routes {
                s.push_str(&format!("  on {k}: fall back to {t}\n"));
            }
        };
        if self.any_model {
            for r in &self.routes {
                s.push_str(&format!(
                    "chain (deadline {} ms; answers any model):\n",
                    r.spec.deadline_ms
                ));
                numbered(&mut s, &r.spec);
            }
        } else {
            for r in &self.routes {
                s.push_str(&format!("route {:?}", r.name));
                if !r.aliases.is_empty() {
                    s.push_str(&format!(" (aliases: {})", r.aliases.join(", ")));
                }
                s.push_str(&format!(" (deadline {} ms):\n", r.spec.deadline_ms));
                numbered(&mut s, &r.spec);
            }
            let shared: Vec<String> = self
                .chain
                .iter()
                .filter_map(|p| {
                    let users: Vec<&str> = self
                        .routes
                        .iter()
                        .filter(|r| r.spec.order.contains(&p.name))
                        .map(|r| r.name.as_str())
                        .collect();
                    (users.len() > 1).then(|| format!("{} ({})", p.name, users.join(", ")))
                })
                .collect();
            if !shared.is_empty() {
                s.push_str(&format!(
                    "shared providers (one breaker, limiter and health record each): {}\n",
                    shared.join("; ")
                ));
            }
        }
        if let Some((providers, model)) = &self.embeddings {
            let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
            s.push_str(&format!("embeddings: {model} via {}\n", names.join(" -> ")));
        }
        if !self.gateway_keys.is_empty() {
            s.push_str(&format!("gateway keys: {}\n", self.gateway_keys.len()));
            for k in &self.gateway_keys {
                s.push_str(&format!(
                    "  key=[redacted] from {} tenant={}",
                    k.source,
                    k.tenant.as_deref().unwrap_or("none")
                ));
                if let Some(list) = &k.routes {
                    let names: Vec<&str> = list
                        .iter()
                        .filter_map(|&i| self.routes.get(i).map(|r| r.name.as_str()))
                        .collect();
                    s.push_str(&format!(" routes={}", names.join(",")));
                }
                if k.sub_tenants {
                    s.push_str(" sub_tenants");
                }
                if let Some(n) = k.rpm {
                    s.push_str(&format!(" rpm={n}"));
                }
                if let Some(n) = k.tpm {
                    s.push_str(&format!(" tpm={n}"));
                }
                s.push('\n');
            }
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
