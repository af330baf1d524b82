//! Vendor-accurate error responses, rendered per wire.
//!
//! The bodies and headers follow what the real services send (OpenAI's
//! `{"error":{"message","type","param","code"}}`, Anthropic's
//! `{"type":"error","error":{"type","message"},"request_id"}`), including the cases that trip
//! up classifiers: the same 429 status for "slow down" and "out of money", a 403 that means
//! "wrong region", bodies that are HTML or empty because a proxy answered.

use std::time::{Duration, SystemTime};

use ripcord_core::ErrorKind;
use serde_json::json;

use crate::Wire;

/// A vendor failure, rendered as that vendor sends it.
///
/// | variant | OpenAI wire | Anthropic wire |
/// | --- | --- | --- |
/// | `RateLimited` | 429 `rate_limit_exceeded`, `retry-after`, `retry-after-ms`, `x-ratelimit-*` | 429 `rate_limit_error`, `retry-after`, `anthropic-ratelimit-*` |
/// | `QuotaExhausted` | 429 `insufficient_quota` | 400 `invalid_request_error` "Your credit balance is too low…" |
/// | `PaymentRequired` | 402 "Insufficient Balance" (DeepSeek style) | 402 `billing_error` |
/// | `Overloaded` | 503 `server_error` | 529 `overloaded_error` |
/// | `ServerError` | 500 `server_error` | 500 `api_error` |
/// | `BadGateway` | 502, HTML body | 502, HTML body |
/// | `GatewayTimeout` | 504, HTML body (in-band: `server_error`, code `timeout`) | 504, HTML body (in-band: `timeout_error`) |
/// | `EmptyServiceUnavailable` | 503, empty body | 503, empty body |
/// | `Auth` | 401 `invalid_api_key` | 401 `authentication_error` |
/// | `PermissionDenied` | 403 `insufficient_permissions` | 403 `permission_error` |
/// | `RegionBlocked` | 403 `unsupported_country_region_territory` | 403 `{"error":{"type":"forbidden","message":"Request not allowed"}}` (the edge's answer: no top-level `type`, no region wording) |
/// | `ModelNotFound` | 404 `model_not_found` | 404 `not_found_error` |
/// | `PayloadTooLarge` | 413 `request_too_large` | 413 `request_too_large` |
/// | `TooLargeForRateLimit` | 429 "Request too large … on tokens per min (TPM)", code `rate_limit_exceeded` (it can never fit the per-minute allowance) | 413 `request_too_large` |
/// | `ContextTooLong` | 400 `context_length_exceeded` | 400 "prompt is too long: N tokens > M maximum" |
/// | `ContentFiltered` | 400 `content_policy_violation` | 400 "Output blocked by content filtering policy" |
/// | `InvalidRequest` | 400 `invalid_request_error` | 400 `invalid_request_error` |
///
/// Anthropic errors also carry `x-should-retry`, as the real API does. On the Bedrock wire each
/// variant is Bedrock's own error type in `x-amzn-ErrorType` with its documented message (see
/// the `bedrock` module).
///
/// # Examples
///
/// ```
/// use ripcord_chaos::{VendorError, Wire};
/// use ripcord_core::ErrorKind;
/// let e = VendorError::QuotaExhausted;
/// assert_eq!(e.status(Wire::OpenAi), 429);
/// assert_eq!(e.status(Wire::Anthropic), 400);
/// assert_eq!(e.expected_kind(), ErrorKind::QuotaExhausted);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VendorError {
    /// Rate limited; `retry_after` becomes `Retry-After` (whole seconds, rounded up) and the
    /// finer vendor headers. `None` sends no wait hint at all.
    RateLimited {
        /// The wait the vendor asks for.
        retry_after: Option<Duration>,
    },
    /// The account's quota or credit balance is spent.
    QuotaExhausted,
    /// 402: the balance is spent (DeepSeek's OpenAI-wire 402, Anthropic's `billing_error`).
    PaymentRequired,
    /// The vendor is overloaded.
    Overloaded,
    /// An internal server error.
    ServerError,
    /// A 502 with an HTML body, as a proxy sends it.
    BadGateway,
    /// A 504 with an HTML body, as a proxy sends it.
    GatewayTimeout,
    /// A 503 with an empty body.
    EmptyServiceUnavailable,
    /// The API key was rejected.
    Auth,
    /// The key lacks permission for this resource.
    PermissionDenied,
    /// The vendor refuses requests from this country or region.
    RegionBlocked,
    /// The model does not exist or is not available.
    ModelNotFound,
    /// The request body is too large.
    PayloadTooLarge,
    /// The request needs more tokens than the whole per-minute allowance: OpenAI answers a
    /// 429 that reads like a rate limit but can never succeed by waiting.
    TooLargeForRateLimit,
    /// The prompt exceeds the model's context window.
    ContextTooLong,
    /// The content policy refused the request.
    ContentFiltered,
    /// Any other invalid request.
    InvalidRequest,
}

/// An error response ready to write.
#[derive(Debug)]
pub(crate) struct ErrorResponse {
    pub(crate) status: u16,
    pub(crate) content_type: Option<&'static str>,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: String,
}

const JSON: Option<&str> = Some("application/json");
const HTML: Option<&str> = Some("text/html");

/// Nominal limits reported in rate-limit headers.
const RPM_LIMIT: u32 = 500;
const TPM_LIMIT: u32 = 30_000;

impl VendorError {
    /// Every variant, with `RateLimited` carrying a 1 s hint (handy for table-driven tests).
    pub const ALL: [VendorError; 17] = [
        VendorError::RateLimited {
            retry_after: Some(Duration::from_secs(1)),
        },
        VendorError::QuotaExhausted,
        VendorError::PaymentRequired,
        VendorError::Overloaded,
        VendorError::ServerError,
        VendorError::BadGateway,
        VendorError::GatewayTimeout,
        VendorError::EmptyServiceUnavailable,
        VendorError::Auth,
        VendorError::PermissionDenied,
        VendorError::RegionBlocked,
        VendorError::ModelNotFound,
        VendorError::PayloadTooLarge,
        VendorError::TooLargeForRateLimit,
        VendorError::ContextTooLong,
        VendorError::ContentFiltered,
        VendorError::InvalidRequest,
    ];

    /// The HTTP status this error is sent with on `wire`.
    pub const fn status(&self, wire: Wire) -> u16 {
        if let Wire::Bedrock = wire {
            return crate::bedrock::error_status(self);
        }
        match (self, wire) {
            (e, Wire::Gemini) => crate::gemini::status(e),
            (VendorError::RateLimited { .. }, _) => 429,
            (VendorError::QuotaExhausted, Wire::OpenAi) => 429,
            (VendorError::QuotaExhausted, _) => 400,
            (VendorError::PaymentRequired, _) => 402,
            (VendorError::Overloaded, Wire::OpenAi) => 503,
            (VendorError::Overloaded, _) => 529,
            (VendorError::ServerError, _) => 500,
            (VendorError::BadGateway, _) => 502,
            (VendorError::GatewayTimeout, _) => 504,
            (VendorError::EmptyServiceUnavailable, _) => 503,
            (VendorError::Auth, _) => 401,
            (VendorError::PermissionDenied | VendorError::RegionBlocked, _) => 403,
            (VendorError::ModelNotFound, _) => 404,
            (VendorError::PayloadTooLarge, _) => 413,
            (VendorError::TooLargeForRateLimit, Wire::OpenAi) => 429,
            (VendorError::TooLargeForRateLimit, _) => 413,
            (
                VendorError::ContextTooLong
                | VendorError::ContentFiltered
                | VendorError::InvalidRequest,
                _,
            ) => 400,
        }
    }

    /// The [`ErrorKind`] a correct adapter classifies this error as (on either wire).
    pub const fn expected_kind(&self) -> ErrorKind {
        match self {
            VendorError::RateLimited { .. } => ErrorKind::RateLimited,
            VendorError::QuotaExhausted | VendorError::PaymentRequired => ErrorKind::QuotaExhausted,
            VendorError::Overloaded | VendorError::EmptyServiceUnavailable => ErrorKind::Overloaded,
            VendorError::ServerError | VendorError::BadGateway => ErrorKind::ServerError,
            // The gateway gave up waiting for the vendor: a timeout, whatever answered it.
            VendorError::GatewayTimeout => ErrorKind::Timeout,
            VendorError::Auth => ErrorKind::Auth,
            VendorError::PermissionDenied => ErrorKind::PermissionDenied,
            VendorError::RegionBlocked => ErrorKind::RegionBlocked,
            VendorError::ModelNotFound => ErrorKind::ModelNotFound,
            VendorError::PayloadTooLarge | VendorError::TooLargeForRateLimit => {
                ErrorKind::PayloadTooLarge
            }
            VendorError::ContextTooLong => ErrorKind::ContextLengthExceeded,
            VendorError::ContentFiltered => ErrorKind::ContentFiltered,
            VendorError::InvalidRequest => ErrorKind::InvalidRequest,
        }
    }

    /// The full HTTP error response for `wire`.
    pub(crate) fn response(&self, wire: Wire, model: &str, request_id: &str) -> ErrorResponse {
        let status = self.status(wire);
        let mut headers = Vec::new();
        if wire == Wire::Bedrock {
            return crate::bedrock::error_response(self, status);
        }
        let (content_type, body) = match self {
            VendorError::BadGateway => (HTML, proxy_page(502, "Bad Gateway")),
            VendorError::GatewayTimeout => (HTML, proxy_page(504, "Gateway Time-out")),
            VendorError::EmptyServiceUnavailable => (None, String::new()),
            VendorError::RegionBlocked if wire == Wire::Anthropic => (
                JSON,
                json!({"error": {"type": "forbidden", "message": "Request not allowed"}})
                    .to_string(),
            ),
            _ => (JSON, self.json_body(wire, model, request_id)),
        };
        // Google sends no rate-limit headers: the wait is the body's `RetryInfo`.
        if let VendorError::RateLimited { retry_after } = self
            && wire != Wire::Gemini
        {
            rate_limit_headers(wire, *retry_after, &mut headers);
        }
        if wire == Wire::Anthropic {
            let retry = matches!(status, 408 | 409 | 429) || status >= 500;
            headers.push(("x-should-retry", retry.to_string()));
        }
        ErrorResponse {
            status,
            content_type,
            headers,
            body,
        }
    }

    /// The JSON an error is carried in: the body of an error response, and the payload of an
    /// in-band error event (non-JSON errors get a JSON stand-in for the event).
    pub(crate) fn json_body(&self, wire: Wire, model: &str, request_id: &str) -> String {
        match wire {
            Wire::OpenAi => self.openai_json(model),
            Wire::Anthropic => self.anthropic_json(model, request_id),
            Wire::Bedrock => crate::bedrock::error_body(crate::bedrock::error_parts(self).1),
            Wire::Gemini => crate::gemini::error_json(self, model),
        }
    }

    fn openai_json(&self, model: &str) -> String {
        let (message, kind, param, code): (String, Option<&str>, Option<&str>, Option<&str>) = match self {
            VendorError::RateLimited { retry_after } => {
                let wait = retry_after
                    .map(|d| format!(" Please try again in {}.", go_duration(d)))
                    .unwrap_or_default();
                (
                    format!(
                        "Rate limit reached for {model} in organization org-ripcordfake on requests per min \
                         (RPM): Limit {RPM_LIMIT}, Used {RPM_LIMIT}, Requested 1.{wait} Visit \
                         https://platform.openai.com/account/rate-limits to learn more."
                    ),
                    Some("requests"),
                    None,
                    Some("rate_limit_exceeded"),
                )
            }
            VendorError::QuotaExhausted => (
                "You exceeded your current quota, please check your plan and billing details. For more \
                 information on this error, read the docs: \
                 https://platform.openai.com/docs/guides/error-codes/api-errors."
                    .to_owned(),
                Some("insufficient_quota"),
                None,
                Some("insufficient_quota"),
            ),
            VendorError::PaymentRequired => (
                "Insufficient Balance".to_owned(),
                Some("unknown_error"),
                None,
                Some("invalid_request_error"),
            ),
            VendorError::Overloaded => (
                "The server is overloaded or not ready yet.".to_owned(),
                Some("server_error"),
                None,
                None,
            ),
            VendorError::ServerError => (
                "The server had an error while processing your request. Sorry about that!".to_owned(),
                Some("server_error"),
                None,
                None,
            ),
            VendorError::BadGateway => ("Bad gateway.".to_owned(), Some("server_error"), None, None),
            VendorError::GatewayTimeout => (
                "Gateway timeout.".to_owned(),
                Some("server_error"),
                None,
                Some("timeout"),
            ),
            VendorError::EmptyServiceUnavailable => (
                "Service unavailable.".to_owned(),
                Some("server_error"),
                None,
                None,
            ),
            VendorError::Auth => (
                "Incorrect API key provided: sk-fake*********************. You can find your API key at \
                 https://platform.openai.com/account/api-keys."
                    .to_owned(),
                Some("invalid_request_error"),
                None,
                Some("invalid_api_key"),
            ),
            VendorError::PermissionDenied => (
                "You have insufficient permissions for this operation. Missing scopes: model.request. \
                 Check that you have the correct role in your organization (Reader, Writer, Owner) and \
                 project (Member, Owner), and if you're using a restricted API key, that it has the \
                 necessary scopes."
                    .to_owned(),
                Some("invalid_request_error"),
                None,
                Some("insufficient_permissions"),
            ),
            VendorError::RegionBlocked => (
                "Country, region, or territory not supported".to_owned(),
                Some("request_forbidden"),
                None,
                Some("unsupported_country_region_territory"),
            ),
            VendorError::ModelNotFound => (
                format!("The model `{model}` does not exist or you do not have access to it."),
                Some("invalid_request_error"),
                None,
                Some("model_not_found"),
            ),
            VendorError::PayloadTooLarge => (
                "Request too large: the request body exceeds the maximum allowed size.".to_owned(),
                Some("invalid_request_error"),
                None,
                Some("request_too_large"),
            ),
            VendorError::TooLargeForRateLimit => (
                format!(
                    "Request too large for {model} in organization org-ripcordfake on tokens per min \
                     (TPM): Limit {TPM_LIMIT}, Requested {}. The input or output tokens must be \
                     reduced in order to run successfully. Visit \
                     https://platform.openai.com/account/rate-limits to learn more.",
                    TPM_LIMIT * 2
                ),
                Some("tokens"),
                None,
                Some("rate_limit_exceeded"),
            ),
            VendorError::ContextTooLong => (
                "This model's maximum context length is 128000 tokens. However, your messages resulted \
                 in 131072 tokens. Please reduce the length of the messages."
                    .to_owned(),
                Some("invalid_request_error"),
                Some("messages"),
                Some("context_length_exceeded"),
            ),
            VendorError::ContentFiltered => (
                "Your request was rejected as a result of our safety system. Your prompt may contain \
                 text that is not allowed by our safety system."
                    .to_owned(),
                Some("invalid_request_error"),
                None,
                Some("content_policy_violation"),
            ),
            VendorError::InvalidRequest => (
                "Invalid value for 'temperature': expected a number between 0 and 2.".to_owned(),
                Some("invalid_request_error"),
                Some("temperature"),
                Some("invalid_value"),
            ),
        };
        openai_error(&message, kind, param, code)
    }

    fn anthropic_json(&self, model: &str, request_id: &str) -> String {
        let (kind, message): (&str, String) = match self {
            VendorError::RateLimited { .. } => (
                "rate_limit_error",
                format!(
                    "This request would exceed the rate limit for your organization (ripcord-fake) of \
                     {RPM_LIMIT} requests per minute. For details, refer to: \
                     https://docs.claude.com/en/api/rate-limits. You can see the response headers for \
                     current usage. Please reduce the prompt length or the maximum tokens requested, or \
                     try again later."
                ),
            ),
            VendorError::QuotaExhausted => (
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API. Please go to Plans & \
                 Billing to upgrade or purchase credits."
                    .to_owned(),
            ),
            VendorError::PaymentRequired => (
                "billing_error",
                "Your credit balance is too low to access the Anthropic API. Please go to Plans & \
                 Billing to upgrade or purchase credits."
                    .to_owned(),
            ),
            VendorError::Overloaded => ("overloaded_error", "Overloaded".to_owned()),
            VendorError::ServerError => ("api_error", "Internal server error".to_owned()),
            VendorError::BadGateway => ("api_error", "Bad gateway".to_owned()),
            VendorError::GatewayTimeout => ("timeout_error", "Request timed out".to_owned()),
            VendorError::EmptyServiceUnavailable => ("api_error", "Service unavailable".to_owned()),
            VendorError::Auth => ("authentication_error", "invalid x-api-key".to_owned()),
            VendorError::PermissionDenied => (
                "permission_error",
                "Your API key does not have permission to use the specified resource.".to_owned(),
            ),
            VendorError::RegionBlocked => ("forbidden", "Request not allowed".to_owned()),
            VendorError::ModelNotFound => ("not_found_error", format!("model: {model}")),
            VendorError::PayloadTooLarge | VendorError::TooLargeForRateLimit => (
                "request_too_large",
                "Request exceeds the maximum allowed number of bytes.".to_owned(),
            ),
            VendorError::ContextTooLong => (
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum".to_owned(),
            ),
            VendorError::ContentFiltered => (
                "invalid_request_error",
                "Output blocked by content filtering policy".to_owned(),
            ),
            VendorError::InvalidRequest => (
                "invalid_request_error",
                "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \
                 \"user\" roles in a row"
                    .to_owned(),
            ),
        };
        anthropic_error(kind, &message, request_id)
    }
}

/// `{"error":{"message","type","param","code"}}`.
pub(crate) fn openai_error(
    message: &str,
    kind: Option<&str>,
    param: Option<&str>,
    code: Option<&str>,
) -> String {
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}}).to_string()
}

/// `{"type":"error","error":{"type","message"},"request_id"}`.
pub(crate) fn anthropic_error(kind: &str, message: &str, request_id: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id})
        .to_string()
}

fn proxy_page(status: u16, reason: &str) -> String {
    format!(
        "<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n<center><h1>{status} \
         {reason}</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"
    )
}

fn rate_limit_headers(
    wire: Wire,
    retry_after: Option<Duration>,
    headers: &mut Vec<(&'static str, String)>,
) {
    if let Some(wait) = retry_after {
        // Retry-After is whole seconds; round up so a client honouring it never retries early.
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        headers.push(("retry-after", secs.to_string()));
    }
    match wire {
        Wire::OpenAi => {
            if let Some(wait) = retry_after {
                headers.push(("retry-after-ms", wait.as_millis().to_string()));
            }
            headers.push(("x-ratelimit-limit-requests", RPM_LIMIT.to_string()));
            headers.push(("x-ratelimit-remaining-requests", "0".to_owned()));
            headers.push(("x-ratelimit-limit-tokens", TPM_LIMIT.to_string()));
            headers.push(("x-ratelimit-remaining-tokens", "0".to_owned()));
            if let Some(wait) = retry_after {
                headers.push(("x-ratelimit-reset-requests", go_duration(wait)));
                headers.push(("x-ratelimit-reset-tokens", go_duration(wait)));
            }
        }
        // Bedrock sends no rate-limit headers (its responses are built in `bedrock`).
        Wire::Bedrock => {}
        Wire::Anthropic => {
            let reset = retry_after.map(|wait| rfc3339(SystemTime::now() + wait));
            for (limit, remaining, reset_name, value) in [
                (
                    "anthropic-ratelimit-requests-limit",
                    "anthropic-ratelimit-requests-remaining",
                    "anthropic-ratelimit-requests-reset",
                    RPM_LIMIT,
                ),
                (
                    "anthropic-ratelimit-tokens-limit",
                    "anthropic-ratelimit-tokens-remaining",
                    "anthropic-ratelimit-tokens-reset",
                    TPM_LIMIT,
                ),
                (
                    "anthropic-ratelimit-input-tokens-limit",
                    "anthropic-ratelimit-input-tokens-remaining",
                    "anthropic-ratelimit-input-tokens-reset",
                    TPM_LIMIT,
                ),
                (
                    "anthropic-ratelimit-output-tokens-limit",
                    "anthropic-ratelimit-output-tokens-remaining",
                    "anthropic-ratelimit-output-tokens-reset",
                    TPM_LIMIT / 4,
                ),
            ] {
                headers.push((limit, value.to_string()));
                headers.push((remaining, "0".to_owned()));
                if let Some(reset) = &reset {
                    headers.push((reset_name, reset.clone()));
                }
            }
        }
        // Google sends none (`RetryInfo` in the body).
        Wire::Gemini => {}
    }
}

/// A duration the way OpenAI's `x-ratelimit-reset-*` headers (Go's `time.Duration`) print it:
/// `20ms`, `1s`, `1.5s`, `6m0s`, `1h2m3s`.
pub(crate) fn go_duration(d: Duration) -> String {
    let total_ms = d.as_millis();
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let hours = total_ms / 3_600_000;
    let minutes = total_ms / 60_000 % 60;
    let secs_ms = total_ms % 60_000;
    let secs = if secs_ms.is_multiple_of(1000) {
        format!("{}s", secs_ms / 1000)
    } else {
        let frac = format!("{:03}", secs_ms % 1000);
        format!("{}.{}s", secs_ms / 1000, frac.trim_end_matches('0'))
    };
    match (hours, minutes) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

/// RFC 3339 UTC timestamp with second precision, e.g. `2026-01-02T03:04:05Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    ripcord_core::calendar::Utc::of(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn go_durations() {
        let cases = [
            (Duration::from_millis(20), "20ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(20_250), "20.25s"),
            (Duration::from_secs(360), "6m0s"),
            (Duration::from_secs(3723), "1h2m3s"),
        ];
        for (d, s) in cases {
            assert_eq!(go_duration(d), s);
        }
    }

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_251_199); // 2024-02-29T23:59:59Z
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29T00:00:00Z
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn every_error_renders_json_for_both_wires_except_proxy_pages() {
        for e in VendorError::ALL {
            for wire in [Wire::OpenAi, Wire::Anthropic] {
                let r = e.response(wire, "m", "req_1");
                assert_eq!(r.status, e.status(wire));
                let json_body = serde_json::from_str::<serde_json::Value>(&r.body);
                match e {
                    VendorError::BadGateway | VendorError::GatewayTimeout => {
                        assert!(r.body.starts_with("<html>") && json_body.is_err())
                    }
                    VendorError::EmptyServiceUnavailable => assert!(r.body.is_empty()),
                    _ => {
                        let v = json_body.unwrap_or_default();
                        assert!(
                            v["error"]["message"].is_string(),
                            "{e:?} on {wire:?}: {}",
                            r.body
                        );
                        assert!(v["error"]["type"].is_string() || wire == Wire::OpenAi);
                    }
                }
                // The in-band form is always JSON.
                let inband: serde_json::Value =
                    serde_json::from_str(&e.json_body(wire, "m", "req_1")).unwrap_or_default();
                assert!(inband["error"]["message"].is_string(), "{e:?} on {wire:?}");
            }
        }
    }
}
