//! Attempt and chain spans, and the helpers that record an outcome on them.

use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

use crate::error::Error;
use crate::model::ModelId;
use crate::request::{ChatRequest, ContentPart};
use crate::response::{ChatResponse, FinishReason, Provenance, Usage};

use super::{SpanKind, attr, content_recording, span_name};

/// Clamps a token count into the `i64` that span attributes carry.
fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A span for one request to one model, named `{operation} {model}` (e.g. `chat gpt-4o`).
///
/// `provider_name` is the `gen_ai.provider.name` value (see [`provider`](super::provider) and
/// [`provider_name`](super::provider_name)); `server_address` is the vendor's host name (never a URL with a key in
/// it). Every attribute the `record_*` helpers write is declared here. Enter the span (or
/// `.instrument(span)` the request future) while the request runs.
///
/// When no subscriber listens this returns a disabled span and formats nothing.
///
/// # Examples
///
/// ```
/// use ripcord_core::telemetry::{self, SpanKind};
/// use ripcord_core::ModelId;
/// let span = telemetry::attempt_span("chat", "ollama", &ModelId::new("local", "llama3.2"), true, Some("127.0.0.1"), SpanKind::Client);
/// let _entered = span.enter();
/// ```
pub fn attempt_span(
    operation: &str,
    provider_name: &str,
    id: &ModelId,
    stream: bool,
    server_address: Option<&str>,
    kind: SpanKind,
) -> Span {
    tracing::info_span!(
        span_name::ATTEMPT,
        otel.name = %format_args!("{operation} {}", id.model),
        otel.kind = kind.as_str(),
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = operation,
        gen_ai.provider.name = provider_name,
        gen_ai.request.model = &*id.model,
        gen_ai.request.stream = stream,
        server.address = server_address,
        ripcord.link = &*id.name,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        ripcord.usage.cached_input_tokens = Empty,
        ripcord.cost_usd = Empty,
        gen_ai.response.time_to_first_chunk = Empty,
        error.type = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
    )
}

/// A span for one chain call, named `chain {name}`, kind INTERNAL.
///
/// The chain creates it; the outcome is recorded with [`record_served`] or [`record_error`].
///
/// # Examples
///
/// ```
/// use ripcord_core::telemetry;
/// let span = telemetry::chain_span("main", telemetry::operation::CHAT, 3, false);
/// assert!(span.is_disabled()); // no subscriber in this example
/// ```
pub fn chain_span(name: &str, operation: &str, links: usize, stream: bool) -> Span {
    tracing::info_span!(
        span_name::CHAIN,
        otel.name = %format_args!("chain {name}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = operation,
        gen_ai.request.stream = stream,
        ripcord.chain = name,
        ripcord.chain.links = i64::try_from(links).unwrap_or(i64::MAX),
        ripcord.attempts = Empty,
        ripcord.served_by = Empty,
        ripcord.degraded = Empty,
        ripcord.static_reply = Empty,
        ripcord.continued_by = Empty,
        ripcord.continuation.offset = Empty,
        ripcord.continuation.mode = Empty,
        ripcord.continuation.reason = Empty,
        ripcord.continuations = Empty,
        error.type = Empty,
    )
}

/// Records token counts (and cost and cached tokens when known) on an attempt span.
///
/// # Examples
///
/// ```
/// use ripcord_core::{telemetry, Usage};
/// # let span = tracing::Span::none();
/// telemetry::record_usage(&span, &Usage::new(120, 40));
/// ```
pub fn record_usage(span: &Span, usage: &Usage) {
    if span.is_disabled() {
        return;
    }
    span.record(attr::USAGE_INPUT_TOKENS, as_i64(usage.input_tokens));
    span.record(attr::USAGE_OUTPUT_TOKENS, as_i64(usage.output_tokens));
    if usage.cached_input_tokens > 0 {
        span.record(attr::CACHED_INPUT_TOKENS, as_i64(usage.cached_input_tokens));
    }
    if let Some(cost) = usage.cost_usd {
        span.record(attr::COST_USD, cost);
    }
}

/// Records the finish reason and the responding model of a (streamed) answer.
///
/// # Examples
///
/// ```
/// use ripcord_core::{telemetry, FinishReason};
/// # let span = tracing::Span::none();
/// telemetry::record_finish(&span, &FinishReason::Length, Some("gpt-4o-2024-08-06"));
/// ```
pub fn record_finish(span: &Span, reason: &FinishReason, model: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    span.record(attr::RESPONSE_FINISH_REASONS, reason.as_str());
    if let Some(m) = model.filter(|m| !m.is_empty()) {
        span.record(attr::RESPONSE_MODEL, m);
    }
}

/// Records a successful answer on an attempt span: the responding model, the finish reason,
/// token usage and cost; and, only when [`content_recording`] is on, the completion.
///
/// # Examples
///
/// ```
/// use ripcord_core::{telemetry, ChatResponse, Usage};
/// # let span = tracing::Span::none();
/// telemetry::record_response(&span, &ChatResponse::new("hi").with_model("gpt-4o").with_usage(Usage::new(3, 1)));
/// ```
pub fn record_response(span: &Span, resp: &ChatResponse) {
    if span.is_disabled() {
        return;
    }
    record_finish(span, &resp.finish_reason, Some(&resp.model));
    record_usage(span, &resp.usage);
    if content_recording() {
        span.record(attr::OUTPUT_MESSAGES, output_messages_json(resp).as_str());
    }
}

/// Records the time from sending the request to the first chunk of the answer, in seconds.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::telemetry;
/// # let span = tracing::Span::none();
/// telemetry::record_first_chunk(&span, Duration::from_millis(250));
/// ```
pub fn record_first_chunk(span: &Span, elapsed: Duration) {
    span.record(attr::RESPONSE_TIME_TO_FIRST_CHUNK, elapsed.as_secs_f64());
}

/// Records a failure on an attempt or chain span: `error.type` (the snake_case kind), status
/// `ERROR` with a short description (kind, HTTP status and vendor code — never the vendor's
/// message, which may echo request data), and — when the error carries the call's attempts —
/// the attempt count and `degraded = true`, as a served call's span has them.
///
/// # Examples
///
/// ```
/// use ripcord_core::{telemetry, Error, ErrorKind, StatusCode};
/// # let span = tracing::Span::none();
/// let e = Error::new(ErrorKind::RateLimited, "slow down").with_status(StatusCode(429));
/// telemetry::record_error(&span, &e);
/// ```
pub fn record_error(span: &Span, error: &Error) {
    if span.is_disabled() {
        return;
    }
    let kind = error.kind().as_str();
    span.record(attr::ERROR_TYPE, kind);
    span.record(attr::OTEL_STATUS_CODE, "ERROR");
    // A failed call's record matches a served one's: how many attempts it made, and that no
    // full answer came (the CLI and the gateway say the same).
    if !error.attempts().is_empty() {
        span.record(
            attr::ATTEMPTS,
            i64::try_from(error.attempts().len()).unwrap_or(i64::MAX),
        );
        span.record(attr::DEGRADED, true);
    }
    match (error.status(), error.vendor_code()) {
        (Some(s), Some(c)) => span.record(
            attr::OTEL_STATUS_DESCRIPTION,
            format_args!("{kind} (HTTP {s}, {c})"),
        ),
        (Some(s), None) => span.record(
            attr::OTEL_STATUS_DESCRIPTION,
            format_args!("{kind} (HTTP {s})"),
        ),
        (None, Some(c)) => span.record(attr::OTEL_STATUS_DESCRIPTION, format_args!("{kind} ({c})")),
        (None, None) => span.record(attr::OTEL_STATUS_DESCRIPTION, kind),
    };
}

/// Records the outcome of a chain call on its span: who served, whether degraded or static,
/// how many attempts it took.
///
/// # Examples
///
/// ```
/// use ripcord_core::{telemetry, Provenance};
/// # let span = tracing::Span::none();
/// telemetry::record_served(&span, &Provenance::default());
/// ```
pub fn record_served(span: &Span, provenance: &Provenance) {
    if span.is_disabled() {
        return;
    }
    let served_by = match &provenance.served_by {
        Some(s) => s,
        None if provenance.static_reply => "static",
        None => "",
    };
    span.record(attr::SERVED_BY, served_by);
    span.record(attr::DEGRADED, provenance.degraded);
    span.record(attr::STATIC_REPLY, provenance.static_reply);
    span.record(
        attr::ATTEMPTS,
        i64::try_from(provenance.attempts.len()).unwrap_or(i64::MAX),
    );
    if let (Some(by), Some(c)) = (&provenance.continued_by, provenance.continuations.last()) {
        span.record(attr::CONTINUED_BY, &**by);
        span.record(attr::CONTINUATION_OFFSET, as_i64(c.offset));
        span.record(attr::CONTINUATION_MODE, c.mode.as_str());
        span.record(
            attr::CONTINUATION_REASON,
            crate::chain::continuation::reason_label(c.reason),
        );
        span.record(
            attr::CONTINUATIONS,
            i64::try_from(provenance.continuations.len()).unwrap_or(i64::MAX),
        );
    }
}

/// Records the prompt on an attempt span — only when [`content_recording`] is on.
///
/// # Examples
///
/// ```
/// use ripcord_core::{telemetry, ChatRequest};
/// # let span = tracing::Span::none();
/// telemetry::record_prompt(&span, &ChatRequest::user("hello")); // a no-op unless opted in
/// ```
pub fn record_prompt(span: &Span, req: &ChatRequest) {
    if span.is_disabled() || !content_recording() {
        return;
    }
    span.record(attr::INPUT_MESSAGES, input_messages_json(req).as_str());
}

/// The prompt in the GenAI conventions' message shape: `[{"role", "parts": [{"type", "content"}]}]`.
fn input_messages_json(req: &ChatRequest) -> String {
    let messages: Vec<serde_json::Value> = req
        .messages
        .iter()
        .map(|m| {
            let parts: Vec<serde_json::Value> = m
                .content
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text } => {
                        serde_json::json!({"type": "text", "content": text})
                    }
                    ContentPart::Image { .. } => serde_json::json!({"type": "image"}),
                    ContentPart::File { .. } => serde_json::json!({"type": "file"}),
                    ContentPart::Audio { .. } => serde_json::json!({"type": "audio"}),
                })
                .collect();
            serde_json::json!({"role": m.role.as_str(), "parts": parts})
        })
        .collect();
    serde_json::Value::Array(messages).to_string()
}

pub(super) fn output_messages_json(resp: &ChatResponse) -> String {
    let mut parts = Vec::new();
    if !resp.content.is_empty() {
        parts.push(serde_json::json!({"type": "text", "content": resp.content}));
    }
    for c in &resp.tool_calls {
        parts.push(serde_json::json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}));
    }
    serde_json::json!([{
        "role": "assistant",
        "parts": parts,
        "finish_reason": resp.finish_reason.as_str(),
    }])
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_json_follows_the_genai_shape() {
        let req = ChatRequest::user("Why is the sky blue?");
        let v: serde_json::Value = serde_json::from_str(&input_messages_json(&req)).unwrap();
        assert_eq!(v[0]["role"], "user");
        assert_eq!(v[0]["parts"][0]["type"], "text");
        assert_eq!(v[0]["parts"][0]["content"], "Why is the sky blue?");
        let out: serde_json::Value =
            serde_json::from_str(&output_messages_json(&ChatResponse::new("Rayleigh."))).unwrap();
        assert_eq!(out[0]["role"], "assistant");
        assert_eq!(out[0]["parts"][0]["content"], "Rayleigh.");
        assert_eq!(out[0]["finish_reason"], "stop");
    }
}
