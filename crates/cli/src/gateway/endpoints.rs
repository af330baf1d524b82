//! The gateway's smaller endpoints: `POST /v1/embeddings`, `GET /v1/models`, `GET /readyz` and
//! `GET /status`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ripcord_core::{Context, EmbeddingRequest};
use serde_json::{Value, json};

use super::GatewayState;
use super::errors::{GatewayError, Shape, call_error};
use super::front::{Authed, RequestId};
use super::reply::hdr;
use super::reply::parse_body;

/// `POST /v1/embeddings`: texts or token arrays in, vectors out as floats or, with
/// `encoding_format: "base64"`, as the base64 of their little-endian `f32` bytes (what OpenAI
/// sends, and what the Node SDK asks for by default and decodes).
pub(super) async fn embeddings(
    State(state): State<Arc<GatewayState>>,
    Extension(RequestId(id)): Extension<RequestId>,
    body: Bytes,
) -> Response {
    let reply = state.reply(id);
    match embed(&state, &reply, &body).await {
        Ok(r) => r,
        Err(e) => e.with_request_id(&reply.id).into_response(),
    }
}

/// How the vectors are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Float,
    Base64,
}

/// The body of `POST /v1/embeddings` (OpenAI's).
#[derive(Debug, serde::Deserialize)]
struct EmbeddingsBody {
    #[serde(default, rename = "model")]
    _model: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<u32>,
    #[serde(default, rename = "user")]
    _user: Option<String>,
}

/// The inputs: a string, strings, one token array or token arrays.
fn embedding_input(input: Option<Value>) -> Result<EmbeddingRequest, GatewayError> {
    let what = "must be a string, an array of strings, an array of token ids or an array of token-id arrays";
    let token = |v: &Value| v.as_u64().and_then(|t| u32::try_from(t).ok());
    let req = match input {
        Some(Value::String(s)) => EmbeddingRequest::new(vec![s]),
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_string) => {
            EmbeddingRequest::new(
                a.into_iter()
                    .filter_map(|x| match x {
                        Value::String(s) => Some(s),
                        _ => None,
                    })
                    .collect(),
            )
        }
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_number) => {
            let ids: Option<Vec<u32>> = a.iter().map(token).collect();
            let ids = ids.ok_or_else(|| {
                GatewayError::invalid_at(
                    "input",
                    "token ids must be whole numbers from 0 to 2^32-1",
                )
            })?;
            EmbeddingRequest::from_tokens(vec![ids])
        }
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_array) => {
            let mut arrays = Vec::with_capacity(a.len());
            for (i, x) in a.iter().enumerate() {
                let ids: Option<Vec<u32>> = x
                    .as_array()
                    .filter(|ids| !ids.is_empty())
                    .and_then(|ids| ids.iter().map(token).collect());
                let ids = ids.ok_or_else(|| {
                    GatewayError::invalid_at(
                        format!("input[{i}]"),
                        "must be a non-empty array of token ids (whole numbers from 0 to 2^32-1)",
                    )
                })?;
                arrays.push(ids);
            }
            EmbeddingRequest::from_tokens(arrays)
        }
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(GatewayError::invalid_at("input", "must not be empty"));
        }
        None | Some(Value::Null) => {
            return Err(GatewayError::invalid_at("input", "Field required"));
        }
        Some(_) => return Err(GatewayError::invalid_at("input", what)),
    };
    Ok(req)
}

async fn embed(
    state: &GatewayState,
    reply: &super::errors::Reply,
    body: &[u8],
) -> Result<Response, GatewayError> {
    let Some(model) = state.embeddings.clone() else {
        return Err(GatewayError::new(
            404,
            "model_not_found",
            "no embedding model is configured",
        ));
    };
    let b: EmbeddingsBody = parse_body(body)?;
    let encoding = match b.encoding_format.as_deref() {
        None | Some("float") => Encoding::Float,
        Some("base64") => Encoding::Base64,
        Some(other) => {
            return Err(GatewayError::invalid_at(
                "encoding_format",
                format_args!("`{other}` is not `float` or `base64`"),
            ));
        }
    };
    let mut req = embedding_input(b.input)?;
    if !req.tokens.is_empty() && !model.accepts_tokens() {
        return Err(GatewayError::invalid_at(
            "input",
            "the embedding model serving this gateway takes texts only, not token ids",
        ));
    }
    req.dimensions = b.dimensions;
    let ctx = Context::new().with_timeout(state.deadline);
    let r = match model.embed(&req, &ctx).await {
        Ok(r) => r,
        Err(e) => return Err(call_error(&e, reply)),
    };
    let data: Vec<Value> = r
        .vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = match encoding {
                Encoding::Float => json!(v),
                Encoding::Base64 => json!(base64_of(v)),
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
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
        resp.headers_mut().insert(hdr::SERVED_BY, s);
    }
    Ok(resp)
}

/// A vector as OpenAI's base64 encoding: its `f32`s' little-endian bytes, base64 (standard
/// alphabet, padded).
fn base64_of(v: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The shape of a models answer: Anthropic's when the client speaks Anthropic's API (its SDKs
/// send `anthropic-version` on every call), else OpenAI's. `/v1/models` is one path for both.
fn models_shape(headers: &HeaderMap) -> Shape {
    if headers.contains_key("anthropic-version") {
        Shape::Anthropic
    } else {
        Shape::OpenAi
    }
}

/// The models (routes and aliases) this caller may use, each with the route it names.
fn visible_models<'a>(state: &'a GatewayState, authed: &Authed) -> Vec<(&'a str, Option<&'a str>)> {
    let caller = state.caller(authed);
    if state.routes.is_empty() {
        return state.models.iter().map(|m| (m.as_str(), None)).collect();
    }
    // Only the routes this key may use, each by its name and its aliases.
    state
        .routes
        .iter()
        .enumerate()
        .filter(|(i, _)| caller.may_use(*i))
        .flat_map(|(_, r)| {
            std::iter::once(&r.name)
                .chain(&r.aliases)
                .map(|m| (m.as_str(), Some(r.name.as_str())))
        })
        .collect()
}

/// One model object in `shape`.
fn model_entry(m: &str, route: Option<&str>, shape: Shape) -> Value {
    let mut v = match shape {
        Shape::OpenAi => json!({"id": m, "object": "model", "created": 0, "owned_by": "ripcord"}),
        Shape::Anthropic => json!({"type": "model", "id": m, "display_name": m,
            "created_at": "1970-01-01T00:00:00Z"}),
    };
    if let Some(r) = route {
        v["route"] = json!(r);
    }
    v
}

/// `GET /v1/models`: the models this caller may use, in OpenAI's list or Anthropic's page.
pub(super) async fn models(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    headers: HeaderMap,
) -> Response {
    let shape = models_shape(&headers);
    let data: Vec<Value> = visible_models(&state, &authed)
        .into_iter()
        .map(|(m, r)| model_entry(m, r, shape))
        .collect();
    match shape {
        Shape::OpenAi => axum::Json(json!({"object": "list", "data": data})).into_response(),
        Shape::Anthropic => {
            let first = data.first().map(|m| m["id"].clone()).unwrap_or(Value::Null);
            let last = data.last().map(|m| m["id"].clone()).unwrap_or(Value::Null);
            axum::Json(json!({"data": data, "has_more": false, "first_id": first, "last_id": last}))
                .into_response()
        }
    }
}

/// `GET /v1/models/{id}` (`models.retrieve` in both SDKs): one model this caller may use, or
/// a 404 in the client's own error shape.
pub(super) async fn model(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let shape = models_shape(&headers);
    match visible_models(&state, &authed)
        .into_iter()
        .find(|(m, _)| *m == id)
    {
        Some((m, r)) => axum::Json(model_entry(m, r, shape)).into_response(),
        None => GatewayError::new(
            404,
            "model_not_found",
            format!("The model `{id}` does not exist on this gateway or this key may not use it; GET /v1/models lists the ones it may use"),
        )
        .with_param("model")
        .with_request_id(&request_id)
        .shaped(shape)
        .into_response(),
    }
}

/// `/readyz`: 503 when the readiness view says `unavailable` (every link of every route is
/// refused by its breaker), else 200; the body is the view either way.
pub(super) async fn readyz(State(state): State<Arc<GatewayState>>) -> Response {
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
/// A key limited to some routes sees only those on the page.
pub(super) async fn status_page(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    headers: axum::http::HeaderMap,
) -> Response {
    let Some(board) = &state.status else {
        return (StatusCode::NOT_FOUND, "this gateway has no status page").into_response();
    };
    let caller = state.caller(&authed);
    let may_use = |route| caller.may_use(route);
    // The same view for a program: `Accept: application/json`.
    if headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"))
    {
        let mut resp = axum::Json(board.to_json_for(&may_use)).into_response();
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return resp;
    }
    let page = board.render_for(&may_use);
    let mut resp = axum::response::Html(page).into_response();
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // The page is inline HTML and CSS only: nothing else may load, and no other site may
    // frame it (clickjacking).
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}
