//! The config file's shapes as written: what serde reads, before any validation.

use std::collections::BTreeMap;
use std::fmt;

use ripcord_providers::Vendor;
use serde::Deserialize;
use toml::Spanned;

use super::route_table::RouteConfig;

/// The kinds of provider a config can name: a vendor of `ripcord-providers` (its registry,
/// [`Vendor`], holds the names), or the local model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// A vendor's API.
    Vendor(Vendor),
    /// The local Llama on ONNX Runtime.
    LocalOnnx,
}

/// The config spelling of [`ProviderKind::LocalOnnx`].
const LOCAL_ONNX: &str = "local-onnx";

impl<'de> Deserialize<'de> for ProviderKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if name == LOCAL_ONNX {
            return Ok(ProviderKind::LocalOnnx);
        }
        Vendor::from_name(&name)
            .map(ProviderKind::Vendor)
            .ok_or_else(|| {
                const KINDS: [&str; Vendor::NAMES.len() + 1] = {
                    let mut all = [LOCAL_ONNX; Vendor::NAMES.len() + 1];
                    let mut i = 0;
                    while i < Vendor::NAMES.len() {
                        all[i] = Vendor::NAMES[i];
                        i += 1;
                    }
                    all
                };
                serde::de::Error::unknown_variant(&name, &KINDS)
            })
    }
}

impl ProviderKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Vendor(v) => v.name(),
            ProviderKind::LocalOnnx => LOCAL_ONNX,
        }
    }

    /// The vendor, when it is one.
    pub fn vendor(self) -> Option<Vendor> {
        match self {
            ProviderKind::Vendor(v) => Some(v),
            ProviderKind::LocalOnnx => None,
        }
    }

    /// True for kinds that work without an API key (see [`Vendor::key_optional`]; the local
    /// model needs none).
    pub fn key_optional(self) -> bool {
        self.vendor().is_none_or(Vendor::key_optional)
    }

    /// True for the Vertex AI kinds (`project`, `location`, `credentials_file` / `token_env`).
    pub fn is_vertex(self) -> bool {
        self.vendor().is_some_and(Vendor::is_vertex)
    }
}

/// `[providers.retry]`. A field left out is the library's default ([`RetryPolicy::default`]);
/// a local-onnx link without this section gets no retry (see [`super::defaults`]).
///
/// [`RetryPolicy::default`]: ripcord_resilience::RetryPolicy
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// Attempts in all (1 = no retry).
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// First backoff.
    #[serde(default)]
    pub base_delay_ms: Option<u64>,
    /// Largest backoff.
    #[serde(default)]
    pub max_delay_ms: Option<u64>,
    /// The failure classes retried on the same link (`rate_limited`, `overloaded`,
    /// `server_error`, `timeout`, `silent`, `network`, `invalid_response`). Default: all but
    /// `silent` (no response byte within the first-token limit) and `overloaded`, which fall
    /// to the next link at once.
    #[serde(default)]
    pub retry_on: Option<Vec<String>>,
}

/// `[providers.breaker]`. A field left out is the library's default
/// ([`BreakerPolicy::default`](ripcord_resilience::BreakerPolicy)).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerConfig {
    /// Consecutive failed calls that open the breaker.
    #[serde(default)]
    pub failure_threshold: Option<u32>,
    /// How long it stays open before a probe: the first spell.
    #[serde(default)]
    pub open_ms: Option<u64>,
    /// The longest spell: re-trips without a close in between double the spell up to this.
    #[serde(default)]
    pub open_max_ms: Option<u64>,
    /// While open, check the vendor's model list this often (0 turns it off).
    #[serde(default)]
    pub background_probe_ms: Option<u64>,
    /// Concurrent probes in half-open.
    #[serde(default)]
    pub half_open_probes: Option<u32>,
    /// Also trip when a share of the recent calls failed.
    #[serde(default)]
    pub failure_rate: Option<super::raw_policies::FailureRateConfig>,
    /// Successful probes needed to close from half-open.
    #[serde(default)]
    pub success_threshold: Option<u32>,
    /// Per-error-kind overrides: kind (snake_case) → `"ignore"`, `"count"` or
    /// `{ trip_for_ms = N }`.
    #[serde(default)]
    pub kinds: BTreeMap<Spanned<String>, super::raw_policies::KindActionConfig>,
}

/// `[providers.rate_limit]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Requests per minute.
    pub rpm: Option<u32>,
    /// Tokens per minute.
    pub tpm: Option<u32>,
    /// The pause after a vendor 429 without Retry-After (default
    /// [`DEFAULT_429_PAUSE`](ripcord_resilience::rate_limit::DEFAULT_429_PAUSE)).
    #[serde(default)]
    pub pause_429_ms: Option<u64>,
}

/// `[providers.bulkhead]`: a bound on calls in flight to one link, with a short queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkheadConfig {
    /// Calls in flight at once.
    pub max_in_flight: usize,
    /// Calls waiting at once (default: the library's,
    /// [`BulkheadPolicy`](ripcord_resilience::BulkheadPolicy)).
    #[serde(default)]
    pub max_queue: Option<usize>,
    /// The longest a call waits for a slot before the chain moves on (default
    /// [`DEFAULT_MAX_QUEUE_WAIT`](ripcord_resilience::bulkhead::DEFAULT_MAX_QUEUE_WAIT)).
    #[serde(default)]
    pub max_queue_wait_ms: Option<u64>,
}

/// `[providers.probe]`: opt-in active health checks for one link. A field left out is the
/// library's default ([`ProbePolicy::default`](ripcord_resilience::ProbePolicy)), applied when
/// the link is built.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// Time between probes (jittered).
    #[serde(default)]
    pub interval_ms: Option<u64>,
    /// Time limit of one probe.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Probe even while the breaker is closed and the link healthy.
    #[serde(default)]
    pub probe_healthy: bool,
}

/// `[redaction]`: opt-in masking of personal data in requests to cloud links.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionConfig {
    /// Put the original values back into the answers (default: the library's,
    /// [`RedactPolicy::builder`](ripcord_resilience::RedactPolicy::builder)).
    #[serde(default)]
    pub restore: Option<bool>,
    /// Extra patterns: `{ label = "EMPLOYEE_ID", pattern = "EMP-\\d{6}" }`.
    #[serde(default)]
    pub custom: Vec<CustomPattern>,
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
    /// Until the response headers / first token, for streams and non-streamed calls alike
    /// (defaults: 10 s for a stream, 30 s for a non-streamed call).
    pub first_token_ms: Option<u64>,
    /// A stream's first token only (over `first_token_ms`).
    #[serde(default)]
    pub stream_first_token_ms: Option<u64>,
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
    /// local-onnx: answers decoded together in one batched step (default 1: no batching).
    #[serde(default)]
    pub max_batch: Option<Spanned<u32>>,
    /// local-onnx: `"cpu"` (default) or `"cuda"` (refused when ONNX Runtime has no CUDA provider).
    #[serde(default)]
    pub device: Option<Spanned<String>>,
    /// azure-openai: the deployment name.
    #[serde(default)]
    pub deployment: Option<Spanned<String>>,
    /// azure-openai: the api-version.
    #[serde(default)]
    pub api_version: Option<Spanned<String>>,
    /// vertex, vertex-anthropic: the Google Cloud project (default: the key file's project,
    /// else `GOOGLE_CLOUD_PROJECT`).
    #[serde(default)]
    pub project: Option<Spanned<String>>,
    /// vertex, vertex-anthropic: the location (`us-central1` default, `global`, …).
    #[serde(default)]
    pub location: Option<Spanned<String>>,
    /// vertex, vertex-anthropic: the service-account key file (default:
    /// `GOOGLE_APPLICATION_CREDENTIALS`).
    #[serde(default)]
    pub credentials_file: Option<Spanned<String>>,
    /// vertex, vertex-anthropic: an environment variable holding a ready access token (instead
    /// of a key file).
    #[serde(default)]
    pub token_env: Option<Spanned<String>>,
    /// gemini, vertex: Gemini's thinking budget in tokens (0 off, -1 dynamic).
    #[serde(default)]
    pub thinking_budget: Option<Spanned<i32>>,
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
    /// openai / azure-openai: which API chat calls go to, `"chat"` (Chat Completions, the
    /// default) or `"responses"` (the Responses API, for models offered only there).
    #[serde(default)]
    pub wire: Option<Spanned<String>>,
    /// The model's context window in tokens, for a model the built-in tables do not know (a
    /// new release, a fine-tune, a deployment name). Without it (and without a table row) the
    /// window is unknown: the link is tried, and the window its vendor states when it refuses a
    /// prompt as too long is what the chain knows afterwards.
    #[serde(default)]
    pub context_window: Option<Spanned<u32>>,
    /// The model's largest output in tokens (overrides the table's).
    #[serde(default)]
    pub max_output_tokens: Option<Spanned<u32>>,
    /// bedrock: the AWS region (default `AWS_REGION` / `AWS_DEFAULT_REGION`, or the model ARN's).
    #[serde(default)]
    pub region: Option<Spanned<String>>,
    /// bedrock: a profile of the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
    /// `~/.aws/credentials`).
    #[serde(default)]
    pub profile: Option<Spanned<String>>,
    /// bedrock: the environment variable holding the access key id (with
    /// `secret_access_key_env`).
    #[serde(default)]
    pub access_key_id_env: Option<Spanned<String>>,
    /// bedrock: the environment variable holding the secret access key.
    #[serde(default)]
    pub secret_access_key_env: Option<Spanned<String>>,
    /// bedrock: the environment variable holding a session token (temporary keys).
    #[serde(default)]
    pub session_token_env: Option<Spanned<String>>,
    /// The response cache of this link.
    #[serde(default)]
    pub cache: Option<super::raw_policies::CacheConfig>,
    /// Output validation of this link.
    #[serde(default)]
    pub validate: Option<super::raw_policies::ValidateConfig>,
    /// Hedging of this link with another provider.
    #[serde(default)]
    pub hedge: Option<super::raw_policies::HedgeConfig>,
    /// The region the vendor processes this provider's data in (`eu`, `us`, …), matched by
    /// `x-ripcord-locality: region=…` (overrides what the adapter knows).
    #[serde(default)]
    pub data_region: Option<Spanned<String>>,
    /// What the vendor may do with the data.
    #[serde(default)]
    pub data_use: Option<super::raw_policies::DataUseConfig>,
    /// The price, overriding the built-in table.
    #[serde(default)]
    pub price: Option<super::raw_policies::PriceConfig>,
    /// A pool: the deployments of this one model (regions, keys, accounts) that the link
    /// balances across; empty for an ordinary link.
    #[serde(default)]
    pub deployments: Vec<DeploymentConfig>,
    /// A pool's balancing strategy: `p2c_peak_ewma` (default), `least_in_flight`, `weighted`,
    /// `round_robin` or `usage`.
    #[serde(default)]
    pub balance: Option<Spanned<String>>,
    /// The vendor's own status page this provider listens to (`[providers.status_page]`).
    #[serde(default)]
    pub status_page: Option<super::resolve_status_page::StatusPageConfig>,
}

/// `[chain]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// Provider names, tried in this order.
    pub order: Vec<Spanned<String>>,
    /// The budget for getting an answer: time to a stream's first content, and whole
    /// non-streamed calls (default [`ripcord_core::chain::DEFAULT_DEADLINE`]).
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// The bound of a stream after its first content (default
    /// [`ripcord_core::chain::DEFAULT_STREAM_MAX`]).
    #[serde(default)]
    pub stream_max_ms: Option<u64>,
    /// The least budget an attempt needs to be useful (default
    /// [`ripcord_core::chain::DEFAULT_MIN_ATTEMPT`]).
    #[serde(default)]
    pub min_attempt_ms: Option<u64>,
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
    /// `end_with_error` (default), `restart` or `continue` (the next link continues a cut
    /// stream from the delivered text).
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
    /// The gateway also writes the fallback notice into the answer's text, where the user
    /// reads it (default: only the `x-ripcord-notice` header and the `ripcord` field).
    #[serde(default)]
    pub fallback_notice_in_text: bool,
    /// Per-intent fallback notices (intent → text), over `fallback_notice`.
    #[serde(default)]
    pub intent_notices: BTreeMap<String, String>,
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
    /// Which per-request control headers the key's clients may send.
    #[serde(default)]
    pub controls: Option<super::raw_policies::KeyControlsConfig>,
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
    /// The operator endpoints and their key.
    #[serde(default)]
    pub admin: Option<super::raw_policies::AdminConfig>,
    /// Browser origins (`https://app.example.com`, or `*`) allowed to call the gateway
    /// cross-origin (CORS); none by default.
    #[serde(default)]
    pub cors_origins: Vec<Spanned<String>>,
    /// Longest wait for the first byte of a new connection, in ms (default 2 000).
    #[serde(default)]
    pub first_byte_timeout_ms: Option<u64>,
    /// Most connections open at once from one client address (default 256).
    #[serde(default)]
    pub max_connections_per_ip: Option<usize>,
    /// Connections accepted beyond `max_connections` for health probes; the rest get a 503
    /// (default 64).
    #[serde(default)]
    pub reserved_connections: Option<usize>,
    /// The listen backlog (default 1024).
    #[serde(default)]
    pub backlog: Option<u32>,
    /// A client that takes no byte of its answer for this long is dropped, in ms (default
    /// 30 000).
    #[serde(default)]
    pub write_timeout_ms: Option<u64>,
    /// Bytes of whole vendor answers read at once across the gateway (default 512 MiB).
    #[serde(default)]
    pub max_buffered_response_bytes: Option<usize>,
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
    /// The window in seconds (default: the library's,
    /// [`BudgetPolicy::default`](ripcord_resilience::BudgetPolicy)).
    #[serde(default)]
    pub window_s: Option<Spanned<u64>>,
    /// A calendar period instead of the sliding window: `"day"` or `"month"` (UTC), each
    /// account starting again at its boundary.
    #[serde(default)]
    pub period: Option<Spanned<String>>,
    /// Per-tenant overrides: tenant → tokens per window.
    #[serde(default)]
    pub tenants: BTreeMap<String, u64>,
    /// Also budget calls without a tenant, as one shared anonymous tenant (default: yes, unlike
    /// the library; see [`super::defaults`]).
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
    /// Alerts sent to a webhook.
    #[serde(default)]
    pub alerts: Option<super::resolve_alerts::AlertsConfig>,
    /// The database of the ledger (issue 38).
    #[serde(default)]
    pub store: Option<super::resolve_store::StoreConfig>,
}

/// One `deployments = [{ … }]` entry of a pooled provider, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentConfig {
    /// Its name in status pages and provenance (default: its region, else `#n`).
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    /// Its endpoint (default: the provider's `base_url`).
    #[serde(default)]
    pub base_url: Option<Spanned<String>>,
    /// The environment variable holding its key (default: the provider's key).
    #[serde(default)]
    pub api_key_env: Option<Spanned<String>>,
    /// Its region, shown on status pages.
    #[serde(default)]
    pub region: Option<Spanned<String>>,
    /// azure-openai: its deployment name (default: the provider's `deployment`).
    #[serde(default)]
    pub deployment: Option<Spanned<String>>,
    /// Its weight for `balance = "weighted"` (default 1).
    #[serde(default)]
    pub weight: Option<Spanned<u32>>,
    /// Its requests-per-minute quota: a local limit of its own, and the `usage` strategy's
    /// measure.
    #[serde(default)]
    pub rpm: Option<Spanned<u32>>,
    /// Its tokens-per-minute quota, likewise.
    #[serde(default)]
    pub tpm: Option<Spanned<u32>>,
}
