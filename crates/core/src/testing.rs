//! Scripted in-memory models for tests (feature `testing`).
//!
//! A [`ScriptedModel`] plays a script of outcomes, one per call, and repeats the last step when
//! the script runs out. A [`FnModel`] answers with a function of the request. Delays use
//! tokio's clock, so tests run on paused time.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use crate::capabilities::{Capabilities, Locality};
use crate::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::model::{ChatModel, Liveness, ModelId};
use crate::request::ChatRequest;
use crate::response::{ChatResponse, FinishReason, Usage};
use crate::stream::{ChatStream, StreamEvent};

/// One scripted outcome.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Step {
    /// Answer with this text after `delay`.
    Reply {
        /// The answer.
        text: String,
        /// How long the call takes.
        delay: Duration,
    },
    /// Fail with this error after `delay`.
    Fail {
        /// The error.
        error: Error,
        /// How long the call takes.
        delay: Duration,
    },
    /// Never answer (until dropped).
    Hang,
    /// Stream these items, each after its delay; `chat` collects them.
    Stream(Vec<(Duration, StreamItem)>),
}

/// One scripted stream item.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StreamItem {
    /// An event.
    Event(StreamEvent),
    /// An error.
    Error(Error),
    /// Stall forever.
    Stall,
}

/// A model that plays a script. Counts its calls and its peak concurrency.
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let m = ScriptedModel::new("a").fail(ErrorKind::ServerError).reply("ok");
/// assert!(m.chat(&ChatRequest::user("x"), &Context::new()).await.is_err());
/// assert_eq!(m.chat(&ChatRequest::user("x"), &Context::new()).await.unwrap().text(), "ok");
/// assert_eq!(m.calls(), 2);
/// # }
/// ```
#[derive(Debug)]
pub struct ScriptedModel {
    id: ModelId,
    caps: Capabilities,
    script: Mutex<VecDeque<Step>>,
    calls: AtomicUsize,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    bounds_itself: bool,
    refusal: Option<Error>,
    seen: Mutex<Vec<ChatRequest>>,
}

struct InFlight<'a>(&'a ScriptedModel);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ScriptedModel {
    /// A model named `name` (model id `name-model`) with a generous cloud window and an empty
    /// script (which answers `"ok"`).
    pub fn new(name: &str) -> Self {
        ScriptedModel {
            id: ModelId::new(name, format!("{name}-model")),
            caps: Capabilities::new(128_000, 4_096)
                .with_tools(true)
                .with_vision(true)
                .with_json_mode(true)
                .with_locality(Locality::cloud(name)),
            script: Mutex::new(VecDeque::new()),
            calls: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            bounds_itself: false,
            refusal: None,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Makes the model bound its own calls by the context, as the HTTP adapters do
    /// ([`ChatModel::bounds_itself`]): a call, a stream being opened or a stream waiting for its
    /// next event at the deadline ends with its own `Timeout` (phase `Total`) error, and
    /// cancellation ends it with `Cancelled`. Without this, the model waits out its script and
    /// relies on the caller to cut it.
    pub fn bounding_itself(mut self) -> Self {
        self.bounds_itself = true;
        self
    }

    /// Makes [`ChatModel::refusal`] answer a copy of `error` before every call, as a link that
    /// knows it cannot take one (an open breaker, an exhausted limit) does. The script still
    /// plays for calls made anyway.
    pub fn refusing(mut self, error: Error) -> Self {
        self.refusal = Some(error);
        self
    }

    /// Replaces the capabilities.
    pub fn with_caps(mut self, caps: Capabilities) -> Self {
        self.caps = caps;
        self
    }

    /// Appends a step.
    pub fn step(self, step: Step) -> Self {
        if let Ok(mut s) = self.script.lock() {
            s.push_back(step);
        }
        self
    }

    /// Appends an instant answer.
    pub fn reply(self, text: &str) -> Self {
        self.reply_after(text, Duration::ZERO)
    }

    /// Appends an answer after a delay.
    pub fn reply_after(self, text: &str, delay: Duration) -> Self {
        self.step(Step::Reply {
            text: text.to_owned(),
            delay,
        })
    }

    /// Appends an instant failure of `kind`.
    pub fn fail(self, kind: ErrorKind) -> Self {
        self.fail_with(Error::new(kind, "scripted failure"), Duration::ZERO)
    }

    /// Appends a failure after a delay.
    pub fn fail_with(self, error: Error, delay: Duration) -> Self {
        self.step(Step::Fail { error, delay })
    }

    /// Appends a call that never answers.
    pub fn hang(self) -> Self {
        self.step(Step::Hang)
    }

    /// Appends a scripted stream.
    pub fn stream_items(self, items: Vec<(Duration, StreamItem)>) -> Self {
        self.step(Step::Stream(items))
    }

    /// Calls made so far (chat and stream).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The requests of every call so far (chat and stream), in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        match self.seen.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn record(&self, req: &ChatRequest) {
        match self.seen.lock() {
            Ok(mut s) => s.push(req.clone()),
            Err(poisoned) => poisoned.into_inner().push(req.clone()),
        }
    }

    /// The most calls that were in flight at once.
    pub fn peak_concurrency(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    fn next_step(&self) -> Step {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut script = match self.script.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if script.len() > 1 {
            script.pop_front().unwrap_or(Step::Hang)
        } else {
            script.front().cloned().unwrap_or(Step::Reply {
                text: "ok".to_owned(),
                delay: Duration::ZERO,
            })
        }
    }

    /// A scripted failure: `error`, tagged with this model, after `delay`.
    async fn fail_after(&self, error: Error, delay: Duration) -> Error {
        tokio::time::sleep(delay).await;
        self.tag(error)
    }

    /// Starts a call of `req`: records it, counts it in flight until the guard drops, and takes
    /// the script's next step.
    fn begin(&self, req: &ChatRequest) -> (InFlight<'_>, Step) {
        self.record(req);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        (InFlight(self), self.next_step())
    }

    fn tag(&self, e: Error) -> Error {
        if e.provider().is_some() {
            e
        } else {
            e.with_provider(self.id.name.clone(), self.id.model.clone())
        }
    }

    /// Plays the next step of the script.
    async fn play(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let (_guard, step) = self.begin(req);
        match step {
            Step::Reply { text, delay } => {
                tokio::time::sleep(delay).await;
                let input = crate::tokens::estimate_request(req);
                Ok(ChatResponse::new(text)
                    .with_model(self.id.model.to_string())
                    .with_usage(Usage::new(u64::from(input), 1).priced(self.caps.price.as_ref())))
            }
            Step::Fail { error, delay } => Err(self.fail_after(error, delay).await),
            Step::Hang => Err(hang().await),
            Step::Stream(items) => crate::stream::collect(item_stream(items))
                .await
                .map_err(|e| self.tag(e))
                .and_then(|r| ctx.check().map(|()| r)),
        }
    }
}

/// A call that never answers: the error is for the type only, as the future never ends.
async fn hang() -> Error {
    std::future::pending::<()>().await;
    Error::cancelled()
}

fn item_stream(items: Vec<(Duration, StreamItem)>) -> ChatStream {
    Box::pin(async_stream::stream! {
        for (delay, item) in items {
            tokio::time::sleep(delay).await;
            match item {
                StreamItem::Event(ev) => yield Ok(ev),
                StreamItem::Error(e) => { yield Err(e); return; }
                StreamItem::Stall => std::future::pending::<()>().await,
            }
        }
    })
}

/// A model whose answer is a plain function of the request and the context, given after an
/// optional delay: for fakes whose only behaviour is what they answer (a counter, a recorder,
/// a fixed reply), so they need not each write the [`ChatModel`] impl out.
///
/// `stream` is the trait's default (the answer replayed as one stream); `bounds_itself` and
/// `refusal` are the trait's defaults too, and `liveness` is the trait's unless given.
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::FnModel;
/// use ripcord_core::{Capabilities, ChatModel, ChatRequest, ChatResponse, Context, ModelId};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let m = FnModel::new(
///     ModelId::new("echo", "echo-1"),
///     Capabilities::new(8192, 512),
///     |req: &ChatRequest, _ctx: &Context| Ok(ChatResponse::new(req.messages[0].text())),
/// );
/// let r = m.chat(&ChatRequest::user("hi"), &Context::new()).await.unwrap();
/// assert_eq!(r.text(), "hi");
/// # }
/// ```
pub struct FnModel<F> {
    id: ModelId,
    caps: Capabilities,
    delay: Duration,
    liveness: Option<Arc<dyn Liveness>>,
    answer: F,
}

impl<F> FnModel<F>
where
    F: Fn(&ChatRequest, &Context) -> Result<ChatResponse> + Send + Sync,
{
    /// A model `id` with `caps` that answers every call with `answer` at once.
    pub fn new(id: ModelId, caps: Capabilities, answer: F) -> Self {
        FnModel {
            id,
            caps,
            delay: Duration::ZERO,
            liveness: None,
            answer,
        }
    }

    /// Gives the model this liveness check ([`ChatModel::liveness`]).
    pub fn with_liveness(mut self, liveness: Arc<dyn Liveness>) -> Self {
        self.liveness = Some(liveness);
        self
    }

    /// Makes every call take `delay` (on tokio's clock) after `answer` has run: what the
    /// function records, it records when the call starts.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

impl<F> std::fmt::Debug for FnModel<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnModel")
            .field("id", &self.id)
            .field("delay", &self.delay)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<F> ChatModel for FnModel<F>
where
    F: Fn(&ChatRequest, &Context) -> Result<ChatResponse> + Send + Sync,
{
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let answer = (self.answer)(req, ctx);
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        answer
    }

    fn liveness(&self) -> Option<Arc<dyn Liveness>> {
        self.liveness.clone()
    }
}

/// A conversation of `turns` question-and-answer pairs after a system prompt, each turn padded
/// with `words` words, ending with one more user question: a prompt whose oldest turns a
/// [`crate::chain::Trim`] can drop.
pub fn conversation(turns: usize, words: usize) -> ChatRequest {
    let mut messages = vec![crate::request::Message::system("Be brief.")];
    for i in 0..turns {
        let pad = "words ".repeat(words);
        messages.push(crate::request::Message::user(format!("question {i} {pad}")));
        messages.push(crate::request::Message::assistant(format!(
            "answer {i} {pad}"
        )));
    }
    messages.push(crate::request::Message::user("and now?"));
    ChatRequest::new(messages)
}

/// Reads a stream to its end: every item, errors included, in order.
pub async fn drain(mut stream: ChatStream) -> Vec<Result<StreamEvent>> {
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item);
    }
    items
}

/// A well-formed stream of `chunks` of text, each after `gap`, with usage and finish.
pub fn text_stream(chunks: &[&str], gap: Duration) -> Vec<(Duration, StreamItem)> {
    let mut v: Vec<(Duration, StreamItem)> = chunks
        .iter()
        .map(|c| (gap, StreamItem::Event(StreamEvent::text(*c))))
        .collect();
    v.push((
        Duration::ZERO,
        StreamItem::Event(StreamEvent::Usage {
            usage: Usage::new(5, chunks.len() as u64),
        }),
    ));
    v.push((
        Duration::ZERO,
        StreamItem::Event(StreamEvent::finish(FinishReason::Stop)),
    ));
    v
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        if !self.bounds_itself {
            return self.play(req, ctx).await;
        }
        ctx.run(self.play(req, ctx))
            .await
            .map_err(|e| self.bounded_error(e))
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        if !self.bounds_itself {
            return self.open(req, ctx).await;
        }
        let stream = ctx
            .run(self.open(req, ctx))
            .await
            .map_err(|e| self.bounded_error(e))?;
        // Every event, too, ends at the deadline (the stream bound once content flows, as the
        // HTTP adapters do) or on cancellation.
        let first_ctx = ctx.clone();
        let after_ctx = match ctx.stream_deadline() {
            Some(at) => Context::new()
                .with_cancellation(ctx.cancellation().clone())
                .with_deadline(at),
            None => Context::new().with_cancellation(ctx.cancellation().clone()),
        };
        let id = self.id.clone();
        Ok(Box::pin(async_stream::stream! {
            let mut stream = stream;
            let mut answered = false;
            loop {
                let ctx = if answered { &after_ctx } else { &first_ctx };
                match ctx.run(async { Ok(stream.next().await) }).await {
                    Ok(Some(item)) => {
                        answered |= matches!(&item, Ok(ev) if ev.is_content());
                        yield item
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let e = if e.kind() == ErrorKind::DeadlineExceeded {
                            let e = deadline_timeout().with_provider(id.name.clone(), id.model.clone());
                            if answered { e.with_fault(crate::fault::Fault::Caller) } else { e }
                        } else {
                            e
                        };
                        yield Err(e);
                        return;
                    }
                }
            }
        }))
    }

    fn bounds_itself(&self) -> bool {
        self.bounds_itself
    }

    fn refusal(&self, _ctx: &Context) -> Option<Error> {
        self.refusal.clone()
    }
}

impl ScriptedModel {
    /// The `Timeout` error a self-bounding model reports when the deadline cuts it.
    fn bounded_error(&self, e: Error) -> Error {
        if e.kind() == ErrorKind::DeadlineExceeded {
            self.tag(deadline_timeout())
        } else {
            e
        }
    }

    /// Opens the next step as a stream.
    async fn open(&self, req: &ChatRequest, _ctx: &Context) -> Result<ChatStream> {
        let (_guard, step) = self.begin(req);
        match step {
            Step::Reply { text, delay } => {
                tokio::time::sleep(delay).await;
                Ok(item_stream(text_stream(&[text.as_str()], Duration::ZERO)))
            }
            Step::Fail { error, delay } => Err(self.fail_after(error, delay).await),
            Step::Hang => Err(hang().await),
            Step::Stream(items) => Ok(item_stream(items)),
        }
    }
}

fn deadline_timeout() -> Error {
    Error::timeout(
        crate::error::TimeoutPhase::Total,
        "the call's deadline passed while the scripted model worked",
    )
}
