//! One attempt of a chat call, the part every adapter shares: its span, its labelled errors and
//! the way its answer comes back.
//!
//! The adapters differ in how a request is written and an answer parsed; what happens around
//! that is the same for each of them. A call is one attempt span (CLIENT kind, the vendor's host
//! as `server.address`); its error is named after the link and scrubbed of the key
//! ([`Labels::finish`]); a whole answer is marked as served by the link, timed from when the
//! request was sent; and a stream call that gets a JSON body instead of a stream (an error
//! object with status 200, or a server or proxy that answered in one piece) parses it — so the
//! error is classified, or the answer replayed as a stream — instead of failing to decode it.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use ripcord_core::telemetry;
use ripcord_core::{
    ChatRequest, ChatResponse, ChatStream, Context, Error, Liveness, ModelId, Provenance, Result,
};
use tokio::time::Instant;

use crate::driver::{self, Decoder, Framer, Labels};
use crate::http::{self, Target, Transport};

/// The span of one chat attempt of `id` at `url` for `provider` (a `gen_ai.provider.name`).
pub(crate) fn span(
    provider: &'static str,
    id: &ModelId,
    stream: bool,
    url: &Target,
) -> tracing::Span {
    telemetry::attempt_span(
        telemetry::operation::CHAT,
        provider,
        id,
        stream,
        url.host_str(),
        telemetry::SpanKind::Client,
    )
}

impl Labels {
    /// The labels of the link `id` whose requests go through `transport`.
    pub(crate) fn of(id: &ModelId, transport: &Transport) -> Labels {
        Labels {
            name: id.name.clone(),
            model: id.model.clone(),
            auth: transport.auth.clone(),
        }
    }
}

/// The answer to one request, on its way back to the caller.
pub(crate) struct Answer<'a> {
    transport: &'a Transport,
    ctx: &'a Context,
    id: &'a ModelId,
    resp: http::Response,
    started: Instant,
}

impl<'a> Answer<'a> {
    /// The answer `sent` (what [`Transport::send`] returned) got, for the link `id`.
    pub(crate) fn new(
        transport: &'a Transport,
        ctx: &'a Context,
        id: &'a ModelId,
        sent: (http::Response, Instant),
    ) -> Self {
        let (resp, started) = sent;
        Answer {
            transport,
            ctx,
            id,
            resp,
            started,
        }
    }

    /// Reads the whole body, under the time limits.
    ///
    /// # Errors
    ///
    /// A body that cannot be read in time or is too large.
    pub(crate) async fn bytes(&mut self) -> Result<Bytes> {
        self.transport
            .body(self.ctx, self.started, &mut self.resp)
            .await
    }

    /// Reads the whole body and parses it with `parse`; the response is marked as served by
    /// the link, timed from when the request was sent.
    ///
    /// # Errors
    ///
    /// Those of [`Answer::bytes`], or `parse`'s error.
    pub(crate) async fn whole(
        mut self,
        parse: impl FnOnce(&[u8]) -> Result<ChatResponse>,
    ) -> Result<ChatResponse> {
        let raw = self.bytes().await?;
        let mut r = parse(&raw)?;
        r.provenance = Provenance::served(
            self.id.name.clone(),
            self.id.model.clone(),
            self.started.elapsed(),
        );
        Ok(r)
    }

    /// Reads the whole body and parses it with `parse` as embeddings, marked as served by the
    /// link.
    ///
    /// # Errors
    ///
    /// Those of [`Answer::bytes`], or `parse`'s error.
    #[cfg(any(feature = "openai", feature = "gemini"))]
    pub(crate) async fn embeddings(
        mut self,
        parse: impl FnOnce(&[u8]) -> Result<ripcord_core::EmbeddingResponse>,
    ) -> Result<ripcord_core::EmbeddingResponse> {
        let raw = self.bytes().await?;
        let mut r = parse(&raw)?;
        r.served_by = Some(self.id.name.clone());
        Ok(r)
    }

    /// The answer of a stream call: frames cut by `framer` and decoded by `decoder`, or — for a
    /// JSON body — [`Answer::whole`] with `parse`, replayed as a stream.
    ///
    /// # Errors
    ///
    /// Those of [`Answer::whole`] for a JSON body; a stream's own errors arrive in the stream.
    pub(crate) async fn stream<P: Framer, D: Decoder<P::Frame>>(
        self,
        parse: impl FnOnce(&[u8]) -> Result<ChatResponse>,
        framer: P,
        decoder: D,
    ) -> Result<ChatStream> {
        if http::is_json(&self.resp) {
            return Ok(ripcord_core::stream::from_response(
                self.whole(parse).await?,
            ));
        }
        let labels = Labels::of(self.id, self.transport);
        Ok(driver::drive_framed(
            self.resp,
            framer,
            decoder,
            self.ctx,
            self.transport.timeouts,
            self.started,
            labels,
        ))
    }
}

/// What an adapter supplies; [`link_impls!`] writes the rest of its [`ChatModel`] impl from it.
///
/// [`ChatModel`]: ripcord_core::ChatModel
pub(crate) trait Adapter: Send + Sync {
    /// The link's `gen_ai.provider.name`, its id, the endpoint its spans name (as
    /// `server.address`) and its transport.
    fn parts(&self) -> (&'static str, &ModelId, &Target, &Transport);

    /// The span of one attempt (see [`span`]).
    fn span(&self, stream: bool) -> tracing::Span {
        let (provider, id, url, _) = self.parts();
        span(provider, id, stream, url)
    }

    /// A failed call's error, named after the link and scrubbed of its key (see
    /// [`Labels::finish`]).
    fn finish(&self, e: Error) -> Error {
        let (_, id, _, transport) = self.parts();
        Labels::of(id, transport).finish(e)
    }

    /// One chat call; its error is finished by the caller.
    fn chat_inner(
        &self,
        req: &ChatRequest,
        ctx: &Context,
    ) -> impl Future<Output = Result<ChatResponse>> + Send;

    /// One stream call; its error before the stream is finished by the caller.
    fn stream_inner(
        &self,
        req: &ChatRequest,
        ctx: &Context,
    ) -> impl Future<Output = Result<ChatStream>> + Send;

    /// A probe for an open breaker, if the vendor has a cheap one (a model list).
    fn liveness(&self) -> Option<Arc<dyn Liveness>> {
        None
    }
}

/// [`ChatModel::chat`](ripcord_core::ChatModel::chat) of an adapter: one attempt span, the
/// error finished.
pub(crate) async fn chat<A: Adapter>(
    a: &A,
    req: &ChatRequest,
    ctx: &Context,
) -> Result<ChatResponse> {
    let call = async { a.chat_inner(req, ctx).await.map_err(|e| a.finish(e)) };
    telemetry::traced_chat(a.span(false), req, call).await
}

/// [`ChatModel::stream`](ripcord_core::ChatModel::stream) of an adapter, as [`chat`].
pub(crate) async fn stream<A: Adapter>(
    a: &A,
    req: &ChatRequest,
    ctx: &Context,
) -> Result<ChatStream> {
    let call = async { a.stream_inner(req, ctx).await.map_err(|e| a.finish(e)) };
    telemetry::traced_stream(a.span(true), req, call).await
}

/// Writes what every adapter shares on an [`Adapter`] that keeps its [`ModelId`] in a field
/// `id` and its capabilities in `caps`: the `named` and `with_capabilities` setters, and its
/// [`ChatModel`](ripcord_core::ChatModel) impl.
///
/// Each call is one attempt span (see [`telemetry::attempt_span`]), recorded here, so a link
/// composed by hand (an adapter inside a retry decorator) has one span per attempt without a
/// [`telemetry::TracedModel`] around it. Every adapter bounds itself: each wait on the network
/// runs under the phase limits, the context's deadline and its cancellation (`http::guard`,
/// a token exchange included), so a stack of decorators needs no timer of its own. The wrappers
/// around the OpenAI engine forward theirs with `engine_wrapper!`.
macro_rules! link_impls {
    ($adapter:ty) => {
        impl $adapter {
            /// Renames the link (the name the chain, provenance and metrics use).
            pub fn named(mut self, name: impl Into<std::sync::Arc<str>>) -> Self {
                self.id.name = name.into();
                self
            }

            /// Replaces the capabilities.
            pub fn with_capabilities(mut self, caps: ripcord_core::Capabilities) -> Self {
                self.caps = caps;
                self
            }
        }

        #[ripcord_core::async_trait]
        impl ripcord_core::ChatModel for $adapter {
            fn id(&self) -> &ripcord_core::ModelId {
                &self.id
            }

            fn capabilities(&self) -> &ripcord_core::Capabilities {
                &self.caps
            }

            fn bounds_itself(&self) -> bool {
                true
            }

            fn liveness(&self) -> Option<std::sync::Arc<dyn ripcord_core::Liveness>> {
                $crate::attempt::Adapter::liveness(self)
            }

            async fn chat(
                &self,
                req: &ripcord_core::ChatRequest,
                ctx: &ripcord_core::Context,
            ) -> ripcord_core::Result<ripcord_core::ChatResponse> {
                $crate::attempt::chat(self, req, ctx).await
            }

            async fn stream(
                &self,
                req: &ripcord_core::ChatRequest,
                ctx: &ripcord_core::Context,
            ) -> ripcord_core::Result<ripcord_core::ChatStream> {
                $crate::attempt::stream(self, req, ctx).await
            }
        }
    };
}
pub(crate) use link_impls;
