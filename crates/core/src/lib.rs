//! # ripcord-core
//!
//! The contract every ripcord crate shares: vendor-neutral chat types, the [`ChatModel`] and
//! [`EmbeddingModel`] traits, the classified [`Error`] with its [`Disposition`], the per-call
//! [`Context`], and the fallback [`Chain`] — an ordered list of models with one deadline, skip
//! rules, per-kind routes, streaming fallback and an honest static last-resort reply.
//!
//! This crate has no HTTP, ONNX, OpenTelemetry, rate-limiter or breaker dependency: vendors live
//! in `ripcord-providers`, policies in `ripcord-resilience`, the local model in
//! `ripcord-local-onnx`. A decorator is a `ChatModel` wrapping a `ChatModel`; a chain is a
//! `ChatModel` too, so everything composes.
//!
//! ```
//! # use async_trait::async_trait;
//! # use ripcord_core::*;
//! # #[derive(Debug)] struct Fixed(ModelId, Capabilities, Option<ErrorKind>);
//! # #[async_trait] impl ChatModel for Fixed {
//! #   fn id(&self) -> &ModelId { &self.0 } fn capabilities(&self) -> &Capabilities { &self.1 }
//! #   async fn chat(&self, _: &ChatRequest, _: &Context) -> Result<ChatResponse> {
//! #     match self.2 { Some(k) => Err(Error::new(k, "down")), None => Ok(ChatResponse::new("Rayleigh scattering.")) } } }
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<()> {
//! # let caps = Capabilities::new(8192, 1024);
//! let chain = Chain::builder()
//!     .link(Fixed(ModelId::new("openai", "gpt-4o"), caps.clone(), Some(ErrorKind::Overloaded)))
//!     .link(Fixed(ModelId::new("local", "smollm2"), caps, None))
//!     .static_reply("The assistant is busy right now; please try again in a few minutes.")
//!     .deadline(std::time::Duration::from_secs(15))
//!     .build()?;
//! let reply = chain.chat(&ChatRequest::user("Why is the sky blue?"), &Context::default()).await?;
//! assert_eq!(reply.served_by(), "local");
//! assert!(reply.degraded());
//! # Ok(()) }
//! ```
//!
//! ## Feature flags
//!
//! - `testing`: `testing::ScriptedModel`, an in-memory model that plays a script of outcomes,
//!   and `testing::FnModel`, one that answers with a function, for tests of this and other
//!   ripcord crates. Off by default.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod alert;
pub mod calendar;
mod capabilities;
pub mod chain;
mod context;
mod decorator;
pub mod embedding;
mod error;
mod fault;
mod macros;
mod model;
pub mod reasoning;
mod request;
mod response;
pub mod rng;
pub mod stream;
pub mod telemetry;
pub mod tokens;

#[cfg(feature = "testing")]
pub mod testing;

pub use capabilities::{Capabilities, Locality};
pub use chain::{BuildError, Chain, ChainBuilder, ChainStats, StaticReply, StreamPolicy};
pub use context::{Context, LocalityRequirement, Priority};
pub use decorator::Decorator;
pub use embedding::{EmbeddingChain, EmbeddingChainBuilder};
pub use error::{
    ContextLimit, Disposition, Error, ErrorKind, ErrorSummary, Result, StatusCode, TimeoutPhase,
};
pub use fault::Fault;
pub use model::{
    ChatModel, EmbeddingModel, EmbeddingRequest, EmbeddingResponse, Liveness, ModelId,
};
pub use reasoning::ReasoningBlock;
pub use request::{
    ChatRequest, ContentPart, FileSource, ImageSource, Message, Needs, Reasoning, ReasoningEffort,
    ResponseFormat, Role, ToolCall, ToolChoice, ToolSpec,
};
pub use response::{
    Attempt, ChatResponse, Continuation, ContinuationMode, FinishReason, Price, Provenance, Skip,
    SkipReason, Usage,
};
pub use stream::{ChatStream, StreamEvent};

/// Re-exported so implementors need no direct dependency.
pub use async_trait::async_trait;
/// Re-exported cancellation token type used by [`Context`].
pub use tokio_util::sync::CancellationToken;
