//! The resolved configuration: validated values the chain builder and the gateway use.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ripcord_core::chain::Strategy;

use super::raw::{
    BulkheadConfig, ProbeConfig, ProviderKind, RateLimitConfig, RedactionConfig, TimeoutsConfig,
};

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
    /// Browser origins allowed to call the gateway cross-origin (`*` for any); empty: CORS
    /// off, as by default.
    pub cors_origins: Vec<String>,
    /// Longest wait for the first byte of a new connection.
    pub first_byte_timeout: std::time::Duration,
    /// Most connections open at once from one client address.
    pub max_connections_per_ip: usize,
    /// Connections accepted beyond `max_connections` to answer health probes (and refuse the
    /// rest with a 503).
    pub reserved_connections: usize,
    /// The listen backlog: connections the kernel queues before the gateway accepts them.
    pub backlog: u32,
    /// A connection whose client takes no byte of its answer for this long is dropped.
    pub write_timeout: std::time::Duration,
    /// Bytes of whole vendor answers read at once across the process.
    pub max_buffered_response_bytes: usize,
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
            cors_origins: Vec::new(),
            first_byte_timeout: Duration::from_secs(2),
            max_connections_per_ip: 256,
            reserved_connections: 64,
            backlog: 1024,
            write_timeout: Duration::from_secs(30),
            max_buffered_response_bytes: 512 * 1024 * 1024,
        }
    }
}
/// `[budget]`, resolved: tokens per tenant per window, charged once per call of the chain
/// (whichever link serves it) with the usage the vendor reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantBudget {
    /// Tokens each tenant may use per window.
    pub tokens_per_window: u64,
    /// The window in seconds.
    pub window_s: u64,
    /// A calendar period instead of the sliding window.
    pub period: Option<ripcord_resilience::BudgetPeriod>,
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

/// `[state] backend = "redis"`, resolved; timing left out is `ripcord-redis`'s default
/// (`StateOptions::default`).
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// The URL, which may hold a password (never printed: it debugs as `[REDACTED]`; see
    /// [`RedisSettings::redacted_url`]).
    pub url: secrecy::SecretString,
    /// The URL with its userinfo replaced by `[redacted]`.
    pub redacted_url: String,
    /// The longest one Redis operation may take.
    pub op_timeout_ms: u64,
    /// The longest the connection may take.
    pub connect_timeout_ms: u64,
    /// How often a degraded replica tries Redis again.
    pub retry_interval_ms: u64,
    /// How many replicas share the limits (default 1).
    pub replicas: u32,
}

/// How a Vertex provider authenticates, resolved.
#[derive(Debug, Clone)]
pub enum VertexCredentials {
    /// A service-account key file (already read and checked).
    KeyFile(PathBuf),
    /// A ready access token (never printed).
    Token(secrecy::SecretString),
}

/// A Vertex provider's address and credentials.
#[derive(Debug, Clone)]
pub struct VertexSettings {
    /// The Google Cloud project.
    pub project: String,
    /// The location.
    pub location: String,
    /// The credentials.
    pub credentials: VertexCredentials,
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
    /// local-onnx answers per batched decode step (`None`: 1, no batching).
    pub max_batch: Option<usize>,
    /// local-onnx execution device (`None`: the CPU).
    pub device: Option<ripcord_local_onnx::Device>,
    /// azure deployment.
    pub deployment: Option<String>,
    /// azure api-version.
    pub api_version: Option<String>,
    /// vertex: project, location and credentials.
    pub vertex: Option<VertexSettings>,
    /// gemini / vertex: the thinking budget.
    pub thinking_budget: Option<i32>,
    /// Reserve for later links.
    pub reserve_ms: u64,
    /// Retry policy.
    pub retry: RetrySettings,
    /// Breaker policy.
    pub breaker: BreakerSettings,
    /// Rate limits.
    pub rate_limit: Option<RateLimitConfig>,
    /// A bound on calls in flight.
    pub bulkhead: Option<BulkheadConfig>,
    /// Timeouts.
    pub timeouts: TimeoutsConfig,
    /// Active health checks.
    pub probe: Option<ProbeConfig>,
    /// openai / azure-openai: Chat Completions or the Responses API.
    pub wire: ripcord_providers::OpenAiWire,
    /// The configured context window (`None`: the table's, or unknown).
    pub context_window: Option<u32>,
    /// The configured largest output (`None`: the table's).
    pub max_output_tokens: Option<u32>,
    /// The opt-in policies (cache, validation, hedging), the breaker's extra rules and the
    /// provider's facts.
    pub policies: super::resolve_policies::LinkPolicies,
    /// bedrock: the region and the credentials, resolved.
    pub bedrock: Option<BedrockSettings>,
    /// A pool's deployments and strategy (`None`: an ordinary link).
    pub pool: Option<super::pool::PoolSettings>,
    /// The vendor's status page the provider listens to (`None`: none is polled).
    pub status_page: Option<super::resolve_status_page::StatusPageSettings>,
}

/// A Bedrock provider's own settings, resolved when the config is read (credentials included,
/// so `check-config` can say where they came from).
#[derive(Debug, Clone)]
pub struct BedrockSettings {
    /// The AWS region.
    pub region: String,
    /// The credentials (secrets redacted in `Debug`).
    #[cfg(feature = "bedrock")]
    pub credentials: ripcord_providers::BedrockCredentials,
    /// Where they came from (`env AWS_ACCESS_KEY_ID`, `profile prod in …`), never the secret.
    pub source: String,
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
        if let Some(b) = &self.bedrock {
            s.push_str(&format!(" region={}", b.region));
            #[cfg(feature = "bedrock")]
            if let Some(id) = b.credentials.access_key_id() {
                s.push_str(&format!(" access_key_id={id}"));
            }
        }
        if self.wire == ripcord_providers::OpenAiWire::Responses {
            s.push_str(" wire=responses");
        }
        if let Some(v) = &self.vertex {
            let creds = match &v.credentials {
                VertexCredentials::KeyFile(p) => format!("key file {}", p.display()),
                VertexCredentials::Token(_) => "access token [redacted]".to_owned(),
            };
            s.push_str(&format!(
                " project={} location={} credentials={creds}",
                v.project, v.location
            ));
        }
        match &self.key_source {
            Some(src) => s.push_str(&format!(" key=[redacted] from {src}")),
            None if self.vertex.is_some() => {}
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
        let retry_on = self.retry.retry_on;
        // One attempt has no backoff to show (a local link without `[providers.retry]`).
        let retry = if self.retry.max_attempts <= 1 {
            "retry: none (1 attempt)".to_owned()
        } else {
            format!(
                "retry: {} attempts, backoff {}..{} ms (full jitter; a 429 without retry-after waits at least {} ms), retry_on {retry_on}",
                self.retry.max_attempts,
                self.retry.base_delay_ms,
                self.retry.max_delay_ms.max(self.retry.base_delay_ms),
                self.retry.base_delay_ms / 2,
            )
        };
        let retry = match &self.pool {
            Some(pool) => pool.describe(&retry),
            None => retry,
        };
        let mut s = format!(
            "{retry}
             breaker: opens after {} failures, for {} ms doubling up to {} ms while it keeps failing; {}
             reserve: {} ms kept for the links after this one",
            self.breaker.failure_threshold,
            self.breaker.open_ms,
            self.breaker.open_max_ms.max(self.breaker.open_ms),
            match self.breaker.background_probe_ms {
                Some(ms) => format!("while open, the model list is checked every {ms} ms"),
                None => "no background probe".to_owned(),
            },
            self.reserve_ms,
        );
        match (self.context_window, self.max_output_tokens) {
            (None, None) => {}
            (w, o) => s.push_str(&format!(
                "\nwindow: {} tokens, output up to {} tokens (configured)",
                w.map_or_else(|| "the table's".to_owned(), |w| w.to_string()),
                o.map_or_else(|| "the table's".to_owned(), |o| o.to_string()),
            )),
        }
        if self.kind != ProviderKind::LocalOnnx {
            let d = ripcord_providers::Timeouts::default();
            let t = &self.timeouts;
            let ms = |d: std::time::Duration| d.as_millis();
            let first = t.first_token_ms.map_or(ms(d.first_token), u128::from);
            let stream_first = t
                .stream_first_token_ms
                .or(t.first_token_ms)
                .map_or(ms(d.stream_first_token), u128::from);
            s.push_str(&format!(
                "\ntimeouts: connect {} ms, first token {} ms (non-streamed: the whole answer) / {} ms (streams), stream idle {} ms; up to {} unparseable stream events skipped",
                t.connect_ms.map_or(ms(d.connect), u128::from),
                first,
                stream_first,
                t.idle_ms.map_or(ms(d.stream_idle), u128::from),
                t.max_skipped_events.unwrap_or(d.max_skipped_events),
            ));
        }
        s
    }
}

/// `[providers.retry]`, resolved: what the file sets over the library's defaults (the
/// [`Default`] is the library's; see [`super::defaults`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    /// Attempts in all (1 = no retry).
    pub max_attempts: u32,
    /// First backoff.
    pub base_delay_ms: u64,
    /// Largest backoff.
    pub max_delay_ms: u64,
    /// The failure classes retried on the same link.
    pub retry_on: ripcord_resilience::RetryOn,
}

/// `[providers.breaker]`, resolved: what the file sets over the library's defaults (the
/// [`Default`] is the library's; see [`super::defaults`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Consecutive failed calls that open the breaker.
    pub failure_threshold: u32,
    /// The first open spell (before a half-open probe).
    pub open_ms: u64,
    /// The longest open spell: each re-trip without a close doubles the spell up to this
    /// (equal to `open_ms`: a constant spell).
    pub open_max_ms: u64,
    /// How often an open breaker lists the vendor's models to learn it is back (`None`: off).
    pub background_probe_ms: Option<u64>,
    /// Concurrent probes in half-open.
    pub half_open_probes: u32,
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
    /// `stream_policy = "continue"`: a cut stream goes on on the next link from the delivered
    /// text (allowed by `serve`: the client never has to un-show anything).
    pub stream_continue: bool,
    /// Fallback notice.
    pub fallback_notice: Option<String>,
    /// The link ordering strategy.
    pub strategy: Strategy,
    /// Prefer another vendor after a failure.
    pub independent_fallbacks: bool,
    /// The gateway writes the notice into the answer's text too.
    pub fallback_notice_in_text: bool,
    /// Per-intent notices, over `fallback_notice`.
    pub intent_notices: BTreeMap<String, String>,
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

/// A gateway key, resolved: who it is, and what it may do. The secret is never printed (a
/// `SecretString` debugs as `[REDACTED]`).
#[derive(Debug, Clone)]
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
    /// The per-request control headers its clients may send.
    pub controls: super::resolve_policies::KeyControls,
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

/// The shortest gateway key accepted.
pub const MIN_KEY_CHARS: usize = 16;

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from.
    pub source: String,
    /// The operator endpoints' key (`[server.admin]`), when they are on.
    pub admin: Option<super::resolve_policies::AdminKey>,
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
    /// The alert webhook (`[alerts]`), when configured.
    pub alerts: Option<super::AlertsSettings>,
    /// The ledger's database (`[store]`); `None`: no ledger.
    pub store: Option<super::StoreSettings>,
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
