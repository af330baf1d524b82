//! [`TracedModel`]: the decorator that records attempt spans for a model that does not.

use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use async_trait::async_trait;
use futures::Stream;
use tracing::Span;

use crate::capabilities::Locality;
use crate::context::Context;
use crate::error::Result;
use crate::model::ChatModel;
use crate::request::ChatRequest;
use crate::response::ChatResponse;
use crate::stream::{ChatStream, StreamEvent};

use super::spans::output_messages_json;
use super::*;

/// A decorator that puts every call of a model in an [`attempt_span`] and records its
/// outcome: the easiest way to instrument a model that does not do it itself (the local model,
/// your own). ripcord's HTTP adapters record their own attempt spans; do not wrap them.
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

    crate::setters! {
        /// Sets `server.address` (a host name; never a URL with credentials).
        with_server_address(host: impl Into<String>) => server_address = Some(host.into());
        /// Overrides the span kind.
        with_kind(kind: SpanKind) => kind = kind;
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
impl<M: ChatModel> crate::Decorator for TracedModel<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        traced_chat(self.span(false), req, self.inner.chat(req, ctx)).await
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        traced_stream(self.span(true), req, self.inner.stream(req, ctx)).await
    }
}

/// Runs one call inside `span` (an [`attempt_span`]) and records its outcome: the prompt (when
/// content recording is on), then the answer or the error. What [`TracedModel`] does for each
/// call, for an adapter that records its own attempt spans.
///
/// # Examples
///
/// ```
/// use ripcord_core::telemetry::{self, SpanKind};
/// use ripcord_core::{ChatRequest, ChatResponse, ModelId};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let id = ModelId::new("primary", "gpt-4o");
/// let span = telemetry::attempt_span("chat", "openai", &id, false, None, SpanKind::Client);
/// let req = ChatRequest::user("hi");
/// let r = telemetry::traced_chat(span, &req, async { Ok(ChatResponse::new("hello")) }).await;
/// assert_eq!(r.unwrap().text(), "hello");
/// # }
/// ```
pub async fn traced_chat(
    span: Span,
    req: &ChatRequest,
    call: impl Future<Output = Result<ChatResponse>>,
) -> Result<ChatResponse> {
    use tracing::Instrument;
    record_prompt(&span, req);
    let result = call.instrument(span.clone()).await;
    match &result {
        Ok(resp) => record_response(&span, resp),
        Err(e) => record_error(&span, e),
    }
    result
}

/// As [`traced_chat`], for a stream: the span stays open until the stream ends or is dropped,
/// and records the time to the first content event, usage, the finish reason, or the error.
/// Returns the stream unwrapped (no allocation) when no subscriber listens.
pub async fn traced_stream(
    span: Span,
    req: &ChatRequest,
    call: impl Future<Output = Result<ChatStream>>,
) -> Result<ChatStream> {
    use tracing::Instrument;
    record_prompt(&span, req);
    let started = tokio::time::Instant::now();
    match call.instrument(span.clone()).await {
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
