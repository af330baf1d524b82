//! The gateway's smaller endpoints: `POST /v1/embeddings`, `GET /v1/models`, `GET /readyz` and
//! `GET /status`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ripcord_core::{Context, EmbeddingRequest};
use serde_json::{Value, json};

use super::GatewayState;
use super::errors::GatewayError;
use super::errors::call_error;
use super::front::{Authed, RequestId};
use super::reply::hdr;
use super::reply::parse_body;

pub(super) async fn embeddings(
    State(state): State<Arc<GatewayState>>,
    Extension(RequestId(id)): Extension<RequestId>,
    body: Bytes,
) -> Response {
    let reply = state.reply(id);
    let Some(model) = state.embeddings.clone() else {
        return GatewayError::new(404, "model_not_found", "no embedding model is configured")
            .into_response();
    };
    let v: Value = match parse_body(&body) {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let inputs: Vec<String> = match v.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        _ => {
            return GatewayError::invalid_at("input", "must be a string or an array of strings")
                .into_response();
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
                resp.headers_mut().insert(hdr::SERVED_BY, s);
            }
            resp
        }
        Err(e) => call_error(&e, &reply).into_response(),
    }
}

pub(super) async fn models(
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
pub(super) async fn status_page(State(state): State<Arc<GatewayState>>) -> Response {
    let Some(board) = &state.status else {
        return (StatusCode::NOT_FOUND, "this gateway has no status page").into_response();
    };
    let mut resp = axum::response::Html(board.render()).into_response();
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
