//! Anthropic error mapping.
//!
//! Anthropic's errors are `{"type":"error","error":{"type":…,"message":…}}` with these types
//! (<https://docs.anthropic.com/en/api/errors>): `invalid_request_error` (400),
//! `authentication_error` (401), `billing_error` (402), `permission_error` (403),
//! `not_found_error` (404), `request_too_large` (413), `rate_limit_error` (429), `api_error`
//! (500), `overloaded_error` (529). Two rows need the body: a spent credit balance arrives as a
//! 400 `invalid_request_error` ("Your credit balance is too low…") and is a quota, not a bad
//! request; "prompt is too long: N tokens > M maximum" is a context overflow. Both are shared
//! rules. One row is Anthropic's own: a request from an unsupported region is refused at the
//! edge with a 403 `{"error":{"type":"forbidden","message":"Request not allowed"}}` — no
//! region wording, and a type real permission errors never use (`permission_error`) — which
//! the [`hook`] classifies as `RegionBlocked`.

use ::http::header::HeaderMap;
use ripcord_core::{Error, ErrorKind};

use crate::error_body::{self, ErrorBody};

/// Anthropic's own rows, before the shared rules.
pub(crate) fn hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let forbidden = body.error_type.as_deref() == Some("forbidden");
    (forbidden && matches!(status, None | Some(403))).then_some(ErrorKind::RegionBlocked)
}

/// A non-2xx response.
pub(crate) fn from_response(status: u16, headers: &HeaderMap, body: &[u8]) -> Error {
    error_body::http_error(status, headers, body, Some(hook))
}

/// An error object in a 200 body or an in-band `event: error`.
pub(crate) fn from_body(status: Option<u16>, body: &ErrorBody) -> Error {
    error_body::body_error(status, body, Some(hook))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ripcord_core::ErrorKind;

    use super::*;
    use crate::test_support;

    fn err(status: u16, headers: &[(&'static str, &'static str)], body: &str) -> Error {
        from_response(status, &test_support::headers(headers), body.as_bytes())
    }

    fn wire(kind: &str, message: &str) -> String {
        format!(
            r#"{{"type":"error","error":{{"type":"{kind}","message":"{message}"}},"request_id":"req_1"}}"#
        )
    }

    #[test]
    fn anthropic_error_rows() {
        let rows: &[(u16, String, ErrorKind)] = &[
            (
                400,
                wire("invalid_request_error", "messages: roles must alternate"),
                ErrorKind::InvalidRequest,
            ),
            (
                400,
                wire(
                    "invalid_request_error",
                    "prompt is too long: 210345 tokens > 200000 maximum",
                ),
                ErrorKind::ContextLengthExceeded,
            ),
            (
                400,
                wire(
                    "invalid_request_error",
                    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
                ),
                ErrorKind::QuotaExhausted,
            ),
            (
                401,
                wire("authentication_error", "invalid x-api-key"),
                ErrorKind::Auth,
            ),
            (
                402,
                wire("billing_error", "payment required"),
                ErrorKind::QuotaExhausted,
            ),
            (
                403,
                wire(
                    "permission_error",
                    "Your API key does not have permission to use the specified resource.",
                ),
                ErrorKind::PermissionDenied,
            ),
            (
                403,
                wire(
                    "permission_error",
                    "Anthropic's API is not available in your country or region.",
                ),
                ErrorKind::RegionBlocked,
            ),
            (
                403,
                r#"{"error":{"type":"forbidden","message":"Request not allowed"}}"#.to_owned(),
                ErrorKind::RegionBlocked,
            ),
            (
                400,
                wire(
                    "invalid_request_error",
                    "Output blocked by content filtering policy",
                ),
                ErrorKind::ContentFiltered,
            ),
            (
                404,
                wire("not_found_error", "model: claude-9"),
                ErrorKind::ModelNotFound,
            ),
            (
                413,
                wire(
                    "request_too_large",
                    "Request exceeds the maximum allowed number of bytes.",
                ),
                ErrorKind::PayloadTooLarge,
            ),
            (
                429,
                wire(
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit",
                ),
                ErrorKind::RateLimited,
            ),
            (
                500,
                wire("api_error", "Internal server error"),
                ErrorKind::ServerError,
            ),
            (
                529,
                wire("overloaded_error", "Overloaded"),
                ErrorKind::Overloaded,
            ),
            (
                502,
                "<html>Bad gateway</html>".to_owned(),
                ErrorKind::ServerError,
            ),
            (503, String::new(), ErrorKind::Overloaded),
        ];
        for (status, body, kind) in rows {
            assert_eq!(err(*status, &[], body).kind(), *kind, "{status} {body}");
        }
    }

    #[test]
    fn retry_after_and_code() {
        let e = err(
            429,
            &[
                ("retry-after", "12"),
                ("anthropic-ratelimit-requests-remaining", "0"),
            ],
            &wire("rate_limit_error", "slow"),
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(12)));
        assert_eq!(e.vendor_code(), Some("rate_limit_error"));
        assert_eq!(e.message(), "slow");
    }

    #[test]
    fn in_band_error_types() {
        for (t, kind) in [
            ("overloaded_error", ErrorKind::Overloaded),
            ("rate_limit_error", ErrorKind::RateLimited),
            ("api_error", ErrorKind::ServerError),
            ("invalid_request_error", ErrorKind::InvalidRequest),
            ("authentication_error", ErrorKind::Auth),
            ("forbidden", ErrorKind::RegionBlocked),
            ("permission_error", ErrorKind::PermissionDenied),
        ] {
            let b = ErrorBody::parse(wire(t, "x").as_bytes()).unwrap();
            assert_eq!(from_body(None, &b).kind(), kind, "{t}");
        }
    }
}
