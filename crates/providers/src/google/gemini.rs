//! The Gemini adapter: one engine for Google AI Studio (`x-goog-api-key`) and, with the
//! `vertex` feature, Vertex AI (OAuth access tokens) — the same wire at different addresses.

use std::fmt;
use std::sync::Arc;

use ::http::header::{HeaderName, HeaderValue};
use ripcord_core::{
    Capabilities, ChatRequest, ChatResponse, ChatStream, Context, EmbeddingModel, EmbeddingRequest,
    EmbeddingResponse, Error, ErrorKind, Locality, ModelId, Result, async_trait,
};
use secrecy::SecretString;

use super::request::{self, Thinking};
use super::{GCP_GEMINI, embed, error_map, models, response, stream};
use crate::attempt::{self, Adapter, Answer};
use crate::http::{self, Auth, Settings, Target, Timeouts, Transport};
use crate::models::ModelInfo;
use crate::sse::SseParser;

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
#[derive(Clone, Debug)]
pub struct GeminiConfig {
    model: String,
    api_key: SecretString,
    thinking: Option<Thinking>,
    http: Settings,
}

impl GeminiConfig {
    /// A configuration for `model` with this API key.
    pub fn new(model: impl Into<String>, api_key: impl Into<SecretString>) -> Self {
        GeminiConfig {
            model: model.into(),
            api_key: api_key.into(),
            thinking: None,
            http: Settings::default(),
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
        c.http.base_url = http::env("GEMINI_BASE_URL");
        Ok(c)
    }

    ripcord_core::setters! {
        /// Sends these thinking settings with every request.
        with_thinking(thinking: Thinking) => thinking = Some(thinking);
    }
}

http::settings_setters!(
    GeminiConfig,
    name: "`gemini`",
    base_url: "Sets the base URL (default [`GEMINI_BASE_URL`], API version included)."
);

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

#[derive(Clone)]
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
/// Implements [`ChatModel`](ripcord_core::ChatModel) (JSON and streamed) and [`EmbeddingModel`]: on AI Studio
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
        let base = cfg.http.base_url.as_deref().unwrap_or(GEMINI_BASE_URL);
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
        let headers = http::custom_headers(&cfg.http.headers, what)?;
        let transport = Transport::new(cfg.http.client, auth, headers, cfg.http.timeouts, what)?;
        let caps = caps_of(&cfg.model, Locality::cloud("google"), cfg.http.capabilities);
        Ok(Gemini {
            id: ModelId::new(
                cfg.http.name.unwrap_or_else(|| "gemini".to_owned()),
                cfg.model,
            ),
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
        let (tokens, transport) = cfg.token_transport(what)?;
        let caps = caps_of(&cfg.model, cfg.locality(), cfg.http.capabilities.clone());
        Ok(Gemini {
            id: ModelId::new(
                cfg.http.name.unwrap_or_else(|| "vertex".to_owned()),
                cfg.model,
            ),
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

    /// Replaces the time limits of the model calls (a client the provider built itself is
    /// rebuilt when the connect limit changes; a shared client keeps its own). A Vertex token
    /// exchange keeps the limits the provider was built with.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for zero limits; `Network` when a new client cannot be built.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Result<Self> {
        let e = Arc::make_mut(&mut self.engine);
        e.transport = e.transport.with_timeouts(timeouts, "gemini")?;
        Ok(self)
    }

    /// The time limits.
    pub fn timeouts(&self) -> &Timeouts {
        &self.engine.transport.timeouts
    }

    /// Sends `body` to `url` with the bearer's header, a failure classified.
    async fn send<'a>(
        &'a self,
        ctx: &'a Context,
        url: &Target,
        body: Vec<u8>,
        stream: bool,
    ) -> Result<Answer<'a>> {
        let e = &self.engine;
        let extra = e.bearer.header(ctx).await?;
        let sent = e
            .transport
            .send_with(ctx, url, body, stream, extra, error_map::from_response)
            .await?;
        Ok(Answer::new(&e.transport, ctx, &self.id, sent))
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
        let (n, model) = (req.inputs.len(), &self.id.model);
        let answer = self.send(ctx, url, body, false).await?;
        answer
            .embeddings(|raw| match &e.embed {
                Embed::Studio { .. } => embed::parse(raw, n, model),
                #[cfg(feature = "vertex")]
                Embed::Vertex { .. } => embed::vertex_parse(raw, n, model),
            })
            .await
    }
}

impl Adapter for Gemini {
    fn parts(&self) -> (&'static str, &ModelId, &Target, &Transport) {
        let e = &self.engine;
        (e.provider, &self.id, &e.generate, &e.transport)
    }

    async fn chat_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let e = &self.engine;
        let body = request::generate_body(req, e.thinking.as_ref())?;
        let price = self.caps.price.as_ref();
        self.send(ctx, &e.generate, body, false)
            .await?
            .whole(|raw| response::parse_generate(raw, price))
            .await
    }

    async fn stream_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let e = &self.engine;
        let body = request::generate_body(req, e.thinking.as_ref())?;
        let price = self.caps.price;
        self.send(ctx, &e.stream, body, true)
            .await?
            .stream(
                |raw| response::parse_generate(raw, price.as_ref()),
                SseParser::new(),
                stream::GeminiDecoder::new(price),
            )
            .await
    }
}

attempt::link_impls!(Gemini);

#[async_trait]
impl EmbeddingModel for Gemini {
    fn embedding_id(&self) -> &ModelId {
        &self.id
    }

    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse> {
        self.embed_inner(req, ctx).await.map_err(|e| self.finish(e))
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
