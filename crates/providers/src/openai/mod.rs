//! OpenAI Chat Completions and Embeddings.
//!
//! API reference: <https://platform.openai.com/docs/api-reference/chat/create>,
//! streaming: <https://platform.openai.com/docs/api-reference/chat-streaming>,
//! errors: <https://platform.openai.com/docs/guides/error-codes>.
//!
//! The same engine serves Azure OpenAI ([`crate::AzureOpenAi`]) and every OpenAI-compatible
//! preset ([`crate::compat`]): they differ only in URLs, the auth header, a few wire details
//! (the [`MaxTokensField`], whether `json_schema` is understood) and the vendor's own error
//! codes — a [`Dialect`] — never in code paths.

pub mod chat_wire;
mod config;
pub(crate) mod error_map;
pub(crate) mod models;
mod request;
pub(crate) mod response;
mod responses;
pub mod responses_wire;
mod stream;
mod wire_de;

use std::fmt;
use std::sync::Arc;

use ::http::header::{HeaderMap, HeaderName, HeaderValue};
use ripcord_core::telemetry;
use ripcord_core::{
    Capabilities, ChatRequest, ChatResponse, ChatStream, Context, EmbeddingModel, EmbeddingRequest,
    EmbeddingResponse, Error, ErrorKind, Locality, ModelId, Price, Result, async_trait,
};

use crate::attempt::{self, Adapter, Answer};
use crate::error_body::ErrorHook;
use crate::http::{self, Auth, Timeouts, Transport};
use crate::models::ModelInfo;
use crate::sse::SseParser;

/// The boxed future `async_trait` methods return (for the engine's wrappers that hand it on).
pub(crate) type BoxFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// `EmbeddingModel` for a wrapper whose `inner` field is an [`OpenAi`] engine (Azure, the
/// OpenAI-compatible presets): every call is the engine's. Written out as `async_trait`
/// expands it so the engine's own boxed future is returned as it is, without a second box per
/// call.
macro_rules! embeddings_through_inner {
    ($wrapper:ty) => {
        impl ripcord_core::EmbeddingModel for $wrapper {
            fn embedding_id(&self) -> &ripcord_core::ModelId {
                ripcord_core::EmbeddingModel::embedding_id(&self.inner)
            }

            fn accepts_tokens(&self) -> bool {
                ripcord_core::EmbeddingModel::accepts_tokens(&self.inner)
            }

            fn embed<'a, 'b, 'c, 'async_trait>(
                &'a self,
                req: &'b ripcord_core::EmbeddingRequest,
                ctx: &'c ripcord_core::Context,
            ) -> crate::openai::BoxFuture<
                'async_trait,
                ripcord_core::Result<ripcord_core::EmbeddingResponse>,
            >
            where
                'a: 'async_trait,
                'b: 'async_trait,
                'c: 'async_trait,
                Self: 'async_trait,
            {
                ripcord_core::EmbeddingModel::embed(&self.inner, req, ctx)
            }
        }
    };
}
pub(crate) use embeddings_through_inner;

/// `named`, `with_capabilities` and `with_timeouts` for a wrapper whose `inner` field is an
/// [`OpenAi`] engine (Azure, the OpenAI-compatible presets): each rebuilds the wrapper around
/// the engine's own result.
macro_rules! setters_through_inner {
    ($wrapper:ident) => {
        impl $wrapper {
            /// Renames the link.
            pub fn named(self, name: impl Into<std::sync::Arc<str>>) -> Self {
                $wrapper {
                    inner: self.inner.named(name),
                }
            }

            /// Replaces the capabilities.
            pub fn with_capabilities(self, caps: ripcord_core::Capabilities) -> Self {
                $wrapper {
                    inner: self.inner.with_capabilities(caps),
                }
            }

            /// Replaces the time limits; see [`OpenAi::with_timeouts`](crate::OpenAi::with_timeouts).
            ///
            /// # Errors
            ///
            /// As [`OpenAi::with_timeouts`](crate::OpenAi::with_timeouts).
            pub fn with_timeouts(self, timeouts: crate::Timeouts) -> ripcord_core::Result<Self> {
                Ok($wrapper {
                    inner: self.inner.with_timeouts(timeouts)?,
                })
            }
        }
    };
}
pub(crate) use setters_through_inner;

/// Everything a wrapper around the [`OpenAi`] engine (Azure, the OpenAI-compatible presets)
/// forwards to its `inner` field: the setters, [`Decorator`](ripcord_core::Decorator) (chat,
/// stream, the link's identity) and `EmbeddingModel`. Such a wrapper differs only in how it is
/// built.
macro_rules! engine_wrapper {
    ($wrapper:ident) => {
        crate::openai::setters_through_inner!($wrapper);

        /// Everything forwards to the [`OpenAi`](crate::OpenAi) engine inside: this type
        /// differs only in how it is built.
        impl ripcord_core::Decorator for $wrapper {
            type Inner = crate::OpenAi;

            fn inner(&self) -> &crate::OpenAi {
                &self.inner
            }
        }

        crate::openai::embeddings_through_inner!($wrapper);
    };
}
pub(crate) use engine_wrapper;

pub(crate) use config::Dialect;
pub use config::{AssistantPrefill, MaxTokensField, OPENAI_BASE_URL, OpenAiConfig, OpenAiWire};

/// The engine shared by OpenAI, Azure and the compatible presets.
#[derive(Clone)]
pub(crate) struct Engine {
    pub(crate) vendor: &'static str,
    /// The `gen_ai.provider.name` of the attempt spans (the vendor name when it has none).
    pub(crate) provider: &'static str,
    pub(crate) chat_url: http::Target,
    pub(crate) embeddings_url: http::Target,
    /// The model list (`GET`), the liveness check; `None` where the vendor has none here.
    pub(crate) models_url: Option<http::Target>,
    pub(crate) transport: Transport,
    pub(crate) dialect: Dialect,
    /// Set when the link calls the Responses API: chat and stream calls go here instead.
    pub(crate) responses_url: Option<http::Target>,
    /// Where a request that continues a final assistant message goes, when not `chat_url`
    /// ([`AssistantPrefill::Prefix`] with a base suffix).
    pub(crate) prefill_url: Option<http::Target>,
}

/// Parses a 200 chat body (Chat Completions or Responses) with the dialect's hook and the price.
type ParseChat = fn(&[u8], Option<ErrorHook>, Option<&Price>) -> Result<ChatResponse>;

/// What differs between the OpenAI-wire providers when they are built.
pub(crate) struct Setup {
    pub(crate) vendor: &'static str,
    pub(crate) chat_url: http::Target,
    pub(crate) embeddings_url: http::Target,
    pub(crate) models_url: Option<http::Target>,
    pub(crate) auth: Auth,
    pub(crate) headers: HeaderMap,
    pub(crate) dialect: Dialect,
    pub(crate) caps: Capabilities,
}

/// An OpenAI Chat Completions model (also the engine behind Azure and the compatible presets).
///
/// Cloning is cheap and shares the connection pool.
///
/// # Examples
///
/// ```no_run
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_providers::OpenAi;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ripcord_core::Result<()> {
/// let gpt = OpenAi::from_env("gpt-4o")?.named("primary");
/// let reply = gpt.chat(&ChatRequest::user("Why is the sky blue?"), &Context::new()).await?;
/// println!("{}", reply.text());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct OpenAi {
    id: ModelId,
    caps: Capabilities,
    engine: Arc<Engine>,
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("id", &self.id)
            .field("vendor", &self.engine.vendor)
            .field("chat_url", &self.engine.chat_url.as_str())
            .field("auth", &self.engine.transport.auth)
            .field("timeouts", &self.engine.transport.timeouts)
            .finish_non_exhaustive()
    }
}

fn region_of(url: &url::Url) -> Option<&'static str> {
    match url.host_str() {
        Some("api.openai.com") => Some("us"),
        Some(h) if h.starts_with("eu.") && h.ends_with("openai.com") => Some("eu"),
        _ => None,
    }
}

impl OpenAi {
    /// Builds an OpenAI provider.
    ///
    /// # Errors
    ///
    /// `Auth` without an API key (or one that cannot be a header); `InvalidRequest` for a bad
    /// base URL or zero timeouts; `Network` when the TLS backend cannot start.
    pub fn new(cfg: OpenAiConfig) -> Result<OpenAi> {
        let what = "openai";
        let base = cfg
            .http
            .base_url
            .clone()
            .unwrap_or_else(|| OPENAI_BASE_URL.to_owned());
        let chat_url = http::Target::new(http::endpoint(&base, "/chat/completions", what)?, what)?;
        let embeddings_url = http::Target::new(http::endpoint(&base, "/embeddings", what)?, what)?;
        let models_url = Some(http::Target::new(
            http::endpoint(&base, "/models", what)?,
            what,
        )?);
        let key = cfg
            .api_key
            .clone()
            .ok_or_else(|| Error::new(ErrorKind::Auth, "openai: no API key configured"))?;
        let auth = Auth::bearer(key, what)?;
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("openai-organization", &cfg.organization),
            ("openai-project", &cfg.project),
        ] {
            if let Some(v) = value {
                let v = HeaderValue::from_str(v).map_err(|_| {
                    Error::new(
                        ErrorKind::InvalidRequest,
                        format!("openai: invalid {name} header value"),
                    )
                })?;
                headers.insert(HeaderName::from_static(name), v);
            }
        }
        http::add_custom_headers(&mut headers, &cfg.http.headers, what)?;
        let locality = match region_of(&chat_url) {
            Some(r) => Locality::cloud_in("openai", r),
            None => Locality::cloud("openai"),
        };
        let caps =
            ModelInfo::lookup(models::TABLE, &models::DEFAULT, &cfg.model).capabilities(locality);
        let mut dialect = Dialect::openai();
        if let Some(f) = cfg.max_tokens_field {
            dialect.max_tokens = f;
        }
        let responses_url = match cfg.wire {
            OpenAiWire::Responses => Some(http::Target::new(
                http::endpoint(&base, "/responses", what)?,
                what,
            )?),
            _ => None,
        };
        let m = OpenAi::assemble(
            Setup {
                vendor: "openai",
                chat_url,
                embeddings_url,
                models_url,
                auth,
                headers,
                dialect,
                caps,
            },
            cfg,
        )?;
        Ok(match responses_url {
            Some(url) => m.with_responses_url(url),
            None => m,
        })
    }

    /// [`OpenAiConfig::from_env`] then [`OpenAi::new`].
    ///
    /// # Errors
    ///
    /// As both.
    pub fn from_env(model: impl Into<String>) -> Result<OpenAi> {
        OpenAi::new(OpenAiConfig::from_env(model)?)
    }

    /// Builds the provider from a setup and the user's configuration.
    pub(crate) fn assemble(setup: Setup, cfg: OpenAiConfig) -> Result<OpenAi> {
        let transport = Transport::new(
            cfg.http.client,
            setup.auth,
            setup.headers,
            cfg.http.timeouts,
            setup.vendor,
        )?;
        let name = cfg.http.name.unwrap_or_else(|| setup.vendor.to_owned());
        Ok(OpenAi {
            id: ModelId::new(name, cfg.model),
            caps: cfg.http.capabilities.unwrap_or(setup.caps),
            engine: Arc::new(Engine {
                vendor: setup.vendor,
                provider: telemetry::provider_name(setup.vendor).unwrap_or(setup.vendor),
                chat_url: setup.chat_url,
                embeddings_url: setup.embeddings_url,
                models_url: setup.models_url,
                transport,
                dialect: setup.dialect,
                responses_url: None,
                prefill_url: None,
            }),
        })
    }

    /// Sends chat and stream calls to this Responses endpoint (the engine is rebuilt once, at
    /// construction).
    pub(crate) fn with_responses_url(mut self, url: http::Target) -> Self {
        Arc::make_mut(&mut self.engine).responses_url = Some(url);
        self
    }

    /// Sends requests that continue a final assistant message to `url` (the engine is rebuilt
    /// once, at construction).
    pub(crate) fn with_prefill_url(mut self, url: http::Target) -> Self {
        Arc::make_mut(&mut self.engine).prefill_url = Some(url);
        self
    }

    /// The endpoint of a Chat Completions call: the prefill endpoint when the request
    /// continues a final assistant message and the vendor has one.
    fn chat_target(&self, req: &ChatRequest) -> &http::Target {
        let e = &self.engine;
        match &e.prefill_url {
            Some(url) if request::prefills(req, &e.dialect) => url,
            _ => &e.chat_url,
        }
    }

    /// Where a chat or stream call goes, its body, and the parser of a whole answer: the
    /// Responses API when the link calls it, else Chat Completions.
    fn chat_call(
        &self,
        req: &ChatRequest,
        stream: bool,
    ) -> Result<(&http::Target, Vec<u8>, ParseChat)> {
        let e = &self.engine;
        Ok(match &e.responses_url {
            Some(url) => (
                url,
                responses::body(&self.id.model, req, stream)?,
                responses::parse,
            ),
            None => (
                self.chat_target(req),
                request::chat_body(&self.id.model, req, &e.dialect, stream)?,
                response::parse_chat,
            ),
        })
    }

    /// Which API chat and stream calls go to.
    pub fn wire(&self) -> OpenAiWire {
        if self.engine.responses_url.is_some() {
            OpenAiWire::Responses
        } else {
            OpenAiWire::ChatCompletions
        }
    }

    /// Replaces the time limits (a client the provider built itself is rebuilt when the
    /// connect limit changes; a shared client keeps its own).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for zero limits; `Network` when a new client cannot be built.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Result<Self> {
        let e = Arc::make_mut(&mut self.engine);
        e.transport = e.transport.with_timeouts(timeouts, e.vendor)?;
        Ok(self)
    }

    /// The time limits.
    pub fn timeouts(&self) -> &Timeouts {
        &self.engine.transport.timeouts
    }

    /// The chat endpoint.
    #[cfg(all(test, feature = "azure"))]
    pub(crate) fn chat_url(&self) -> &url::Url {
        &self.engine.chat_url
    }

    /// The Responses endpoint, when the link calls it.
    #[cfg(all(test, feature = "azure"))]
    pub(crate) fn responses_url(&self) -> Option<&url::Url> {
        self.engine.responses_url.as_deref()
    }

    /// The `gen_ai.provider.name` of the attempt spans.
    #[cfg(test)]
    pub(crate) fn provider_name(&self) -> &'static str {
        self.engine.provider
    }

    /// Sends `body` to `url`, a vendor error status classified with the dialect's hook.
    async fn send<'a>(
        &'a self,
        ctx: &'a Context,
        url: &http::Target,
        body: Vec<u8>,
        stream: bool,
    ) -> Result<Answer<'a>> {
        let e = &self.engine;
        let hook = e.dialect.hook;
        let sent = e
            .transport
            .send(ctx, url, body, stream, |status, headers, raw| {
                error_map::from_response(status, headers, raw, hook)
            })
            .await?;
        Ok(Answer::new(&e.transport, ctx, &self.id, sent))
    }

    async fn embed_inner(
        &self,
        req: &EmbeddingRequest,
        ctx: &Context,
    ) -> Result<EmbeddingResponse> {
        let e = &self.engine;
        let body = request::embedding_body(&self.id.model, req)?;
        self.send(ctx, &e.embeddings_url, body, false)
            .await?
            .embeddings(|raw| response::parse_embeddings(raw, req.len(), e.dialect.hook))
            .await
    }
}

impl Adapter for OpenAi {
    fn parts(&self) -> (&'static str, &ModelId, &http::Target, &Transport) {
        let e = &self.engine;
        (e.provider, &self.id, &e.chat_url, &e.transport)
    }

    async fn chat_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let (hook, price) = (self.engine.dialect.hook, self.caps.price.as_ref());
        let (url, body, parse) = self.chat_call(req, false)?;
        let answer = self.send(ctx, url, body, false).await?;
        answer.whole(|raw| parse(raw, hook, price)).await
    }

    /// A stream; a JSON body (an error object with status 200, or a server that ignored
    /// `stream: true` and sent the whole answer) is classified or replayed as a stream.
    async fn stream_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let (hook, price) = (self.engine.dialect.hook, self.caps.price);
        let (url, body, parse) = self.chat_call(req, true)?;
        let answer = self.send(ctx, url, body, true).await?;
        let parse = |raw: &[u8]| parse(raw, hook, price.as_ref());
        match self.wire() {
            OpenAiWire::Responses => {
                let decoder = responses::ResponsesDecoder::new(hook, price);
                answer.stream(parse, SseParser::new(), decoder).await
            }
            OpenAiWire::ChatCompletions => {
                let decoder = stream::OpenAiDecoder::new(hook, price);
                answer.stream(parse, SseParser::new(), decoder).await
            }
        }
    }

    /// `GET {base}/models` (spends no tokens), for an open breaker's background probe.
    fn liveness(&self) -> Option<Arc<dyn ripcord_core::Liveness>> {
        let e = &self.engine;
        let target = e.models_url.clone()?;
        let hook = e.dialect.hook;
        Some(Arc::new(http::ListModels::new(
            e.transport.clone(),
            target,
            Box::new(move |status, headers, raw| {
                error_map::from_response(status, headers, raw, hook)
            }),
        )))
    }
}

attempt::link_impls!(OpenAi);

#[async_trait]
impl EmbeddingModel for OpenAi {
    fn embedding_id(&self) -> &ModelId {
        &self.id
    }

    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse> {
        self.embed_inner(req, ctx).await.map_err(|e| self.finish(e))
    }

    /// OpenAI's `/embeddings` takes `input` as token arrays too.
    fn accepts_tokens(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_errors_name_what_and_where() {
        let e = OpenAi::new(OpenAiConfig::new("gpt-4o", "sk-x").with_base_url("not a url"))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        assert!(e.message().contains("openai: invalid base URL"), "{e}");
        let e = OpenAi::new(OpenAiConfig::new("gpt-4o", "sk-x").with_base_url("ftp://x/v1"))
            .unwrap_err();
        assert!(e.message().contains("http or https"), "{e}");
        let e = OpenAi::new(OpenAiConfig::new("gpt-4o", "sk-x").with_base_url("https://u:p@h/v1"))
            .unwrap_err();
        assert!(e.message().contains("credentials"), "{e}");
        let e = OpenAi::new(OpenAiConfig::keyless("gpt-4o")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth);
    }

    #[test]
    fn timeouts_can_be_replaced_after_construction() {
        let m = OpenAi::new(OpenAiConfig::new("gpt-4o", "sk-x")).unwrap();
        let t = Timeouts::default().with_first_token(std::time::Duration::from_secs(7));
        let m = m.with_timeouts(t).unwrap();
        assert_eq!(m.timeouts().first_token, std::time::Duration::from_secs(7));
        let e = m
            .with_timeouts(Timeouts::default().with_connect(std::time::Duration::ZERO))
            .unwrap_err();
        assert!(e.message().contains("timeouts.connect"), "{e}");
    }

    #[test]
    fn id_capabilities_and_urls() {
        let m = OpenAi::new(OpenAiConfig::new("gpt-4o-mini-2024-07-18", "sk-x")).unwrap();
        assert_eq!(&*m.id.name, "openai");
        assert_eq!(&*m.id.model, "gpt-4o-mini-2024-07-18");
        assert_eq!(m.caps.context_window, 128_000);
        assert_eq!(m.caps.price.map(|p| p.input_per_mtok), Some(0.15));
        assert_eq!(m.caps.locality, Locality::cloud_in("openai", "us"));
        assert_eq!(
            m.engine.chat_url.as_str(),
            "https://api.openai.com/v1/chat/completions"
        );
        let m = m.named("primary");
        assert_eq!(&*m.id.name, "primary");
        let unknown = OpenAi::new(
            OpenAiConfig::new("my-finetune", "sk-x").with_base_url("http://127.0.0.1:9/v1/"),
        )
        .unwrap();
        assert_eq!(
            unknown.engine.embeddings_url.as_str(),
            "http://127.0.0.1:9/v1/embeddings"
        );
        assert!(unknown.caps.tools && !unknown.caps.vision && unknown.caps.price.is_none());
        assert_eq!(unknown.caps.locality, Locality::cloud("openai"));
    }
}
