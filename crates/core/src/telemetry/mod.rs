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
//!   in-process model), with the outcome recorded by [`traced_chat`] / [`traced_stream`]
//!   (built on [`record_response`], [`record_first_chunk`], [`record_usage`] and
//!   [`record_error`]).
//!
//! # Who records attempt spans
//!
//! - **ripcord's HTTP adapters record their own**: `OpenAi`, `Anthropic`, `AzureOpenAi` and the
//!   OpenAI-compatible presets of `ripcord-providers` open one attempt span per call. A link
//!   composed by hand — `OpenAi::new(cfg)?.with_retry(layer)` — has one span per retry attempt
//!   with nothing else to add. Do not wrap them in a [`TracedModel`]: that would give each
//!   attempt two spans.
//! - **Any other model** (the local ONNX model, your own `ChatModel`) records nothing itself;
//!   one line gives it attempt spans, placed inside any retry decorator so each retry is its
//!   own span: `TracedModel::new(model, telemetry::provider::LOCAL_ONNX)`.
//!
//! # Event names
//!
//! Every event a ripcord crate emits is named by a constant of [`event`] (listed in
//! [`event::ALL`]) and written `tracing::info!(field = …, message = event::NAME)`: the
//! exporter and the metrics layer match on the same constants, and a test holds the
//! vocabulary and the emitters to each other.
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

use std::sync::atomic::{AtomicBool, Ordering};

mod names;
mod spans;
mod traced;

pub use names::{attr, event, operation, provider, span_name};
pub use spans::{
    attempt_span, chain_span, record_error, record_finish, record_first_chunk, record_prompt,
    record_response, record_served, record_usage,
};
pub(crate) use traced::in_span;
pub use traced::{TracedModel, traced_chat, traced_stream};

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
        ("bedrock", provider::AWS_BEDROCK),
        ("aws-bedrock", provider::AWS_BEDROCK),
        ("aws.bedrock", provider::AWS_BEDROCK),
        ("mistral", provider::MISTRAL_AI),
        ("mistral_ai", provider::MISTRAL_AI),
        ("groq", provider::GROQ),
        ("xai", provider::XAI),
        ("x_ai", provider::XAI),
        ("openrouter", provider::OPENROUTER),
        ("together", provider::TOGETHER),
        ("together_ai", provider::TOGETHER),
        ("fireworks", provider::FIREWORKS),
        ("fireworks_ai", provider::FIREWORKS),
        ("cerebras", provider::CEREBRAS),
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
}
