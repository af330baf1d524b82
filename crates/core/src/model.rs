//! The `ChatModel` and `EmbeddingModel` traits every vendor, decorator and chain implements.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::capabilities::Capabilities;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::request::ChatRequest;
use crate::response::{ChatResponse, Usage};
use crate::stream::{self, ChatStream};

/// The name of a link and the model it asks for.
///
/// `name` is what the chain, the provenance and the metrics call the link (`"openai"`,
/// `"primary"`, `"local"`); `model` is the model id sent to the vendor (`"gpt-4o"`).
/// Both are reference-counted so provenance can copy them without allocating.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelId {
    /// The link's name.
    pub name: Arc<str>,
    /// The vendor's model id.
    pub model: Arc<str>,
}

impl ModelId {
    /// A model id.
    pub fn new(name: impl Into<Arc<str>>, model: impl Into<Arc<str>>) -> Self {
        ModelId {
            name: name.into(),
            model: model.into(),
        }
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.name, self.model)
    }
}

/// A chat model: a vendor adapter, a decorator around another model, or a chain of models.
///
/// Object-safe: chains hold `Arc<dyn ChatModel>` of different vendors.
///
/// # Examples
///
/// ```
/// use async_trait::async_trait;
/// use ripcord_core::{Capabilities, ChatModel, ChatRequest, ChatResponse, Context, ModelId, Result};
///
/// #[derive(Debug)]
/// struct Echo { id: ModelId, caps: Capabilities }
///
/// #[async_trait]
/// impl ChatModel for Echo {
///     fn id(&self) -> &ModelId { &self.id }
///     fn capabilities(&self) -> &Capabilities { &self.caps }
///     async fn chat(&self, req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
///         Ok(ChatResponse::new(req.messages.last().map(|m| m.text()).unwrap_or_default()))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let m: Box<dyn ChatModel> = Box::new(Echo { id: ModelId::new("echo", "echo-1"), caps: Capabilities::new(4096, 512) });
/// let r = m.chat(&ChatRequest::user("ping"), &Context::new()).await.unwrap();
/// assert_eq!(r.text(), "ping");
/// # }
/// ```
#[async_trait]
pub trait ChatModel: Send + Sync + fmt::Debug {
    /// The link's name and model.
    fn id(&self) -> &ModelId;

    /// What the model can do.
    fn capabilities(&self) -> &Capabilities;

    /// Answers a request.
    ///
    /// # Errors
    ///
    /// A classified [`crate::Error`]; see [`crate::ErrorKind`].
    ///
    /// # Cancellation
    ///
    /// Dropping the future abandons the call; implementations must stop work and release
    /// resources when dropped, and honour [`Context::deadline`] and [`Context::cancellation`].
    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse>;

    /// Answers a request as a stream of events.
    ///
    /// The default calls [`ChatModel::chat`] and replays the whole answer as one stream.
    ///
    /// # Errors
    ///
    /// Errors before the stream exists are returned here; later ones arrive as stream items. A
    /// stream that ends without [`crate::StreamEvent::Finish`] must yield an `InvalidResponse`
    /// error instead of ending quietly.
    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let resp = self.chat(req, ctx).await?;
        Ok(stream::from_response(resp))
    }

    /// Whether this model bounds its own calls by the [`Context`]: `chat`, opening a `stream`
    /// and waiting for each event of that stream return on their own, with an error, once
    /// [`Context::deadline`] passes or [`Context::cancellation`] fires, without the caller
    /// having to drop the future.
    ///
    /// Layers that must stop a call at the deadline — the chain, the breaker, retry — race it
    /// against their own timer only when the model does not bound itself; when it does, one
    /// timer (the innermost, which also knows *which* phase ran out) serves the whole stack
    /// instead of one per layer. That keeps timeouts inside the breaker-wrapped call, where
    /// they are recorded as failures.
    ///
    /// The default is `false`: a model is cut from the outside unless it says otherwise. The
    /// HTTP adapters return `true`; a decorator returns its inner model's answer when every wait
    /// it adds is itself bounded by the context. Answer `true` only if it holds for every call:
    /// a model that claims it and then overruns makes the whole call overrun.
    fn bounds_itself(&self) -> bool {
        false
    }

    /// The refusal a call would meet right now before any work or wait, such as an open
    /// circuit breaker; `None` when a call would go ahead (or when the model cannot tell).
    ///
    /// The chain asks each link before calling it and, on `Some`, records the error as that
    /// link's failure and moves on: a link whose breaker is open is skipped without a call
    /// (ARCHITECTURE.md, "Where a request travels"). The answer must be the error `chat` would return, and a model
    /// that answers `Some` books the refusal as it books a refused call (counters, listeners);
    /// it must never claim anything, such as a half-open probe permit, that only a call may
    /// use. `None` promises nothing: the call itself may still be refused.
    ///
    /// The default is `None`. A decorator forwards its inner model's answer, and books the
    /// refusal as it books a failed call, when nothing it does could turn that refusal into
    /// another outcome; [`crate::Decorator`] forwards it by default and lists the decorators
    /// that deliberately do not.
    fn refusal(&self, ctx: &Context) -> Option<Error> {
        let _ = ctx;
        None
    }

    /// A cheap check that the vendor is up, spending no tokens (listing its models), where the
    /// vendor has one; `None` (the default) when it has none.
    ///
    /// An open circuit breaker runs it in the background ([`Liveness`]) so that a vendor that
    /// came back is re-admitted without waiting for user traffic to find out. It must be cheap
    /// and side-effect free; it is never a chat call. Decorators forward it.
    fn liveness(&self) -> Option<Arc<dyn Liveness>> {
        None
    }
}

/// A vendor's cheap liveness check ([`ChatModel::liveness`]), owned apart from the model so a
/// background task can hold it.
///
/// # Examples
///
/// ```
/// use ripcord_core::{async_trait, Context, Liveness, Result};
/// #[derive(Debug)]
/// struct AlwaysUp;
/// #[async_trait]
/// impl Liveness for AlwaysUp {
///     async fn check(&self, _ctx: &Context) -> Result<()> { Ok(()) }
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert!(AlwaysUp.check(&Context::new()).await.is_ok());
/// # }
/// ```
#[async_trait]
pub trait Liveness: Send + Sync + fmt::Debug {
    /// Asks the vendor once whether it is up, under the context's deadline.
    ///
    /// # Errors
    ///
    /// The classified failure when the vendor does not answer with success.
    async fn check(&self, ctx: &Context) -> Result<()>;
}

/// An embedding request: texts to embed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EmbeddingRequest {
    /// The texts.
    pub inputs: Vec<String>,
    /// Requested output dimensions, for models that can shorten their vectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
    /// Inputs given as token ids (one array per input) instead of texts, for models that
    /// accept them ([`EmbeddingModel::accepts_tokens`]); empty when the inputs are texts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<Vec<u32>>,
}

impl EmbeddingRequest {
    /// A request for these texts.
    pub fn new(inputs: Vec<String>) -> Self {
        EmbeddingRequest {
            inputs,
            dimensions: None,
            tokens: Vec::new(),
        }
    }

    /// A request for inputs given as token ids, one array per input (OpenAI's token-array
    /// input, which LangChain's `OpenAIEmbeddings` sends by default).
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_core::EmbeddingRequest;
    /// let req = EmbeddingRequest::from_tokens(vec![vec![9906, 1917]]);
    /// assert!(req.inputs.is_empty());
    /// assert_eq!(req.len(), 1);
    /// ```
    pub fn from_tokens(tokens: Vec<Vec<u32>>) -> Self {
        EmbeddingRequest {
            inputs: Vec::new(),
            dimensions: None,
            tokens,
        }
    }

    /// How many inputs (texts or token arrays) the request holds.
    pub fn len(&self) -> usize {
        if self.tokens.is_empty() {
            self.inputs.len()
        } else {
            self.tokens.len()
        }
    }

    /// True when the request holds no input.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Embedding vectors, one per input, in input order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EmbeddingResponse {
    /// The vectors.
    pub vectors: Vec<Vec<f32>>,
    /// The model that produced them.
    pub model: String,
    /// Token counts.
    pub usage: Usage,
    /// The link that served them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<Arc<str>>,
    /// Every attempt it took, in order, the serving one last — filled by the policies and
    /// chains that try more than once ([`crate::EmbeddingChain`], a retry); empty from a bare
    /// adapter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<crate::response::Attempt>,
}

impl EmbeddingResponse {
    /// A response with these vectors.
    pub fn new(vectors: Vec<Vec<f32>>, model: impl Into<String>) -> Self {
        EmbeddingResponse {
            vectors,
            model: model.into(),
            usage: Usage::default(),
            served_by: None,
            attempts: Vec::new(),
        }
    }
}

/// An embedding model.
///
/// Vectors of different models are not comparable, so an [`crate::EmbeddingChain`] only falls
/// back across endpoints that serve the *same* model.
#[async_trait]
pub trait EmbeddingModel: Send + Sync + fmt::Debug {
    /// The link's name and model.
    fn embedding_id(&self) -> &ModelId;

    /// Embeds the inputs.
    ///
    /// # Errors
    ///
    /// A classified [`crate::Error`].
    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse>;

    /// True when the model takes inputs as token ids ([`EmbeddingRequest::tokens`]); a caller
    /// refuses such a request up front for a model that does not (the default).
    fn accepts_tokens(&self) -> bool {
        false
    }
}

#[async_trait]
impl<M: EmbeddingModel + ?Sized> EmbeddingModel for Arc<M> {
    fn embedding_id(&self) -> &ModelId {
        (**self).embedding_id()
    }
    fn accepts_tokens(&self) -> bool {
        (**self).accepts_tokens()
    }
    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse> {
        (**self).embed(req, ctx).await
    }
}
