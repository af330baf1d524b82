//! Names and span helpers for instrumenting ripcord with `tracing`, following the OpenTelemetry
//! GenAI semantic conventions.
//!
//! # Why this lives in core, and why it is only `tracing`
//!
//! Library crates instrument with `tracing` only: a user who never installs a subscriber pays a
//! cached "not interested" check per call site and nothing else — no allocation, no formatting,
//! no OpenTelemetry dependency. `ripcord-telemetry` (or any `tracing` subscriber) turns the spans
//! and events below into OTLP traces and metrics. Keeping the names here, next to the types they
//! describe, means every crate (vendor adapters, the local model, the resilience decorators, the
//! chain) spells them the same way and the exporter can rely on them.
//!
//! # The shape of a call
//!
//! - One [`chain_span`] per chain call (`ripcord.chain`, OTel name `chain {name}`, kind
//!   INTERNAL), with events for what the chain decided: [`event::LINK_SKIPPED`],
//!   [`event::LINK_FAILED`], [`event::FALLBACK`], [`event::STATIC_REPLY`],
//!   [`event::STREAM_RESTARTED`].
//! - One [`attempt_span`] per request to a model (`ripcord.attempt`, OTel name
//!   `{gen_ai.operation.name} {gen_ai.request.model}`, kind CLIENT, or INTERNAL for an
//!   in-process model), recorded by the adapter with [`record_response`], [`record_first_chunk`],
//!   [`record_usage`] and [`record_error`] — or by wrapping any model in a [`TracedModel`].
//!
//! Every attribute a span will ever carry is declared when it is created (as
//! [`tracing::field::Empty`] until known), because `tracing` ignores recordings of undeclared
//! fields.
//!
//! Prompt and completion text are recorded only after [`set_content_recording`]`(true)`; API
//! keys never: no helper here takes a key, a header or a URL with credentials.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use ripcord_core::telemetry::{self, SpanKind};
//! use ripcord_core::{ChatResponse, Error, ErrorKind, ModelId, Usage};
//!
//! let id = ModelId::new("primary", "gpt-4o");
//! let span = telemetry::attempt_span(
//!     telemetry::operation::CHAT,
//!     telemetry::provider::OPENAI,
//!     &id,
//!     false,
//!     Some("api.openai.com"),
//!     SpanKind::Client,
//! );
//! // ... send the request inside the span ...
//! let reply = ChatResponse::new("Rayleigh scattering.").with_model("gpt-4o-2024-08-06").with_usage(Usage::new(12, 5));
//! telemetry::record_first_chunk(&span, Duration::from_millis(180));
//! telemetry::record_response(&span, &reply);
//! // or, on failure:
//! telemetry::record_error(&span, &Error::new(ErrorKind::Overloaded, "busy"));
//! ```

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;
use tracing::Span;
use tracing::field::Empty;

use crate::capabilities::{Capabilities, Locality};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::model::{ChatModel, ModelId};
use crate::request::{ChatRequest, ContentPart};
use crate::response::{ChatResponse, FinishReason, Provenance, Usage};
use crate::stream::{ChatStream, StreamEvent};

/// Span names (the `tracing` name; the OpenTelemetry name comes from the `otel.name` field).
pub mod span_name {
    /// A chain call ([`super::chain_span`]).
    pub const CHAIN: &str = "ripcord.chain";
    /// One request to one model ([`super::attempt_span`]).
    pub const ATTEMPT: &str = "ripcord.attempt";
}

/// Values of `gen_ai.operation.name`.
pub mod operation {
    /// Chat completion.
    pub const CHAT: &str = "chat";
    /// Embeddings.
    pub const EMBEDDINGS: &str = "embeddings";
}

/// Values of `gen_ai.provider.name` for ripcord's vendors.
///
/// Registered values of the GenAI semantic conventions where one exists (`openai`, `anthropic`,
/// `azure.ai.openai`, `deepseek`); stable custom values in the same style otherwise. The
/// deprecated `gen_ai.system` attribute is never written.
pub mod provider {
    /// OpenAI (registered).
    pub const OPENAI: &str = "openai";
    /// Anthropic (registered).
    pub const ANTHROPIC: &str = "anthropic";
    /// Azure OpenAI (registered).
    pub const AZURE_OPENAI: &str = "azure.ai.openai";
    /// DeepSeek (registered).
    pub const DEEPSEEK: &str = "deepseek";
    /// Zhipu AI (GLM); not registered, custom.
    pub const ZHIPU: &str = "zhipu_ai";
    /// Alibaba Cloud DashScope (Qwen); not registered, custom.
    pub const DASHSCOPE: &str = "alibaba.dashscope";
    /// Moonshot AI (Kimi); not registered, custom.
    pub const MOONSHOT: &str = "moonshot_ai";
    /// Baidu Qianfan (ERNIE); not registered, custom.
    pub const QIANFAN: &str = "baidu.qianfan";
    /// Ollama; not registered, custom.
    pub const OLLAMA: &str = "ollama";
    /// vLLM; not registered, custom.
    pub const VLLM: &str = "vllm";
    /// ripcord's in-process ONNX Runtime model; custom.
    pub const LOCAL_ONNX: &str = "ripcord.local_onnx";
}

/// Attribute (field) names.
pub mod attr {
    /// `gen_ai.operation.name`: [`super::operation`].
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    /// `gen_ai.provider.name`: [`super::provider`].
    pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// `gen_ai.request.model`: the model asked for.
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    /// `gen_ai.request.stream`: whether the answer was streamed.
    pub const REQUEST_STREAM: &str = "gen_ai.request.stream";
    /// `gen_ai.response.model`: the model that answered, as the vendor named it.
    pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// `gen_ai.response.finish_reasons`. `tracing` has no array values, so spans carry the
    /// reasons comma-separated; `ripcord-telemetry` exports them as a string array.
    pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// `gen_ai.usage.input_tokens`.
    pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// `gen_ai.usage.output_tokens`.
    pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// `gen_ai.response.time_to_first_chunk`, in seconds.
    pub const RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
    /// `gen_ai.input.messages`: the prompt, as JSON (only when content recording is on).
    pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
    /// `gen_ai.output.messages`: the completion, as JSON (only when content recording is on).
    pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
    /// `server.address`: the vendor's host.
    pub const SERVER_ADDRESS: &str = "server.address";
    /// `error.type`: ripcord's snake_case [`crate::ErrorKind`].
    pub const ERROR_TYPE: &str = "error.type";
    /// `otel.name`: the OpenTelemetry span name (read by `tracing-opentelemetry`).
    pub const OTEL_NAME: &str = "otel.name";
    /// `otel.kind`: `client` or `internal`.
    pub const OTEL_KIND: &str = "otel.kind";
    /// `otel.status_code`: `ERROR` on failure.
    pub const OTEL_STATUS_CODE: &str = "otel.status_code";
    /// `otel.status_description`: a short failure description (kind, HTTP status, vendor code).
    pub const OTEL_STATUS_DESCRIPTION: &str = "otel.status_description";

    /// `ripcord.link`: the chain link's name ([`crate::ModelId::name`]).
    pub const LINK: &str = "ripcord.link";
    /// `ripcord.attempt`: the position of an attempt within its call (1-based).
    pub const ATTEMPT: &str = "ripcord.attempt";
    /// `ripcord.chain`: the chain's name.
    pub const CHAIN: &str = "ripcord.chain";
    /// `ripcord.chain.links`: how many links the chain has.
    pub const CHAIN_LINKS: &str = "ripcord.chain.links";
    /// `ripcord.attempts`: how many attempts a chain call made.
    pub const ATTEMPTS: &str = "ripcord.attempts";
    /// `ripcord.degraded`: the answer came from a fallback or is the static reply.
    pub const DEGRADED: &str = "ripcord.degraded";
    /// `ripcord.served_by`: the link that served the answer (`static` for the static reply).
    pub const SERVED_BY: &str = "ripcord.served_by";
    /// `ripcord.static_reply`: the answer is the static last-resort reply.
    pub const STATIC_REPLY: &str = "ripcord.static_reply";
    /// `ripcord.cost_usd`: estimated cost of an answer in USD.
    pub const COST_USD: &str = "ripcord.cost_usd";
    /// `ripcord.usage.cached_input_tokens`: prompt tokens served from the vendor's cache.
    pub const CACHED_INPUT_TOKENS: &str = "ripcord.usage.cached_input_tokens";
    /// `ripcord.fallback.from`: the link that failed (on [`super::event::FALLBACK`]).
    pub const FALLBACK_FROM: &str = "ripcord.fallback.from";
    /// `ripcord.fallback.to`: the link tried next (on [`super::event::FALLBACK`]).
    pub const FALLBACK_TO: &str = "ripcord.fallback.to";
    /// `ripcord.skip.reason`: why a link was skipped (on [`super::event::LINK_SKIPPED`]).
    pub const SKIP_REASON: &str = "ripcord.skip.reason";
    /// `ripcord.tenant`: the tenant a call was charged to (on [`super::event::TENANT_USAGE`];
    /// the tenant of the caller's key, never a sub-tenant, so the values stay few).
    pub const TENANT: &str = "ripcord.tenant";
}

/// Event names (the message of a `tracing` event, which `tracing-opentelemetry` uses as the
/// span event's name).
pub mod event {
    /// The chain passed over a link without calling it (`ripcord.link`, `ripcord.skip.reason`).
    pub const LINK_SKIPPED: &str = "ripcord.link_skipped";
    /// A link's attempt failed (`ripcord.link`, `error.type`, `ripcord.attempt`, `latency_ms`).
    pub const LINK_FAILED: &str = "ripcord.link_failed";
    /// The chain moved on to another link after a failure (`ripcord.fallback.from`,
    /// `ripcord.fallback.to`, `error.type`).
    pub const FALLBACK: &str = "ripcord.fallback";
    /// The chain answered with its static reply (`error.type` of the last failure).
    pub const STATIC_REPLY: &str = "ripcord.static_reply";
    /// A committed stream failed and restarted on another link (`ripcord.fallback.from`,
    /// `ripcord.fallback.to`, `error.type`).
    pub const STREAM_RESTARTED: &str = "ripcord.stream_restarted";
    /// A committed stream failed and ended with the error (`ripcord.link`, `error.type`).
    pub const STREAM_FAILED: &str = "ripcord.stream_failed_after_commit";
    /// The chain waits for a cooling-down link (`wait_ms`).
    pub const READMISSION_WAIT: &str = "ripcord.readmission_wait";
    /// A retry decorator scheduled another attempt (`link`, `attempt`, `delay_ms`, `error.type`).
    pub const RETRY_SCHEDULED: &str = "ripcord.retry_scheduled";
    /// A vendor stream event that could not be parsed was skipped (`ripcord.link`,
    /// `ripcord.skipped_events`: how many this stream skipped so far, `error.message`).
    pub const STREAM_EVENT_SKIPPED: &str = "ripcord.stream_event_skipped";
    /// A circuit breaker changed state (`link`, `from`, `to`; states `closed`, `open`,
    /// `half_open`).
    pub const BREAKER_TRANSITION: &str = "ripcord.breaker_transition";
    /// Shared resilience state (Redis) became unreachable: the process runs on local state
    /// until it is back (`reason`). Said once per outage, not per request.
    pub const STATE_DEGRADED: &str = "ripcord.state_degraded";
    /// Shared resilience state is reachable again after [`STATE_DEGRADED`].
    pub const STATE_RESTORED: &str = "ripcord.state_restored";
    /// A link failed with a kind an operator must act on (`ripcord.link`, `error.type`,
    /// `ripcord.alert.suppressed`); at most one per link and kind per interval, see
    /// [`crate::alert`].
    pub const ALERT: &str = crate::alert::EVENT;
    /// A gateway call was answered for a tenant (`ripcord.tenant`,
    /// `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`, and `ripcord.cost_usd` when
    /// the price is known).
    pub const TENANT_USAGE: &str = "ripcord.tenant_usage";
}

/// The OpenTelemetry span kind of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpanKind {
    /// A request to a remote service (every HTTP vendor).
    Client,
    /// Work done in this process (the local ONNX model, chains).
    Internal,
}

impl SpanKind {
    /// The `otel.kind` value: `client` or `internal`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SpanKind::Client => "client",
            SpanKind::Internal => "internal",
        }
    }
}

/// The `gen_ai.provider.name` value for one of ripcord's vendor names (the provider presets and
/// cargo features: `openai`, `anthropic`, `azure`, `deepseek`, `zhipu`, `qwen`, `moonshot`,
/// `qianfan`, `ollama`, `vllm`, `local`), case-insensitive, with common aliases. `None` for
/// anything else.
///
/// # Examples
///
/// ```
/// use ripcord_core::telemetry::provider_name;
/// assert_eq!(provider_name("azure"), Some("azure.ai.openai"));
/// assert_eq!(provider_name("Qwen"), Some("alibaba.dashscope"));
/// assert_eq!(provider_name("zhipu"), Some("zhipu_ai"));
/// assert_eq!(provider_name("acme"), None);
/// ```
pub fn provider_name(vendor: &str) -> Option<&'static str> {
    const TABLE: &[(&str, &str)] = &[
        ("openai", provider::OPENAI),
        ("anthropic", provider::ANTHROPIC),
        ("claude", provider::ANTHROPIC),
        ("azure", provider::AZURE_OPENAI),
        ("azure_openai", provider::AZURE_OPENAI),
        ("azure.ai.openai", provider::AZURE_OPENAI),
        ("deepseek", provider::DEEPSEEK),
        ("zhipu", provider::ZHIPU),
        ("zhipu_ai", provider::ZHIPU),
        ("glm", provider::ZHIPU),
        ("qwen", provider::DASHSCOPE),
        ("dashscope", provider::DASHSCOPE),
        ("alibaba.dashscope", provider::DASHSCOPE),
        ("moonshot", provider::MOONSHOT),
        ("moonshot_ai", provider::MOONSHOT),
        ("kimi", provider::MOONSHOT),
        ("qianfan", provider::QIANFAN),
        ("baidu", provider::QIANFAN),
        ("baidu.qianfan", provider::QIANFAN),
        ("ernie", provider::QIANFAN),
        ("ollama", provider::OLLAMA),
        ("vllm", provider::VLLM),
        ("local", provider::LOCAL_ONNX),
        ("local_onnx", provider::LOCAL_ONNX),
        ("local-onnx", provider::LOCAL_ONNX),
        ("ripcord.local_onnx", provider::LOCAL_ONNX),
    ];
    TABLE
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(vendor))
        .map(|&(_, v)| v)
}

static RECORD_CONTENT: AtomicBool = AtomicBool::new(false);

/// Turns recording of prompt and completion text (`gen_ai.input.messages`,
/// `gen_ai.output.messages`) on or off for the whole process. Off by default: prompts and
/// answers often hold personal data. `ripcord-telemetry` sets it from its builder.
pub fn set_content_recording(on: bool) {
    RECORD_CONTENT.store(on, Ordering::Relaxed);
}

/// True when prompt and completion text are recorded (see [`set_content_recording`]).
pub fn content_recording() -> bool {
    RECORD_CONTENT.load(Ordering::Relaxed)
}

/// Clamps a token count into the `i64` that span attributes carry.
fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A span for one request to one model, named `{operation} {model}` (e.g. `chat gpt-4o`).
///
/// `provider_name` is the `gen_ai.provider.name` value (see [`provider`] and
/// [`provider_name`]); `server_address` is the vendor's host name (never a URL with a key in
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
        "ripcord.attempt",
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
        "ripcord.chain",
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
                })
                .collect();
            serde_json::json!({"role": m.role.as_str(), "parts": parts})
        })
        .collect();
    serde_json::Value::Array(messages).to_string()
}

fn output_messages_json(resp: &ChatResponse) -> String {
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

/// A decorator that puts every call of a model in an [`attempt_span`] and records its
/// outcome: the easiest way to instrument a model that does not do it itself.
///
/// Place it *inside* a retry decorator so that each retry is its own attempt span:
/// `Retry(TracedModel(vendor))`. Streams keep the span open until they end or are dropped,
/// and record the time to the first content event, usage and finish reason.
///
/// # Examples
///
/// ```
/// use ripcord_core::telemetry::{self, SpanKind, TracedModel};
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let model = TracedModel::new(ScriptedModel::new("primary").reply("hi"), telemetry::provider::OPENAI)
///     .with_server_address("api.openai.com");
/// let r = model.chat(&ChatRequest::user("hello"), &Context::new()).await.unwrap();
/// assert_eq!(r.text(), "hi");
/// # }
/// ```
#[derive(Debug)]
pub struct TracedModel<M> {
    inner: M,
    provider_name: &'static str,
    server_address: Option<String>,
    kind: SpanKind,
}

impl<M: ChatModel> TracedModel<M> {
    /// Wraps `inner`; `provider_name` is its `gen_ai.provider.name` (see [`provider`]). The span
    /// kind is CLIENT, or INTERNAL when the model's capabilities say it runs locally.
    pub fn new(inner: M, provider_name: &'static str) -> Self {
        let kind = match inner.capabilities().locality {
            Locality::Local => SpanKind::Internal,
            _ => SpanKind::Client,
        };
        TracedModel {
            inner,
            provider_name,
            server_address: None,
            kind,
        }
    }

    /// Sets `server.address` (a host name; never a URL with credentials).
    pub fn with_server_address(mut self, host: impl Into<String>) -> Self {
        self.server_address = Some(host.into());
        self
    }

    /// Overrides the span kind.
    pub fn with_kind(mut self, kind: SpanKind) -> Self {
        self.kind = kind;
        self
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// Unwraps the model.
    pub fn into_inner(self) -> M {
        self.inner
    }

    fn span(&self, stream: bool) -> Span {
        attempt_span(
            operation::CHAT,
            self.provider_name,
            self.inner.id(),
            stream,
            self.server_address.as_deref(),
            self.kind,
        )
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for TracedModel<M> {
    fn id(&self) -> &ModelId {
        self.inner.id()
    }

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        use tracing::Instrument;
        let span = self.span(false);
        record_prompt(&span, req);
        let result = self.inner.chat(req, ctx).instrument(span.clone()).await;
        match &result {
            Ok(resp) => record_response(&span, resp),
            Err(e) => record_error(&span, e),
        }
        result
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        use tracing::Instrument;
        let span = self.span(true);
        record_prompt(&span, req);
        let started = tokio::time::Instant::now();
        match self.inner.stream(req, ctx).instrument(span.clone()).await {
            Ok(stream) if span.is_disabled() => Ok(stream),
            Ok(stream) => Ok(Box::pin(TracedStream {
                inner: stream,
                span,
                started,
                first_seen: false,
                text: content_recording().then(String::new),
            })),
            Err(e) => {
                record_error(&span, &e);
                Err(e)
            }
        }
    }

    fn bounds_itself(&self) -> bool {
        self.inner.bounds_itself()
    }
}

/// A stream that polls its inner stream inside a span and records what passes.
struct TracedStream {
    inner: ChatStream,
    span: Span,
    started: tokio::time::Instant,
    first_seen: bool,
    /// The completion so far, kept only when content recording is on.
    text: Option<String>,
}

impl Stream for TracedStream {
    type Item = Result<StreamEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let polled = {
            let _entered = this.span.enter();
            this.inner.as_mut().poll_next(cx)
        };
        if let Poll::Ready(Some(item)) = &polled {
            match item {
                Ok(ev) => {
                    if !this.first_seen && ev.is_content() {
                        this.first_seen = true;
                        record_first_chunk(&this.span, this.started.elapsed());
                    }
                    match ev {
                        StreamEvent::TextDelta { text } => {
                            if let Some(acc) = this.text.as_mut() {
                                acc.push_str(text);
                            }
                        }
                        StreamEvent::Usage { usage } => record_usage(&this.span, usage),
                        StreamEvent::Finish { reason, model } => {
                            record_finish(&this.span, reason, model.as_deref());
                            if let Some(acc) = this.text.take() {
                                let resp =
                                    ChatResponse::new(acc).with_finish_reason(reason.clone());
                                this.span.record(
                                    attr::OUTPUT_MESSAGES,
                                    output_messages_json(&resp).as_str(),
                                );
                            }
                        }
                        StreamEvent::Restarted { .. } => {
                            if let Some(acc) = this.text.as_mut() {
                                acc.clear();
                            }
                        }
                        _ => {}
                    }
                }
                Err(e) => record_error(&this.span, e),
            }
        }
        polled
    }
}

/// Polls a chain's stream inside the chain span, so the span lives as long as the stream.
/// Returns the stream unchanged (no allocation) when the span is disabled.
pub(crate) fn in_span(stream: ChatStream, span: Span) -> ChatStream {
    if span.is_disabled() {
        return stream;
    }
    Box::pin(InSpan {
        inner: stream,
        span,
    })
}

struct InSpan {
    inner: ChatStream,
    span: Span,
}

impl Stream for InSpan {
    type Item = Result<StreamEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        this.inner.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vendor_maps_to_a_provider_name_and_unknown_ones_do_not() {
        for (vendor, want) in [
            ("openai", "openai"),
            ("anthropic", "anthropic"),
            ("azure", "azure.ai.openai"),
            ("deepseek", "deepseek"),
            ("zhipu", "zhipu_ai"),
            ("qwen", "alibaba.dashscope"),
            ("moonshot", "moonshot_ai"),
            ("qianfan", "baidu.qianfan"),
            ("ollama", "ollama"),
            ("vllm", "vllm"),
            ("OpenAI", "openai"),
        ] {
            assert_eq!(provider_name(vendor), Some(want), "{vendor}");
        }
        assert_eq!(provider_name("gen_ai.system"), None);
        assert_eq!(provider_name(""), None);
    }

    #[test]
    fn span_kinds_use_the_otel_kind_spelling() {
        assert_eq!(SpanKind::Client.as_str(), "client");
        assert_eq!(SpanKind::Internal.as_str(), "internal");
    }

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
