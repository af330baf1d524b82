//! Google's error envelope, read and classified.
//!
//! Every Google API answers a failure with the `google.rpc.Status` shape
//! (<https://cloud.google.com/apis/design/errors>, <https://ai.google.dev/gemini-api/docs/troubleshooting>):
//!
//! ```json
//! {"error": {"code": 429, "message": "…", "status": "RESOURCE_EXHAUSTED",
//!            "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": […]},
//!                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"}]}}
//! ```
//!
//! Vertex AI's streaming endpoints wrap the same object in a one-element array. The canonical
//! `status` decides the family; the message and `details` refine it where Google uses one status
//! for opposite remedies:
//!
//! - `RESOURCE_EXHAUSTED` (429) is a per-minute rate limit *or* spent money. AI Studio's message
//!   says "You exceeded your current quota, please check your plan and billing details" for both,
//!   so the words cannot decide. A `QuotaFailure` violation of a per-day quota, a quota whose
//!   limit is 0 (the model is not in the account's tier at all), or depleted prepaid credits is
//!   `QuotaExhausted` (waiting minutes will not help); anything else — a per-minute violation,
//!   Vertex's "Resource exhausted. Please try again later." — is `RateLimited`, with
//!   `RetryInfo.retryDelay` (else `Retry-After`, else "Please retry in 20.5s.") as the wait.
//! - `INVALID_ARGUMENT` (400) carries AI Studio's bad key (`ErrorInfo` reason `API_KEY_INVALID`,
//!   an auth failure sent as 400) and the context overflow ("The input token count (N) exceeds
//!   the maximum number of tokens allowed (M)."); other cases are invalid requests.
//! - `FAILED_PRECONDITION` (400) "User location is not supported for the API use." is a region
//!   block.
//! - `PERMISSION_DENIED` (403) for a key Google revoked ("reported as leaked") is an auth
//!   failure; other 403s are missing permissions (a disabled API, a suspended consumer).
//! - `UNAVAILABLE` (503, "The model is overloaded.") is overload, `INTERNAL` (500) a server
//!   error, `DEADLINE_EXCEEDED` (504) a timeout, `UNAUTHENTICATED` (401) auth, `NOT_FOUND`
//!   (404) a missing model.

use std::time::{Duration, SystemTime};

use ::http::header::HeaderMap;
use ripcord_core::{Error, ErrorKind, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use crate::error_body::{self, ErrorBody};
use crate::retry_after;

/// A `google.rpc.Status` error object.
#[derive(Deserialize, Debug, Default, Clone)]
pub(crate) struct GoogleError {
    #[serde(default)]
    pub(crate) code: Option<u16>,
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default)]
    pub(crate) status: Option<String>,
    #[serde(default)]
    details: Vec<Value>,
}

#[derive(Deserialize)]
struct Envelope {
    error: GoogleError,
}

impl GoogleError {
    /// Reads `{"error":{…}}` or Vertex's `[{"error":{…}}]`; `None` for anything else.
    pub(crate) fn parse(body: &[u8]) -> Option<GoogleError> {
        let v: Value = serde_json::from_slice(body).ok()?;
        GoogleError::from_value(&v)
    }

    /// The same, from a parsed value.
    pub(crate) fn from_value(v: &Value) -> Option<GoogleError> {
        let v = match v {
            Value::Array(items) if items.len() == 1 => &items[0],
            other => other,
        };
        let env: Envelope = serde_json::from_value(v.clone()).ok()?;
        let e = env.error;
        (e.status.is_some() || e.code.is_some() || e.message.is_some()).then_some(e)
    }

    fn message_or_empty(&self) -> &str {
        self.message.as_deref().unwrap_or("")
    }

    fn says(&self, any: &[&str]) -> bool {
        let m = self.message_or_empty().to_ascii_lowercase();
        any.iter().any(|p| m.contains(p))
    }

    /// The `details` entries of one `@type` (`type.googleapis.com/google.rpc.{name}`).
    fn details_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.details.iter().filter(move |d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.rsplit('.').next() == Some(name))
        })
    }

    /// The `ErrorInfo.reason`s (`API_KEY_INVALID`, `SERVICE_DISABLED`, …).
    fn reasons(&self) -> impl Iterator<Item = &str> {
        self.details_of("ErrorInfo")
            .filter_map(|d| d.get("reason").and_then(Value::as_str))
    }

    /// `RetryInfo.retryDelay` ("26s", "0.5s").
    fn retry_delay(&self) -> Option<Duration> {
        self.details_of("RetryInfo")
            .filter_map(|d| d.get("retryDelay").and_then(Value::as_str))
            .find_map(retry_after::parse_go_duration)
    }

    /// The `quotaId`s (and metric names) of the `QuotaFailure` violations.
    fn violated_quotas(&self) -> Vec<String> {
        self.details_of("QuotaFailure")
            .filter_map(|d| d.get("violations").and_then(Value::as_array))
            .flatten()
            .flat_map(|v| {
                ["quotaId", "quotaMetric"]
                    .into_iter()
                    .filter_map(|k| v.get(k).and_then(Value::as_str).map(str::to_owned))
            })
            .collect()
    }

    /// A 429 that waiting minutes cannot fix: a per-day quota, a quota of zero, spent credits.
    fn is_spent(&self) -> bool {
        let per_day = self
            .violated_quotas()
            .iter()
            .any(|q| q.contains("PerDay") || q.contains("per_day"));
        per_day
            || self.says(&[
                "limit: 0,",
                "limit: 0\n",
                "credits are depleted",
                "enable billing",
                "billing account",
                "per day",
                "daily limit",
            ])
    }

    /// The kind, from the canonical status (or the HTTP status), the message and the details.
    pub(crate) fn kind(&self, http_status: Option<u16>) -> ErrorKind {
        let status = self.status.as_deref().unwrap_or("");
        let code = http_status.or(self.code);
        let auth_reason = self.reasons().any(|r| {
            matches!(
                r,
                "API_KEY_INVALID"
                    | "API_KEY_EXPIRED"
                    | "ACCESS_TOKEN_EXPIRED"
                    | "ACCESS_TOKEN_TYPE_UNSUPPORTED"
                    | "CREDENTIALS_MISSING"
            )
        });
        if auth_reason {
            return ErrorKind::Auth;
        }
        match (status, code) {
            ("RESOURCE_EXHAUSTED", _) | ("", Some(429)) => {
                if self.is_spent() {
                    ErrorKind::QuotaExhausted
                } else {
                    ErrorKind::RateLimited
                }
            }
            ("UNAVAILABLE", _) => ErrorKind::Overloaded,
            ("INTERNAL", _) | ("UNKNOWN", _) | ("ABORTED", _) | ("CANCELLED", _) => {
                ErrorKind::ServerError
            }
            ("DEADLINE_EXCEEDED", _) => ErrorKind::Timeout,
            ("UNAUTHENTICATED", _) => ErrorKind::Auth,
            ("PERMISSION_DENIED", _) if self.says(&["leaked", "api key"]) => ErrorKind::Auth,
            ("PERMISSION_DENIED", _) if self.is_region() => ErrorKind::RegionBlocked,
            ("PERMISSION_DENIED", _) => ErrorKind::PermissionDenied,
            ("NOT_FOUND", _) => ErrorKind::ModelNotFound,
            ("FAILED_PRECONDITION", _) if self.is_region() => ErrorKind::RegionBlocked,
            ("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE", _) => {
                if self.says(&["payload size exceeds", "request payload size"]) {
                    ErrorKind::PayloadTooLarge
                } else if self.is_context_length() {
                    ErrorKind::ContextLengthExceeded
                } else {
                    // The shared body rules (a policy refusal, a spent account, a request that
                    // can never fit) still apply; otherwise the request is at fault.
                    let b = self.error_body();
                    match error_body::classify(Some(400), Some(&b)) {
                        ErrorKind::ServerError | ErrorKind::InvalidResponse => {
                            ErrorKind::InvalidRequest
                        }
                        k => k,
                    }
                }
            }
            // No canonical status we know: the shared rules over status and body.
            _ => error_body::classify(code, Some(&self.error_body())),
        }
    }

    fn is_region(&self) -> bool {
        self.says(&[
            "user location is not supported",
            "not available in your country",
            "not supported in your country",
            "unsupported location",
            "in your region",
        ])
    }

    fn is_context_length(&self) -> bool {
        self.says(&["input token count", "exceeds the maximum number of tokens"])
            || self.error_body().is_context_length()
    }

    /// The same error in the shared shape (status as its type), for the shared rules.
    fn error_body(&self) -> ErrorBody {
        let mut b = ErrorBody::with_message(self.message_or_empty().to_owned());
        b.error_type = self.status.clone();
        b.code = self.code.map(|c| c.to_string());
        b
    }

    /// The ripcord error: kind, message, status, the canonical status as the vendor code, and
    /// the wait Google asks for.
    pub(crate) fn to_error(&self, http_status: Option<u16>, headers: Option<&HeaderMap>) -> Error {
        let kind = self.kind(http_status);
        let message = match &self.message {
            Some(m) if !m.trim().is_empty() => m.trim().to_owned(),
            _ => format!(
                "Google reported {}",
                self.status
                    .as_deref()
                    .unwrap_or("an error without a message")
            ),
        };
        let mut e = Error::new(kind, message);
        if let Some(s) = http_status.or(self.code) {
            e = e.with_status(StatusCode(s));
        }
        if let Some(s) = &self.status {
            e = e.with_vendor_code(s.clone());
        }
        let wait = self
            .retry_delay()
            .or_else(|| headers.and_then(|h| retry_after::from_headers(h, SystemTime::now())))
            .or_else(|| retry_after::from_message(self.message_or_empty()));
        if let Some(d) = wait {
            e = e.with_retry_after(d);
        }
        e
    }
}

/// A non-2xx response from a Google endpoint.
#[cfg_attr(not(feature = "gemini"), allow(dead_code))]
pub(crate) fn from_response(status: u16, headers: &HeaderMap, body: &[u8]) -> Error {
    match GoogleError::parse(body) {
        Some(g) => g.to_error(Some(status), Some(headers)),
        // An HTML page from a proxy, an empty body, another shape: the shared rules.
        None => error_body::http_error(status, headers, body, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(status: u16, body: &str) -> Error {
        from_response(status, &HeaderMap::new(), body.as_bytes())
    }

    #[test]
    fn rate_limit_and_quota_are_told_apart_by_details() {
        let per_minute = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#;
        let e = kind(429, per_minute);
        assert_eq!(e.kind(), ErrorKind::RateLimited);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(26)));
        assert_eq!(e.vendor_code(), Some("RESOURCE_EXHAUSTED"));
        let per_day = per_minute.replace("PerModelPerMinute", "PerModelPerDay");
        assert_eq!(kind(429, &per_day).kind(), ErrorKind::QuotaExhausted);
        let zero = r#"{"error":{"code":429,"message":"You exceeded your current quota.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-2.5-pro\nPlease retry in 20.04s.","status":"RESOURCE_EXHAUSTED"}}"#;
        assert_eq!(kind(429, zero).kind(), ErrorKind::QuotaExhausted);
        let vertex = r#"[{"error":{"code":429,"message":"Resource exhausted. Please try again later.","status":"RESOURCE_EXHAUSTED"}}]"#;
        assert_eq!(kind(429, vertex).kind(), ErrorKind::RateLimited);
    }

    #[test]
    fn canonical_statuses() {
        for (status, body, want) in [
            (
                503,
                r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#,
                ErrorKind::Overloaded,
            ),
            (
                500,
                r#"{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}"#,
                ErrorKind::ServerError,
            ),
            (
                504,
                r#"{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}"#,
                ErrorKind::Timeout,
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
                ErrorKind::ContextLengthExceeded,
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}"#,
                ErrorKind::RegionBlocked,
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}"#,
                ErrorKind::Auth,
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified","status":"INVALID_ARGUMENT"}}"#,
                ErrorKind::InvalidRequest,
            ),
            (
                401,
                r#"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#,
                ErrorKind::Auth,
            ),
            (
                403,
                r#"{"error":{"code":403,"message":"Your API key was reported as leaked. Please use another API key.","status":"PERMISSION_DENIED"}}"#,
                ErrorKind::Auth,
            ),
            (
                403,
                r#"{"error":{"code":403,"message":"Permission denied on resource project p.","status":"PERMISSION_DENIED"}}"#,
                ErrorKind::PermissionDenied,
            ),
            (
                404,
                r#"{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}"#,
                ErrorKind::ModelNotFound,
            ),
            (502, "<html>bad gateway</html>", ErrorKind::ServerError),
            (503, "", ErrorKind::Overloaded),
        ] {
            assert_eq!(kind(status, body).kind(), want, "{status} {body}");
        }
    }

    #[test]
    fn a_message_without_details_still_gives_the_wait() {
        let e = kind(
            429,
            r#"{"error":{"code":429,"message":"Too many requests. Please retry in 1.5s.","status":"RESOURCE_EXHAUSTED"}}"#,
        );
        assert_eq!(e.retry_after(), Some(Duration::from_millis(1500)));
        assert_eq!(e.status().map(|s| s.as_u16()), Some(429));
    }
}
