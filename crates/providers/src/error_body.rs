//! Reading a vendor's error body, and the classification every vendor shares.
//!
//! Vendors agree on little: OpenAI and most compatible servers send
//! `{"error":{"message","type","code"}}`, Anthropic `{"type":"error","error":{"type","message"}}`,
//! vLLM puts the same fields at the top level, Baidu's older APIs send
//! `{"error_code":…,"error_msg":…}`, proxies send HTML or nothing at all. [`ErrorBody::parse`]
//! reads all of these into one small struct, leniently (codes may be strings or numbers).
//!
//! [`classify`] then turns status + body into an [`ErrorKind`]. For a 4xx (or an error without
//! a status) a few kinds are decided by the body whatever the status, because vendors disagree
//! on the status and the kind drives what an operator does about it: spent money (a spend cap,
//! an overdue account, a used-up daily allowance — sent as 400, 402, 403 or 429), a request
//! that can never fit (OpenAI's 429 "Request too large … tokens per min" waits for nothing), a
//! policy refusal hidden in a generic 400 (`invalid_prompt`, DeepSeek's "Content Exists
//! Risk"), a context overflow, and a model that is missing, retired or not enabled for the
//! account. Otherwise the status decides the family and the body refines it — a 429 that says
//! "overloaded" is the vendor's capacity, a 403 that names a country is a region block; 408 and
//! 504 (and a vendor's own timeout types) are timeouts. Vendor-specific codes (Zhipu's `1113`, DashScope's
//! `Arrearage`, …) are mapped by each preset's own hook *before* this shared logic runs, so
//! the shared rules stay small and the vendor knowledge stays with the vendor.

use std::time::SystemTime;

use ::http::header::HeaderMap;
use ripcord_core::{Error, ErrorKind, StatusCode};
use serde_json::Value;

use crate::http::excerpt;
use crate::retry_after;

/// What a vendor's error body said, in a vendor-neutral shape.
///
/// # Examples
///
/// ```
/// use ripcord_providers::ErrorBody;
/// let b = ErrorBody::parse(br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#).unwrap();
/// assert_eq!(b.code.as_deref(), Some("insufficient_quota"));
/// let zhipu = ErrorBody::parse(r#"{"error":{"code":"1113","message":"余额不足"}}"#.as_bytes()).unwrap();
/// assert_eq!(zhipu.code.as_deref(), Some("1113"));
/// assert!(ErrorBody::parse(b"<html>502 Bad Gateway</html>").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ErrorBody {
    /// The human-readable message.
    pub message: Option<String>,
    /// The error type (`invalid_request_error`, `overloaded_error`, `Arrearage`, …).
    pub error_type: Option<String>,
    /// The error code, as text (`insufficient_quota`, `1113`, `429`, …).
    pub code: Option<String>,
    /// A nested code some vendors add (Azure's `innererror.code`, e.g. `ResponsibleAIPolicyViolation`).
    pub inner_code: Option<String>,
}

impl ErrorBody {
    /// An error body with just a message.
    pub fn with_message(message: impl Into<String>) -> Self {
        ErrorBody {
            message: Some(message.into()),
            ..ErrorBody::default()
        }
    }

    /// Reads an error body; `None` when it is not JSON or holds no error fields.
    pub fn parse(body: &[u8]) -> Option<ErrorBody> {
        let v: Value = serde_json::from_slice(body).ok()?;
        ErrorBody::from_value(&v)
    }

    /// Reads an already parsed JSON value; `None` when it holds no error fields.
    pub fn from_value(v: &Value) -> Option<ErrorBody> {
        let obj = v.as_object()?;
        let b = match obj.get("error") {
            Some(Value::Object(e)) => ErrorBody {
                message: text(e.get("message")).or_else(|| text(e.get("msg"))),
                error_type: text(e.get("type")),
                code: text(e.get("code")),
                inner_code: e
                    .get("innererror")
                    .and_then(|i| text(i.get("code")))
                    .or_else(|| text(obj.get("code"))),
            },
            Some(Value::String(s)) => ErrorBody {
                message: Some(s.clone()),
                error_type: text(obj.get("type")),
                code: text(obj.get("code")),
                inner_code: None,
            },
            _ => ErrorBody {
                message: text(obj.get("message"))
                    .or_else(|| text(obj.get("msg")))
                    .or_else(|| text(obj.get("error_msg")))
                    .or_else(|| text(obj.get("detail"))),
                error_type: text(obj.get("type")).filter(|t| t != "error"),
                code: text(obj.get("code")).or_else(|| text(obj.get("error_code"))),
                inner_code: None,
            },
        };
        let is_error = b.message.is_some() || b.code.is_some() || b.error_type.is_some();
        // A success object also has "type"/"code"-free shapes; only call it an error when an
        // error field is present and it is not a normal completion/message object.
        let looks_like_success = obj.contains_key("choices")
            || obj.contains_key("content") && !obj.contains_key("error")
            || obj.get("object").and_then(Value::as_str) == Some("list");
        (is_error && !looks_like_success).then_some(b)
    }

    /// The code to keep on the error: the vendor's code, else its type.
    pub fn vendor_code(&self) -> Option<&str> {
        self.code.as_deref().or(self.error_type.as_deref())
    }

    /// The message, or `""`.
    pub fn message_or_empty(&self) -> &str {
        self.message.as_deref().unwrap_or("")
    }

    /// Every tag (type, code, inner code), lowercased, for matching.
    fn tags(&self) -> impl Iterator<Item = String> + '_ {
        [&self.error_type, &self.code, &self.inner_code]
            .into_iter()
            .flatten()
            .map(|s| s.to_ascii_lowercase())
    }

    fn has_tag(&self, any: &[&str]) -> bool {
        self.tags().any(|t| any.contains(&t.as_str()))
    }

    fn says(&self, any: &[&str]) -> bool {
        let m = self.message_or_empty().to_lowercase();
        any.iter().any(|p| m.contains(p))
    }

    /// The spent-money family (never retry): no balance, an overdue account, a spend cap or a
    /// usage cap for the period, a daily request allowance used up. Vendors send these with
    /// 400, 402, 403 or 429 — the words decide, not the status.
    pub fn is_quota(&self) -> bool {
        self.has_tag(&[
            "insufficient_quota",
            "billing_hard_limit_reached",
            "billing_not_active",
            "exceeded_current_quota_error",
            "arrearage",
            "billing_error",
            "insufficient_balance",
            "insufficient_user_quota",
        ]) || self.says(&[
            "exceeded your current quota",
            "exceeded your current token quota",
            "credit balance is too low",
            "insufficient balance",
            "insufficient credit",
            "insufficient_quota",
            "account is not active",
            "in good standing",
            "overdue",
            "in arrears",
            "reached your specified api usage limits",
            "usage limit",
            "spend limit",
            "daily request limit",
            "total request limit",
            "余额不足",
            "欠费",
        ])
    }

    /// The request can never fit, however long one waits: too many bytes, or more tokens than
    /// the whole per-minute allowance (OpenAI's 429 "Request too large … on tokens per min").
    pub fn is_payload_too_large(&self) -> bool {
        self.has_tag(&["request_too_large", "badrequest.toolarge"])
            || self.says(&[
                "request too large",
                "request entity too large",
                "payload too large",
                "total message size",
            ])
    }

    /// The prompt (plus requested output) does not fit the model.
    pub fn is_context_length(&self) -> bool {
        self.has_tag(&[
            "context_length_exceeded",
            "tokens_too_long",
            "characters_too_long",
        ]) || self.says(&[
            "maximum context length",
            "context length",
            "context_length_exceeded",
            "prompt is too long",
            "context window",
            "input token length too long",
            "exceeded model token limit",
            "range of input length",
            "input is too long",
            "too many input tokens",
            "prompt tokens too long",
            "超长",
        ])
    }

    /// The vendor's content policy refused the prompt or the answer — whether it says so with
    /// a dedicated code or inside a generic 400 (`invalid_prompt`, "Content Exists Risk").
    pub fn is_content_filter(&self) -> bool {
        self.has_tag(&[
            "content_filter",
            "content_filter_error",
            "content_policy_violation",
            "responsibleaipolicyviolation",
            "datainspectionfailed",
            "data_inspection_failed",
            "unsafe_request",
            "invalid_prompt",
            "sensitive_words_detected",
            "prompt_blocked",
        ]) || self.says(&[
            "content management policy",
            "content policy",
            "inappropriate content",
            "sensitive content",
            "considered high risk",
            "safety system",
            "content filter",
            "violating our usage policy",
            "content exists risk",
            "敏感",
        ])
    }

    /// A region / country block.
    pub fn is_region(&self) -> bool {
        self.has_tag(&[
            "unsupported_country_region_territory",
            "unsupported_country",
            "request_forbidden",
        ]) || self.says(&["country", "region", "territory", "unsupported location"])
    }

    /// The model does not exist, was retired or taken offline, or is not enabled for this
    /// account — whatever status it came with (some vendors use 400, 401 or 403).
    pub fn is_model_not_found(&self) -> bool {
        self.has_tag(&[
            "model_not_found",
            "modelnotfound",
            "deploymentnotfound",
            "not_found_error",
            "resource_not_found_error",
            "model_not_available",
            "accessdenied.unpurchased",
        ]) || (self.says(&["model"])
            && self.says(&[
                "does not exist",
                "not found",
                "has been deprecated",
                "has been decommissioned",
                "has been retired",
                "taken offline",
                "not allowed to sample",
                "no permission to use the model",
            ]))
    }

    /// The vendor (or a gateway in front of it) gave up waiting.
    pub fn is_timeout(&self) -> bool {
        self.has_tag(&[
            "timeout_error",
            "timeout",
            "requesttimeout",
            "request_timeout",
        ])
    }

    /// The vendor is overloaded (some vendors send it with 429 or in-band).
    pub fn is_overloaded(&self) -> bool {
        self.has_tag(&[
            "overloaded_error",
            "engine_overloaded_error",
            "engine_overloaded",
            "server_overloaded",
        ]) || self.says(&["overloaded", "service unavailable"])
    }

    /// Rate limited.
    pub fn is_rate_limit(&self) -> bool {
        self.has_tag(&[
            "rate_limit_error",
            "rate_limit_exceeded",
            "rate_limit_reached_error",
            "rpm_rate_limit_exceeded",
            "tpm_rate_limit_exceeded",
            "requests",
            "tokens",
            "throttling",
            "limit_requests",
        ]) || self.says(&["rate limit"])
    }

    /// Bad credentials.
    pub fn is_auth(&self) -> bool {
        self.has_tag(&[
            "authentication_error",
            "invalid_api_key",
            "invalid_authentication_error",
            "incorrect_api_key_error",
            "invalidapikey",
            "unauthorized",
        ])
    }

    /// Missing permission.
    pub fn is_permission(&self) -> bool {
        self.has_tag(&[
            "permission_error",
            "permission_denied_error",
            "permission_denied",
            "access_denied",
            "insufficient_permissions",
        ])
    }

    /// The HTTP status the body implies, for errors that arrive without one (a 200 whose body
    /// is an error, an in-band stream `error` event).
    pub fn implied_status(&self) -> Option<u16> {
        for t in self.tags() {
            if let Ok(n) = t.parse::<u16>()
                && (400..600).contains(&n)
            {
                return Some(n);
            }
        }
        IMPLIED_STATUS
            .iter()
            .find_map(|&(holds, status)| holds(self).then_some(status))
    }
}

/// A test on an error body, and the status it implies when it holds.
type StatusRule = (fn(&ErrorBody) -> bool, u16);

/// [`ErrorBody::implied_status`]'s rules after a numeric tag, in order: the first that holds
/// names the status.
const IMPLIED_STATUS: &[StatusRule] = &[
    (ErrorBody::is_quota, 429),
    (ErrorBody::is_overloaded, 529),
    (ErrorBody::is_rate_limit, 429),
    (ErrorBody::is_auth, 401),
    (|b| b.is_permission() || b.has_tag(FORBIDDEN_TAGS), 403),
    (ErrorBody::is_payload_too_large, 413),
    (ErrorBody::is_model_not_found, 404),
    (|b| b.has_tag(BAD_REQUEST_TAGS), 400),
    (ErrorBody::is_timeout, 504),
    (|b| b.has_tag(SERVER_ERROR_TAGS), 500),
];

/// Error types and codes that imply a 403 (besides [`ErrorBody::is_permission`]).
const FORBIDDEN_TAGS: &[&str] = &[
    "unsupported_country_region_territory",
    "unsupported_country",
    "request_forbidden",
    "forbidden",
];

/// Error types and codes that imply a 400.
const BAD_REQUEST_TAGS: &[&str] = &[
    "invalid_request_error",
    "invalid_request",
    "invalidparameter",
    "bad_request",
    "badrequesterror",
];

/// Error types and codes that imply a 500.
const SERVER_ERROR_TAGS: &[&str] = &[
    "api_error",
    "server_error",
    "internal_error",
    "internalerror",
    "internal_server_error",
];

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A vendor-specific refinement run before the shared rules: return `Some(kind)` to decide.
///
/// `status` is `None` for errors that came without one (an error object in a 200 body, an
/// in-band stream error).
pub type ErrorHook = fn(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind>;

/// The shared classification of a vendor error from its status and (parsed) body.
///
/// # Examples
///
/// ```
/// use ripcord_core::ErrorKind;
/// use ripcord_providers::{ErrorBody, error_body::classify};
/// let quota = ErrorBody::parse(br#"{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"x"}}"#);
/// assert_eq!(classify(Some(429), quota.as_ref()), ErrorKind::QuotaExhausted);
/// assert_eq!(classify(Some(429), None), ErrorKind::RateLimited);
/// assert_eq!(classify(Some(529), None), ErrorKind::Overloaded);
/// assert_eq!(classify(Some(502), None), ErrorKind::ServerError);
/// ```
pub fn classify(status: Option<u16>, body: Option<&ErrorBody>) -> ErrorKind {
    let empty = ErrorBody::default();
    let b = body.unwrap_or(&empty);
    let status = status.or_else(|| b.implied_status());
    let Some(status) = status else {
        // Nothing but a message: keywords, else a server-side failure (retryable).
        return b.body_kind().unwrap_or(ErrorKind::ServerError);
    };
    match status {
        401 => ErrorKind::Auth,
        402 => ErrorKind::QuotaExhausted,
        408 => ErrorKind::Timeout,
        // A conflict (Anthropic's `conflict_error`) clears on its own: retry.
        409 => ErrorKind::ServerError,
        400..=499 => b.body_kind().unwrap_or(match status {
            403 if b.is_region() => ErrorKind::RegionBlocked,
            403 => ErrorKind::PermissionDenied,
            404 => ErrorKind::ModelNotFound,
            413 => ErrorKind::PayloadTooLarge,
            429 if b.is_overloaded() => ErrorKind::Overloaded,
            429 => ErrorKind::RateLimited,
            _ if b.is_timeout() => ErrorKind::Timeout,
            _ => ErrorKind::InvalidRequest,
        }),
        503 | 529 => ErrorKind::Overloaded,
        504 => ErrorKind::Timeout,
        500..=599 if b.is_timeout() => ErrorKind::Timeout,
        500..=599 => ErrorKind::ServerError,
        // 1xx, 3xx (we do not follow redirects on API calls), or an error object in a 2xx body
        // without any clue: the answer cannot be used.
        _ => ErrorKind::InvalidResponse,
    }
}

impl ErrorBody {
    /// The kinds a body decides whatever the status it came with: money before everything
    /// (a spent account fails the same way whatever it asks for), then a request that can
    /// never fit, a policy refusal, a context overflow and a missing model. `None` leaves the
    /// decision to the status.
    fn body_kind(&self) -> Option<ErrorKind> {
        if self.is_quota() {
            Some(ErrorKind::QuotaExhausted)
        } else if self.is_payload_too_large() {
            Some(ErrorKind::PayloadTooLarge)
        } else if self.is_content_filter() {
            Some(ErrorKind::ContentFiltered)
        } else if self.is_context_length() {
            Some(ErrorKind::ContextLengthExceeded)
        } else if self.is_model_not_found() {
            Some(ErrorKind::ModelNotFound)
        } else {
            None
        }
    }
}

/// The kind: the vendor hook first, then the shared rules.
fn kind_of(status: Option<u16>, body: Option<&ErrorBody>, hook: Option<ErrorHook>) -> ErrorKind {
    body.and_then(|b| hook.and_then(|h| h(status, b)))
        .unwrap_or_else(|| classify(status, body))
}

/// The ripcord error for a non-2xx HTTP response: kind from status + body (+ the vendor hook),
/// the vendor's message and code, the status, and the wait its headers (or message) ask for.
/// Non-JSON bodies (an HTML 502 from a proxy, an empty 503) are classified by status alone.
pub(crate) fn http_error(
    status: u16,
    headers: &HeaderMap,
    raw: &[u8],
    hook: Option<ErrorHook>,
) -> Error {
    let parsed = ErrorBody::parse(raw);
    let kind = kind_of(Some(status), parsed.as_ref(), hook);
    let message = match &parsed {
        Some(b) => b
            .message
            .clone()
            .unwrap_or_else(|| format!("HTTP {status}")),
        None if raw.iter().all(u8::is_ascii_whitespace) => {
            format!("HTTP {status} with an empty body")
        }
        None => format!("HTTP {status} with a non-JSON body: {}", excerpt(raw)),
    };
    let mut e = Error::new(kind, message).with_status(StatusCode(status));
    if let Some(code) = parsed.as_ref().and_then(ErrorBody::vendor_code) {
        e = e.with_vendor_code(code);
    }
    let wait = retry_after::from_headers(headers, SystemTime::now()).or_else(|| {
        parsed
            .as_ref()
            .and_then(|b| b.message.as_deref())
            .and_then(retry_after::from_message)
    });
    if let Some(d) = wait {
        e = e.with_retry_after(d);
    }
    with_stated_limit(e)
}

/// A context-length error keeps the window its vendor stated in the message, if it did.
pub(crate) fn with_stated_limit(e: Error) -> Error {
    if e.kind() != ErrorKind::ContextLengthExceeded {
        return e;
    }
    match crate::stated_limit::stated_context_limit(e.message()) {
        Some(limit) => e.with_context_limit(limit),
        None => e,
    }
}

/// The ripcord error for an error object without (or with only an implied) HTTP status: an
/// error in a 200 body, or an in-band stream error event.
#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
pub(crate) fn body_error(status: Option<u16>, b: &ErrorBody, hook: Option<ErrorHook>) -> Error {
    let kind = kind_of(status, Some(b), hook);
    let mut e = Error::new(
        kind,
        b.message
            .clone()
            .unwrap_or_else(|| "the vendor reported an error".to_owned()),
    );
    if let Some(s) = status {
        e = e.with_status(StatusCode(s));
    }
    if let Some(code) = b.vendor_code() {
        e = e.with_vendor_code(code);
    }
    if let Some(d) = b.message.as_deref().and_then(retry_after::from_message) {
        e = e.with_retry_after(d);
    }
    with_stated_limit(e)
}

/// Reads a 200 body as `T`; one that does not read but is an error body (a vendor's error
/// sent with a 200) is classified like an error without a status ([`body_error`]). Any other
/// body that does not read is an invalid response: `invalid` says what, then serde's reason.
#[cfg(feature = "openai")]
pub(crate) fn read_ok_body<T: serde::de::DeserializeOwned>(
    body: &[u8],
    invalid: &str,
    hook: Option<ErrorHook>,
) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| match ErrorBody::parse(body) {
        Some(b) => body_error(None, &b, hook),
        None => Error::new(ErrorKind::InvalidResponse, format!("{invalid}: {e}")).with_source(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(s: &str) -> Option<ErrorBody> {
        ErrorBody::parse(s.as_bytes())
    }

    #[test]
    fn shapes() {
        let anthropic =
            body(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
                .unwrap();
        assert_eq!(anthropic.error_type.as_deref(), Some("overloaded_error"));
        let vllm = body(r#"{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}"#).unwrap();
        assert_eq!(vllm.code.as_deref(), Some("400"));
        let baidu =
            body(r#"{"error_code":336501,"error_msg":"Rate limit reached for RPM"}"#).unwrap();
        assert_eq!(baidu.code.as_deref(), Some("336501"));
        let ollama = body(r#"{"error":"model 'x' not found"}"#).unwrap();
        assert_eq!(ollama.message.as_deref(), Some("model 'x' not found"));
        let azure = body(r#"{"error":{"code":"content_filter","message":"m","innererror":{"code":"ResponsibleAIPolicyViolation"}}}"#).unwrap();
        assert_eq!(
            azure.inner_code.as_deref(),
            Some("ResponsibleAIPolicyViolation")
        );
        assert!(body(r#"{"id":"x","choices":[]}"#).is_none());
        assert!(body("").is_none());
        assert!(body("[1,2]").is_none());
    }

    #[test]
    fn status_and_body_together() {
        let k = |s: Option<u16>, b: &str| classify(s, body(b).as_ref());
        assert_eq!(
            k(
                Some(429),
                r#"{"error":{"code":"rate_limit_exceeded","message":"slow"}}"#
            ),
            ErrorKind::RateLimited
        );
        assert_eq!(
            k(
                Some(400),
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#
            ),
            ErrorKind::QuotaExhausted
        );
        assert_eq!(
            k(
                Some(403),
                r#"{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported"}}"#
            ),
            ErrorKind::RegionBlocked
        );
        assert_eq!(
            k(
                Some(403),
                r#"{"error":{"type":"permission_error","message":"no access to this model"}}"#
            ),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            k(
                Some(400),
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#
            ),
            ErrorKind::ContextLengthExceeded
        );
        assert_eq!(
            k(
                Some(400),
                r#"{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum","type":"invalid_request_error"}}"#
            ),
            ErrorKind::ContextLengthExceeded
        );
        assert_eq!(
            k(
                Some(400),
                r#"{"error":{"code":"content_policy_violation","message":"no"}}"#
            ),
            ErrorKind::ContentFiltered
        );
        assert_eq!(
            k(
                Some(422),
                r#"{"error":{"message":"temperature must be <= 2"}}"#
            ),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            k(
                Some(429),
                r#"{"error":{"type":"engine_overloaded_error","message":"The engine is currently overloaded"}}"#
            ),
            ErrorKind::Overloaded
        );
        assert_eq!(k(Some(503), ""), ErrorKind::Overloaded);
        assert_eq!(k(Some(504), "<html>gateway</html>"), ErrorKind::Timeout);
        assert_eq!(k(Some(408), ""), ErrorKind::Timeout);
        assert_eq!(k(Some(413), ""), ErrorKind::PayloadTooLarge);
        assert_eq!(k(Some(404), ""), ErrorKind::ModelNotFound);
        assert_eq!(k(Some(401), ""), ErrorKind::Auth);
        assert_eq!(k(Some(402), ""), ErrorKind::QuotaExhausted);
        assert_eq!(k(Some(302), ""), ErrorKind::InvalidResponse);
    }

    #[test]
    fn without_status_the_body_decides() {
        let k = |b: &str| classify(None, body(b).as_ref());
        assert_eq!(
            k(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            ErrorKind::Overloaded
        );
        assert_eq!(
            k(
                r#"{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"quota"}}"#
            ),
            ErrorKind::QuotaExhausted
        );
        assert_eq!(
            k(r#"{"error":{"type":"rate_limit_error","message":"slow down"}}"#),
            ErrorKind::RateLimited
        );
        assert_eq!(
            k(r#"{"error":{"type":"api_error","message":"Internal server error"}}"#),
            ErrorKind::ServerError
        );
        assert_eq!(
            k(r#"{"error":{"type":"invalid_request_error","message":"prompt is too long"}}"#),
            ErrorKind::ContextLengthExceeded
        );
        assert_eq!(
            k(r#"{"object":"error","message":"x","code":400}"#),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            k(r#"{"error":{"message":"something odd"}}"#),
            ErrorKind::ServerError
        );
    }
}
