//! Errors the gateway sends: one shape per front door, general words for clients, the detail
//! for the server log.
//!
//! - Every non-2xx answer has the error shape of the wire its path speaks: Anthropic's
//!   `{"type":"error","error":{"type","message"}}` under `/v1/messages`, OpenAI's
//!   `{"error":{"message","type","param","code"}}` everywhere else. Refusals made before a
//!   handler runs (401, 404, 405, 408, 413, 415, 503 shed, …) are all built by [`refusal`].
//! - `Retry-After` (and `retry-after-ms`, which OpenAI's SDKs read first) goes on 429 and 503
//!   when a wait is known. `x-should-retry: false` goes on quota, budget, auth and
//!   content-filter errors: the OpenAI SDKs read it and stop retrying what will not change.
//! - A failed chain's client-facing message says what happened in general terms plus the
//!   request id; which links were tried, their models and the vendors' own messages (billing
//!   text included) go to the server log and spans. `[server] expose_errors = true` puts the
//!   full detail back in the body (for development).

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ripcord_core::{Error, ErrorKind};
use serde_json::json;

use super::reply::hdr;
use super::shed::{self, Shed};
use super::wire::WireError;
use crate::routing;

/// `Retry-After` in whole seconds (rounded up, as clients wait at least that long) and
/// `retry-after-ms`, which OpenAI's SDKs read first.
pub(crate) fn set_retry_after(headers: &mut HeaderMap, after: Duration) {
    let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX).max(1);
    headers.insert(header::RETRY_AFTER, HeaderValue::from(ms.div_ceil(1000)));
    headers.insert(hdr::RETRY_AFTER_MS, HeaderValue::from(ms));
}

/// Whether a client should retry an error of this kind at all (`x-should-retry`): never for
/// an exhausted quota or budget, a refused key or filtered content.
pub(crate) fn should_retry(kind: ErrorKind) -> bool {
    !matches!(
        kind,
        ErrorKind::QuotaExhausted
            | ErrorKind::BudgetExhausted
            | ErrorKind::Auth
            | ErrorKind::PermissionDenied
            | ErrorKind::ContentFiltered
    )
}

/// True when `path` belongs to the Anthropic-shaped front door.
pub(crate) fn is_anthropic_path(path: &str) -> bool {
    path == "/v1/messages" || path.starts_with("/v1/messages/")
}

/// Anthropic's error `type` for a status.
fn anthropic_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// OpenAI's error `type` for a status.
fn openai_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

/// A refusal made before (or instead of) a handler: the error shape of the path's wire, the
/// request id in the message, `Retry-After` when a wait is known.
pub(crate) fn refusal(
    path: &str,
    status: u16,
    code: &str,
    message: &str,
    request_id: Option<&str>,
    retry_after: Option<Duration>,
) -> Response {
    let status_code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let message = match request_id {
        Some(id) => format!("{message} (request id: {id})"),
        None => message.to_owned(),
    };
    let body = if is_anthropic_path(path) {
        json!({"type": "error", "error": {"type": anthropic_type(status), "message": message}})
    } else {
        json!({"error": {"message": message, "type": openai_type(status), "param": null, "code": code}})
    };
    let mut resp = (status_code, axum::Json(body)).into_response();
    if let Some(after) = retry_after.filter(|_| matches!(status, 429 | 503)) {
        set_retry_after(resp.headers_mut(), after);
    }
    if status == 401 {
        resp.headers_mut()
            .insert(hdr::SHOULD_RETRY, HeaderValue::from_static("false"));
    }
    resp
}

/// What a client is told about a failed call when the detail is not exposed: the kind in
/// general terms, never a link, a model or a vendor's own words.
pub(crate) fn public_message(e: &Error) -> &'static str {
    match e.kind() {
        ErrorKind::RateLimited | ErrorKind::LocalRateLimited => {
            "The AI service is rate limited right now; please retry later."
        }
        ErrorKind::QuotaExhausted => "The AI service's quota is exhausted.",
        ErrorKind::BudgetExhausted => "The token budget for this caller is exhausted.",
        ErrorKind::Overloaded | ErrorKind::CircuitOpen => {
            "The AI service is unavailable right now; please retry later."
        }
        ErrorKind::DeadlineExceeded | ErrorKind::Timeout => {
            "The AI service did not answer in time."
        }
        ErrorKind::ContentFiltered => "The request or its answer was refused by a content filter.",
        ErrorKind::ContextLengthExceeded => "The request is too long for the models serving it.",
        ErrorKind::PayloadTooLarge => "The request is too large for the models serving it.",
        ErrorKind::InvalidRequest => "The request was refused as invalid by the AI service.",
        ErrorKind::Auth | ErrorKind::PermissionDenied => {
            "The gateway could not authenticate with the AI service."
        }
        ErrorKind::Cancelled => "The request was cancelled.",
        _ => "The AI service failed to answer.",
    }
}

/// The wire error of a failed call: a refusal by the caller's own key limits is OpenAI's
/// `rate_limit_exceeded`; anything else is mapped by kind.
///
/// The full error (links, models, vendor messages) goes to the server log with the request
/// id; the client gets general words and the request id unless `expose_errors` is on.
pub(super) fn call_error(e: &Error, reply: &Reply) -> WireError {
    tracing::warn!(
        target: "ripcord::gateway",
        request_id = &*reply.id,
        error.type = e.kind().as_str(),
        error = %e,
        "call failed"
    );
    let own_limit = e.kind() == ErrorKind::LocalRateLimited
        && e.provider()
            .is_some_and(|p| p.starts_with(routing::KeyScope::PREFIX));
    let (mut w, general) = if own_limit {
        let which = if e.to_string().contains("tokens-per-minute") {
            "tokens"
        } else {
            "requests"
        };
        let general = format!("Rate limit reached for this gateway key on {which} per minute");
        let mut w = WireError::new(429, which, "rate_limit_exceeded", "");
        w.retry_after = e.retry_after();
        (w, general)
    } else if e.kind() == ErrorKind::BudgetExhausted {
        // The caller's own account, which it may know about (no link or vendor in it).
        (WireError::from_error(e), e.message().to_owned())
    } else {
        (WireError::from_error(e), public_message(e).to_owned())
    };
    let text = if reply.expose {
        format!("{general}: {e}")
    } else {
        general
    };
    w.set_message(format!("{text} (request id: {})", reply.id));
    w.no_retry = !should_retry(e.kind());
    w
}

/// How a call's errors are told to its client: its request id, and whether the full detail
/// may be shown (`[server] expose_errors`).
#[derive(Debug, Clone)]
pub(super) struct Reply {
    pub(super) id: Arc<str>,
    pub(super) expose: bool,
}

/// The 503 of a call shed at the door (see [`shed`]), with `Retry-After`, in the shape of the
/// wire `path` speaks.
pub(super) fn shed_response(
    why: Shed,
    path: &str,
    route: Option<HeaderValue>,
    reply: &Reply,
) -> Response {
    let message = match why {
        Shed::QueueFull => "The gateway is at capacity for this model; please retry shortly.",
        Shed::Deadline => {
            "The gateway had no free slot for this model before the request's deadline; please retry shortly."
        }
    };
    let mut resp = refusal(
        path,
        503,
        "server_overloaded",
        message,
        Some(&reply.id),
        Some(shed::SHED_RETRY_AFTER),
    );
    if let Some(v) = route {
        resp.headers_mut().insert(hdr::ROUTE, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_path() {
        assert!(is_anthropic_path("/v1/messages"));
        assert!(is_anthropic_path("/v1/messages/count_tokens"));
        assert!(!is_anthropic_path("/v1/messagesx"));
        assert!(!is_anthropic_path("/v1/chat/completions"));
        assert_eq!(anthropic_type(503), "overloaded_error");
        assert_eq!(anthropic_type(401), "authentication_error");
        assert_eq!(openai_type(415), "invalid_request_error");
    }

    #[test]
    fn should_retry_is_false_for_what_a_retry_cannot_fix() {
        for k in [
            ErrorKind::QuotaExhausted,
            ErrorKind::BudgetExhausted,
            ErrorKind::Auth,
            ErrorKind::ContentFiltered,
        ] {
            assert!(!should_retry(k), "{k:?}");
        }
        assert!(should_retry(ErrorKind::RateLimited));
        assert!(should_retry(ErrorKind::Overloaded));
    }
}
