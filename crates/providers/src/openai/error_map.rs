//! OpenAI-family error mapping: status + headers + body → [`ripcord_core::Error`].
//!
//! OpenAI's own rules need no hook: they are the shared rules of [`crate::error_body`]
//! (`insufficient_quota` on a 429 is a spent quota, `unsupported_country_region_territory` on a
//! 403 is a region block, `context_length_exceeded` on a 400 is a context overflow, …). Each
//! OpenAI-compatible preset passes its own [`ErrorHook`] for the codes only it uses.

use ::http::header::HeaderMap;
use ripcord_core::Error;

use crate::error_body::{self, ErrorBody, ErrorHook};

/// A non-2xx response.
pub(crate) fn from_response(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    hook: Option<ErrorHook>,
) -> Error {
    error_body::http_error(status, headers, body, hook)
}

/// An error object in a 200 body or an in-band stream error.
pub(crate) fn from_body(status: Option<u16>, body: &ErrorBody, hook: Option<ErrorHook>) -> Error {
    error_body::body_error(status, body, hook)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ripcord_core::{ErrorKind, StatusCode};

    use super::*;
    use crate::test_support;

    fn err(status: u16, headers: &[(&'static str, &'static str)], body: &str) -> Error {
        from_response(
            status,
            &test_support::headers(headers),
            body.as_bytes(),
            None,
        )
    }

    /// Every row of the error table, with OpenAI's real bodies.
    #[test]
    fn openai_error_rows() {
        let rows: &[(u16, &str, ErrorKind)] = &[
            (
                429,
                r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
                ErrorKind::RateLimited,
            ),
            (
                429,
                r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
                ErrorKind::QuotaExhausted,
            ),
            (
                401,
                r#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
                ErrorKind::Auth,
            ),
            (
                403,
                r#"{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}"#,
                ErrorKind::RegionBlocked,
            ),
            (
                403,
                r#"{"error":{"message":"You are not allowed to sample from this model","type":"invalid_request_error","param":null,"code":null}}"#,
                ErrorKind::ModelNotFound,
            ),
            (
                403,
                r#"{"error":{"message":"You have insufficient permissions for this operation. Missing scopes: model.request.","type":"invalid_request_error","param":null,"code":"insufficient_permissions"}}"#,
                ErrorKind::PermissionDenied,
            ),
            (
                404,
                r#"{"error":{"message":"The model `gpt-5o` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
                ErrorKind::ModelNotFound,
            ),
            (413, "", ErrorKind::PayloadTooLarge),
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                ErrorKind::ContextLengthExceeded,
            ),
            (
                400,
                r#"{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}"#,
                ErrorKind::ContentFiltered,
            ),
            (
                400,
                r#"{"error":{"message":"Invalid value for 'temperature'.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}"#,
                ErrorKind::InvalidRequest,
            ),
            (
                422,
                r#"{"error":{"message":"Unprocessable"}}"#,
                ErrorKind::InvalidRequest,
            ),
            (
                500,
                r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#,
                ErrorKind::ServerError,
            ),
            (
                502,
                "<html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>",
                ErrorKind::ServerError,
            ),
            (503, "", ErrorKind::Overloaded),
            (
                503,
                r#"{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error"}}"#,
                ErrorKind::Overloaded,
            ),
            (504, "upstream timed out", ErrorKind::Timeout),
        ];
        for (status, body, kind) in rows {
            let e = err(*status, &[], body);
            assert_eq!(e.kind(), *kind, "{status} {body}");
            assert_eq!(e.status(), Some(StatusCode(*status)));
        }
    }

    #[test]
    fn message_code_and_non_json_bodies() {
        let e = err(
            429,
            &[],
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
        );
        assert_eq!(e.message(), "You exceeded your current quota");
        assert_eq!(e.vendor_code(), Some("insufficient_quota"));
        let e = err(502, &[], "<html>\n<body>Bad Gateway</body>\n</html>");
        assert_eq!(
            e.message(),
            "HTTP 502 with a non-JSON body: <html> <body>Bad Gateway</body> </html>"
        );
        assert_eq!(e.vendor_code(), None);
        let e = err(503, &[], "");
        assert_eq!(e.message(), "HTTP 503 with an empty body");
    }

    #[test]
    fn retry_after_from_headers_and_message() {
        let e = err(
            429,
            &[("retry-after", "7")],
            r#"{"error":{"code":"rate_limit_exceeded","message":"slow"}}"#,
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        let e = err(
            429,
            &[("retry-after-ms", "250"), ("retry-after", "7")],
            "{}",
        );
        assert_eq!(e.retry_after(), Some(Duration::from_millis(250)));
        let e = err(
            429,
            &[
                ("x-ratelimit-reset-tokens", "1m30s"),
                ("x-ratelimit-remaining-tokens", "0"),
            ],
            r#"{"error":{"code":"rate_limit_exceeded","message":"slow"}}"#,
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(90)));
        let e = err(
            429,
            &[],
            r#"{"error":{"code":"rate_limit_exceeded","message":"Please try again in 20ms."}}"#,
        );
        assert_eq!(e.retry_after(), Some(Duration::from_millis(20)));
        assert_eq!(
            e.disposition(),
            ripcord_core::Disposition::Retry {
                after: Some(Duration::from_millis(20))
            }
        );
    }

    #[test]
    fn in_band_errors_use_the_body() {
        let b = ErrorBody::parse(br#"{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}"#).unwrap();
        let e = from_body(None, &b, None);
        assert_eq!(e.kind(), ErrorKind::QuotaExhausted);
        assert_eq!(e.status(), None);
    }
}
