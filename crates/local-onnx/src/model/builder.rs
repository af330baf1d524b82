//! [`LocalLlamaBuilder`]: every option of a [`LocalLlama`], checked when it is built.

use std::path::PathBuf;
use std::sync::Arc;

use ripcord_core::{Capabilities, Locality, ModelId, Price, Result};
use tokio::sync::{OnceCell, Semaphore};

use super::{DEFAULT_WINDOW, Inner, LocalLlama, Options, load};
use crate::config::{ModelConfig, ModelFiles};
use crate::engine::Device;
use crate::error::invalid_request;
use crate::variant::Variant;

/// Configures a [`LocalLlama`]; see [`LocalLlama::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct LocalLlamaBuilder {
    pub(super) dir: PathBuf,
    pub(super) opts: Options,
}

impl LocalLlamaBuilder {
    ripcord_core::setters! {
        /// The link's name in ids, provenance and metrics (default `"local"`).
        name(name: impl Into<String>) => opts.name = Some(name.into());
        /// The ONNX file inside the folder.
        ///
        /// Default: the default [`Variant`]'s file (`model.q8.onnx`) when the folder has it, else
        /// `model.onnx` (so any optimum-style export works as it is).
        model_file(file: impl Into<PathBuf>) => opts.model_file = Some(file.into());
        /// One of the converter's variants (sets [`LocalLlamaBuilder::model_file`]).
        variant(variant: Variant) => opts.model_file = Some(PathBuf::from(variant.file_name()));
        /// The ONNX Runtime shared library (default [`crate::default_ort_dylib`]).
        ort_dylib(path: impl Into<PathBuf>) => opts.ort_dylib = Some(path.into());
        /// Intra-op threads per session (default [`crate::default_threads`]: the cores available,
        /// at most 4).
        threads(n: usize) => opts.threads = n;
        /// Answers generated at once, each with its own session (default 1).
        max_sessions(n: usize) => opts.max_sessions = n;
        /// Answers decoded together in one batched step by one session (default 1: no batching,
        /// each answer runs alone on one of `max_sessions` sessions). With `n > 1` a scheduler
        /// thread owns one session and up to `n` concurrent answers share its decode steps (each
        /// with its own KV slot, sampler, stop sequences, cancellation and deadline); further calls
        /// wait for a place. Needs a fused variant (`q8`, `q4`), whose KV cache is shared, and
        /// cannot be combined with `max_sessions > 1`.
        max_batch(n: usize) => opts.max_batch = n;
        /// Where ONNX Runtime runs (default [`Device::Cpu`]). [`Device::Cuda`] fails to load,
        /// naming the device, when the ONNX Runtime library has no CUDA execution provider.
        device(device: Device) => opts.device = device;
        /// Load in `build()` (default `true`) or on the first call.
        eager(eager: bool) => opts.eager = eager;
        /// Caps the context window below the model's `max_position_embeddings` (memory and time
        /// grow with it).
        context_window(tokens: u32) => opts.context_window = Some(tokens);
        /// The answer length when a request sets no `max_tokens` (default 512, cut to what fits).
        max_new_tokens(tokens: u32) => opts.max_new_tokens = tokens;
        /// Default temperature when the request sets none (default: the folder's
        /// `generation_config.json`, else 0 = greedy).
        temperature(t: f32) => opts.temperature = Some(t);
        /// Top-k for sampling (requests cannot set it; default from `generation_config.json`, else
        /// off).
        top_k(k: usize) => opts.top_k = Some(k);
        /// Default top-p when the request sets none.
        top_p(p: f32) => opts.top_p = Some(p);
        /// Events buffered between the generating thread and the stream (default 32). The
        /// generator waits when the buffer is full, so a slow reader slows generation down instead
        /// of growing memory.
        stream_buffer(events: usize) => opts.stream_buffer = events;
    }

    /// Builds the model (loading it when eager).
    ///
    /// Eager loading blocks for the load time: call it at startup or from
    /// `tokio::task::spawn_blocking`.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for a zero thread, session or buffer count; `ModelNotFound`
    /// ("local model unavailable: …", naming the path) for a missing folder, file or library,
    /// a corrupt file or a model that does not match its config.
    pub fn build(self) -> Result<LocalLlama> {
        let o = &self.opts;
        if o.threads == 0
            || o.max_sessions == 0
            || o.max_batch == 0
            || o.stream_buffer == 0
            || o.max_new_tokens == 0
        {
            return Err(invalid_request(
                "LocalLlama: threads, max_sessions, max_batch, stream_buffer and max_new_tokens must be at least 1",
            ));
        }
        if o.max_batch > 1 && o.max_sessions > 1 {
            return Err(invalid_request(format!(
                "LocalLlama: max_batch = {} shares one session among its answers; it cannot be combined with max_sessions = {}",
                o.max_batch, o.max_sessions
            )));
        }
        let model_file = o.model_file.clone().unwrap_or_else(|| {
            let preferred = PathBuf::from(Variant::default().file_name());
            if self.dir.join(&preferred).is_file() {
                preferred
            } else {
                PathBuf::from(Variant::Fp32.file_name())
            }
        });
        let files = ModelFiles::locate(&self.dir, &model_file)?;
        let config = ModelConfig::read(&files)?;
        let model_window = config.window.unwrap_or(DEFAULT_WINDOW);
        let window = o
            .context_window
            .map_or(model_window, |w| w.min(model_window));
        let model_name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".to_owned());
        let id = ModelId::new(
            o.name.clone().unwrap_or_else(|| "local".to_owned()),
            model_name,
        );
        let caps = Capabilities::new(window, window)
            .with_streaming(true)
            .with_price(Price::FREE)
            .with_locality(Locality::Local);
        let dylib = o.ort_dylib.clone().unwrap_or_else(crate::default_ort_dylib);
        let inner = Arc::new(Inner {
            id,
            caps,
            files,
            config,
            window,
            permits: Arc::new(Semaphore::new(o.max_sessions.max(o.max_batch))),
            opts: self.opts,
            dylib,
            loaded: OnceCell::new(),
        });
        if inner.opts.eager {
            let loaded = Arc::new(load(&inner)?);
            // A fresh cell: nobody else can have set it.
            let _ = inner.loaded.set(loaded);
        }
        Ok(LocalLlama { inner })
    }
}
