//! Bedrock error mapping.
//!
//! Bedrock names its errors by type, not by body shape. An HTTP error carries the type in the
//! `x-amzn-ErrorType` header (`ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/`)
//! and, from some front ends, as `__type` in the body
//! (`com.amazon.coral.service#ExpiredTokenException`); the body itself is just
//! `{"message": "…"}` (`{"Message": …}` from the auth layer). A stream error is an event-stream
//! frame with `:message-type: exception` and the type, in camel case, in `:exception-type`
//! (`throttlingException`). All three are read into one type name and classified here
//! (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_Errors>,
//! <https://docs.aws.amazon.com/bedrock/latest/userguide/troubleshooting-api-error-codes.html>):
//!
//! | type | status | kind |
//! | --- | --- | --- |
//! | `ValidationException` | 400 | context length exceeded for "Input is too long…", "prompt is too long…", "too many input tokens"; model not found for "The provided model identifier is invalid." and "…with on-demand throughput isn't supported" (the id needs an inference profile); content filtered, payload too large by the message; else invalid request |
//! | `AccessDeniedException` | 403 | permission denied (no access to the model); region blocked when the message names the region |
//! | `ExpiredTokenException`, `UnrecognizedClientException`, `InvalidSignatureException`, `IncompleteSignatureException`, `MissingAuthenticationTokenException`, `InvalidClientTokenId` | 400/403 | auth |
//! | `ResourceNotFoundException` | 404 | model not found |
//! | `ModelTimeoutException` | 408 | timeout |
//! | `ModelErrorException`, `ModelStreamErrorException` | 424 | server error |
//! | `ThrottlingException` | 429 | rate limited ("Too many requests…", "Too many tokens…"), quota exhausted for a daily token quota ("…tokens per day…") |
//! | `ServiceQuotaExceededException` | 400/429 | quota exhausted |
//! | `InternalServerException` | 500 | server error |
//! | `ServiceUnavailableException` | 503 | overloaded |
//! | `ModelNotReadyException` | 429 | overloaded (the model is being brought up) |
//!
//! A type that is not listed falls to the shared rules (status first, then the message).

use std::time::SystemTime;

use ::http::header::HeaderMap;
use ripcord_core::{Error, ErrorKind, StatusCode};
use serde_json::Value;

use crate::error_body::{self, ErrorBody};
use crate::http::excerpt;
use crate::retry_after;

/// The bare type name: namespace (`…#`) and URL suffix (`:http://…`) cut, first letter upper
/// case (`throttlingException` → `ThrottlingException`).
pub(crate) fn type_name(raw: &str) -> String {
    let t = raw.trim();
    let t = t.rsplit_once('#').map_or(t, |(_, n)| n);
    let t = t.split_once(':').map_or(t, |(n, _)| n);
    let mut chars = t.chars();
    match chars.next() {
        Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// Bedrock's kinds by type (and, for two types, by message).
fn kind_of_type(error_type: &str, body: &ErrorBody) -> Option<ErrorKind> {
    let says = |words: &[&str]| {
        let m = body.message_or_empty().to_ascii_lowercase();
        words.iter().any(|w| m.contains(w))
    };
    Some(match error_type {
        "ValidationException" if body.is_context_length() => ErrorKind::ContextLengthExceeded,
        // The link cannot serve the model as named: a bad id, a foundation model that needs an
        // inference profile, a model that does not chat. Another link can.
        "ValidationException"
            if says(&[
                "model identifier is invalid",
                "on-demand throughput",
                "doesn't support the model",
            ]) =>
        {
            ErrorKind::ModelNotFound
        }
        "ValidationException" if body.is_content_filter() => ErrorKind::ContentFiltered,
        "ValidationException" if body.is_payload_too_large() => ErrorKind::PayloadTooLarge,
        "ValidationException" => ErrorKind::InvalidRequest,
        "AccessDeniedException" if body.is_region() => ErrorKind::RegionBlocked,
        "AccessDeniedException" => ErrorKind::PermissionDenied,
        "ExpiredTokenException"
        | "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "IncompleteSignatureException"
        | "MissingAuthenticationTokenException"
        | "InvalidClientTokenId" => ErrorKind::Auth,
        "ResourceNotFoundException" => ErrorKind::ModelNotFound,
        "ModelTimeoutException" => ErrorKind::Timeout,
        "ModelErrorException" | "ModelStreamErrorException" => ErrorKind::ServerError,
        "ThrottlingException" if says(&["per day", "daily"]) => ErrorKind::QuotaExhausted,
        "ThrottlingException" => ErrorKind::RateLimited,
        "ServiceQuotaExceededException" => ErrorKind::QuotaExhausted,
        "InternalServerException" | "InternalFailure" => ErrorKind::ServerError,
        "ServiceUnavailableException" | "ModelNotReadyException" => ErrorKind::Overloaded,
        _ => return None,
    })
}

/// The message of a Bedrock error body (`message`, or `Message` from the auth layer), and its
/// `__type` when the body names one.
fn read_body(raw: &[u8]) -> Option<(Option<String>, Option<String>)> {
    let v: Value = serde_json::from_slice(raw).ok()?;
    let obj = v.as_object()?;
    let text = |k: &str| {
        obj.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let message = text("message").or_else(|| text("Message"));
    let kind = text("__type").or_else(|| text("code"));
    (message.is_some() || kind.is_some()).then_some((message, kind))
}

/// A non-2xx response.
pub(crate) fn from_response(status: u16, headers: &HeaderMap, raw: &[u8]) -> Error {
    let parsed = read_body(raw);
    let header_type = headers
        .get("x-amzn-errortype")
        .and_then(|v| v.to_str().ok())
        .map(type_name)
        .filter(|t| !t.is_empty());
    let body_type = parsed
        .as_ref()
        .and_then(|(_, t)| t.as_deref())
        .map(type_name);
    let error_type = header_type.or(body_type);
    let message = match &parsed {
        Some((Some(m), _)) => m.clone(),
        Some((None, _)) => format!("HTTP {status}"),
        None if raw.iter().all(u8::is_ascii_whitespace) => {
            format!("HTTP {status} with an empty body")
        }
        None => format!("HTTP {status} with a non-JSON body: {}", excerpt(raw)),
    };
    let body = ErrorBody {
        message: Some(message.clone()),
        error_type: error_type.clone(),
        ..ErrorBody::default()
    };
    let kind = error_type
        .as_deref()
        .and_then(|t| kind_of_type(t, &body))
        .unwrap_or_else(|| error_body::classify(Some(status), Some(&body)));
    let mut e = Error::new(kind, message).with_status(StatusCode(status));
    if let Some(t) = error_type {
        e = e.with_vendor_code(t);
    }
    let wait = retry_after::from_headers(headers, SystemTime::now())
        .or_else(|| body.message.as_deref().and_then(retry_after::from_message));
    if let Some(d) = wait {
        e = e.with_retry_after(d);
    }
    // A context-length error keeps the window the message states ("… tokens > 200000 maximum").
    error_body::with_stated_limit(e)
}

/// An exception frame of a stream (`:exception-type`, JSON payload with a `message`), or an
/// `error` frame (`:error-code`, `:error-message`).
pub(crate) fn from_exception(
    exception_type: &str,
    payload: &[u8],
    fallback: Option<&str>,
) -> Error {
    let error_type = type_name(exception_type);
    let message = read_body(payload)
        .and_then(|(m, _)| m)
        .or_else(|| fallback.map(str::to_owned))
        .unwrap_or_else(|| format!("the stream ended with {error_type}"));
    let body = ErrorBody {
        message: Some(message.clone()),
        error_type: Some(error_type.clone()),
        ..ErrorBody::default()
    };
    let kind =
        kind_of_type(&error_type, &body).unwrap_or_else(|| error_body::classify(None, Some(&body)));
    error_body::with_stated_limit(
        Error::new(kind, message)
            .with_vendor_code(error_type)
            .with_request_delivered(),
    )
}

#[cfg(test)]
mod tests {
    use ::http::header::HeaderValue;

    use super::*;

    fn err(status: u16, error_type: Option<&'static str>, body: &str) -> Error {
        let mut h = HeaderMap::new();
        if let Some(t) = error_type {
            h.insert("x-amzn-errortype", HeaderValue::from_static(t));
        }
        from_response(status, &h, body.as_bytes())
    }

    const NS: &str = ":http://internal.amazon.com/coral/com.amazon.bedrock/";

    #[test]
    fn type_names() {
        assert_eq!(
            type_name(&format!("ThrottlingException{NS}")),
            "ThrottlingException"
        );
        assert_eq!(
            type_name("com.amazon.coral.service#ExpiredTokenException"),
            "ExpiredTokenException"
        );
        assert_eq!(type_name("throttlingException"), "ThrottlingException");
        assert_eq!(type_name(""), "");
    }

    #[test]
    fn the_issue_table_by_header_type() {
        let rows: &[(u16, &'static str, &str, ErrorKind)] = &[
            (
                400,
                "ValidationException:x",
                "Input is too long for requested model.",
                ErrorKind::ContextLengthExceeded,
            ),
            (
                400,
                "ValidationException:x",
                "prompt is too long: 215000 tokens > 200000 maximum",
                ErrorKind::ContextLengthExceeded,
            ),
            (
                400,
                "ValidationException:x",
                "The provided model identifier is invalid.",
                ErrorKind::ModelNotFound,
            ),
            (
                400,
                "ValidationException:x",
                "Malformed input request: #: extraneous key [foo] is not permitted, please reformat your input and try again.",
                ErrorKind::InvalidRequest,
            ),
            (
                403,
                "AccessDeniedException:x",
                "You don't have access to the model with the specified model ID.",
                ErrorKind::PermissionDenied,
            ),
            (
                403,
                "ExpiredTokenException:x",
                "The security token included in the request is expired",
                ErrorKind::Auth,
            ),
            (
                403,
                "UnrecognizedClientException:x",
                "The security token included in the request is invalid.",
                ErrorKind::Auth,
            ),
            (
                403,
                "InvalidSignatureException:x",
                "The request signature we calculated does not match the signature you provided.",
                ErrorKind::Auth,
            ),
            (
                404,
                "ResourceNotFoundException:x",
                "Model not found",
                ErrorKind::ModelNotFound,
            ),
            (
                408,
                "ModelTimeoutException:x",
                "Model has timed out in processing the request.",
                ErrorKind::Timeout,
            ),
            (
                424,
                "ModelErrorException:x",
                "The system encountered an unexpected error during processing. Try your request again.",
                ErrorKind::ServerError,
            ),
            (
                429,
                "ThrottlingException:x",
                "Too many requests, please wait before trying again.",
                ErrorKind::RateLimited,
            ),
            (
                429,
                "ThrottlingException:x",
                "Too many tokens, please wait before trying again.",
                ErrorKind::RateLimited,
            ),
            (
                429,
                "ThrottlingException:x",
                "Too many tokens per day, please wait before trying again.",
                ErrorKind::QuotaExhausted,
            ),
            (
                400,
                "ServiceQuotaExceededException:x",
                "Your request exceeds the service quota for your account.",
                ErrorKind::QuotaExhausted,
            ),
            (
                500,
                "InternalServerException:x",
                "The system encountered an unexpected error during processing.",
                ErrorKind::ServerError,
            ),
            (
                503,
                "ServiceUnavailableException:x",
                "Bedrock is unable to process your request.",
                ErrorKind::Overloaded,
            ),
            (
                429,
                "ModelNotReadyException:x",
                "Model is not ready for inference.",
                ErrorKind::Overloaded,
            ),
        ];
        for (status, t, message, kind) in rows {
            let body = serde_json::json!({ "message": message }).to_string();
            let e = err(*status, Some(t), &body);
            assert_eq!(e.kind(), *kind, "{status} {t} {message}");
            assert_eq!(e.message(), *message);
            assert_eq!(e.status().map(|s| s.as_u16()), Some(*status));
            assert!(e.vendor_code().is_some_and(|c| !c.contains(':')), "{e:?}");
        }
    }

    #[test]
    fn body_type_capital_message_and_no_type() {
        let e = err(
            403,
            None,
            r#"{"__type":"com.amazon.coral.service#ExpiredTokenException","Message":"The security token included in the request is expired"}"#,
        );
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert_eq!(e.vendor_code(), Some("ExpiredTokenException"));
        assert_eq!(
            e.message(),
            "The security token included in the request is expired"
        );
        // No type anywhere: the status decides.
        assert_eq!(err(503, None, "").kind(), ErrorKind::Overloaded);
        assert_eq!(
            err(502, None, "<html>bad gateway</html>").kind(),
            ErrorKind::ServerError
        );
        assert_eq!(
            err(429, None, r#"{"message":"slow down"}"#).kind(),
            ErrorKind::RateLimited
        );
    }

    #[test]
    fn stream_exceptions() {
        for (t, message, kind) in [
            (
                "throttlingException",
                "Too many tokens, please wait before trying again.",
                ErrorKind::RateLimited,
            ),
            (
                "modelStreamErrorException",
                "Model stream error",
                ErrorKind::ServerError,
            ),
            (
                "serviceUnavailableException",
                "Bedrock is unable to process your request.",
                ErrorKind::Overloaded,
            ),
            (
                "validationException",
                "Input is too long for requested model.",
                ErrorKind::ContextLengthExceeded,
            ),
            (
                "validationException",
                "messages.1: roles must alternate",
                ErrorKind::InvalidRequest,
            ),
            (
                "internalServerException",
                "internal error",
                ErrorKind::ServerError,
            ),
        ] {
            let payload = serde_json::json!({ "message": message }).to_string();
            let e = from_exception(t, payload.as_bytes(), None);
            assert_eq!(e.kind(), kind, "{t}");
            assert_eq!(e.message(), message);
            assert!(e.request_delivered());
        }
        let e = from_exception("internalFailure", b"", Some("boom"));
        assert_eq!((e.kind(), e.message()), (ErrorKind::ServerError, "boom"));
    }
}
