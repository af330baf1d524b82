//! Errors the gateway sends: one shape per front door, general words for clients, the detail
//! for the server log.
//!
//! - Every non-2xx answer has the error shape of the wire its path speaks: Anthropic's
//!   `{"type":"error","error":{"type","message"}}` under `/v1/messages`, OpenAI's
//!   `{"error":{"message","type","param","code"}}` everywhere else. Refusals made before a
//!   handler runs (401, 404, 405, 408, 413, 415, 503 shed, …) are all built by [`refusal`].
//! - `Retry-After` (and `retry-after-ms`, which OpenAI's SDKs read first) goes on 429 and 503
//!   when a wait is known. `x-should-retry: false` goes on quota, budget, auth and
//!   content-filter errors, and on a failed chain that tried every link (a client's retry would
//!   run the whole chain again; `Retry-After` then says when a link readmits, on any status):
//!   the OpenAI and Anthropic SDKs read it and stop retrying what will not change.
//! - A failed chain's client-facing message says what happened in general terms plus the
//!   request id; which links were tried, their models and the vendors' own messages (billing
//!   text included) go to the server log and spans. `[server] expose_errors = true` puts the
//!   full detail back in the body (for development).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ripcord_core::{Error, ErrorKind, Provenance};
use ripcord_providers::anthropic_wire;
use serde::Serialize;
use serde_json::{Value, json};

use super::reply::{hdr, set_provenance_headers};
use super::shed::{self, Shed};
use crate::routing;

/// The error shape of a front door's wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Shape {
    /// OpenAI's `{"error":{"message","type","param","code"}}` (Chat Completions, Responses,
    /// embeddings, models and everything that is not Anthropic's).
    #[default]
    OpenAi,
    /// Anthropic's `{"type":"error","error":{"type","message"}}` (`/v1/messages…`).
    Anthropic,
}

impl Shape {
    /// The shape of the wire `path` speaks.
    pub(crate) fn of_path(path: &str) -> Shape {
        if is_anthropic_path(path) {
            Shape::Anthropic
        } else {
            Shape::OpenAi
        }
    }
}

/// Every error a front door answers with, wire-neutral until it is rendered: the door's
/// [`Shape`] decides the envelope, the type names and (for a failed call) the status, so one
/// value serves every dialect and handlers return it with `?`.
#[derive(Debug)]
pub(crate) struct GatewayError {
    /// The status on OpenAI's wire (Anthropic's door maps a failed call's kind itself).
    pub(crate) status: u16,
    /// The class of a failed call, when the error is one.
    kind: Option<ErrorKind>,
    /// OpenAI's `type`, when it is not the status's usual one.
    openai_type: Option<&'static str>,
    code: Cow<'static, str>,
    message: String,
    param: Option<String>,
    /// Sent as `Retry-After` / `retry-after-ms`.
    pub(crate) retry_after: Option<Duration>,
    /// Sent as `x-should-retry: false` (what a retry cannot fix).
    pub(crate) no_retry: bool,
    /// `Retry-After` goes out whatever the status (a failed chain's readmission), not only on
    /// 429 and 503.
    retry_after_any_status: bool,
    provenance: Option<Box<Provenance>>,
    /// Whether the attempts name their links and models (`[server] expose_errors`); off, they
    /// are `link1`, `link2`, … (see [`super::reply::attempts_header`]).
    expose_attempts: bool,
    shape: Shape,
}

/// OpenAI's error body, borrowed from a [`GatewayError`].
#[derive(Debug, Serialize)]
struct OpenAiBody<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: &'a str,
}

impl GatewayError {
    /// An error of the gateway's own with this status and OpenAI `code`.
    pub(crate) fn new(
        status: u16,
        code: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        GatewayError {
            status,
            kind: None,
            openai_type: None,
            code: code.into(),
            message: message.into(),
            param: None,
            retry_after: None,
            no_retry: false,
            retry_after_any_status: false,
            provenance: None,
            expose_attempts: false,
            shape: Shape::OpenAi,
        }
    }

    /// A 400 for the client's own mistake.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        GatewayError::new(400, "invalid_request", message)
    }

    /// A 400 naming the field at fault by its path (`input[2].content[0].type`): the path is
    /// OpenAI's `param` and starts the message.
    pub(crate) fn invalid_at(path: impl Into<String>, message: impl std::fmt::Display) -> Self {
        let path = path.into();
        let mut e = GatewayError::invalid(format!("{path}: {message}"));
        e.param = Some(path);
        e
    }

    /// A failed call, classified by its kind (the status and types follow the kind on every
    /// wire); a refusal that says when to come back passes that on.
    pub(crate) fn from_error(e: &Error) -> Self {
        let kind = e.kind();
        let status: u16 = match kind {
            ErrorKind::ContentFiltered
            | ErrorKind::InvalidRequest
            | ErrorKind::ContextLengthExceeded => 400,
            ErrorKind::PayloadTooLarge => 413,
            ErrorKind::RateLimited
            | ErrorKind::LocalRateLimited
            | ErrorKind::BudgetExhausted
            | ErrorKind::QuotaExhausted => 429,
            ErrorKind::DeadlineExceeded | ErrorKind::Timeout => 504,
            ErrorKind::Overloaded | ErrorKind::CircuitOpen => 503,
            ErrorKind::Cancelled => 499,
            _ => 502,
        };
        let mut g = GatewayError::new(status, kind.as_str(), e.to_string());
        g.kind = Some(kind);
        g.retry_after = e.retry_after();
        g
    }

    /// Names the request parameter at fault (OpenAI's `param`).
    pub(crate) fn with_param(mut self, param: &str) -> Self {
        self.param = Some(param.to_owned());
        self
    }

    /// Uses this OpenAI `code`.
    pub(crate) fn with_code(mut self, code: &'static str) -> Self {
        self.code = Cow::Borrowed(code);
        self
    }

    /// Uses this OpenAI `type` instead of the status's usual one.
    pub(crate) fn with_openai_type(mut self, ty: &'static str) -> Self {
        self.openai_type = Some(ty);
        self
    }

    /// Carries the record of the failed call, sent as its provenance headers.
    pub(crate) fn with_provenance(mut self, p: Provenance) -> Self {
        self.provenance = Some(Box::new(p));
        self
    }

    /// Says the request id in the message (once), so that every error a client sees can be
    /// found in the server log by it.
    pub(crate) fn with_request_id(mut self, id: &str) -> Self {
        let tag = format!("(request id: {id})");
        if !self.message.ends_with(&tag) {
            self.message = format!("{} {tag}", self.message);
        }
        self
    }

    /// Renders in `shape` (a front door sets its own).
    pub(crate) fn shaped(mut self, shape: Shape) -> Self {
        self.shape = shape;
        self
    }

    /// The record of the failed call, when it carries one.
    pub(crate) fn provenance(&self) -> Option<&Provenance> {
        self.provenance.as_deref()
    }

    /// Lets the attempts of [`Self::provenance`] name links and models (`[server]
    /// expose_errors`); by default they do not.
    pub(crate) fn exposing(mut self, expose: bool) -> Self {
        self.expose_attempts = expose;
        self
    }

    /// Whether the attempts of [`Self::provenance`] may name links and models.
    pub(crate) fn expose_attempts(&self) -> bool {
        self.expose_attempts
    }

    /// The message.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// Replaces the message.
    pub(crate) fn set_message(&mut self, message: String) {
        self.message = message;
    }

    /// The status and the error `type` on the wire of `shape`.
    fn status_and_type(&self, shape: Shape) -> (u16, &'static str) {
        match (shape, self.kind) {
            (Shape::OpenAi, _) => (
                self.status,
                self.openai_type.unwrap_or(openai_type(self.status)),
            ),
            (Shape::Anthropic, Some(kind)) => anthropic_wire::error_type(kind),
            (Shape::Anthropic, None) => (self.status, anthropic_type(self.status)),
        }
    }

    /// The error body in `shape` (the body of an HTTP error, and of an in-band stream error
    /// event: the same envelope, never nested twice, so SDKs show `message` as the reason).
    pub(crate) fn body(&self, shape: Shape) -> Value {
        let (_, ty) = self.status_and_type(shape);
        match shape {
            Shape::OpenAi => json!({"error": OpenAiBody {
                message: &self.message,
                kind: ty,
                param: self.param.as_deref(),
                code: &self.code,
            }}),
            Shape::Anthropic => {
                json!({"type": "error", "error": {"type": ty, "message": self.message}})
            }
        }
    }

    /// OpenAI's error object (`{"code","message","param","type"}`) without the envelope, for
    /// the Responses API's `error` stream event and a failed response's `error`.
    pub(crate) fn openai_object(&self) -> Value {
        let (_, ty) = self.status_and_type(Shape::OpenAi);
        json!({"type": ty, "code": self.code, "message": self.message, "param": self.param})
    }
}

impl IntoResponse for GatewayError {
    fn into_response(self) -> Response {
        let (status, _) = self.status_and_type(self.shape);
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut resp = (code, axum::Json(self.body(self.shape))).into_response();
        let h = resp.headers_mut();
        if self.no_retry {
            h.insert(hdr::SHOULD_RETRY, HeaderValue::from_static("false"));
        }
        if let Some(p) = &self.provenance {
            set_provenance_headers(h, p, self.expose_attempts);
        }
        if let Some(after) = self
            .retry_after
            .filter(|_| self.retry_after_any_status || matches!(status, 429 | 503 | 529))
        {
            set_retry_after(h, after);
        }
        resp
    }
}

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
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
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
    code: &'static str,
    message: &str,
    request_id: Option<&str>,
    retry_after: Option<Duration>,
) -> Response {
    let message = match request_id {
        Some(id) => format!("{message} (request id: {id})"),
        None => message.to_owned(),
    };
    let mut e = GatewayError::new(status, code, message).shaped(Shape::of_path(path));
    e.retry_after = retry_after;
    e.no_retry = status == 401;
    e.into_response()
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
pub(super) fn call_error(e: &Error, reply: &Reply) -> GatewayError {
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
        let w = GatewayError::from_error(e)
            .with_openai_type(which)
            .with_code("rate_limit_exceeded");
        (w, general)
    } else if e.kind() == ErrorKind::BudgetExhausted {
        // The caller's own account, which it may know about (no link or vendor in it).
        (GatewayError::from_error(e), e.message().to_owned())
    } else if let Some(refusal) = own_refusal(e) {
        // An adapter refused a field its vendor has no equivalent for, before sending: the
        // words are ripcord's own and name the field, so the client gets them.
        (GatewayError::from_error(e), refusal.to_owned())
    } else {
        (GatewayError::from_error(e), public_message(e).to_owned())
    };
    let text = if reply.expose {
        format!("{general}: {e}")
    } else {
        general
    };
    w.set_message(format!("{text} (request id: {})", reply.id));
    w.no_retry = !should_retry(e.kind());
    if chain_exhausted(e) {
        // The chain already retried every link and fell back through all of them: a client
        // that retries the whole call multiplies that work (three SDK attempts of a chain of
        // three links of three attempts is 27 vendor calls) and reaches the same links. It is
        // told not to, and, when a link's breaker or rate limit says when it readmits, when
        // the call is worth making again.
        w.no_retry = true;
        if let Some(after) = readmission(e) {
            w.retry_after = Some(after);
            w.retry_after_any_status = true;
        }
    }
    w.expose_attempts = reply.expose;
    w.with_provenance(failed_provenance(e))
}

/// The message of an invalid-request refusal an adapter made itself (no vendor answered:
/// no status), as the error that ended the call: ripcord's words, naming the field.
fn own_refusal(e: &Error) -> Option<&str> {
    let last = e.causes().last().unwrap_or(e);
    (last.kind() == ErrorKind::InvalidRequest && last.status().is_none() && e.kind() == last.kind())
        .then(|| last.message())
}

/// True when `e` is a chain's end after every link was tried or passed over (not a single
/// model's failure, nor a refusal before the chain ran).
pub(crate) fn chain_exhausted(e: &Error) -> bool {
    !e.causes().is_empty() || !e.skipped().is_empty()
}

/// The soonest a link of a failed chain said it would take calls again (`Retry-After` of a
/// rate limit, the open-until of a breaker), when any said.
pub(crate) fn readmission(e: &Error) -> Option<Duration> {
    e.causes()
        .iter()
        .filter_map(Error::retry_after)
        .chain(e.retry_after())
        .min()
}

/// The provenance of a failed call, for its headers: no link served, degraded, and every
/// attempt the error carries.
pub(super) fn failed_provenance(e: &Error) -> Provenance {
    let mut p = Provenance::default();
    p.attempts = e.attempts().to_vec();
    p.degraded = true;
    p
}

/// How a call's errors are told to its client: its request id, and whether the full detail
/// may be shown (`[server] expose_errors`).
#[derive(Debug, Clone)]
pub(super) struct Reply {
    pub(super) id: Arc<str>,
    pub(super) expose: bool,
    /// Turns `true` when the server's shutdown grace period is over (see
    /// [`super::server::StreamCut`]); `None` outside the accept loop (a router in a test).
    pub(super) cut: Option<tokio::sync::watch::Receiver<bool>>,
    /// Turns `true` when the client sent a FIN while its stream was written (see
    /// [`super::socket::PeerFin`]); `None` outside the accept loop.
    pub(super) peer_fin: Option<tokio::sync::watch::Receiver<bool>>,
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
