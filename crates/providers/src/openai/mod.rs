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

use std::fmt;
use std::sync::Arc;

use ::http::header::{HeaderMap, HeaderName, HeaderValue};
use ripcord_core::telemetry;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, EmbeddingModel,
    EmbeddingRequest, EmbeddingResponse, Error, ErrorKind, Locality, ModelId, Provenance, Result,
    async_trait,
};

use crate::driver::{self, Labels};
use crate::http::{self, Auth, Timeouts, Transport};
use crate::models::ModelInfo;

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

pub(crate) use config::Dialect;
pub use config::{AssistantPrefill, MaxTokensField, OPENAI_BASE_URL, OpenAiConfig, OpenAiWire};

/// The engine shared by OpenAI, Azure and the compatible presets.
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
        http::add_custom_headers(&mut headers, &cfg.headers, what)?;
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
            cfg.client,
            setup.auth,
            setup.headers,
            cfg.timeouts,
            setup.vendor,
        )?;
        let name = cfg.name.unwrap_or_else(|| setup.vendor.to_owned());
        Ok(OpenAi {
            id: ModelId::new(name, cfg.model),
            caps: cfg.capabilities.unwrap_or(setup.caps),
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
        let e = &self.engine;
        self.engine = Arc::new(Engine {
            vendor: e.vendor,
            provider: e.provider,
            chat_url: e.chat_url.clone(),
            embeddings_url: e.embeddings_url.clone(),
            models_url: e.models_url.clone(),
            transport: e.transport.clone(),
            dialect: e.dialect,
            responses_url: Some(url),
            prefill_url: e.prefill_url.clone(),
        });
        self
    }

    /// Sends requests that continue a final assistant message to `url` (the engine is rebuilt
    /// once, at construction).
    pub(crate) fn with_prefill_url(mut self, url: http::Target) -> Self {
        let e = &self.engine;
        self.engine = Arc::new(Engine {
            vendor: e.vendor,
            provider: e.provider,
            chat_url: e.chat_url.clone(),
            embeddings_url: e.embeddings_url.clone(),
            models_url: e.models_url.clone(),
            transport: e.transport.clone(),
            dialect: e.dialect,
            responses_url: e.responses_url.clone(),
            prefill_url: Some(url),
        });
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

    /// Which API chat and stream calls go to.
    pub fn wire(&self) -> OpenAiWire {
        if self.engine.responses_url.is_some() {
            OpenAiWire::Responses
        } else {
            OpenAiWire::ChatCompletions
        }
    }

    /// Renames the link (the name the chain, provenance and metrics use).
    pub fn named(mut self, name: impl Into<Arc<str>>) -> Self {
        self.id.name = name.into();
        self
    }

    /// Replaces the capabilities.
    pub fn with_capabilities(mut self, caps: Capabilities) -> Self {
        self.caps = caps;
        self
    }

    /// Replaces the time limits (a client the provider built itself is rebuilt when the
    /// connect limit changes; a shared client keeps its own).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for zero limits; `Network` when a new client cannot be built.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Result<Self> {
        let e = &self.engine;
        let transport = e.transport.with_timeouts(timeouts, e.vendor)?;
        self.engine = Arc::new(Engine {
            vendor: e.vendor,
            provider: e.provider,
            chat_url: e.chat_url.clone(),
            embeddings_url: e.embeddings_url.clone(),
            models_url: e.models_url.clone(),
            transport,
            dialect: e.dialect,
            responses_url: e.responses_url.clone(),
            prefill_url: e.prefill_url.clone(),
        });
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

    /// The span of one attempt: CLIENT kind, the vendor's host as `server.address`.
    fn attempt_span(&self, stream: bool) -> tracing::Span {
        let e = &self.engine;
        telemetry::attempt_span(
            telemetry::operation::CHAT,
            e.provider,
            &self.id,
            stream,
            e.chat_url.host_str(),
            telemetry::SpanKind::Client,
        )
    }

    fn labels(&self) -> Labels {
        Labels {
            name: self.id.name.clone(),
            model: self.id.model.clone(),
            auth: self.engine.transport.auth.clone(),
        }
    }

    /// Sends a Chat Completions request (streamed or not), a vendor error status classified.
    async fn send_chat(
        &self,
        req: &ChatRequest,
        ctx: &Context,
        stream: bool,
    ) -> Result<(http::Response, tokio::time::Instant)> {
        let e = &self.engine;
        let body = request::chat_body(&self.id.model, req, &e.dialect, stream)?;
        let hook = e.dialect.hook;
        e.transport
            .send(
                ctx,
                self.chat_target(req),
                body,
                stream,
                |status, headers, raw| error_map::from_response(status, headers, raw, hook),
            )
            .await
    }

    async fn chat_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let e = &self.engine;
        if let Some(url) = &e.responses_url {
            return self.responses_chat(url, req, ctx).await;
        }
        let (mut resp, started) = self.send_chat(req, ctx, false).await?;
        let raw = e.transport.body(ctx, started, &mut resp).await?;
        let mut r = response::parse_chat(&raw, e.dialect.hook, self.caps.price.as_ref())?;
        r.provenance = Provenance::served(
            self.id.name.clone(),
            self.id.model.clone(),
            started.elapsed(),
        );
        Ok(r)
    }

    async fn stream_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let e = &self.engine;
        if let Some(url) = &e.responses_url {
            return self.responses_stream(url, req, ctx).await;
        }
        let (mut resp, started) = self.send_chat(req, ctx, true).await?;
        if http::is_json(&resp) {
            // An error object with status 200, or a server that ignored `stream: true` and sent
            // the whole answer: classify the first, replay the second as a stream.
            let raw = e.transport.body(ctx, started, &mut resp).await?;
            let mut r = response::parse_chat(&raw, e.dialect.hook, self.caps.price.as_ref())?;
            r.provenance = Provenance::served(
                self.id.name.clone(),
                self.id.model.clone(),
                started.elapsed(),
            );
            return Ok(ripcord_core::stream::from_response(r));
        }
        let decoder = stream::OpenAiDecoder::new(e.dialect.hook, self.caps.price);
        Ok(driver::drive(
            resp,
            decoder,
            ctx,
            e.transport.timeouts,
            started,
            self.labels(),
        ))
    }

    /// A chat call on the Responses API.
    async fn responses_chat(
        &self,
        url: &http::Target,
        req: &ChatRequest,
        ctx: &Context,
    ) -> Result<ChatResponse> {
        let e = &self.engine;
        let body = responses::body(&self.id.model, req, false)?;
        let hook = e.dialect.hook;
        let (mut resp, started) = e
            .transport
            .send(ctx, url, body, false, |status, headers, raw| {
                error_map::from_response(status, headers, raw, hook)
            })
            .await?;
        let raw = e.transport.body(ctx, started, &mut resp).await?;
        let mut r = responses::parse(&raw, hook, self.caps.price.as_ref())?;
        r.provenance = Provenance::served(
            self.id.name.clone(),
            self.id.model.clone(),
            started.elapsed(),
        );
        Ok(r)
    }

    /// A stream on the Responses API.
    async fn responses_stream(
        &self,
        url: &http::Target,
        req: &ChatRequest,
        ctx: &Context,
    ) -> Result<ChatStream> {
        let e = &self.engine;
        let body = responses::body(&self.id.model, req, true)?;
        let hook = e.dialect.hook;
        let (mut resp, started) = e
            .transport
            .send(ctx, url, body, true, |status, headers, raw| {
                error_map::from_response(status, headers, raw, hook)
            })
            .await?;
        if http::is_json(&resp) {
            // An error object with status 200, or a server that ignored `stream: true`.
            let raw = e.transport.body(ctx, started, &mut resp).await?;
            let mut r = responses::parse(&raw, hook, self.caps.price.as_ref())?;
            r.provenance = Provenance::served(
                self.id.name.clone(),
                self.id.model.clone(),
                started.elapsed(),
            );
            return Ok(ripcord_core::stream::from_response(r));
        }
        let decoder = responses::ResponsesDecoder::new(hook, self.caps.price);
        Ok(driver::drive(
            resp,
            decoder,
            ctx,
            e.transport.timeouts,
            started,
            self.labels(),
        ))
    }

    async fn embed_inner(
        &self,
        req: &EmbeddingRequest,
        ctx: &Context,
    ) -> Result<EmbeddingResponse> {
        let e = &self.engine;
        let body = request::embedding_body(&self.id.model, req)?;
        let hook = e.dialect.hook;
        let (mut resp, started) = e
            .transport
            .send(
                ctx,
                &e.embeddings_url,
                body,
                false,
                |status, headers, raw| error_map::from_response(status, headers, raw, hook),
            )
            .await?;
        let raw = e.transport.body(ctx, started, &mut resp).await?;
        let mut r = response::parse_embeddings(&raw, req.len(), e.dialect.hook)?;
        r.served_by = Some(self.id.name.clone());
        Ok(r)
    }
}

#[async_trait]
impl ChatModel for OpenAi {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// Every wait on the network runs under the phase limits, the context's deadline and its
    /// cancellation (`http::guard`), so a stack of decorators needs no timer of its own.
    fn bounds_itself(&self) -> bool {
        true
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

    /// Each call is one attempt span (see [`telemetry::attempt_span`]), recorded here, so a
    /// link composed by hand (`OpenAi` inside a retry decorator) has one span per attempt
    /// without a [`telemetry::TracedModel`] around it.
    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let call = async {
            self.chat_inner(req, ctx)
                .await
                .map_err(|e| self.labels().finish(e))
        };
        telemetry::traced_chat(self.attempt_span(false), req, call).await
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let call = async {
            self.stream_inner(req, ctx)
                .await
                .map_err(|e| self.labels().finish(e))
        };
        telemetry::traced_stream(self.attempt_span(true), req, call).await
    }
}

#[async_trait]
impl EmbeddingModel for OpenAi {
    fn embedding_id(&self) -> &ModelId {
        &self.id
    }

    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse> {
        self.embed_inner(req, ctx)
            .await
            .map_err(|e| self.labels().finish(e))
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
