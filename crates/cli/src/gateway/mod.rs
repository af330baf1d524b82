//! `ripcord serve`: an OpenAI-compatible HTTP gateway in front of one or more routes.
//!
//! Any app with an OpenAI SDK gets ripcord by pointing its base URL here. Endpoints:
//! `POST /v1/chat/completions` (JSON and SSE), `POST /v1/embeddings` (when configured),
//! `POST /v1/messages` and `/v1/messages/count_tokens` (Anthropic's wire, see the `messages`
//! module), `POST /v1/responses` with `GET`/`DELETE /v1/responses/{id}` and `…/input_items`
//! (OpenAI's Responses API, see the `responses` module), `GET /v1/models`, `GET /healthz`,
//! `GET /readyz` (per-route and per-link health as JSON). The three chat doors are dialects of
//! one request flow (the `pipeline` module).
//! Every chat answer carries `x-ripcord-served-by`, `x-ripcord-degraded`, `x-ripcord-attempts`
//! (every attempt, `link/model=outcome(status):latency`) and, with routes, `x-ripcord-route`
//! headers; a failed call carries them too, with `served-by: none` and `degraded: true`. The
//! body's `model` — of a completion and of every stream chunk — names the model that served
//! (the serving link's model, `static` for the static reply), never just the one asked for:
//! a client reading `model` learns who answered after a fallback. The requested name is in
//! `x-ripcord-requested-model`.
//!
//! Routes: with `[[routes]]` the request's `model` picks a route by name or alias; an unknown
//! model is a 404 `model_not_found` naming the routes, a route outside the key's list a 403
//! `route_not_allowed`. A gateway with a single chain answers any `model`.
//!
//! Tenants: the tenant of a call (what `[budget]` charges) is the tenant of the key that
//! authenticated it, never what the client says about itself. Only a key with
//! `sub_tenants = true` may narrow it, with the `x-ripcord-tenant` header or else the body's
//! OpenAI `user`, to a sub-tenant; the call is then charged to both. Calls by keys without a
//! tenant (`api_keys_env`) and calls on a keyless loopback gateway are anonymous: they share
//! one anonymous budget account. Answers say who was charged in `x-ripcord-tenant`, so a claim
//! the key may not make is visibly not what counted.
//!
//! Why it looks the way it does:
//! - Accepted sockets get `TCP_NODELAY`: with Nagle's algorithm on, a keep-alive client waits
//!   ~40 ms per response for a delayed ACK.
//! - Bearer keys are mandatory whenever the gateway listens beyond loopback; [`check_bind`]
//!   refuses to start otherwise. A presented key is hashed (SHA-256) and the digest compared
//!   with every configured key's digest in constant time, so neither the content nor the
//!   length of a key leaks through timing; keys are never logged. The scheme (`Bearer`) is
//!   matched case-insensitively, as HTTP auth schemes are; without an `Authorization` header
//!   the key is read from `x-api-key`, where Anthropic clients send it.
//! - A key's own `rpm`/`tpm` is checked before any vendor is called and refuses at once with a
//!   429 and `Retry-After` (it never queues a caller).
//! - A client that disconnects drops the handler future, which drops the chain call and with it
//!   the upstream request: nothing keeps running for a caller who is gone.
//! - Streams: headers are sent once the chain has committed to a link (its first content event),
//!   so `x-ripcord-served-by` is true for streams too; with the chain's stream hold-back, a
//!   failure inside it falls over before anything is sent. A failure after commit is sent as
//!   OpenAI's in-band `{"error": {"message", "type", "param", "code"}}` event (the envelope of an
//!   HTTP error, not nested twice, so SDKs show the message), with the call's final record
//!   beside it (`"ripcord": {"degraded": true, "attempts": "…"}`, the `x-ripcord-attempts`
//!   format). A `Restarted` event cannot be expressed on OpenAI's wire (a client cannot un-show
//!   text), so `ripcord serve` refuses `stream_policy = "restart"`; a gateway built around a
//!   restarting chain by hand ends the stream with an error there instead.

mod admin;
mod admin_keys;
mod admin_spend;
mod automatic;
mod chat;
mod controls;
mod cors;
mod descriptors;
mod endpoints;
mod errors;
mod front;
mod ledger;
pub mod live;
mod messages;
mod messages_wire;
mod metrics;
mod notice;
mod pipeline;
mod reply;
mod responses;
mod responses_events;
mod responses_store;
mod server;
mod shed;
mod socket;
pub mod status;
mod status_vendors;
pub mod store_keys;
#[cfg(test)]
mod support_matrix;
mod wire;

pub use descriptors::raise_nofile_limit;
pub use metrics::metrics_router;
pub use server::{ServeLimits, serve_router};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, header};
use axum::routing::{get, post};
use ripcord_core::chain::{DEFAULT_DEADLINE, DEFAULT_STREAM_MAX};
use ripcord_core::{ChatModel, EmbeddingModel};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use errors::GatewayError;
use front::Authed;
use ripcord_telemetry::PrometheusExport;
use shed::Admission;

use crate::build::Built;
use crate::config::{Config, GatewayKey, ServerSettings};

/// Reports per-link health for `/readyz`.
pub type Readiness = Arc<dyn Fn() -> Value + Send + Sync>;

/// A route as the gateway sees it: the names it answers to and its deadline. Calls for route
/// number `i` reach the model with a [`crate::routing::Route`]`(i)` in their context.
#[derive(Debug, Clone)]
pub struct GatewayRoute {
    /// Its name.
    pub name: String,
    /// More names for it.
    pub aliases: Vec<String>,
    /// The deadline of each call (for a stream: until its first content).
    pub deadline: Duration,
    /// The bound of a streamed answer after its first content.
    pub stream_max: Duration,
}

/// An accepted key: the digest of its secret and what it may do.
pub(crate) struct Key {
    digest: [u8; 32],
    /// Its id in the ledger (`tenant@source`, never the secret).
    label: Arc<str>,
    tenant: Option<Arc<str>>,
    routes: Option<Vec<usize>>,
    sub_tenants: bool,
    /// The model behind this key's own limits, when it has any.
    limited: Option<Arc<dyn ChatModel>>,
    /// The per-request control headers its clients may send.
    controls: crate::config::KeyControls,
}

/// Who is calling: the key that authenticated the request (none on a keyless gateway).
struct Caller<'a> {
    key: Option<&'a Key>,
}

impl Caller<'_> {
    fn may_use(&self, route: usize) -> bool {
        self.key
            .and_then(|k| k.routes.as_ref())
            .is_none_or(|r| r.contains(&route))
    }
}

/// Everything the gateway serves.
pub struct GatewayState {
    /// The model (a chain, or every route behind a [`crate::routing::RouteSwitch`]).
    pub model: Arc<dyn ChatModel>,
    /// Embeddings, when configured.
    pub embeddings: Option<Arc<dyn EmbeddingModel>>,
    /// Deadline of each request when there are no routes (and of embeddings); for a stream,
    /// until its first content.
    pub deadline: Duration,
    /// The bound of a streamed answer after its first content, when there are no routes.
    pub stream_max: Duration,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// `/readyz` body.
    pub readiness: Readiness,
    /// Model names listed by `/v1/models` when there are no routes.
    pub models: Vec<String>,
    /// The source of `GET /metrics`, when the process exposes metrics.
    pub metrics: Option<PrometheusExport>,
    /// Timeouts, connection cap, shedding limits and error detail.
    pub server: ServerSettings,
    /// What `GET /status` shows (a gateway without one answers it with 404).
    pub status: Option<Arc<status::StatusBoard>>,
    /// The Responses door's stored responses (`store: true`).
    responses: Arc<responses_store::ResponseStore>,
    keys: Vec<Arc<Key>>,
    /// The keys kept in the store (`[store] keys = true`), read again as they change.
    store_keys: Option<store_keys::StoreKeys>,
    routes: Vec<GatewayRoute>,
    /// One admission gate per route (one for a gateway without routes).
    admissions: Vec<Admission>,
    ids: AtomicU64,
    /// The degradation notice settings of each route (of the config's routes, in order).
    notices: Vec<notice::RouteNotice>,
    /// The digest of the admin key (`[server.admin]`); `None`: the admin endpoints are off.
    admin_digest: Option<[u8; 32]>,
    /// The admin endpoints have an address of their own (see [`admin_router`]).
    admin_elsewhere: bool,
    /// Each link's operator switches.
    switches: crate::build::admin::Switches,
    /// The live gateway this state serves in, when it can be reloaded.
    live: Option<std::sync::Weak<live::Live>>,
    /// Where every call is recorded (`[store]`), when there is a ledger.
    ledger: Option<ripcord_store::Ledger>,
    /// The ledger's database, for `GET /admin/spend`.
    store: Option<ripcord_store::Store>,
}

impl std::fmt::Debug for GatewayState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayState")
            .field("model", &self.model.id())
            .field("keys", &format_args!("{} [redacted]", self.keys.len()))
            .field("routes", &self.routes)
            .field("deadline", &self.deadline)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

/// `s` with every character `replace` names a replacement for replaced by it.
pub(crate) fn escaped(s: &str, replace: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match replace(c) {
            Some(r) => out.push_str(r),
            None => out.push(c),
        }
    }
    out
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Equal digests, compared without an early exit.
fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl GatewayState {
    /// A gateway over `model` that answers any `model` name, without keys.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        let name = model.id().name.to_string();
        GatewayState {
            model,
            embeddings: None,
            deadline: DEFAULT_DEADLINE,
            stream_max: DEFAULT_STREAM_MAX,
            max_body_bytes: crate::config::defaults::MAX_BODY_BYTES,
            readiness: Arc::new(|| json!({"status": "ready"})),
            models: vec![name],
            metrics: None,
            server: ServerSettings::default(),
            status: None,
            responses: Arc::new(responses_store::ResponseStore::new(
                responses_store::DEFAULT_MAX_BYTES,
                responses_store::DEFAULT_TTL,
                None,
            )),
            keys: Vec::new(),
            store_keys: None,
            routes: Vec::new(),
            admissions: Vec::new(),
            ids: AtomicU64::new(0),
            notices: Vec::new(),
            admin_digest: None,
            admin_elsewhere: false,
            switches: crate::build::admin::Switches::default(),
            live: None,
            ledger: None,
            store: None,
        }
        .with_admissions()
    }

    /// This state, serving inside `live` (what `POST /admin/reload` reloads).
    fn with_live(mut self, live: std::sync::Weak<live::Live>) -> Self {
        self.live = Some(live);
        self
    }

    /// Records every chat call in `ledger` (one row per call and per attempt), and answers
    /// `GET /admin/spend` from `store`.
    pub fn set_ledger(&mut self, ledger: ripcord_store::Ledger, store: ripcord_store::Store) {
        self.ledger = Some(ledger);
        self.store = Some(store);
    }

    /// Also accepts the keys kept in the store (`[store] keys = true`), made into keys with
    /// `limiter`, and answers the key endpoints (`/admin/keys`).
    pub fn set_store_keys(
        &mut self,
        directory: store_keys::KeyDirectory,
        limiter: store_keys::KeyLimiter,
    ) {
        self.store_keys = Some(store_keys::StoreKeys::new(directory, limiter));
    }

    /// Uses these server settings (and resets the admission gates to their limits).
    pub fn set_server(&mut self, server: ServerSettings) {
        self.server = server;
        self.reset_admissions();
    }

    fn with_admissions(mut self) -> Self {
        self.reset_admissions();
        self
    }

    fn reset_admissions(&mut self) {
        let n = self.routes.len().max(1);
        self.admissions = (0..n)
            .map(|_| Admission::new(self.server.max_concurrency, self.server.max_queue))
            .collect();
    }

    /// The gateway of a resolved config and its built routes: every route, every key (with its
    /// tenant, routes and limits), the readiness view and the `/v1/models` list.
    pub fn from_built(cfg: &Config, built: &Built) -> Self {
        let board = Arc::new(status::StatusBoard::from_built(built));
        let recorded = |m: &Arc<dyn ChatModel>| -> Arc<dyn ChatModel> {
            Arc::new(status::Recorded::new(Arc::clone(m), Arc::clone(&board)))
        };
        let mut state = GatewayState::new(recorded(&built.model));
        state.status = Some(Arc::clone(&board));
        #[cfg(feature = "redis")]
        if let Some(redis) = built.redis() {
            // Stored responses go to Redis too, so any replica continues any conversation.
            let shared: Arc<dyn responses_store::SharedDocuments> = Arc::new(
                ripcord_redis::RedisDocuments::new(redis.clone(), "responses"),
            );
            state.responses = Arc::new(responses_store::ResponseStore::new(
                responses_store::DEFAULT_MAX_BYTES,
                responses_store::DEFAULT_TTL,
                Some(shared),
            ));
        }
        state.embeddings = built.embeddings.clone();
        state.deadline = cfg.default_route().map_or(DEFAULT_DEADLINE, |r| {
            Duration::from_millis(r.spec.deadline_ms)
        });
        state.stream_max = cfg.default_route().map_or(DEFAULT_STREAM_MAX, |r| {
            Duration::from_millis(r.spec.stream_max_ms)
        });
        state.max_body_bytes = cfg.max_body_bytes;
        state.server = cfg.server.clone();
        let view = built.clone();
        state.readiness = Arc::new(move || view.readiness());
        if cfg.any_model {
            state.models = std::iter::once("ripcord".to_owned())
                .chain(built.chain.links().map(|l| l.id().model.to_string()))
                .collect();
        } else {
            state.routes = built
                .routes
                .iter()
                .map(|r| GatewayRoute {
                    name: r.name.clone(),
                    aliases: r.aliases.clone(),
                    deadline: r.deadline,
                    stream_max: r.stream_max,
                })
                .collect();
            state.models = cfg.model_names();
        }
        for (i, k) in cfg.gateway_keys.iter().enumerate() {
            let limited = built.key_limits.get(i).cloned().flatten();
            state.add_key(k, limited.as_ref().map(recorded));
        }
        state.notices = cfg.routes.iter().map(notice::RouteNotice::of).collect();
        state.admin_digest = cfg
            .admin
            .as_ref()
            .map(|a| sha256(a.secret.expose_secret().as_bytes()));
        state.admin_elsewhere = cfg.admin.as_ref().is_some_and(|a| a.listen.is_some());
        state.switches = built.switches.clone();
        state.reset_admissions();
        state
    }

    /// Accepts `key`; its calls go through `limited` (the model behind its own limits) when
    /// given.
    pub fn add_key(&mut self, key: &GatewayKey, limited: Option<Arc<dyn ChatModel>>) {
        self.keys.push(Arc::new(Key {
            digest: sha256(key.secret.expose_secret().as_bytes()),
            label: Arc::from(key.label()),
            tenant: key.tenant.as_deref().map(Arc::from),
            routes: key.routes.clone(),
            sub_tenants: key.sub_tenants,
            limited,
            controls: key.controls,
        }));
    }

    /// Serves these routes: a request's `model` must name one of them (by name or alias), and
    /// reaches [`GatewayState::model`] with its index in the context. Empty = any `model`.
    pub fn set_routes(&mut self, routes: Vec<GatewayRoute>) {
        self.models = routes
            .iter()
            .flat_map(|r| std::iter::once(r.name.clone()).chain(r.aliases.iter().cloned()))
            .collect();
        self.routes = routes;
        self.reset_admissions();
    }

    /// Whether requests must carry a key (a key in the config, or keys kept in the store).
    fn keyed(&self) -> bool {
        !self.keys.is_empty() || self.store_keys.is_some()
    }

    /// Who the request is (its key, or [`Authed`]`(None)` on a keyless gateway), or `None` when
    /// it carries no accepted key. The key is read from `Authorization: Bearer` or, for
    /// Anthropic's SDKs, `x-api-key`; the config's keys are compared first, then the store's.
    fn authenticate(&self, headers: &HeaderMap) -> Option<front::Authed> {
        if !self.keyed() {
            return Some(front::Authed(None));
        }
        // `Authorization: Bearer` (OpenAI clients), else `x-api-key` (Anthropic clients).
        let token = match headers.get(header::AUTHORIZATION) {
            Some(v) => {
                let (scheme, token) = v.to_str().ok()?.trim().split_once(' ')?;
                if !scheme.eq_ignore_ascii_case("bearer") {
                    return None;
                }
                token.trim()
            }
            None => headers.get("x-api-key")?.to_str().ok()?.trim(),
        };
        let digest = sha256(token.as_bytes());
        // Every key is compared (no early exit); distinct secrets are checked at start, so at
        // most one matches.
        let mut found = None;
        for k in &self.keys {
            if digests_equal(&k.digest, &digest) {
                found = Some(k);
            }
        }
        if let Some(k) = found {
            return Some(front::Authed(Some(Arc::clone(k))));
        }
        self.store_keys
            .as_ref()?
            .find(&digest, &self.routes)
            .map(|k| front::Authed(Some(k)))
    }

    /// The caller the front door authenticated.
    fn caller<'a>(&self, authed: &'a Authed) -> Caller<'a> {
        Caller {
            key: authed.0.as_deref(),
        }
    }

    /// How a call's errors are told to its client (request `id`).
    fn reply(&self, id: Arc<str>) -> errors::Reply {
        errors::Reply {
            id,
            expose: self.server.expose_errors,
            cut: None,
            peer_fin: None,
        }
    }

    /// Whose stored documents a caller sees: its key's tenant (`""` for anonymous callers).
    fn owner(&self, authed: &Authed) -> Arc<str> {
        self.caller(authed)
            .key
            .and_then(|k| k.tenant.clone())
            .unwrap_or_else(|| Arc::from(""))
    }

    /// The admission gate of route `route` (the only gate without routes).
    fn admission(&self, route: Option<usize>) -> Option<&Admission> {
        self.admissions
            .get(route.unwrap_or(0))
            .or(self.admissions.first())
    }

    /// Takes a slot at route `route`'s door within `deadline`, or answers 503 at once with the
    /// front door's `path` and route header: a call refused here touches no breaker, limiter
    /// or budget. Both front doors call it.
    async fn at_the_door(
        &self,
        route: Option<usize>,
        deadline: Duration,
        path: &str,
        route_header: Option<&axum::http::HeaderValue>,
        reply: &errors::Reply,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, axum::response::Response> {
        let Some(gate) = self.admission(route) else {
            return Ok(None);
        };
        gate.admit(deadline)
            .await
            .map(Some)
            .map_err(|why| errors::shed_response(why, path, route_header.cloned(), reply))
    }

    /// The index of the route `model` names.
    fn route_of(&self, model: Option<&str>) -> Result<Option<usize>, GatewayError> {
        if self.routes.is_empty() {
            return Ok(None);
        }
        let known = || self.models.join(", ");
        let Some(model) = model else {
            return Err(GatewayError::new(
                400,
                "invalid_request",
                format!("`model` is required; this gateway serves: {}", known()),
            )
            .with_param("model"));
        };
        match self
            .routes
            .iter()
            .position(|r| r.name == model || r.aliases.iter().any(|a| a == model))
        {
            Some(i) => Ok(Some(i)),
            None => Err(GatewayError::new(
                404,
                "model_not_found",
                format!(
                    "The model `{model}` does not exist on this gateway; it serves: {}",
                    known()
                ),
            )
            .with_param("model")),
        }
    }
}

/// Refuses to listen beyond loopback without gateway keys.
///
/// # Errors
///
/// A message saying why the gateway must not start.
pub fn check_bind(addr: SocketAddr, has_keys: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || has_keys {
        Ok(())
    } else {
        Err(format!(
            "refusing to listen on {addr} without gateway keys: set [server] api_keys_env in the config \
             (or listen on 127.0.0.1)"
        ))
    }
}

/// The router, for tests and embedding in another server.
pub fn router(state: Arc<GatewayState>) -> Router {
    let limit = state.max_body_bytes;
    let mut r = Router::new()
        .route(
            "/v1/chat/completions",
            post(pipeline::door::<chat::ChatCompletions>),
        )
        .route("/v1/messages", post(pipeline::door::<messages::Messages>))
        .route(
            "/v1/responses",
            post(pipeline::door::<responses::Responses>),
        )
        .route(
            "/v1/responses/{id}",
            get(responses::get_response).delete(responses::delete_response),
        )
        .route(
            "/v1/responses/{id}/input_items",
            get(responses::input_items),
        )
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/v1/embeddings", post(endpoints::embeddings))
        .route("/v1/models", get(endpoints::models))
        .route("/v1/models/{*id}", get(endpoints::model))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(endpoints::readyz))
        .route("/status", get(endpoints::status_page));
    if state.metrics.is_some() && state.server.metrics_listen.is_none() {
        r = r.route("/metrics", get(metrics::metrics));
    }
    let r = r
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            front::front,
        ))
        // Outside the front door: a browser's preflight carries no key (see `cors`).
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            cors::cors,
        ));
    // The admin endpoints check their own key, beside the front door rather than behind it.
    let r = if state.admin_digest.is_some() && !state.admin_elsewhere {
        r.merge(admin::router())
    } else {
        r
    };
    r.with_state(state)
}

/// The admin endpoints alone, for `[server.admin] listen` (they check the admin key
/// themselves).
pub fn admin_router(state: Arc<GatewayState>) -> Router {
    admin::router().with_state(state)
}

/// Serves until `shutdown` resolves, then drains in-flight requests.
///
/// # Errors
///
/// I/O errors of the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<GatewayState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = ServeLimits::from_settings(&state.server);
    serve_with_limits(listener, state, limits, shutdown).await
}

/// [`serve`] with the accept loop's limits given (`ripcord serve` fits them to its descriptor
/// limit, see [`ServeLimits::fitted_to_descriptors`]).
///
/// # Errors
///
/// I/O errors of the listener.
pub async fn serve_with_limits(
    listener: tokio::net::TcpListener,
    state: Arc<GatewayState>,
    limits: ServeLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_router(listener, router(state), limits, shutdown).await
}
