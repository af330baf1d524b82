//! The gateway's front door: what every request goes through before (and after) its handler.
//!
//! In order: a request id (the client's `x-request-id` when it sent a sane one, else a random
//! one; echoed on the answer); on a keyless gateway, a `Host` that is not loopback is refused
//! (a web page cannot reach the gateway through DNS rebinding); the key, checked from the
//! headers before a byte of the body is read; `Content-Type: application/json` on POST (415
//! otherwise, so a web page's `text/plain` form post, which needs no CORS preflight, cannot
//! spend the vendor credit); a declared body over the limit is refused at once (413); the body
//! is then read under the body-read timeout (408 when it is too slow). After the handler, any
//! non-2xx answer that is not already JSON (axum's own 404/405/413 texts) is replaced by the
//! wire's error shape, and one access-log line is written through `tracing` (target
//! `ripcord::access`: method, path, route, tenant, status, served_by, attempts, latency; never
//! a key or a prompt).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use tokio::time::Instant;

use super::GatewayState;
use super::errors::refusal;
use super::reply::hdr;

/// The request id of a call, in the request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub(crate) Arc<str>);

/// The key that authenticated the request (`None` on a keyless gateway), in the request's
/// extensions.
#[derive(Clone)]
pub(crate) struct Authed(pub(crate) Option<Arc<super::Key>>);

impl std::fmt::Debug for Authed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Authed")
            .field(&self.0.as_ref().map(|k| &k.label))
            .finish()
    }
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The client's request id when it is short printable ASCII, else a fresh random one.
fn request_id(headers: &HeaderMap) -> Arc<str> {
    if let Some(v) = headers.get(REQUEST_ID).and_then(|v| v.to_str().ok())
        && !v.is_empty()
        && v.len() <= 128
        && v.bytes().all(|b| b.is_ascii_graphic())
    {
        return Arc::from(v);
    }
    let n: u128 = rand::random();
    Arc::from(format!("req_{:024x}", n >> 32))
}

/// True for a `Host` naming this machine's loopback (with or without a port).
fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// Paths answered without a key: liveness and readiness probes.
fn open_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// The front middleware; see the module docs.
pub(crate) async fn front(
    State(state): State<Arc<GatewayState>>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let (mut parts, body) = req.into_parts();
    let id = request_id(&parts.headers);
    let path = parts.uri.path().to_owned();
    let method = parts.method.clone();
    let resp = match admit(&state, &mut parts, &path, &id) {
        Err(refused) => *refused,
        Ok(()) => {
            let body = if parts.method == Method::POST {
                match read_body(&state, &parts.headers, body, &path, &id).await {
                    Ok(b) => b,
                    Err(refused) => return finish(*refused, &method, &path, &id, started),
                }
            } else {
                body
            };
            parts.extensions.insert(RequestId(Arc::clone(&id)));
            let resp = next.run(Request::from_parts(parts, body)).await;
            reshape(resp, &path, &id)
        }
    };
    finish(resp, &method, &path, &id, started)
}

/// The checks made from the request's head alone.
fn admit(
    state: &GatewayState,
    parts: &mut axum::http::request::Parts,
    path: &str,
    id: &str,
) -> Result<(), Box<Response>> {
    if !state.keyed()
        && let Some(host) = parts.headers.get(header::HOST)
        && !host.to_str().is_ok_and(loopback_host)
    {
        return Err(Box::new(refusal(
            path,
            403,
            "host_not_allowed",
            "this keyless gateway only answers requests addressed to a loopback host",
            Some(id),
            None,
        )));
    }
    if !open_path(path) {
        match state.authenticate(&parts.headers) {
            Some(authed) => {
                parts.extensions.insert(authed);
            }
            None => {
                return Err(Box::new(refusal(
                    path,
                    401,
                    "invalid_api_key",
                    "missing or invalid gateway key (send `Authorization: Bearer <key>` or `x-api-key`)",
                    Some(id),
                    None,
                )));
            }
        }
    }
    if parts.method == Method::POST && !is_json(&parts.headers) {
        return Err(Box::new(refusal(
            path,
            415,
            "unsupported_media_type",
            "send the request body as JSON with `Content-Type: application/json`",
            Some(id),
            None,
        )));
    }
    Ok(())
}

/// Reads a POST body under the size limit and the body-read timeout.
async fn read_body(
    state: &GatewayState,
    headers: &HeaderMap,
    body: Body,
    path: &str,
    id: &str,
) -> Result<Body, Box<Response>> {
    let limit = state.max_body_bytes;
    let too_large = || {
        refusal(
            path,
            413,
            "request_too_large",
            &format!("the request body is larger than this gateway accepts ({limit} bytes)"),
            Some(id),
            None,
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| usize::try_from(n).map_or(true, |n| n > limit)) {
        return Err(Box::new(too_large()));
    }
    match tokio::time::timeout(state.server.body_timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(Body::from(bytes)),
        Ok(Err(e)) => {
            let over = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if over {
                Err(Box::new(too_large()))
            } else {
                Err(Box::new(refusal(
                    path,
                    400,
                    "invalid_request",
                    "the request body could not be read",
                    Some(id),
                    None,
                )))
            }
        }
        Err(_) => Err(Box::new(refusal(
            path,
            408,
            "request_timeout",
            "the request body did not arrive in time",
            Some(id),
            None,
        ))),
    }
}

/// axum's own non-JSON error answers (404 unknown path, 405, 413, 400 …) in the wire's shape.
fn reshape(resp: Response, path: &str, id: &str) -> Response {
    let status = resp.status();
    if status.is_success() || is_json(resp.headers()) || status.is_informational() {
        return resp;
    }
    let (code, message) = match status.as_u16() {
        404 => ("not_found", "there is no such endpoint on this gateway"),
        405 => (
            "method_not_allowed",
            "this endpoint does not accept that HTTP method",
        ),
        413 => (
            "request_too_large",
            "the request body is larger than this gateway accepts",
        ),
        408 => ("request_timeout", "the request did not arrive in time"),
        s if s >= 500 => ("server_error", "the gateway failed to answer"),
        _ => ("invalid_request", "the request was refused"),
    };
    let mut shaped = refusal(path, status.as_u16(), code, message, Some(id), None);
    // Keep what the handler said about the call (Retry-After, provenance, route).
    for (k, v) in resp.headers() {
        if k != header::CONTENT_TYPE && k != header::CONTENT_LENGTH {
            shaped.headers_mut().insert(k.clone(), v.clone());
        }
    }
    shaped
}

/// Echoes the request id and writes the access-log line.
fn finish(mut resp: Response, method: &Method, path: &str, id: &str, started: Instant) -> Response {
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert(REQUEST_ID, v);
    }
    let h = resp.headers();
    let text = |name: &HeaderName| h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("-");
    let attempts = h
        .get(hdr::ATTEMPTS)
        .and_then(|v| v.to_str().ok())
        .map_or(0, |a| a.split(", ").count());
    tracing::info!(
        target: "ripcord::access",
        request_id = id,
        method = method.as_str(),
        path,
        route = text(&hdr::ROUTE),
        tenant = text(&hdr::TENANT),
        status = resp.status().as_u16(),
        served_by = text(&hdr::SERVED_BY),
        attempts,
        latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        message = "access",
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:80",
            "127.3.4.5",
            "[::1]:8080",
            "[::1]",
        ] {
            assert!(loopback_host(h), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.1:80",
            "[2001:db8::1]:1",
            "localhost.evil.example",
        ] {
            assert!(!loopback_host(h), "{h}");
        }
    }

    #[test]
    fn client_request_ids_are_echoed_only_when_sane() {
        let mut h = HeaderMap::new();
        h.insert(REQUEST_ID, HeaderValue::from_static("abc-123"));
        assert_eq!(&*request_id(&h), "abc-123");
        h.insert(REQUEST_ID, HeaderValue::from_static("has space"));
        let fresh = request_id(&h);
        assert!(fresh.starts_with("req_") && fresh.len() == 28, "{fresh}");
        assert_ne!(request_id(&HeaderMap::new()), request_id(&HeaderMap::new()));
    }
}
