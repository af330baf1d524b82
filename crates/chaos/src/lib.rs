//! # ripcord-chaos
//!
//! Fake LLM vendors for tests, chaos runs and benchmarks: OpenAI-wire, Anthropic-wire and
//! Gemini-wire and Bedrock-wire HTTP servers (and Google's OAuth token endpoint,
//! [`google_token`]) on `127.0.0.1:0` (the Bedrock one checks every SigV4 signature against
//! the [`bedrock`] test keys) whose behaviour per request is scripted — success (JSON or SSE,
//! with chosen delays), any status with a vendor-accurate error body and headers, a hang
//! before the headers, a slow first token, a stall or a reset mid-stream, malformed JSON, a
//! truncated stream, an in-band error event. Every request is recorded (method, path, headers,
//! body) so a test can assert what an adapter sent and how many times.
//!
//! Only the *vendor* is fake: clients talk real HTTP/1.1 over real sockets, so timeouts,
//! connection pools, resets and SSE parsing are exercised for real.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
//!
//! let fake = FakeVendor::start(Wire::Anthropic).await?;
//! fake.set_script(Script::Sequence(vec![
//!     Behavior::Error(VendorError::Overloaded),
//!     Behavior::Ok,
//! ]));
//! let client = reqwest::Client::new();
//! let url = format!("{}/v1/messages", fake.base_url());
//! let body = serde_json::json!({
//!     "model": "claude-sonnet-4-5", "max_tokens": 64,
//!     "messages": [{"role": "user", "content": "Why is the sky blue?"}],
//! });
//!
//! let first = client.post(&url).json(&body).send().await?;
//! assert_eq!(first.status(), 529);
//! let err: serde_json::Value = first.json().await?;
//! assert_eq!(err["error"]["type"], "overloaded_error");
//!
//! let second: serde_json::Value = client.post(&url).json(&body).send().await?.json().await?;
//! assert_eq!(second["type"], "message");
//! assert_eq!(second["stop_reason"], "end_turn");
//!
//! assert_eq!(fake.hits(), 2);
//! assert_eq!(fake.requests()[1].json().map(|b| b["max_tokens"].clone()), Some(64.into()));
//! # Ok(()) }
//! ```
//!
//! ## Pieces
//!
//! - [`FakeVendor`]: the server; [`FakeOptions`] to turn recording off (benchmarks) or change
//!   the default [`Reply`].
//! - [`Script`]: how a [`Behavior`] is chosen per request — always, a sequence, a seeded
//!   probability, a time window, or a timeline of scripts.
//! - [`VendorError`]: vendor-accurate errors, with [`VendorError::expected_kind`] naming the
//!   `ripcord_core::ErrorKind` an adapter should classify each as.
//! - [`RecordedRequest`]: what the server received.
//! - [`status_page`]: a fake vendor status page (Atlassian Statuspage JSON, RSS, Atom) whose
//!   components, incidents and failures are scripted.
//! - [`vendor_table`]: recorded vendor failures (exact status, headers and body bytes, streams
//!   too) with the kind and disposition each must get, replayed with [`Behavior::Raw`].
//!
//! ## Notes
//!
//! - Connections are kept alive (HTTP/1.1) and `TCP_NODELAY` is set on each, so a benchmark
//!   against the fake measures the client, not Nagle's algorithm.
//! - Time in scripts is Tokio time: a script's windows follow a paused clock too (HTTP clients
//!   generally need real time, though).
//! - There are no feature flags.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod anthropic;
pub mod bedrock;
mod gemini;
pub mod google_token;
mod http;
mod openai;
mod openai_responses;
pub mod otlp;
pub mod process;
mod record;
mod reply;
mod script;
mod server;
pub mod status_page;
mod vendor_error;
pub mod vendor_table;

pub use record::RecordedRequest;
pub use reply::{Chunking, Reply, signature_for};
pub use script::{Behavior, RawEnd, RawResponse, Script};
pub use server::{FakeOptions, FakeVendor};
pub use vendor_error::VendorError;

/// Which vendor's wire format a [`FakeVendor`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Wire {
    /// OpenAI Chat Completions, Embeddings and Models (also Azure OpenAI's deployment paths and
    /// OpenAI-compatible vendors' paths ending in `/chat/completions`), and the Responses API
    /// on paths ending in `/responses` (`/v1/responses`, Azure's `/openai/v1/responses`).
    OpenAi,
    /// Anthropic Messages (also Claude on Vertex AI: `…/publishers/anthropic/models/{m}:rawPredict`
    /// and `:streamRawPredict`, the model in the URL and `anthropic_version` in the body).
    Anthropic,
    /// AWS Bedrock Converse and ConverseStream (event-stream frames), behind a SigV4 check
    /// with the [`bedrock`] test credentials.
    Bedrock,
    /// Gemini `generateContent` / `streamGenerateContent`, `embedContent` /
    /// `batchEmbedContents`, on AI Studio's paths and Vertex AI's.
    Gemini,
}
