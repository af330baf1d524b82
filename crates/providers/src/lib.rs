//! # ripcord-providers
//!
//! Vendor adapters for ripcord: each one speaks its vendor's real wire format over a pooled
//! HTTP client with rustls (hyper-util's; reqwest's when you pass one or a proxy is set, see
//! [`HttpClient`]), implements [`ripcord_core::ChatModel`] (and, for the OpenAI
//! family, [`ripcord_core::EmbeddingModel`]), and maps every failure — status, headers and
//! body — to an [`ripcord_core::ErrorKind`] so the chain can retry, fall back or fail fast
//! without parsing strings.
//!
//! ```no_run
//! use std::time::Duration;
//! use ripcord_core::{Chain, ChatModel, ChatRequest, Context};
//! use ripcord_providers::{Anthropic, OpenAi, compat};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let chain = Chain::builder()
//!     .link(OpenAi::from_env("gpt-4o")?.named("primary"))
//!     .link(Anthropic::from_env("claude-sonnet-4-5")?)
//!     .link(compat::OpenAiCompatible::new(compat::ollama(), "llama3.2", None)?)
//!     .static_reply("The assistant is busy right now; please try again in a few minutes.")
//!     .deadline(Duration::from_secs(15))
//!     .build()?;
//! let reply = chain.chat(&ChatRequest::user("Why is the sky blue?"), &Context::new()).await?;
//! println!("{} [served by {}]", reply.text(), reply.served_by());
//! # Ok(()) }
//! ```
//!
//! ## What every adapter guarantees
//!
//! - **Errors are classified** from status, headers and body (see [`error_body`]): a 429 with
//!   `insufficient_quota` is [`ErrorKind::QuotaExhausted`](ripcord_core::ErrorKind::QuotaExhausted),
//!   not a rate limit; `Retry-After` (seconds or HTTP date), `retry-after-ms` and
//!   `x-ratelimit-reset-*` become [`ripcord_core::Error::retry_after`] (see [`retry_after`]);
//!   HTML and empty error bodies are classified by status; an error object in a 200 body or
//!   in the middle of a stream is classified exactly like an HTTP error.
//! - **Four time limits** ([`Timeouts`] plus the [`ripcord_core::Context`] deadline), each
//!   reported as `Timeout { phase }`: connect, first token, stream idle, total. Cancellation
//!   through the context stops the call at once.
//! - **Streams** yield text and tool-call deltas as they arrive, usage when known, and exactly
//!   one `Finish` as the last event. A stream (or body) that ends without the vendor's
//!   terminator is a `Network` "truncated" error marked as delivered
//!   ([`ripcord_core::Error::request_delivered`]), never a short answer; a stream whose only
//!   answer is a `content_filter` / `refusal` stop is `ContentFiltered`. Dropping a stream drops
//!   the connection; nothing is spawned.
//! - **Vendor errors** are classified from status, headers and body by [`error_body`] and each
//!   preset's hook; the rows the tests replay, with the doc page each phrasing comes from, are
//!   `ripcord-chaos`'s `fixtures/vendor_errors.toml`.
//! - **API keys** live in [`secrecy::SecretString`], go out only in a sensitive header, and
//!   never appear in `Debug` output, errors or logs (vendor messages that echo a key are
//!   scrubbed).
//!
//! ## Optional features
//!
//! All are on by default; each preset pulls in `openai`, `vertex-anthropic` pulls in
//! `anthropic`.
//!
//! - `openai`: [`OpenAi`] — Chat Completions and Embeddings.
//! - `anthropic`: [`Anthropic`] — the Messages API.
//! - `azure`: [`AzureOpenAi`] — deployment URLs, `api-version`, `api-key` header.
//! - `deepseek`, `zhipu`, `qwen`, `moonshot`, `qianfan`, `ollama`, `vllm`: OpenAI-compatible
//!   presets in [`compat`] — real base URLs, model tables and each vendor's own error codes.
//! - `gemini`: [`google::Gemini`] on Google AI Studio — `generateContent`, streams, tools,
//!   JSON schemas, thinking, embeddings.
//! - `vertex`: Gemini on Vertex AI ([`google::Gemini::vertex`]) with service-account or
//!   bearer-token auth ([`google::GoogleCredentials`]).
//! - `vertex-anthropic`: Claude on Vertex AI ([`google::VertexAnthropic`]), the Anthropic wire
//!   through `rawPredict`.
//! - `bedrock`: [`Bedrock`] — AWS Bedrock's Converse and ConverseStream APIs, signed with
//!   SigV4 (`aws-sigv4`) or a Bedrock API key, the event stream decoded by
//!   `aws-smithy-eventstream`.
//! - `status-page`: [`status_page`] — parsers for the vendors' own status pages (Atlassian
//!   Statuspage JSON, RSS 2.0 / Atom by `feed-rs`), which `ripcord serve` polls.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// Without any vendor feature only the shared parsers (and Bedrock, which has its own error
// mapping) are left; their HTTP helpers idle.
#![cfg_attr(
    not(any(feature = "openai", feature = "anthropic", feature = "gemini")),
    allow(dead_code)
)]

/// The one list of the vendor adapters' features (OpenAI, Anthropic, Gemini, Bedrock). Wrapped
/// items exist only in a build with at least one of them; after `#[unused_without]`, they exist
/// always and are expected to go unused in a build with none.
macro_rules! with_any_adapter {
    (#[unused_without] $($item:item)*) => {$(
        #[cfg_attr(
            not(any(feature = "openai", feature = "anthropic", feature = "gemini", feature = "bedrock")),
            expect(unused_imports, reason = "only the vendor adapters use these; this build has none")
        )]
        $item
    )*};
    ($($item:item)*) => {$(
        #[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini", feature = "bedrock"))]
        $item
    )*};
}

with_any_adapter! {
    mod attempt;
    mod driver;
}
pub mod error_body;
mod http;
mod models;
pub mod retry_after;
pub mod sse;
mod stated_limit;
#[cfg(feature = "status-page")]
pub mod status_page;
#[cfg(test)]
mod test_support;
pub mod vendor;

#[cfg(any(feature = "anthropic", feature = "gemini", feature = "bedrock"))]
mod answer;
#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(feature = "azure")]
mod azure;
#[cfg(feature = "bedrock")]
mod bedrock;
#[cfg(feature = "openai")]
pub mod compat;
#[cfg(any(feature = "gemini", feature = "vertex-anthropic"))]
pub mod google;
#[cfg(feature = "openai")]
mod openai;
#[cfg(any(feature = "anthropic", feature = "bedrock"))]
mod stream_end;
#[cfg(any(feature = "anthropic", feature = "gemini", feature = "bedrock"))]
mod turns;

/// Anthropic's names for ripcord's values, for servers that answer on the Messages wire.
#[cfg(feature = "anthropic")]
pub use anthropic::wire as anthropic_wire;
#[cfg(feature = "anthropic")]
pub use anthropic::{
    ANTHROPIC_BASE_URL, ANTHROPIC_VERSION, Anthropic, AnthropicConfig, DEFAULT_MAX_TOKENS,
};
#[cfg(feature = "azure")]
pub use azure::{AZURE_API_VERSION, AzureConfig, AzureOpenAi};
#[cfg(feature = "bedrock")]
pub use bedrock::{
    BEDROCK_API_KEY_ENV, Bedrock, BedrockConfig, BedrockCredentials, CredentialSource, Guardrail,
    Thinking,
};
pub use error_body::{ErrorBody, ErrorHook};
pub use http::{
    DEFAULT_FIRST_TOKEN, DEFAULT_MAX_SKIPPED_EVENTS, DEFAULT_STREAM_FIRST_TOKEN,
    DEFAULT_STREAM_IDLE, HttpClient, Timeouts,
};
pub use http::{DEFAULT_RESPONSE_BUFFER_LIMIT, response_bytes_buffered, set_response_buffer_limit};
pub use models::ModelInfo;
/// OpenAI's Chat Completions API (`/v1/chat/completions`) as serde types, shared by the
/// gateway's `/v1/chat/completions` door and the OpenAI adapter.
#[cfg(feature = "openai")]
pub use openai::chat_wire as openai_chat_wire;
/// OpenAI's Responses API (`/v1/responses`) as serde types, shared by the gateway's
/// `/v1/responses` door and the Responses upstream.
#[cfg(feature = "openai")]
pub use openai::responses_wire as openai_responses_wire;
#[cfg(feature = "openai")]
pub use openai::{
    AssistantPrefill, MaxTokensField, OPENAI_BASE_URL, OpenAi, OpenAiConfig, OpenAiWire,
};
pub use stated_limit::stated_context_limit;
pub use vendor::{UnknownVendor, Vendor};
