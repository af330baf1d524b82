//! The Messages wire's vocabulary in the other direction: ripcord's neutral values as
//! Anthropic names them, for servers that answer on Anthropic's wire (the gateway's
//! `/v1/messages`).
//!
//! Each function is the inverse of the adapter's own mapping (`stop_reason` for responses, the
//! error table for errors, the usage split), kept beside it so the two cannot drift: the tests
//! below feed every value through both directions.

use ripcord_core::{ErrorKind, FinishReason, Usage};

/// The `stop_reason` for a neutral finish reason: `end_turn`, `max_tokens`, `tool_use`,
/// `refusal`; a vendor value ripcord does not know (`Other`) is passed on as it was.
///
/// # Examples
///
/// ```
/// use ripcord_core::FinishReason;
/// use ripcord_providers::anthropic_wire::stop_reason;
/// assert_eq!(stop_reason(&FinishReason::ToolCalls), "tool_use");
/// ```
pub fn stop_reason(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter => "refusal",
        FinishReason::Other(s) => s,
        // A reason added to the neutral set later: Anthropic's plain "the model stopped".
        _ => "end_turn",
    }
}

/// The HTTP status and Anthropic error `type` for an error kind
/// (<https://docs.anthropic.com/en/api/errors>). Refusals ripcord raises itself take the
/// nearest vendor meaning: an open breaker or an overloaded vendor is `overloaded_error`
/// (529), a local limit or spent budget is `rate_limit_error` (429), a deadline is
/// `timeout_error` (504).
///
/// # Examples
///
/// ```
/// use ripcord_core::ErrorKind;
/// use ripcord_providers::anthropic_wire::error_type;
/// assert_eq!(error_type(ErrorKind::Overloaded), (529, "overloaded_error"));
/// ```
pub fn error_type(kind: ErrorKind) -> (u16, &'static str) {
    match kind {
        ErrorKind::InvalidRequest
        | ErrorKind::ContextLengthExceeded
        | ErrorKind::ContentFiltered => (400, "invalid_request_error"),
        ErrorKind::Auth => (401, "authentication_error"),
        ErrorKind::QuotaExhausted => (402, "billing_error"),
        ErrorKind::PermissionDenied | ErrorKind::RegionBlocked => (403, "permission_error"),
        ErrorKind::ModelNotFound => (404, "not_found_error"),
        ErrorKind::PayloadTooLarge => (413, "request_too_large"),
        ErrorKind::RateLimited | ErrorKind::LocalRateLimited | ErrorKind::BudgetExhausted => {
            (429, "rate_limit_error")
        }
        ErrorKind::Overloaded | ErrorKind::CircuitOpen => (529, "overloaded_error"),
        ErrorKind::Timeout | ErrorKind::DeadlineExceeded => (504, "timeout_error"),
        _ => (500, "api_error"),
    }
}

/// Anthropic's usage split: `(input_tokens, cache_read_input_tokens, output_tokens)`.
/// Anthropic's `input_tokens` excludes cache reads, ripcord's includes them.
///
/// # Examples
///
/// ```
/// use ripcord_core::Usage;
/// use ripcord_providers::anthropic_wire::usage;
/// assert_eq!(usage(&Usage::new(120, 9).with_cached_input(100)), (20, 100, 9));
/// ```
pub fn usage(u: &Usage) -> (u64, u64, u64) {
    let cached = u.cached_input_tokens.min(u.input_tokens);
    (u.input_tokens - cached, cached, u.output_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::request::JsonMode;
    use crate::anthropic::response::{WireUsage, stop_reason as parse_stop};
    use crate::error_body::ErrorBody;
    use crate::stream_end::WireTokens;

    #[test]
    fn stop_reasons_round_trip_through_the_adapter() {
        for r in [
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::ToolCalls,
            FinishReason::ContentFilter,
            FinishReason::Other("pause_turn".into()),
        ] {
            assert_eq!(parse_stop(stop_reason(&r), JsonMode(false)), r);
        }
    }

    #[test]
    fn error_types_classify_back_to_their_kind() {
        // Every kind a vendor can cause comes back as itself through the adapter's table.
        for kind in [
            ErrorKind::InvalidRequest,
            ErrorKind::Auth,
            ErrorKind::QuotaExhausted,
            ErrorKind::PermissionDenied,
            ErrorKind::ModelNotFound,
            ErrorKind::PayloadTooLarge,
            ErrorKind::RateLimited,
            ErrorKind::Overloaded,
            ErrorKind::ServerError,
        ] {
            let (status, ty) = error_type(kind);
            let body = format!(r#"{{"type":"error","error":{{"type":"{ty}","message":"x"}}}}"#);
            let b = ErrorBody::parse(body.as_bytes()).unwrap();
            let e = crate::anthropic::error_map::from_body(Some(status), &b);
            assert_eq!(e.kind(), kind, "{ty} ({status})");
        }
        // ripcord's own refusals keep their retry meaning.
        assert_eq!(error_type(ErrorKind::CircuitOpen).0, 529);
        assert_eq!(error_type(ErrorKind::BudgetExhausted).0, 429);
        assert_eq!(error_type(ErrorKind::DeadlineExceeded).0, 504);
    }

    #[test]
    fn usage_round_trips_through_the_adapter() {
        let u = Usage::new(125, 15).with_cached_input(100);
        let (input, read, output) = usage(&u);
        let back = WireUsage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cache_read_input_tokens: Some(read),
            cache_creation_input_tokens: None,
        }
        .to_usage(None);
        assert_eq!(
            (
                back.input_tokens,
                back.cached_input_tokens,
                back.output_tokens
            ),
            (125, 100, 15)
        );
    }
}
