//! The Gemini adapter: one engine for Google AI Studio (`x-goog-api-key`) and, with the
//! `vertex` feature, Vertex AI (OAuth access tokens) — the same wire at different addresses.

use std::fmt;
use std::sync::Arc;

use ::http::header::{HeaderName, HeaderValue};
use ripcord_core::telemetry;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, EmbeddingModel,
    EmbeddingRequest, EmbeddingResponse, Error, ErrorKind, Locality, ModelId, Provenance, Result,
    async_trait,
};
use secrecy::SecretString;

use super::request::{self, Thinking};
use super::{GCP_GEMINI, embed, error_map, models, response, stream};
use crate::driver::{self, Labels};
use crate::http::{self, Auth, HttpClient, Target, Timeouts, Transport};
use crate::models::ModelInfo;

/// The default Gemini API (AI Studio) base URL; requests go to `{base}/models/{model}:…`.
pub const GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// Configuration of a [`Gemini`] provider on Google AI Studio.
///
/// # Examples
///
/// ```
/// use ripcord_providers::google::{Gemini, GeminiConfig, Thinking};
/// let cfg = GeminiConfig::new("gemini-2.5-flash", "AIza-test-key")
///     .with_base_url("http://127.0.0.1:9/v1beta")
///     .with_thinking(Thinking::budget(1024));
/// let g = Gemini::new(cfg)?;
/// assert!(!format!("{g:?}").contains("AIza-test-key"));
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone)]
pub struct GeminiConfig {
    model: String,
    api_key: SecretString,
    base_url: Option<String>,
    name: Option<String>,
    timeouts: Timeouts,
    client: Option<HttpClient>,
    capabilities: Option<Capabilities>,
    thinking: Option<Thinking>,
    headers: Vec<(String, SecretString)>,
}

impl fmt::Debug for GeminiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiConfig")
            .field("model", &self.model)
            .field("api_key", &"[redacted]")
            .field("base_url", &self.base_url)
            .field("name", &self.name)
            .field("timeouts", &self.timeouts)
            .field("thinking", &self.thinking)
            .finish_non_exhaustive()
    }
}

impl GeminiConfig {
    /// A configuration for `model` with this API key.
    pub fn new(model: impl Into<String>, api_key: impl Into<SecretString>) -> Self {
        GeminiConfig {
            model: model.into(),
            api_key: api_key.into(),
            base_url: None,
            name: None,
            timeouts: Timeouts::default(),
            client: None,
            capabilities: None,
            thinking: None,
            headers: Vec::new(),
        }
    }

    /// Reads `GEMINI_API_KEY` (else `GOOGLE_API_KEY`) and `GEMINI_BASE_URL` (optional).
    ///
    /// # Errors
    ///
    /// `Auth` when neither key variable is set.
    pub fn from_env(model: impl Into<String>) -> Result<Self> {
        let key = http::env("GEMINI_API_KEY")
            .or_else(|| http::env("GOOGLE_API_KEY"))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Auth,
                    "gemini: GEMINI_API_KEY (or GOOGLE_API_KEY) is not set",
                )
            })?;
        let mut c = GeminiConfig::new(model, key);
        c.base_url = http::env("GEMINI_BASE_URL");
        Ok(c)
    }

    /// Sets the base URL (default [`GEMINI_BASE_URL`], API version included).
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Sets the link name (default `gemini`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the time limits.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Uses this (shared) HTTP client.
    pub fn with_client(mut self, client: HttpClient) -> Self {
        self.client = Some(client);
        self
    }

    /// Overrides the capabilities from the model table.
    pub fn with_capabilities(mut self, caps: Capabilities) -> Self {
        self.capabilities = Some(caps);
        self
    }

    /// Adds a header sent with every request of this adapter: a gateway's own key behind
    /// Helicone or Portkey, an organization header. The value is kept secret (never in logs or
    /// `Debug`); a name or value that cannot be a header, or a header ripcord sets itself, is
    /// refused when the adapter is built. Call it again for more headers.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<SecretString>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends these thinking settings with every request.
    pub fn with_thinking(mut self, thinking: Thinking) -> Self {
        self.thinking = Some(thinking);
        self
    }
}

/// How a request is authorised beyond the transport's fixed headers.
#[derive(Clone, Debug)]
enum Bearer {
    /// The transport's fixed header says it all (AI Studio's `x-goog-api-key`).
    Fixed,
    /// An OAuth access token, minted and refreshed (Vertex AI).
    #[cfg(feature = "vertex")]
    Token(super::auth::TokenSource),
}

impl Bearer {
    async fn header(&self, _ctx: &Context) -> Result<Option<(HeaderName, HeaderValue)>> {
        match self {
            Bearer::Fixed => Ok(None),
            #[cfg(feature = "vertex")]
            Bearer::Token(t) => Ok(Some((
                ::http::header::AUTHORIZATION,
                t.authorization(_ctx).await?,
            ))),
        }
    }
}

/// Where embeddings go: AI Studio's two methods, or Vertex's prediction endpoint.
#[derive(Clone)]
enum Embed {
    /// `embedContent` (one input) and `batchEmbedContents` (several).
    Studio { one: Target, batch: Target },
    /// `…/publishers/google/models/{m}:predict`, every input an instance, and the task type
    /// sent with each.
    #[cfg(feature = "vertex")]
    Vertex {
        predict: Target,
        task_type: Option<String>,
    },
}

struct Engine {
    /// `gcp.gemini` or `gcp.vertex_ai`, for the attempt spans.
    provider: &'static str,
    generate: Target,
    stream: Target,
    embed: Embed,
    transport: Transport,
    bearer: Bearer,
    thinking: Option<Thinking>,
}

/// A Gemini model on Google AI Studio or (with [`Gemini::vertex`]) on Vertex AI.
///
/// Implements [`ChatModel`] (JSON and streamed) and [`EmbeddingModel`]: on AI Studio
/// `embedContent` for one input and `batchEmbedContents` for several, on Vertex AI the
/// text-embedding `:predict` endpoint (the configured model must then be an embedding model).
///
/// # Examples
///
/// ```no_run
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_providers::google::Gemini;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ripcord_core::Result<()> {
/// let gemini = Gemini::from_env("gemini-2.5-flash")?;
/// let reply = gemini.chat(&ChatRequest::user("Why is the sky blue?"), &Context::new()).await?;
/// println!("{}", reply.text());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Gemini {
    id: ModelId,
    caps: Capabilities,
    engine: Arc<Engine>,
}

impl fmt::Debug for Gemini {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gemini")
            .field("id", &self.id)
            .field("url", &self.engine.generate.as_str())
            .field("auth", &self.engine.transport.auth)
            .field("bearer", &self.engine.bearer)
            .field("timeouts", &self.engine.transport.timeouts)
            .finish_non_exhaustive()
    }
}

fn caps_of(model: &str, locality: Locality, own: Option<Capabilities>) -> Capabilities {
    own.unwrap_or_else(|| {
        ModelInfo::lookup(models::TABLE, &models::DEFAULT, model).capabilities(locality)
    })
}

fn target(base: &str, path: &str, what: &str) -> Result<Target> {
    Target::new(http::endpoint(base, path, what)?, what)
}

impl Gemini {
    /// Builds a Gemini provider on Google AI Studio.
    ///
    /// # Errors
    ///
    /// `Auth` for an empty key; `InvalidRequest` for a bad base URL, model name or zero
    /// timeouts; `Network` when the TLS backend cannot start.
    pub fn new(cfg: GeminiConfig) -> Result<Gemini> {
        let what = "gemini";
        super::check_segment(&cfg.model, "model", what)?;
        let base = cfg.base_url.as_deref().unwrap_or(GEMINI_BASE_URL);
        let m = &cfg.model;
        let generate = target(base, &format!("/models/{m}:generateContent"), what)?;
        let stream = target(
            base,
            &format!("/models/{m}:streamGenerateContent?alt=sse"),
            what,
        )?;
        let embed = Embed::Studio {
            one: target(base, &format!("/models/{m}:embedContent"), what)?,
            batch: target(base, &format!("/models/{m}:batchEmbedContents"), what)?,
        };
        let auth = Auth::header("x-goog-api-key", cfg.api_key, what)?;
        let headers = http::custom_headers(&cfg.headers, what)?;
        let transport = Transport::new(cfg.client, auth, headers, cfg.timeouts, what)?;
        let caps = caps_of(&cfg.model, Locality::cloud("google"), cfg.capabilities);
        Ok(Gemini {
            id: ModelId::new(cfg.name.unwrap_or_else(|| "gemini".to_owned()), cfg.model),
            caps,
            engine: Arc::new(Engine {
                provider: GCP_GEMINI,
                generate,
                stream,
                embed,
                transport,
                bearer: Bearer::Fixed,
                thinking: cfg.thinking,
            }),
        })
    }

    /// [`GeminiConfig::from_env`] then [`Gemini::new`].
    ///
    /// # Errors
    ///
    /// As both.
    pub fn from_env(model: impl Into<String>) -> Result<Gemini> {
        Gemini::new(GeminiConfig::from_env(model)?)
    }

    /// Builds a Gemini provider on Vertex AI
    /// (`…/publishers/google/models/{model}:generateContent`). As an [`EmbeddingModel`] it
    /// calls `…/models/{model}:predict`, Vertex's text-embedding wire (with
    /// [`VertexConfig::with_task_type`](super::VertexConfig::with_task_type)'s task type).
    ///
    /// # Errors
    ///
    /// `Auth` for unusable credentials (a key that is not an RSA PEM, an empty token);
    /// `InvalidRequest` for a bad project, location, model or base URL.
    #[cfg(feature = "vertex")]
    pub fn vertex(cfg: super::VertexConfig) -> Result<Gemini> {
        let what = "vertex";
        let generate = Target::new(cfg.model_url("google", "generateContent", what)?, what)?;
        let stream = Target::new(
            cfg.model_url("google", "streamGenerateContent?alt=sse", what)?,
            what,
        )?;
        let embed = Embed::Vertex {
            predict: Target::new(cfg.model_url("google", "predict", what)?, what)?,
            task_type: cfg.task_type.clone(),
        };
        let tokens = super::auth::TokenSource::new(
            cfg.credentials.clone(),
            cfg.client.clone(),
            cfg.timeouts,
            what,
        )?;
        let transport = Transport::new(
            cfg.client.clone(),
            Auth::none(),
            http::custom_headers(&cfg.headers, what)?,
            cfg.timeouts,
            what,
        )?;
        let caps = caps_of(&cfg.model, cfg.locality(), cfg.capabilities.clone());
        Ok(Gemini {
            id: ModelId::new(cfg.name.unwrap_or_else(|| "vertex".to_owned()), cfg.model),
            caps,
            engine: Arc::new(Engine {
                provider: super::GCP_VERTEX_AI,
                generate,
                stream,
                embed,
                transport,
                bearer: Bearer::Token(tokens),
                thinking: cfg.thinking,
            }),
        })
    }

    /// Renames the link.
    pub fn named(mut self, name: impl Into<Arc<str>>) -> Self {
        self.id.name = name.into();
        self
    }

    /// Replaces the capabilities.
    pub fn with_capabilities(mut self, caps: Capabilities) -> Self {
        self.caps = caps;
        self
    }

    /// Replaces the time limits of the model calls (a client the provider built itself is
    /// rebuilt when the connect limit changes; a shared client keeps its own). A Vertex token
    /// exchange keeps the limits the provider was built with.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for zero limits; `Network` when a new client cannot be built.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Result<Self> {
        let e = &self.engine;
        self.engine = Arc::new(Engine {
            provider: e.provider,
            generate: e.generate.clone(),
            stream: e.stream.clone(),
            embed: e.embed.clone(),
            transport: e.transport.with_timeouts(timeouts, "gemini")?,
            bearer: e.bearer.clone(),
            thinking: e.thinking.clone(),
        });
        Ok(self)
    }

    /// The time limits.
    pub fn timeouts(&self) -> &Timeouts {
        &self.engine.transport.timeouts
    }

    fn attempt_span(&self, stream: bool) -> tracing::Span {
        telemetry::attempt_span(
            telemetry::operation::CHAT,
            self.engine.provider,
            &self.id,
            stream,
            self.engine.generate.host_str(),
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

    fn served(&self, mut r: ChatResponse, started: tokio::time::Instant) -> ChatResponse {
        r.provenance = Provenance::served(
            self.id.name.clone(),
            self.id.model.clone(),
            started.elapsed(),
        );
        r
    }

    async fn chat_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let e = &self.engine;
        let body = request::generate_body(req, e.thinking.as_ref())?;
        let extra = e.bearer.header(ctx).await?;
        let (mut resp, started) = e
            .transport
            .send_with(
                ctx,
                &e.generate,
                body,
                false,
                extra,
                error_map::from_response,
            )
            .await?;
        let raw = e.transport.body(ctx, started, &mut resp).await?;
        let r = response::parse_generate(&raw, self.caps.price.as_ref())?;
        Ok(self.served(r, started))
    }

    async fn stream_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let e = &self.engine;
        let body = request::generate_body(req, e.thinking.as_ref())?;
        let extra = e.bearer.header(ctx).await?;
        let (mut resp, started) = e
            .transport
            .send_with(ctx, &e.stream, body, true, extra, error_map::from_response)
            .await?;
        if http::is_json(&resp) {
            // An error object with status 200, or a server that answered in one piece.
            let raw = e.transport.body(ctx, started, &mut resp).await?;
            let r = response::parse_generate(&raw, self.caps.price.as_ref())?;
            return Ok(ripcord_core::stream::from_response(self.served(r, started)));
        }
        Ok(driver::drive(
            resp,
            stream::GeminiDecoder::new(self.caps.price),
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
        let (url, body) = match &e.embed {
            Embed::Studio { one, batch } => {
                let (body, single) = embed::body(&self.id.model, req)?;
                (if single { one } else { batch }, body)
            }
            #[cfg(feature = "vertex")]
            Embed::Vertex { predict, task_type } => {
                (predict, embed::vertex_body(req, task_type.as_deref())?)
            }
        };
        let extra = e.bearer.header(ctx).await?;
        let (mut resp, started) = e
            .transport
            .send_with(ctx, url, body, false, extra, error_map::from_response)
            .await?;
        let raw = e.transport.body(ctx, started, &mut resp).await?;
        let mut r = match &e.embed {
            Embed::Studio { .. } => embed::parse(&raw, req.inputs.len(), &self.id.model)?,
            #[cfg(feature = "vertex")]
            Embed::Vertex { .. } => embed::vertex_parse(&raw, req.inputs.len(), &self.id.model)?,
        };
        r.served_by = Some(self.id.name.clone());
        Ok(r)
    }
}

#[async_trait]
impl ChatModel for Gemini {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// Every wait on the network runs under the phase limits, the context's deadline and its
    /// cancellation, the token exchange included.
    fn bounds_itself(&self) -> bool {
        true
    }

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
impl EmbeddingModel for Gemini {
    fn embedding_id(&self) -> &ModelId {
        &self.id
    }

    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse> {
        self.embed_inner(req, ctx)
            .await
            .map_err(|e| self.labels().finish(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_names_and_capabilities() {
        let g = Gemini::new(GeminiConfig::new("gemini-2.5-flash", "AIza-k")).unwrap();
        assert_eq!(&*g.id.name, "gemini");
        assert_eq!(
            g.engine.generate.as_str(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            g.engine.stream.as_str(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(g.caps.context_window, 1_048_576);
        assert!(g.caps.tools && g.caps.vision && g.caps.json_mode);
        let e = Gemini::new(GeminiConfig::new("gemini 2.5", "k-1234")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        let e = Gemini::new(GeminiConfig::new("gemini-2.5-pro", " ")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth);
    }
}
