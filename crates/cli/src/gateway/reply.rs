//! What every chat answer of both front doors carries: the provenance headers
//! (`x-ripcord-attempts`, `x-ripcord-served-by`, `x-ripcord-degraded`), an error in OpenAI's
//! shape, and the parsing of a JSON request body.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ripcord_core::{Error, Provenance};
use std::time::{SystemTime, UNIX_EPOCH};

use super::errors::set_retry_after;
use super::wire::WireError;

/// The gateway's own header names, checked once at compile time (a name given as a `&str`
/// is parsed again on every insert and lookup).
pub(super) mod hdr {
    use axum::http::HeaderName;

    /// The route that served (`x-ripcord-route`).
    pub(crate) const ROUTE: HeaderName = HeaderName::from_static("x-ripcord-route");
    /// Who pays (`x-ripcord-tenant`), on the request (a sub-tenant claim) and the answer.
    pub(crate) const TENANT: HeaderName = HeaderName::from_static("x-ripcord-tenant");
    /// The model the client asked for (`x-ripcord-requested-model`).
    pub(crate) const REQUESTED_MODEL: HeaderName =
        HeaderName::from_static("x-ripcord-requested-model");
    /// The link that served (`x-ripcord-served-by`).
    pub(crate) const SERVED_BY: HeaderName = HeaderName::from_static("x-ripcord-served-by");
    /// Every attempt of the call (`x-ripcord-attempts`).
    pub(crate) const ATTEMPTS: HeaderName = HeaderName::from_static("x-ripcord-attempts");
    /// Whether a fallback served (`x-ripcord-degraded`).
    pub(crate) const DEGRADED: HeaderName = HeaderName::from_static("x-ripcord-degraded");
    /// How a token count was made (`x-ripcord-token-count`).
    pub(crate) const TOKEN_COUNT: HeaderName = HeaderName::from_static("x-ripcord-token-count");
    /// `false` on errors a retry cannot fix (the OpenAI SDKs read it).
    pub(crate) const SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");
    /// The wait in milliseconds, next to `Retry-After` in seconds.
    pub(crate) const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");
}

pub(super) fn error_response(e: WireError, provenance: Option<&Provenance>) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let retry_after = e.retry_after;
    let no_retry = e.no_retry;
    let mut resp = (status, axum::Json(e)).into_response();
    if no_retry {
        resp.headers_mut()
            .insert(hdr::SHOULD_RETRY, HeaderValue::from_static("false"));
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
pub(super) fn failed_provenance(e: &Error) -> Provenance {
    let mut p = Provenance::default();
    p.attempts = e.attempts().to_vec();
    p.degraded = true;
    p
}

/// `x-ripcord-attempts`: every attempt in order, `link/model=outcome[(status)]:latency_ms`,
/// comma-separated — the same record `ripcord chat --json` prints.
pub(super) fn attempts_header(p: &Provenance) -> Option<HeaderValue> {
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

pub(super) fn set_provenance_headers(headers: &mut HeaderMap, p: &Provenance) {
    if let Some(v) = attempts_header(p) {
        headers.insert(hdr::ATTEMPTS, v);
    }
    let served = p
        .served_by
        .as_deref()
        .unwrap_or(if p.static_reply { "static" } else { "none" });
    if let Ok(v) = HeaderValue::from_str(served) {
        headers.insert(hdr::SERVED_BY, v);
    }
    headers.insert(
        hdr::DEGRADED,
        HeaderValue::from_static(if p.degraded { "true" } else { "false" }),
    );
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Parses a JSON request body, or the 400 that names what is wrong with it.
pub(super) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(body).map_err(|e| {
        WireError::new(
            400,
            "invalid_request_error",
            "invalid_request",
            format!("invalid request body: {e}"),
        )
    })
}
