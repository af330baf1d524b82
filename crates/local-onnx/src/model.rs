//! [`LocalLlama`]: the `ChatModel` that runs in this process.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use ort::environment::Environment;
use ort::session::RunOptions;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind,
    ModelId, Result, StreamEvent, async_trait, stream,
};
use tokenizers::Tokenizer;
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore, mpsc};

use crate::config::{ModelConfig, ModelFiles};
use crate::engine::{Decoder, Device, SessionOptions};
use crate::error::{invalid_request, runtime, unavailable};
use crate::generate::{self, Control, Job};
use crate::sampling::SamplingParams;
use crate::scheduler::{Request, Scheduler};
use crate::template::ChatTemplate;

/// The window used when `config.json` states none and the builder sets none.
const DEFAULT_WINDOW: u32 = 2048;
/// The answer length when the request sets no `max_tokens`.
const DEFAULT_MAX_NEW_TOKENS: u32 = 512;

/// A decoder (Llama architecture or Gemma 3, as the converter writes them) running in this
/// process on ONNX Runtime.
///
/// Point it at a folder with `model.onnx` (any decoder exported with the `optimum` names:
/// `input_ids`, `attention_mask`, `position_ids`, `past_key_values.{i}.key/value` →
/// `logits`, `present.{i}.key/value`), `tokenizer.json` and `config.json`; the optional
/// `tokenizer_config.json` supplies the chat template and `generation_config.json` the
/// end-of-sequence ids and sampling defaults. `cargo xtask setup-model` prepares
/// SmolLM2-135M-Instruct in [`crate::default_model_dir`].
///
/// Cloning is cheap and shares the loaded model.
///
/// # Loading and first-call latency
///
/// [`LocalLlama::load`] and an eager builder (the default) load everything in `build()`:
/// ONNX Runtime (once per process), the tokenizer, the template and one session. For
/// SmolLM2-135M on a 2-core machine that took 2–3 s for fp32 (whose fp16 weights are widened at
/// load) and well under a second for the fused `q8` / `q4` files, as `cargo xtask bench`
/// measures it (`load s`); the first call then starts generating at once. A lazy builder
/// (`eager(false)`) only checks that the files exist and reads `config.json`; the first call
/// pays the load (it honours the call's deadline, and a failed load is tried again on the next
/// call). Load failures are `ModelNotFound` errors
/// whose message starts `local model unavailable:` and names the path.
///
/// # Concurrency
///
/// At most `max_sessions` answers are generated at once; further calls wait for a slot (the
/// wait honours the deadline and cancellation). Each concurrent answer needs its own ONNX
/// Runtime session, created on first need, and each session holds its own copy of the weights
/// (a process with one SmolLM2-135M session peaks at about 0.9 GB fp32 and well under half that
/// for `q8` / `q4`; `cargo xtask bench` prints the figures), so the default is 1. Each session
/// uses [`crate::default_threads`] threads unless told otherwise: with several sessions, give
/// each fewer.
///
/// # Examples
///
/// ```no_run
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_local_onnx::{LocalLlama, default_model_dir};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ripcord_core::Result<()> {
/// let local = LocalLlama::builder(default_model_dir()).threads(1).max_sessions(1).build()?;
/// let reply = local.chat(&ChatRequest::user("What is the capital of France?"), &Context::new()).await?;
/// println!("{}", reply.text());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LocalLlama {
    inner: Arc<Inner>,
}

struct Inner {
    id: ModelId,
    caps: Capabilities,
    files: ModelFiles,
    config: ModelConfig,
    window: u32,
    opts: Options,
    dylib: PathBuf,
    permits: Arc<Semaphore>,
    loaded: OnceCell<Arc<Loaded>>,
}

struct Loaded {
    env: Environment,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    eos: Vec<u32>,
    pool: Mutex<Vec<Decoder>>,
    /// With `max_batch > 1`: the thread that owns the one session and batches the answers.
    scheduler: Option<Scheduler>,
}

#[derive(Debug, Clone)]
struct Options {
    name: Option<String>,
    /// None: the default variant's file when the folder has it, else `model.onnx`.
    model_file: Option<PathBuf>,
    ort_dylib: Option<PathBuf>,
    threads: usize,
    max_sessions: usize,
    max_batch: usize,
    device: Device,
    eager: bool,
    context_window: Option<u32>,
    max_new_tokens: u32,
    temperature: Option<f32>,
    top_k: Option<usize>,
    top_p: Option<f32>,
    stream_buffer: usize,
}

mod builder;

pub use builder::LocalLlamaBuilder;

fn session_options(opts: &Options) -> SessionOptions {
    SessionOptions {
        intra_threads: opts.threads,
        device: opts.device,
    }
}

/// Loads the runtime, tokenizer, template and the first session.
fn load(inner: &Inner) -> Result<Loaded> {
    let started = Instant::now();
    let env = crate::runtime::environment(&inner.dylib)?;
    let tok_path = &inner.files.tokenizer;
    let tokenizer = Tokenizer::from_file(tok_path).map_err(|e| {
        unavailable(format!(
            "{} is not a valid tokenizer: {e}",
            tok_path.display()
        ))
    })?;
    let tcfg = inner.files.dir.join("tokenizer_config.json");
    let template = ChatTemplate::new(
        inner.config.chat_template.clone(),
        inner.config.bos_token.clone(),
        inner.config.eos_token.clone(),
        &tcfg.display().to_string(),
    )?;
    let decoder = Decoder::load(
        &env,
        &inner.files.model,
        &inner.config,
        session_options(&inner.opts),
    )?;
    let tok_vocab = tokenizer.get_vocab_size(true);
    if let Some(v) = decoder.spec().vocab
        && tok_vocab > v
    {
        return Err(unavailable(format!(
            "shape mismatch: {} has {tok_vocab} tokens but {} produces only {v} logits",
            tok_path.display(),
            inner.files.model.display()
        )));
    }
    let mut eos = inner.config.eos_ids.clone();
    let mut add_eos = |text: &str| {
        if let Some(id) = tokenizer.token_to_id(text)
            && !eos.contains(&id)
        {
            eos.push(id);
        }
    };
    if let Some(t) = &inner.config.eos_token {
        add_eos(t);
    }
    if template.is_fallback() {
        add_eos("<|im_end|>");
    }
    if eos.is_empty() {
        return Err(unavailable(format!(
            "{} names no end-of-sequence token (eos_token_id) and the tokenizer has none",
            inner.files.config.display()
        )));
    }
    tracing::debug!(
        model = %inner.files.model.display(),
        load_ms = started.elapsed().as_secs_f64() * 1000.0,
        message = ripcord_core::telemetry::event::LOCAL_LOADED
    );
    let (pool, scheduler) = if inner.opts.max_batch > 1 {
        if !decoder.spec().shared_kv {
            return Err(unavailable(format!(
                "max_batch = {} needs a fused variant whose KV cache is shared (model.q8.onnx or model.q4.onnx); {} grows its cache per answer",
                inner.opts.max_batch,
                inner.files.model.display()
            )));
        }
        let span = tracing::debug_span!(
            ripcord_core::telemetry::span_name::LOCAL_GENERATE,
            model = %inner.id,
            max_batch = inner.opts.max_batch
        );
        let scheduler = Scheduler::start(
            decoder,
            tokenizer.clone(),
            inner.opts.max_batch,
            inner.window as usize,
            span,
        )?;
        (Vec::new(), Some(scheduler))
    } else {
        (vec![decoder], None)
    };
    Ok(Loaded {
        env,
        tokenizer,
        template,
        eos,
        pool: Mutex::new(pool),
        scheduler,
    })
}

impl Loaded {
    /// A session for one answer: an idle one, or a new one (the semaphore bounds how many).
    fn take_decoder(&self, inner: &Inner) -> Result<Decoder> {
        if let Some(d) = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
        {
            return Ok(d);
        }
        Decoder::load(
            &self.env,
            &inner.files.model,
            &inner.config,
            session_options(&inner.opts),
        )
    }

    fn give_back(&self, d: Decoder) {
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(d);
    }
}

/// Cancels the generating thread when the stream is dropped (or ends).
struct WorkerGuard {
    cancel: ripcord_core::CancellationToken,
    run_options: Arc<RunOptions>,
}

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        self.cancel.cancel();
        // Stops a run in progress between two kernels; the next run fails at once.
        let _ = self.run_options.terminate();
    }
}

impl LocalLlama {
    /// Loads the model in `dir` with the defaults (eager, the default variant when present,
    /// [`crate::default_threads`] threads, 1 session).
    ///
    /// # Errors
    ///
    /// See [`LocalLlamaBuilder::build`].
    pub fn load(dir: impl AsRef<Path>) -> Result<LocalLlama> {
        LocalLlama::builder(dir).build()
    }

    /// A builder for the model in `dir`.
    pub fn builder(dir: impl AsRef<Path>) -> LocalLlamaBuilder {
        LocalLlamaBuilder {
            dir: dir.as_ref().to_path_buf(),
            opts: Options {
                name: None,
                model_file: None,
                ort_dylib: None,
                threads: crate::default_threads(),
                max_sessions: 1,
                max_batch: 1,
                device: Device::Cpu,
                eager: true,
                context_window: None,
                max_new_tokens: DEFAULT_MAX_NEW_TOKENS,
                temperature: None,
                top_k: None,
                top_p: None,
                stream_buffer: 32,
            },
        }
    }

    /// The model folder.
    pub fn dir(&self) -> &Path {
        &self.inner.files.dir
    }

    /// True once the model is loaded (always, for an eager model).
    pub fn is_loaded(&self) -> bool {
        self.inner.loaded.initialized()
    }

    /// Counts the tokens of `text` with the model's tokenizer (loading it if needed).
    ///
    /// # Errors
    ///
    /// A load error, or `InvalidRequest` when the text cannot be tokenized.
    pub async fn count_tokens(&self, text: &str) -> Result<usize> {
        let loaded = self.loaded().await?;
        Ok(encode(&loaded.tokenizer, text)?.len())
    }

    /// The greedy token ids of the answer to `req`, at most `n` of them (fewer when the answer
    /// ends first; the end-of-sequence token is not included).
    ///
    /// Sampling settings of the request and the builder are ignored: this is the deterministic
    /// path that [`crate::agreement`] compares across variants.
    ///
    /// # Errors
    ///
    /// As [`ChatModel::chat`]: a load error, an invalid request or a runtime failure.
    pub async fn greedy_tokens(&self, req: &ChatRequest, n: usize) -> Result<Vec<u32>> {
        self.check_request(req)?;
        let n_u32 = u32::try_from(n).map_err(|_| invalid_request("too many tokens"))?;
        let loaded = self.loaded().await?;
        let job = self.job(&loaded, &req.clone().with_max_tokens(n_u32.max(1)))?;
        let permit = Arc::clone(&self.inner.permits)
            .acquire_owned()
            .await
            .map_err(|_| runtime("the session limiter is closed"))?;
        let inner = Arc::clone(&self.inner);
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut dec = loaded.take_decoder(&inner)?;
            let result = greedy(&mut dec, &job, n);
            loaded.give_back(dec);
            result
        });
        task.await
            .map_err(|e| runtime(format!("the generating thread failed: {e}")))?
            .map_err(|e| self.tag(e))
    }

    fn tag(&self, e: Error) -> Error {
        e.with_provider(
            Arc::clone(&self.inner.id.name),
            Arc::clone(&self.inner.id.model),
        )
    }

    async fn loaded(&self) -> Result<Arc<Loaded>> {
        let inner = &self.inner;
        inner
            .loaded
            .get_or_try_init(|| {
                let inner = Arc::clone(inner);
                async move {
                    let task = tokio::task::spawn_blocking(move || {
                        let loaded = Arc::new(load(&inner)?);
                        // If the caller gave up meanwhile, keep the work done for the next call.
                        let _ = inner.loaded.set(Arc::clone(&loaded));
                        Ok::<_, Error>(loaded)
                    });
                    task.await
                        .map_err(|e| unavailable(format!("the loading thread failed: {e}")))?
                }
            })
            .await
            .cloned()
    }

    fn check_request(&self, req: &ChatRequest) -> Result<()> {
        let needs = req.needs();
        if req.messages.is_empty() {
            return Err(invalid_request("the request has no messages"));
        }
        if needs.tools {
            return Err(invalid_request(
                "the local model does not support tool calls",
            ));
        }
        if needs.vision {
            return Err(invalid_request("the local model does not read images"));
        }
        if needs.json {
            return Err(invalid_request("the local model has no JSON mode"));
        }
        Ok(())
    }

    fn job(&self, loaded: &Loaded, req: &ChatRequest) -> Result<Job> {
        let prompt_text = loaded.template.render(&req.messages)?;
        let prompt = encode(&loaded.tokenizer, &prompt_text)?;
        let window = self.inner.window as usize;
        if prompt.is_empty() {
            return Err(invalid_request("the prompt is empty after tokenization"));
        }
        let max_new = match req.max_tokens {
            Some(0) => return Err(invalid_request("max_tokens must be at least 1")),
            Some(n) => n as usize,
            None => {
                (self.inner.opts.max_new_tokens as usize).min(window.saturating_sub(prompt.len()))
            }
        };
        if max_new == 0 || prompt.len() + max_new > window {
            return Err(Error::new(
                ErrorKind::ContextLengthExceeded,
                format!(
                    "the prompt ({} tokens) plus max_tokens ({max_new}) exceed the local model's context window of {window} tokens",
                    prompt.len()
                ),
            ));
        }
        let opts = &self.inner.opts;
        let defaults = self.inner.config.sampling;
        let sampling = SamplingParams {
            temperature: req
                .temperature
                .or(opts.temperature)
                .unwrap_or(defaults.temperature),
            top_k: opts.top_k.unwrap_or(defaults.top_k),
            top_p: req.top_p.or(opts.top_p).unwrap_or(defaults.top_p),
            seed: req.seed,
        };
        if !(sampling.temperature.is_finite() && sampling.top_p.is_finite() && sampling.top_p > 0.0)
        {
            return Err(invalid_request(
                "temperature must be finite and top_p in (0, 1]",
            ));
        }
        Ok(Job {
            prompt,
            max_new_tokens: max_new,
            sampling,
            stops: req.stop.clone(),
            eos: loaded.eos.clone(),
            model_name: self.inner.id.model.to_string(),
        })
    }

    async fn start(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        ctx.check()?;
        self.check_request(req)?;
        let loaded = ctx.run(self.loaded()).await?;
        let job = self.job(&loaded, req)?;
        let permits = Arc::clone(&self.inner.permits);
        let permit: OwnedSemaphorePermit = ctx
            .run(async move {
                permits
                    .acquire_owned()
                    .await
                    .map_err(|_| runtime("the session limiter is closed"))
            })
            .await?;
        ctx.check()?;

        let (tx, mut rx) = mpsc::channel::<Result<StreamEvent>>(self.inner.opts.stream_buffer);
        let cancel = ctx.cancellation().child_token();
        let run_options = Arc::new(
            RunOptions::new().map_err(|e| runtime(format!("cannot create run options: {e}")))?,
        );
        let control = Control {
            cancel: cancel.clone(),
            deadline: ctx.remaining().and_then(|r| Instant::now().checked_add(r)),
            stream_deadline: ctx.stream_deadline().and_then(|d| {
                Instant::now().checked_add(d.saturating_duration_since(tokio::time::Instant::now()))
            }),
            run_options: Arc::clone(&run_options),
        };
        let inner = Arc::clone(&self.inner);
        let parent = tracing::Span::current();
        if let Some(scheduler) = &loaded.scheduler {
            scheduler.submit(Request {
                job,
                control,
                tx,
                permit,
            })?;
        } else {
            // The thread ends at its next check once the stream is gone (the guard cancels it), so
            // it never outlives its stream by more than one step.
            drop(tokio::task::spawn_blocking(move || {
                let _permit = permit;
                let span = tracing::debug_span!(parent: &parent, ripcord_core::telemetry::span_name::LOCAL_GENERATE, model = %inner.id);
                let _enter = span.enter();
                let mut decoder = match loaded.take_decoder(&inner) {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        return;
                    }
                };
                let result =
                    generate::run(&mut decoder, &loaded.tokenizer, &job, &control, &mut |ev| {
                        tx.blocking_send(Ok(ev)).is_ok()
                    });
                loaded.give_back(decoder);
                if let Err(e) = result {
                    let _ = tx.blocking_send(Err(e));
                }
            }));
        }

        let guard = WorkerGuard {
            cancel,
            run_options,
        };
        let caller_cancel = ctx.cancellation().clone();
        // The deadline bounds the answer until its first content; after that, the stream
        // deadline (which is the deadline unless the caller set a longer stream bound).
        let mut deadline = ctx.deadline();
        let stream_deadline = ctx.stream_deadline();
        let this = self.clone();
        let events = async_stream::stream! {
            let _guard = guard;
            loop {
                let next = tokio::select! {
                    biased;
                    () = caller_cancel.cancelled() => Some(Err(Error::cancelled())),
                    () = sleep_until(deadline) => Some(Err(Error::deadline_exceeded())),
                    ev = rx.recv() => ev,
                };
                match next {
                    Some(Ok(ev)) => {
                        if ev.is_content() {
                            deadline = stream_deadline;
                        }
                        let done = matches!(ev, StreamEvent::Finish { .. });
                        yield Ok(ev);
                        if done {
                            break;
                        }
                    }
                    Some(Err(e)) => {
                        yield Err(this.tag(e));
                        break;
                    }
                    None => {
                        yield Err(this.tag(runtime("the generating thread ended without finishing")));
                        break;
                    }
                }
            }
        };
        Ok(events.boxed())
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Greedy decoding of `job.prompt`, at most `n` tokens, stopping at an end-of-sequence token.
fn greedy(dec: &mut Decoder, job: &Job, n: usize) -> Result<Vec<u32>> {
    let options =
        RunOptions::new().map_err(|e| runtime(format!("cannot create run options: {e}")))?;
    let mut cache = dec.empty_cache(job.prompt.len() + n + 1)?;
    let mut logits = dec.forward(&job.prompt, &mut cache, &options)?;
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let id = crate::sampling::argmax(&logits)?;
        if job.eos.contains(&id) {
            break;
        }
        ids.push(id);
        if ids.len() < n {
            logits = dec.forward(&[id], &mut cache, &options)?;
        }
    }
    Ok(ids)
}

fn encode(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>> {
    tokenizer
        .encode(text, false)
        .map(|e| e.get_ids().to_vec())
        .map_err(|e| invalid_request(format!("cannot tokenize the prompt: {e}")))
}

impl fmt::Debug for LocalLlama {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalLlama")
            .field("id", &self.inner.id)
            .field("model", &self.inner.files.model)
            .field("window", &self.inner.window)
            .field("threads", &self.inner.opts.threads)
            .field("max_sessions", &self.inner.opts.max_sessions)
            .field("max_batch", &self.inner.opts.max_batch)
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

#[async_trait]
impl ChatModel for LocalLlama {
    fn id(&self) -> &ModelId {
        &self.inner.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.inner.caps
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let events = self.stream(req, ctx).await?;
        stream::collect(events).await
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        self.start(req, ctx).await.map_err(|e| self.tag(e))
    }
}
