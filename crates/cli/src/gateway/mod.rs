//! `ripcord serve`: an OpenAI-compatible HTTP gateway in front of a chain.
//!
//! Any app with an OpenAI SDK gets ripcord by pointing its base URL here. Routes:
//! `POST /v1/chat/completions` (JSON and SSE), `POST /v1/embeddings` (when configured),
//! `GET /v1/models`, `GET /healthz`, `GET /readyz` (per-link health as JSON). Every chat answer
//! carries `x-ripcord-served-by`, `x-ripcord-degraded` and `x-ripcord-attempts` headers (every
//! attempt, `link/model=outcome(status):latency`); a failed call carries them too, with
//! `served-by: none` and `degraded: true`.
//!
//! The tenant of a chat completion (for `[budget]`) is the `x-ripcord-tenant` header, else the
//! body's OpenAI `user` field; none means an anonymous call.
//!
//! Why it looks the way it does:
//! - Accepted sockets get `TCP_NODELAY` (PITFALLS 17: with Nagle on, keep-alive clients wait
//!   ~40 ms per response for a delayed ACK).
//! - Bearer keys are mandatory whenever the gateway listens beyond loopback; [`check_bind`]
//!   refuses to start otherwise. Keys are compared in constant time and never logged.
//! - A client that disconnects drops the handler future, which drops the chain call and with it
//!   the upstream request: nothing keeps running for a caller who is gone.
//! - Streams: headers are sent once the chain has committed to a link (its first content event),
//!   so `x-ripcord-served-by` is true for streams too. A failure after that is sent as OpenAI's
//!   in-band `{"error": …}` event, with the call's final record beside it
//!   (`"ripcord": {"degraded": true, "attempts": "…"}`, the `x-ripcord-attempts` format); a `Restarted` event cannot be expressed on OpenAI's wire (a
//!   client cannot un-show text), so the gateway ends the stream with an error there instead.

mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use futures::StreamExt;
use ripcord_core::{
    ChatModel, ChatStream, Context, EmbeddingModel, EmbeddingRequest, Error, ErrorKind, Provenance,
    StreamEvent,
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use wire::{ChunkWriter, WireError, WireRequest};

/// Reports per-link health for `/readyz`.
pub type Readiness = Arc<dyn Fn() -> Value + Send + Sync>;

/// Everything the gateway serves.
pub struct GatewayState {
    /// The chain (or any model).
    pub model: Arc<dyn ChatModel>,
    /// Embeddings, when configured.
    pub embeddings: Option<Arc<dyn EmbeddingModel>>,
    /// Accepted bearer keys; empty = no auth (loopback only).
    pub keys: Vec<SecretString>,
    /// Deadline of each request (for a stream: until its first content).
    pub deadline: Duration,
    /// The bound of a streamed answer after its first content.
    pub stream_max: Duration,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// `/readyz` body.
    pub readiness: Readiness,
    /// Model names listed by `/v1/models`.
    pub models: Vec<String>,
    ids: AtomicU64,
}

impl std::fmt::Debug for GatewayState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayState")
            .field("model", &self.model.id())
            .field("keys", &format_args!("{} [redacted]", self.keys.len()))
            .field("deadline", &self.deadline)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl GatewayState {
    /// A gateway over `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        let name = model.id().name.to_string();
        GatewayState {
            model,
            embeddings: None,
            keys: Vec::new(),
            deadline: Duration::from_secs(30),
            stream_max: Duration::from_secs(600),
            max_body_bytes: 1 << 20,
            readiness: Arc::new(|| json!({"status": "ready"})),
            models: vec![name],
            ids: AtomicU64::new(0),
        }
    }

    fn next_id(&self) -> String {
        format!(
            "chatcmpl-ripcord-{}",
            self.ids.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        if self.keys.is_empty() {
            return true;
        }
        let Some(given) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        // Check every key without early exit, each in constant time for equal lengths.
        self.keys.iter().fold(false, |ok, k| {
            ok | constant_time_eq(k.expose_secret().as_bytes(), given.as_bytes())
        })
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .layer(DefaultBodyLimit::max(limit))
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
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "could not set TCP_NODELAY on an accepted connection");
        }
    });
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

fn error_response(e: WireError, provenance: Option<&Provenance>) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut resp = (status, axum::Json(e)).into_response();
    if let Some(p) = provenance {
        set_provenance_headers(resp.headers_mut(), p);
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

fn unauthorized() -> Response {
    error_response(
        WireError::new(
            401,
            "invalid_request_error",
            "invalid_api_key",
            "missing or invalid gateway key",
        ),
        None,
    )
}

async fn chat_completions(
    State(state): State<Arc<GatewayState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !state.authorized(&headers) {
        return unauthorized();
    }
    let wire: WireRequest = match parse_body(&body) {
        Ok(x) => x,
        Err(e) => return error_response(e, None),
    };
    let stream = wire.stream;
    let include_usage = wire.include_usage();
    let requested_model = wire
        .model
        .clone()
        .unwrap_or_else(|| state.model.id().model.to_string());
    let req = match wire.into_chat_request() {
        Ok(r) => r,
        Err(e) => return error_response(WireError::from_error(&e), None),
    };
    let mut ctx = Context::new().with_timeout(state.deadline);
    if stream {
        // The request deadline bounds getting an answer; a long answer then streams on.
        if let Some(at) = tokio::time::Instant::now().checked_add(state.stream_max) {
            ctx = ctx.with_stream_deadline(at);
        }
    }
    if let Some(tenant) = tenant_of(&headers, req.user.as_deref()) {
        ctx = ctx.with_tenant(tenant);
    }
    let id = state.next_id();
    let created = unix_now();
    if !stream {
        return match state.model.chat(&req, &ctx).await {
            Ok(resp) => {
                let body = wire::completion(&id, created, &requested_model, &resp);
                let mut r = axum::Json(body).into_response();
                set_provenance_headers(r.headers_mut(), &resp.provenance);
                r
            }
            Err(e) => error_response(WireError::from_error(&e), Some(&failed_provenance(&e))),
        };
    }
    match state.model.stream(&req, &ctx).await {
        Ok(s) => {
            sse_response(
                s,
                ChunkWriter {
                    id,
                    created,
                    model: requested_model,
                },
                include_usage,
            )
            .await
        }
        Err(e) => error_response(WireError::from_error(&e), Some(&failed_provenance(&e))),
    }
}

/// The caller's tenant: the `x-ripcord-tenant` header, else the request's `user`; blank or
/// over 256 bytes counts as none.
fn tenant_of(headers: &HeaderMap, user: Option<&str>) -> Option<String> {
    headers
        .get("x-ripcord-tenant")
        .and_then(|v| v.to_str().ok())
        .or(user)
        .map(str::trim)
        .filter(|t| !t.is_empty() && t.len() <= 256)
        .map(str::to_owned)
}

fn sse_data(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

async fn sse_response(mut s: ChatStream, writer: ChunkWriter, include_usage: bool) -> Response {
    // Read up to the commit point (the chain's first provenance), so the headers are true.
    let mut head = Vec::new();
    let mut provenance = None;
    while provenance.is_none() {
        match s.next().await {
            Some(Ok(StreamEvent::Provenance { provenance: p })) => provenance = Some(*p),
            Some(Ok(ev)) => {
                let content = ev.is_content();
                head.push(ev);
                if content {
                    break;
                }
            }
            Some(Err(e)) => {
                return error_response(WireError::from_error(&e), Some(&failed_provenance(&e)));
            }
            None => break,
        }
    }
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
                    yield Ok(sse_data(&json!({"error": WireError::from_error(&e)})));
                    return;
                }
                Some(Ok(StreamEvent::Provenance { .. })) => {}
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    // The headers went out at commit; the call's final record rides with the
                    // error event (clients that only read `error` ignore it).
                    let attempts = attempts_header(&failed_provenance(&e))
                        .and_then(|v| v.to_str().ok().map(str::to_owned));
                    yield Ok(sse_data(&json!({
                        "error": WireError::from_error(&e),
                        "ripcord": {"served_by": null, "degraded": true, "attempts": attempts},
                    })));
                    return;
                }
                None => break,
            }
        }
        if !finished {
            let e = Error::new(ErrorKind::InvalidResponse, "stream ended without a finish event");
            yield Ok(sse_data(&json!({"error": WireError::from_error(&e)})));
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
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !state.authorized(&headers) {
        return unauthorized();
    }
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
        Err(e) => error_response(WireError::from_error(&e), None),
    }
}

async fn models(State(state): State<Arc<GatewayState>>, headers: HeaderMap) -> Response {
    if !state.authorized(&headers) {
        return unauthorized();
    }
    let data: Vec<Value> = state
        .models
        .iter()
        .map(|m| json!({"id": m, "object": "model", "created": 0, "owned_by": "ripcord"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn readyz(State(state): State<Arc<GatewayState>>) -> Response {
    axum::Json((state.readiness)()).into_response()
}
