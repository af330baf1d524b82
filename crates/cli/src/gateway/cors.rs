//! CORS for browser apps: `[server] cors_origins = ["https://app.example.com"]` (or `["*"]`),
//! off by default.
//!
//! A browser calls a gateway on another origin only after a preflight (`OPTIONS` with
//! `Access-Control-Request-Method`) that carries no credentials, so the preflight of an allowed
//! origin is answered here, before the front door asks for a key — answered with a 401, the
//! browser would never send the real request, which is then authenticated like any other. The
//! answers to an allowed origin name it in `Access-Control-Allow-Origin` and expose the headers
//! a client reads (the request id, provenance, `Retry-After`, `x-should-retry`). An origin not
//! in the list gets no CORS headers at all, so the browser keeps the answer from the page; with
//! no origins configured this layer passes every request through untouched.
//!
//! The loopback protections of a keyless gateway (`application/json` and a loopback `Host`,
//! see `docs/pitfalls.md` rule 19) are not loosened: only a preflight skips the front door,
//! and it reaches no handler.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::GatewayState;

/// What a browser may call: the API's methods.
const ALLOW_METHODS: HeaderValue = HeaderValue::from_static("GET, POST, DELETE, OPTIONS");
/// Headers the browser may ask for when the preflight names none.
const ALLOW_HEADERS: HeaderValue = HeaderValue::from_static(
    "authorization, content-type, x-api-key, anthropic-version, anthropic-beta, x-request-id, x-ripcord-tenant",
);
/// Headers a page's script may read from an answer.
const EXPOSE_HEADERS: HeaderValue = HeaderValue::from_static(
    "x-request-id, x-ripcord-served-by, x-ripcord-degraded, x-ripcord-attempts, x-ripcord-route, x-ripcord-tenant, x-ripcord-requested-model, retry-after, retry-after-ms, x-should-retry",
);
/// How long a browser may keep a preflight's answer (seconds).
const MAX_AGE: HeaderValue = HeaderValue::from_static("600");

/// The origin of the request when `allowed` lets it in.
fn allowed_origin<'a>(allowed: &[String], headers: &'a HeaderMap) -> Option<&'a HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    let text = origin.to_str().ok()?;
    allowed
        .iter()
        .any(|a| a == "*" || a.eq_ignore_ascii_case(text))
        .then_some(origin)
}

/// The CORS middleware; see the module docs. It runs outside the front door.
pub(crate) async fn cors(
    State(state): State<Arc<GatewayState>>,
    req: Request,
    next: Next,
) -> Response {
    let allowed = &state.server.cors_origins;
    if allowed.is_empty() {
        return next.run(req).await;
    }
    let Some(origin) = allowed_origin(allowed, req.headers()).cloned() else {
        return next.run(req).await;
    };
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let asked = req
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned();
        let mut resp = Response::new(Body::empty());
        *resp.status_mut() = StatusCode::NO_CONTENT;
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, ALLOW_METHODS);
        // The headers the browser asked to send (the SDKs add their own `x-stainless-*` and
        // `anthropic-dangerous-direct-browser-access`); the key is checked on the real request.
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            asked.unwrap_or(ALLOW_HEADERS),
        );
        h.insert(header::ACCESS_CONTROL_MAX_AGE, MAX_AGE);
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
        return resp;
    }
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSE_HEADERS);
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_origins_are_allowed() {
        let mut h = HeaderMap::new();
        let list = vec!["https://app.example.com".to_owned()];
        assert!(allowed_origin(&list, &h).is_none(), "no Origin, no CORS");
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://app.example.com"),
        );
        assert!(allowed_origin(&list, &h).is_some());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(allowed_origin(&list, &h).is_none());
        assert!(allowed_origin(&["*".to_owned()], &h).is_some());
    }
}
