//! Test models.

use std::sync::Mutex;
use std::time::Duration;

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Decorator, ErrorKind,
    ModelId, Result, StreamEvent, Usage, async_trait,
};
use ripcord_resilience::{
    BreakerPolicy, BreakerPolicyBuilder, HedgeDelay, HedgePolicy, HedgePolicyBuilder,
    RateLimitPolicy,
};

/// A model that keeps the trait's contract about deadlines: it stops at the context's deadline
/// and on cancellation, whatever its script says.
#[derive(Debug)]
pub(crate) struct Honest<M>(pub M);

#[async_trait]
impl<M: ChatModel> Decorator for Honest<M> {
    type Inner = M;
    fn inner(&self) -> &M {
        &self.0
    }
    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        ctx.run(self.0.chat(req, ctx)).await
    }
    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        ctx.run(self.0.stream(req, ctx)).await
    }
}

/// A model that records the text of each request when it starts serving it, takes `delay`,
/// and reports `usage` (or the prompt estimate plus one when `None`).
#[derive(Debug)]
pub(crate) struct Recorder {
    id: ModelId,
    caps: Capabilities,
    delay: Duration,
    usage: Option<Usage>,
    seen: Mutex<Vec<String>>,
}

impl Recorder {
    pub(crate) fn new(name: &str, delay: Duration) -> Self {
        Recorder {
            id: ModelId::new(name, format!("{name}-model")),
            caps: Capabilities::new(128_000, 4096),
            delay,
            usage: None,
            seen: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    pub(crate) fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for Recorder {
    fn id(&self) -> &ModelId {
        &self.id
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn chat(&self, req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        let text = req.messages.last().map(|m| m.text()).unwrap_or_default();
        self.seen.lock().unwrap().push(text.clone());
        tokio::time::sleep(self.delay).await;
        let usage = self.usage.unwrap_or_else(|| {
            Usage::new(u64::from(ripcord_core::tokens::estimate_request(req)), 1)
        });
        Ok(ChatResponse::new(format!("re: {text}")).with_usage(usage))
    }
}

/// A breaker that trips after `failures` failures in a row and stays open for `open`, to be
/// set further.
pub(crate) fn tripping(failures: u32, open: Duration) -> BreakerPolicyBuilder {
    BreakerPolicy::builder()
        .consecutive_failures(failures)
        .open_for(open)
}

/// A breaker that trips after `failures` failures in a row and stays open for `open`.
pub(crate) fn breaker(failures: u32, open: Duration) -> BreakerPolicy {
    tripping(failures, open).build().unwrap()
}

/// A token rate limit of `tpm` tokens a minute under which a call waits up to `max_wait`.
pub(crate) fn tpm_waiting(tpm: u32, max_wait: Duration) -> RateLimitPolicy {
    RateLimitPolicy::builder()
        .tpm(tpm)
        .max_wait(max_wait)
        .build()
        .unwrap()
}

/// A hedge that starts at the primary's p95 latency once `min_samples` successes are known,
/// and after `initial` until then; to be set further.
pub(crate) fn p95_hedge(initial: Duration, min_samples: usize) -> HedgePolicyBuilder {
    HedgePolicy::builder().delay(HedgeDelay::P95 {
        initial,
        min_samples,
    })
}

pub(crate) fn req() -> ChatRequest {
    ChatRequest::user("Why is the sky blue?")
}

pub(crate) fn scripted(name: &str) -> ScriptedModel {
    ScriptedModel::new(name)
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The stream `m` opens for `req()` on a fresh context.
pub(crate) async fn open_stream(m: &impl ChatModel) -> ChatStream {
    m.stream(&req(), &Context::new()).await.unwrap()
}

/// Every item of one stream of `req()` on a fresh context: the setup the stream tests share.
pub(crate) async fn stream_all(m: &impl ChatModel) -> Vec<Result<StreamEvent>> {
    futures::StreamExt::collect(open_stream(m).await).await
}

/// The kind of the error that ends a stream's items.
pub(crate) fn last_err_kind(items: &[Result<StreamEvent>]) -> ErrorKind {
    items.last().unwrap().as_ref().unwrap_err().kind()
}

/// The answer to `req()` on a fresh context.
pub(crate) async fn chat_ok(m: &impl ChatModel) -> ChatResponse {
    m.chat(&req(), &Context::new()).await.unwrap()
}

/// The outcome of `req()` on a fresh context with `timeout` to go.
pub(crate) async fn chat_within(m: &impl ChatModel, timeout: Duration) -> Result<ChatResponse> {
    m.chat(&req(), &Context::new().with_timeout(timeout)).await
}

/// The error `req()` on a fresh context fails with.
pub(crate) async fn chat_err(m: &impl ChatModel) -> ripcord_core::Error {
    m.chat(&req(), &Context::new()).await.unwrap_err()
}

/// The error kind of each attempt an answer's provenance records, in order.
pub(crate) fn attempt_kinds(resp: &ChatResponse) -> Vec<Option<ErrorKind>> {
    resp.provenance
        .attempts
        .iter()
        .map(|a| a.error_kind)
        .collect()
}

/// How long `n` calls of `req` in a row take, each allowed `timeout`.
pub(crate) async fn time_calls(
    m: &impl ChatModel,
    n: usize,
    req: &ChatRequest,
    timeout: Duration,
) -> Duration {
    let start = tokio::time::Instant::now();
    for _ in 0..n {
        m.chat(req, &Context::new().with_timeout(timeout))
            .await
            .unwrap();
    }
    start.elapsed()
}

/// Starts a call of `req()` to `m` under `ctx` on a task of its own.
pub(crate) fn spawn_chat<M>(
    m: &std::sync::Arc<M>,
    ctx: Context,
) -> tokio::task::JoinHandle<Result<ChatResponse>>
where
    M: ChatModel + Send + Sync + 'static,
{
    let m = std::sync::Arc::clone(m);
    tokio::spawn(async move { m.chat(&req(), &ctx).await })
}

/// Calls `m` under a cancellation token, cancels it after `after`, and returns the kind of the
/// call's error.
pub(crate) async fn cancel_after<M>(m: &std::sync::Arc<M>, after: Duration) -> ErrorKind
where
    M: ChatModel + Send + Sync + 'static,
{
    let token = ripcord_core::CancellationToken::new();
    let ctx = Context::new().with_cancellation(token.clone());
    let call = spawn_chat(m, ctx);
    tokio::time::sleep(after).await;
    token.cancel();
    call.await.unwrap().unwrap_err().kind()
}
