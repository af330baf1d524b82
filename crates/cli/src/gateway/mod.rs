//! `ripcord serve`: an OpenAI-compatible HTTP gateway in front of one or more routes.
//!
//! Any app with an OpenAI SDK gets ripcord by pointing its base URL here. Endpoints:
//! `POST /v1/chat/completions` (JSON and SSE), `POST /v1/embeddings` (when configured),
//! `POST /v1/messages` and `/v1/messages/count_tokens` (Anthropic's wire, see the `messages`
//! module), `GET /v1/models`, `GET /healthz`, `GET /readyz` (per-route and per-link health as JSON).
//! Every chat answer carries `x-ripcord-served-by`, `x-ripcord-degraded`, `x-ripcord-attempts`
//! (every attempt, `link/model=outcome(status):latency`) and, with routes, `x-ripcord-route`
//! headers; a failed call carries them too, with `served-by: none` and `degraded: true`. The
//! body's `model` — of a completion and of every stream chunk — names the model that served
//! (the vendor's name for it, else the serving link's model), never just the one asked for:
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

mod errors;
mod front;
mod messages;
mod messages_wire;
mod metrics;
mod server;
mod shed;
pub mod status;
mod wire;

pub use metrics::metrics_router;
pub use server::{ServeLimits, serve_router};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use ripcord_core::{
    ChatModel, ChatStream, Context, EmbeddingModel, EmbeddingRequest, Error, ErrorKind, Provenance,
    StreamEvent,
};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use errors::{Reply, call_error, set_retry_after, shed_response};
use front::{Authed, RequestId};
use ripcord_telemetry::PrometheusExport;
use shed::Admission;
use wire::{ChunkWriter, WireError, WireRequest};

use crate::build::Built;
use crate::config::{Config, GatewayKey, ServerSettings};
use crate::routing;

/// Reports per-link health for `/readyz`.
pub type Readiness = Arc<dyn Fn() -> Value + Send + Sync>;

/// A route as the gateway sees it: the names it answers to and its deadline. Calls for route
/// number `i` reach the model with [`routing::ROUTE`] = `i` in their context.
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
struct Key {
    digest: [u8; 32],
    tenant: Option<Arc<str>>,
    routes: Option<Vec<usize>>,
    sub_tenants: bool,
    /// The model behind this key's own limits, when it has any.
    limited: Option<Arc<dyn ChatModel>>,
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
    /// The model (a chain, or every route behind a [`routing::RouteSwitch`]).
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
    keys: Vec<Key>,
    routes: Vec<GatewayRoute>,
    /// One admission gate per route (one for a gateway without routes).
    admissions: Vec<Admission>,
    ids: AtomicU64,
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
            deadline: Duration::from_secs(30),
            stream_max: Duration::from_secs(600),
            max_body_bytes: 1 << 20,
            readiness: Arc::new(|| json!({"status": "ready"})),
            models: vec![name],
            metrics: None,
            server: ServerSettings::default(),
            status: None,
            keys: Vec::new(),
            routes: Vec::new(),
            admissions: Vec::new(),
            ids: AtomicU64::new(0),
        }
        .with_admissions()
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
        state.embeddings = built.embeddings.clone();
        state.deadline = cfg.default_route().map_or(Duration::from_secs(30), |r| {
            Duration::from_millis(r.spec.deadline_ms)
        });
        state.stream_max = cfg.default_route().map_or(Duration::from_secs(600), |r| {
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
        state.reset_admissions();
        state
    }

    /// Accepts `key`; its calls go through `limited` (the model behind its own limits) when
    /// given.
    pub fn add_key(&mut self, key: &GatewayKey, limited: Option<Arc<dyn ChatModel>>) {
        self.keys.push(Key {
            digest: sha256(key.secret.expose_secret().as_bytes()),
            tenant: key.tenant.as_deref().map(Arc::from),
            routes: key.routes.clone(),
            sub_tenants: key.sub_tenants,
            limited,
        });
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

    fn next_id(&self) -> String {
        format!(
            "chatcmpl-ripcord-{}",
            self.ids.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// The index of the key the request carries (`Some(None)` on a keyless gateway), or `None`
    /// when it carries no accepted key. The key is read from `Authorization: Bearer` or, for
    /// Anthropic's SDKs, `x-api-key`.
    fn key_index(&self, headers: &HeaderMap) -> Option<Option<usize>> {
        if self.keys.is_empty() {
            return Some(None);
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
        for (i, k) in self.keys.iter().enumerate() {
            if digests_equal(&k.digest, &digest) {
                found = Some(i);
            }
        }
        found.map(Some)
    }

    /// The caller the front door authenticated.
    fn caller(&self, authed: Authed) -> Caller<'_> {
        Caller {
            key: authed.0.and_then(|i| self.keys.get(i)),
        }
    }

    /// The admission gate of route `route` (the only gate without routes).
    fn admission(&self, route: Option<usize>) -> Option<&Admission> {
        self.admissions
            .get(route.unwrap_or(0))
            .or(self.admissions.first())
    }

    /// The index of the route `model` names.
    fn route_of(&self, model: Option<&str>) -> Result<Option<usize>, WireError> {
        if self.routes.is_empty() {
            return Ok(None);
        }
        let known = || self.models.join(", ");
        let Some(model) = model else {
            return Err(WireError::new(
                400,
                "invalid_request_error",
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
            None => Err(WireError::new(
                404,
                "invalid_request_error",
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
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages::messages))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/status", get(status_page));
    if state.metrics.is_some() && state.server.metrics_listen.is_none() {
        r = r.route("/metrics", get(metrics::metrics));
    }
    r.layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            front::front,
        ))
        .with_state(state)
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
    let limits = ServeLimits {
        header_timeout: state.server.header_timeout,
        idle_timeout: state.server.idle_timeout,
        max_connections: state.server.max_connections,
        shutdown_grace: state.server.shutdown_grace,
    };
    serve_router(listener, router(state), limits, shutdown).await
}

fn error_response(e: WireError, provenance: Option<&Provenance>) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let retry_after = e.retry_after;
    let no_retry = e.no_retry;
    let mut resp = (status, axum::Json(e)).into_response();
    if no_retry {
        resp.headers_mut()
            .insert("x-should-retry", HeaderValue::from_static("false"));
    }
    if let Some(p) = provenance {
        set_provenance_headers(resp.headers_mut(), p);
    }
    if let Some(after) = retry_after {
        set_retry_after(resp.headers_mut(), after);
    }
    resp
}

/// The provenance of a failed call, for its headers: no link served, degraded, and every
/// attempt the error carries.
fn failed_provenance(e: &Error) -> Provenance {
    let mut p = Provenance::default();
    p.attempts = e.attempts().to_vec();
    p.degraded = true;
    p
}

/// `x-ripcord-attempts`: every attempt in order, `link/model=outcome[(status)]:latency_ms`,
/// comma-separated — the same record `ripcord chat --json` prints.
fn attempts_header(p: &Provenance) -> Option<HeaderValue> {
    let parts: Vec<String> = p
        .attempts
        .iter()
        .map(|a| {
            let outcome = a.error_kind.map_or("ok", |k| k.as_str());
            let status = a.status.map(|s| format!("({s})")).unwrap_or_default();
            format!(
                "{}/{}={outcome}{status}:{}ms",
                a.provider,
                a.model,
                a.latency.as_millis()
            )
        })
        .collect();
    HeaderValue::from_str(&parts.join(", ")).ok()
}

fn set_provenance_headers(headers: &mut HeaderMap, p: &Provenance) {
    if let Some(v) = attempts_header(p) {
        headers.insert("x-ripcord-attempts", v);
    }
    let served = p
        .served_by
        .as_deref()
        .unwrap_or(if p.static_reply { "static" } else { "none" });
    if let Ok(v) = HeaderValue::from_str(served) {
        headers.insert("x-ripcord-served-by", v);
    }
    headers.insert(
        "x-ripcord-degraded",
        HeaderValue::from_static(if p.degraded { "true" } else { "false" }),
    );
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Parses a JSON request body, or the 400 that names what is wrong with it.
fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(body).map_err(|e| {
        WireError::new(
            400,
            "invalid_request_error",
            "invalid_request",
            format!("invalid request body: {e}"),
        )
    })
}

fn route_not_allowed(requested: &str, route: &GatewayRoute) -> Response {
    let which = if requested == route.name {
        format!("`{requested}`")
    } else {
        format!("`{requested}` (route `{}`)", route.name)
    };
    error_response(
        WireError::new(
            403,
            "invalid_request_error",
            "route_not_allowed",
            format!(
                "this gateway key may not use the model {which}; GET /v1/models lists the ones it may use"
            ),
        )
        .with_param("model"),
        None,
    )
}

async fn chat_completions(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Extension(RequestId(id)): Extension<RequestId>,
    request: axum::extract::Request,
) -> Response {
    // The head is taken apart, not cloned (axum's `HeaderMap` extractor copies every header);
    // the front door has already read the body under its limits, so this is a hand-over.
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(
                WireError::new(
                    400,
                    "invalid_request_error",
                    "invalid_request",
                    "the request body could not be read",
                ),
                None,
            );
        }
    };
    let caller = state.caller(authed);
    let reply = Reply {
        id,
        expose: state.server.expose_errors,
    };
    let wire: WireRequest = match parse_body(&body) {
        Ok(x) => x,
        Err(e) => return error_response(e, None),
    };
    let route = match state.route_of(wire.model.as_deref()) {
        Ok(r) => r,
        Err(e) => return error_response(e, None),
    };
    if let Some(i) = route
        && !caller.may_use(i)
        && let Some(r) = state.routes.get(i)
    {
        return route_not_allowed(wire.model.as_deref().unwrap_or_default(), r);
    }
    let stream = wire.stream;
    let include_usage = wire.include_usage();
    let requested_model = wire
        .model
        .clone()
        .unwrap_or_else(|| state.model.id().model.to_string());
    let req = match wire.into_chat_request() {
        Ok(r) => r,
        // The client's own mistake, named in full.
        Err(e) => return error_response(WireError::from_error(&e), None),
    };
    let (deadline, stream_max) = route
        .and_then(|i| state.routes.get(i))
        .map_or((state.deadline, state.stream_max), |r| {
            (r.deadline, r.stream_max)
        });
    let mut ctx = Context::new().with_timeout(deadline);
    if stream {
        // The request deadline bounds getting an answer; a long answer then streams on.
        if let Some(at) = tokio::time::Instant::now().checked_add(stream_max) {
            ctx = ctx.with_stream_deadline(at);
        }
    }
    if let Some(i) = route {
        ctx = ctx.with_metadata(routing::ROUTE, i.to_string());
    }
    let mut model = &state.model;
    // Who pays, said back to the client (`x-ripcord-tenant`), so a claim the key may not make
    // is visibly not what counted.
    let mut charged = None;
    if let Some(key) = caller.key {
        if let Some(tenant) = &key.tenant {
            ctx = ctx.with_tenant(Arc::clone(tenant));
            charged = Some(tenant.to_string());
            if key.sub_tenants {
                match sub_tenant_of(&headers, req.user.as_deref()) {
                    Ok(Some(sub)) => {
                        charged = Some(format!("{tenant}/{sub}"));
                        ctx = ctx.with_metadata(routing::SUB_TENANT, sub);
                    }
                    Ok(None) => {}
                    Err(e) => return error_response(e, None),
                }
            }
        }
        if let Some(limited) = &key.limited {
            model = limited;
        }
    }
    let route_header = route
        .and_then(|i| state.routes.get(i))
        .and_then(|r| HeaderValue::from_str(&r.name).ok());
    let tenant_header = charged.and_then(|t| HeaderValue::from_str(&t).ok());
    // Shed at the door: a call refused here touches no breaker, limiter or budget.
    let slot = match state.admission(route).map(|a| a.admit(deadline)) {
        Some(admit) => match admit.await {
            Ok(p) => Some(p),
            Err(why) => return shed_response(why, "/v1/chat/completions", route_header, &reply),
        },
        None => None,
    };
    let requested_header = HeaderValue::from_str(&requested_model).ok();
    let id = state.next_id();
    let created = unix_now();
    let resp = if !stream {
        match model.chat(&req, &ctx).await {
            Ok(resp) => {
                // The body names who served (the vendor's own name, else the serving link's
                // model); the requested name goes in a header.
                let fallback = served_model(&resp.provenance).unwrap_or(&requested_model);
                let body = wire::completion(&id, created, fallback, &resp);
                let mut r = axum::Json(body).into_response();
                set_provenance_headers(r.headers_mut(), &resp.provenance);
                r
            }
            Err(e) => error_response(call_error(&e, &reply), Some(&failed_provenance(&e))),
        }
    } else {
        match model.stream(&req, &ctx).await {
            Ok(s) => {
                sse_response(
                    s,
                    ChunkWriter {
                        id,
                        created,
                        model: requested_model,
                    },
                    include_usage,
                    &reply,
                )
                .await
            }
            Err(e) => error_response(call_error(&e, &reply), Some(&failed_provenance(&e))),
        }
    };
    // The slot is held until the answer's body is done (a stream: until its last event).
    let mut resp = match slot {
        Some(p) => shed::hold(resp, p),
        None => resp,
    };
    if let Some(v) = route_header {
        resp.headers_mut().insert("x-ripcord-route", v);
    }
    if let Some(v) = tenant_header {
        resp.headers_mut().insert("x-ripcord-tenant", v);
    }
    if let Some(v) = requested_header {
        resp.headers_mut().insert("x-ripcord-requested-model", v);
    }
    resp
}

/// The sub-tenant a `sub_tenants` key's client names: the `x-ripcord-tenant` header, else the
/// request's `user`; none when both are absent or blank. A name over 256 bytes, with a `/` (the
/// separator of `tenant/sub`) or a header that is not text is a 400 naming where it came from.
fn sub_tenant_of(headers: &HeaderMap, user: Option<&str>) -> Result<Option<String>, WireError> {
    let (raw, from) = match headers.get("x-ripcord-tenant") {
        Some(v) => match v.to_str() {
            Ok(t) => (Some(t), "the x-ripcord-tenant header"),
            Err(_) => return Err(bad_sub_tenant("the x-ripcord-tenant header", "is not text")),
        },
        None => (user, "the request's `user`"),
    };
    let Some(t) = raw.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if t.len() > 256 {
        return Err(bad_sub_tenant(from, "is longer than 256 bytes"));
    }
    if t.contains('/') {
        return Err(bad_sub_tenant(from, "contains `/`"));
    }
    Ok(Some(t.to_owned()))
}

fn bad_sub_tenant(from: &str, why: &str) -> WireError {
    WireError::new(
        400,
        "invalid_request_error",
        "invalid_sub_tenant",
        format!("the sub-tenant in {from} {why}"),
    )
}

fn sse_data(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// The model that served an answer, as the serving link names it: the last successful
/// attempt's model (`None` for a static reply or when no link served).
fn served_model(p: &Provenance) -> Option<&str> {
    p.served_by.as_ref()?;
    p.attempts
        .iter()
        .rev()
        .find(|a| a.succeeded())
        .map(|a| &*a.model)
        .filter(|m| !m.is_empty())
}

/// Reads a stream up to its commit point: the chain's first provenance, or the first content
/// or the end when none comes. Returns the events read before it and the provenance; an error
/// before commit is returned for the caller to answer in its own wire's shape.
async fn read_to_commit(
    s: &mut ChatStream,
) -> Result<(Vec<StreamEvent>, Option<Provenance>), Error> {
    let mut head = Vec::new();
    while let Some(item) = s.next().await {
        match item? {
            StreamEvent::Provenance { provenance } => return Ok((head, Some(*provenance))),
            ev => {
                let content = ev.is_content();
                head.push(ev);
                if content {
                    break;
                }
            }
        }
    }
    Ok((head, None))
}

async fn sse_response(
    mut s: ChatStream,
    mut writer: ChunkWriter,
    include_usage: bool,
    reply: &Reply,
) -> Response {
    // Headers go out at the commit point, so they are true.
    let (head, provenance) = match read_to_commit(&mut s).await {
        Ok(h) => h,
        Err(e) => return error_response(call_error(&e, reply), Some(&failed_provenance(&e))),
    };
    // Every chunk names the model that serves, not the one asked for (that one is in the
    // `x-ripcord-requested-model` header): a client that reads `model` learns who answered.
    if let Some(m) = provenance.as_ref().and_then(served_model) {
        writer.model = m.to_owned();
    }
    let reply = reply.clone();
    let body = async_stream::stream! {
        yield Ok::<Bytes, std::convert::Infallible>(sse_data(&writer.chunk(json!({"role": "assistant", "content": ""}), None)));
        let mut usage = None;
        let mut finished = false;
        let mut pending: std::collections::VecDeque<Result<StreamEvent, Error>> = head.into_iter().map(Ok).collect();
        loop {
            let next = match pending.pop_front() {
                Some(ev) => Some(ev),
                None => s.next().await,
            };
            match next {
                Some(Ok(StreamEvent::TextDelta { text })) => {
                    yield Ok(sse_data(&writer.chunk(json!({"content": text}), None)));
                }
                Some(Ok(StreamEvent::ToolCallDelta { index, id, name, arguments })) => {
                    let mut call = json!({"index": index, "function": {"arguments": arguments}});
                    if let Some(id) = id { call["id"] = json!(id); call["type"] = json!("function"); }
                    if let Some(name) = name { call["function"]["name"] = json!(name); }
                    yield Ok(sse_data(&writer.chunk(json!({"tool_calls": [call]}), None)));
                }
                Some(Ok(StreamEvent::Usage { usage: u })) => usage = Some(u),
                Some(Ok(StreamEvent::Finish { reason, .. })) => {
                    finished = true;
                    yield Ok(sse_data(&writer.chunk(json!({}), Some(reason.as_str()))));
                }
                Some(Ok(StreamEvent::Restarted { reason, message })) => {
                    let e = Error::new(reason, format!("the upstream failed mid-stream and the answer restarted: {message}"));
                    yield Ok(sse_data(&WireError::from_error(&e).event_json()));
                    return;
                }
                Some(Ok(StreamEvent::Provenance { .. })) => {}
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    // The headers went out at commit; the call's final record rides with the
                    // error event (clients that only read `error` ignore it).
                    let attempts = attempts_header(&failed_provenance(&e))
                        .and_then(|v| v.to_str().ok().map(str::to_owned));
                    let mut event = call_error(&e, &reply).event_json();
                    event["ripcord"] = json!({"served_by": null, "degraded": true, "attempts": attempts});
                    yield Ok(sse_data(&event));
                    return;
                }
                None => break,
            }
        }
        if !finished {
            let e = Error::new(ErrorKind::InvalidResponse, "stream ended without a finish event");
            yield Ok(sse_data(&WireError::from_error(&e).event_json()));
            return;
        }
        if let Some(u) = usage.filter(|_| include_usage) {
            yield Ok(sse_data(&writer.usage(&u)));
        }
        yield Ok(Bytes::from_static(b"data: [DONE]\n\n"));
    };
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(p) = &provenance {
        set_provenance_headers(h, p);
    }
    resp
}

async fn embeddings(
    State(state): State<Arc<GatewayState>>,
    Extension(RequestId(id)): Extension<RequestId>,
    body: Bytes,
) -> Response {
    let reply = Reply {
        id,
        expose: state.server.expose_errors,
    };
    let Some(model) = state.embeddings.clone() else {
        return error_response(
            WireError::new(
                404,
                "invalid_request_error",
                "model_not_found",
                "no embedding model is configured",
            ),
            None,
        );
    };
    let v: Value = match parse_body(&body) {
        Ok(x) => x,
        Err(e) => return error_response(e, None),
    };
    let inputs: Vec<String> = match v.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        _ => {
            return error_response(
                WireError::new(
                    400,
                    "invalid_request_error",
                    "invalid_request",
                    "`input` must be a string or an array of strings",
                ),
                None,
            );
        }
    };
    let mut req = EmbeddingRequest::new(inputs);
    req.dimensions = v
        .get("dimensions")
        .and_then(Value::as_u64)
        .and_then(|d| u32::try_from(d).ok());
    let ctx = Context::new().with_timeout(state.deadline);
    match model.embed(&req, &ctx).await {
        Ok(r) => {
            let data: Vec<Value> = r
                .vectors
                .iter()
                .enumerate()
                .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
                .collect();
            let mut resp = axum::Json(json!({
                "object": "list",
                "data": data,
                "model": r.model,
                "usage": {"prompt_tokens": r.usage.input_tokens, "total_tokens": r.usage.total_tokens()},
            }))
            .into_response();
            if let Some(s) = r
                .served_by
                .as_deref()
                .and_then(|s| HeaderValue::from_str(s).ok())
            {
                resp.headers_mut().insert("x-ripcord-served-by", s);
            }
            resp
        }
        Err(e) => error_response(call_error(&e, &reply), None),
    }
}

async fn models(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
) -> Response {
    let caller = state.caller(authed);
    let entry = |m: &str, route: Option<&str>| {
        let mut v = json!({"id": m, "object": "model", "created": 0, "owned_by": "ripcord"});
        if let Some(r) = route {
            v["route"] = json!(r);
        }
        v
    };
    let data: Vec<Value> = if state.routes.is_empty() {
        state.models.iter().map(|m| entry(m, None)).collect()
    } else {
        // Only the routes this key may use, each by its name and its aliases.
        state
            .routes
            .iter()
            .enumerate()
            .filter(|(i, _)| caller.may_use(*i))
            .flat_map(|(_, r)| {
                std::iter::once(&r.name)
                    .chain(&r.aliases)
                    .map(|m| entry(m, Some(&r.name)))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

/// `/readyz`: 503 when the readiness view says `unavailable` (every link of every route is
/// refused by its breaker), else 200; the body is the view either way.
async fn readyz(State(state): State<Arc<GatewayState>>) -> Response {
    let view = (state.readiness)();
    let status = if view.get("status").and_then(Value::as_str) == Some("unavailable") {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (status, axum::Json(view)).into_response()
}

/// `GET /status`: the HTML status page (see [`status`]). The front door keeps it behind the
/// gateway keys when keys are configured, like every path but the health probes.
async fn status_page(State(state): State<Arc<GatewayState>>) -> Response {
    let Some(board) = &state.status else {
        return (StatusCode::NOT_FOUND, "this gateway has no status page").into_response();
    };
    let mut resp = axum::response::Html(board.render()).into_response();
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}
