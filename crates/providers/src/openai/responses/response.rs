//! The Response object → [`ChatResponse`], and the pieces the stream shares: usage, the finish
//! reason of a final status, and the classification of a failed response.
//!
//! - `completed` is a stop, or `tool_calls` when the output has function calls;
//! - `incomplete` with `max_output_tokens` is `length`; with `content_filter` it is a
//!   content-filter stop (an error when nothing came before it, as on every adapter);
//! - `failed` is its `error` classified with the chat adapter's table (`rate_limit_exceeded` is
//!   a rate limit, `insufficient_quota` a spent quota, `server_error` a server error, …);
//! - `queued`, `in_progress` and `cancelled` are not answers (ripcord never asks for
//!   background responses): an invalid response.

use ripcord_core::{
    ChatResponse, Error, ErrorKind, FinishReason, Price, ReasoningBlock, Result, ToolCall, Usage,
};

use crate::error_body::{ErrorBody, ErrorHook, read_ok_body};
use crate::openai::error_map;
use crate::openai::responses_wire as wire;

/// Token counts, cached input included.
pub(super) fn usage(u: &wire::Usage, price: Option<&Price>) -> Usage {
    Usage::new(u.input_tokens, u.output_tokens)
        .with_cached_input(u.input_tokens_details.cached_tokens)
        .priced(price)
}

/// The error of a `failed` response, or of an in-band `error` event, classified like an HTTP
/// error without a status.
pub(super) fn classified(
    code: Option<&str>,
    error_type: Option<&str>,
    message: &str,
    hook: Option<ErrorHook>,
) -> Error {
    let mut b = ErrorBody::with_message(if message.is_empty() {
        "the vendor reported an error"
    } else {
        message
    });
    b.code = code.filter(|c| !c.is_empty()).map(str::to_owned);
    b.error_type = error_type.filter(|t| !t.is_empty()).map(str::to_owned);
    if b.error_type.is_none() && code.is_some_and(|c| REQUEST_ERROR_CODES.contains(&c)) {
        // The flat `error` event has no `type`; these codes only ever come with
        // `invalid_request_error` in OpenAI's HTTP bodies, so they are the request's fault.
        b.error_type = Some("invalid_request_error".to_owned());
    }
    error_map::from_body(None, &b, hook)
}

/// OpenAI's parameter-error codes (<https://platform.openai.com/docs/guides/error-codes>), which
/// an in-band `error` event carries without the `invalid_request_error` type that says so.
const REQUEST_ERROR_CODES: &[&str] = &[
    "invalid_value",
    "invalid_type",
    "missing_required_parameter",
    "unknown_parameter",
    "unsupported_parameter",
    "unsupported_value",
    "integer_below_min_value",
    "integer_above_max_value",
    "string_above_max_length",
    "array_above_max_length",
    "empty_array",
    "invalid_function_parameters",
];

/// The error of a response whose status is `failed`.
pub(super) fn failed(r: &wire::Response, hook: Option<ErrorHook>) -> Error {
    match &r.error {
        Some(e) => classified(Some(&e.code), None, &e.message, hook),
        None => Error::new(
            ErrorKind::ServerError,
            "the response failed without an error object",
        ),
    }
}

/// The finish reason of a final response (`completed` or `incomplete`); any other status is an
/// error.
pub(super) fn finish(
    r: &wire::Response,
    tool_calls: bool,
    hook: Option<ErrorHook>,
) -> Result<FinishReason> {
    match r.status {
        Some(wire::ResponseStatus::Completed) | None => Ok(if tool_calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        }),
        Some(wire::ResponseStatus::Incomplete) => {
            let reason = r
                .incomplete_details
                .as_ref()
                .and_then(|d| d.reason.as_deref())
                .unwrap_or("");
            Ok(match reason {
                "max_output_tokens" | "max_tokens" => FinishReason::Length,
                "content_filter" => FinishReason::ContentFilter,
                "" => FinishReason::Other("incomplete".to_owned()),
                other => FinishReason::Other(other.to_owned()),
            })
        }
        Some(wire::ResponseStatus::Failed) => Err(failed(r, hook)),
        Some(other) => Err(Error::new(
            ErrorKind::InvalidResponse,
            format!("the response is not finished (status {other:?})"),
        )),
    }
}

/// A reasoning item as a thinking block: its reasoning text when the model returns it, else
/// its summary parts set off by blank lines; `None` when it shows neither. Its
/// `encrypted_content` is OpenAI's own state for OpenAI's next turn and is not kept: no other
/// vendor can read it, and ripcord does not ask for it.
fn reasoning_block(item: &wire::ReasoningItem) -> Option<ReasoningBlock> {
    let content: Vec<&str> = item
        .content
        .iter()
        .flatten()
        .map(|c| match c {
            wire::ReasoningContent::ReasoningText(t) => t.text.as_str(),
        })
        .filter(|t| !t.is_empty())
        .collect();
    let parts: Vec<&str> = if content.is_empty() {
        item.summary
            .iter()
            .map(|p| match p {
                wire::SummaryPart::SummaryText(t) => t.text.as_str(),
            })
            .filter(|t| !t.is_empty())
            .collect()
    } else {
        content
    };
    (!parts.is_empty()).then(|| ReasoningBlock::thinking(parts.join("\n\n")))
}

/// Parses a 200 body of `POST /v1/responses`. An error object in it (or a `failed` response)
/// is classified like an HTTP error.
pub(crate) fn parse(
    body: &[u8],
    hook: Option<ErrorHook>,
    price: Option<&Price>,
) -> Result<ChatResponse> {
    let r: wire::Response = read_ok_body(
        body,
        "the responses body is not a valid Response object",
        hook,
    )?;
    if r.id.is_empty() && r.output.is_empty() && r.status.is_none() {
        // `{"error": …}` parses as an empty Response: classify it as the error it is.
        if let Some(b) = ErrorBody::parse(body) {
            return Err(error_map::from_body(None, &b, hook));
        }
        return Err(Error::new(
            ErrorKind::InvalidResponse,
            "the responses body has no id, status or output",
        ));
    }
    let mut text = String::new();
    let mut refusal = String::new();
    let mut calls = Vec::new();
    let mut reasoning = Vec::new();
    for item in &r.output {
        match item {
            wire::OutputItem::Message(m) => {
                for part in &m.content {
                    match part {
                        wire::OutputContent::OutputText(t) => text.push_str(&t.text),
                        wire::OutputContent::Refusal(x) => refusal.push_str(&x.refusal),
                        _ => {}
                    }
                }
            }
            wire::OutputItem::FunctionCall(f) => {
                calls.push(ToolCall::new(
                    f.call_id.clone(),
                    f.name.clone(),
                    f.arguments.clone(),
                ));
            }
            wire::OutputItem::Reasoning(item) => {
                if let Some(block) = reasoning_block(item) {
                    reasoning.push(block);
                }
            }
            // Anything else carries no answer ripcord can hand on.
            _ => {}
        }
    }
    let mut finish = finish(&r, !calls.is_empty(), hook)?;
    if text.is_empty() && !refusal.is_empty() {
        text = refusal;
        finish = FinishReason::ContentFilter;
    }
    if finish == FinishReason::ContentFilter && text.is_empty() && calls.is_empty() {
        return Err(crate::driver::refused_without_content());
    }
    let usage = r
        .usage
        .as_ref()
        .map(|u| usage(u, price))
        .unwrap_or_default();
    Ok(ChatResponse::new(text)
        .with_tool_calls(calls)
        .with_reasoning(reasoning)
        .with_finish_reason(finish)
        .with_usage(usage)
        .with_model(r.model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_v(v: serde_json::Value) -> Result<ChatResponse> {
        parse(v.to_string().as_bytes(), None, None)
    }

    fn resp(status: &str, output: serde_json::Value) -> serde_json::Value {
        json!({"id": "resp_1", "object": "response", "created_at": 1, "status": status,
               "model": "gpt-5-2025", "output": output,
               "usage": {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 20},
                         "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 4},
                         "total_tokens": 39}})
    }

    #[test]
    fn text_tool_calls_usage_and_finish() {
        let r = parse_v(resp(
            "completed",
            json!([
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "message", "id": "m", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "Hel", "annotations": []},
                             {"type": "output_text", "text": "lo", "annotations": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                 "arguments": "{\"a\":1}", "status": "completed"}
            ]),
        ))
        .unwrap();
        assert_eq!(r.text(), "Hello");
        assert_eq!(r.tool_calls, [ToolCall::new("call_1", "f", "{\"a\":1}")]);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.cached_input_tokens,
                r.usage.output_tokens
            ),
            (30, 20, 9)
        );
        assert_eq!(r.model, "gpt-5-2025");
        assert!(r.reasoning.is_empty(), "an empty summary is no reasoning");
    }

    #[test]
    fn reasoning_items_become_thinking_blocks_text_before_summary() {
        let r = parse_v(resp(
            "completed",
            json!([
                {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA",
                 "summary": [{"type": "summary_text", "text": "**Plan**"},
                             {"type": "summary_text", "text": "Add them."}]},
                {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "short"}],
                 "content": [{"type": "reasoning_text", "text": "the full reasoning"}]},
                {"type": "message", "id": "m", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "4", "annotations": []}]}
            ]),
        ))
        .unwrap();
        assert_eq!(
            r.reasoning,
            vec![
                ReasoningBlock::thinking("**Plan**\n\nAdd them."),
                ReasoningBlock::thinking("the full reasoning"),
            ]
        );
    }

    #[test]
    fn incomplete_failed_and_refused_responses() {
        let mut v = resp(
            "incomplete",
            json!([{"type": "message", "id": "m", "role": "assistant",
            "status": "incomplete", "content": [{"type": "output_text", "text": "Once upon", "annotations": []}]}]),
        );
        v["incomplete_details"] = json!({"reason": "max_output_tokens"});
        assert_eq!(
            parse_v(v.clone()).unwrap().finish_reason,
            FinishReason::Length
        );
        v["incomplete_details"] = json!({"reason": "content_filter"});
        assert_eq!(
            parse_v(v.clone()).unwrap().finish_reason,
            FinishReason::ContentFilter
        );
        v["output"] = json!([]);
        assert_eq!(parse_v(v).unwrap_err().kind(), ErrorKind::ContentFiltered);

        let refusal = resp(
            "completed",
            json!([{"type": "message", "id": "m", "role": "assistant",
            "status": "completed", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]),
        );
        let r = parse_v(refusal).unwrap();
        assert_eq!(r.text(), "I can't help with that.");
        assert_eq!(r.finish_reason, FinishReason::ContentFilter);

        for (code, kind) in [
            ("rate_limit_exceeded", ErrorKind::RateLimited),
            ("insufficient_quota", ErrorKind::QuotaExhausted),
            ("server_error", ErrorKind::ServerError),
            ("invalid_prompt", ErrorKind::ContentFiltered),
            ("context_length_exceeded", ErrorKind::ContextLengthExceeded),
        ] {
            let mut f = resp("failed", json!([]));
            f["error"] = json!({"code": code, "message": "it failed"});
            let e = parse_v(f).unwrap_err();
            assert_eq!(e.kind(), kind, "{code}");
            assert_eq!(e.vendor_code(), Some(code));
        }
        let e = parse_v(resp("in_progress", json!([]))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
    }

    #[test]
    fn error_objects_and_garbage_in_a_200() {
        let e = parse(
            br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
            None,
            None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::QuotaExhausted);
        let e = parse(b"{\"id\":", None, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        let e = parse(b"{}", None, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
    }
}
