//! Anthropic's Messages API.
//!
//! API reference: <https://docs.anthropic.com/en/api/messages>,
//! streaming: <https://docs.anthropic.com/en/docs/build-with-claude/streaming>,
//! errors: <https://docs.anthropic.com/en/api/errors>.
//!
//! The translation rules (system prompt lifted out, roles merged, `max_tokens` always sent,
//! JSON mode as a forced tool) are documented in the request module; the stream grammar in
//! the stream module.

pub(crate) mod error_map;
pub(crate) mod models;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod stream;
pub mod wire;

use std::fmt;
use std::sync::Arc;

use ::http::header::{HeaderMap, HeaderName, HeaderValue};
use ripcord_core::telemetry;
use ripcord_core::{
    Capabilities, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Locality,
    ModelId, Result,
};
use secrecy::SecretString;

pub use request::DEFAULT_MAX_TOKENS;

use crate::attempt::{self, Adapter, Answer};
use crate::http::{self, Auth, Settings, Target, Timeouts, Transport};
use crate::models::ModelInfo;
use crate::sse::SseParser;

/// The default Anthropic base URL; requests go to `{base}/v1/messages`.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header sent by default.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Configuration of an [`Anthropic`] provider.
///
/// # Examples
///
/// ```
/// use ripcord_providers::{Anthropic, AnthropicConfig};
/// let claude = Anthropic::new(AnthropicConfig::new("claude-sonnet-4-5", "sk-ant-test"))?;
/// assert!(!format!("{claude:?}").contains("sk-ant-test"));
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    model: String,
    api_key: SecretString,
    version: Option<String>,
    http: Settings,
}

impl AnthropicConfig {
    /// A configuration for `model` with this API key.
    pub fn new(model: impl Into<String>, api_key: impl Into<SecretString>) -> Self {
        AnthropicConfig {
            model: model.into(),
            api_key: api_key.into(),
            version: None,
            http: Settings::default(),
        }
    }

    /// Reads `ANTHROPIC_API_KEY` (required) and `ANTHROPIC_BASE_URL` (optional).
    ///
    /// # Errors
    ///
    /// `Auth` when `ANTHROPIC_API_KEY` is unset or empty.
    pub fn from_env(model: impl Into<String>) -> Result<Self> {
        let key = http::env("ANTHROPIC_API_KEY").ok_or_else(|| {
            Error::new(ErrorKind::Auth, "anthropic: ANTHROPIC_API_KEY is not set")
        })?;
        let mut c = AnthropicConfig::new(model, key);
        c.http.base_url = http::env("ANTHROPIC_BASE_URL");
        Ok(c)
    }

    ripcord_core::setters! {
        /// Sets the `anthropic-version` header (default [`ANTHROPIC_VERSION`]).
        with_version(version: impl Into<String>) => version = Some(version.into());
    }
}

http::settings_setters!(
    AnthropicConfig,
    name: "`anthropic`",
    base_url: "Sets the base URL (default [`ANTHROPIC_BASE_URL`]): the host alone, as \
        Anthropic's SDKs take it, or with a trailing `/v1` (the OpenAI convention) — both \
        reach `{host}/v1/messages`."
);

/// A Claude model through the Messages API.
///
/// # Examples
///
/// ```no_run
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_providers::Anthropic;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ripcord_core::Result<()> {
/// let claude = Anthropic::from_env("claude-sonnet-4-5")?;
/// let reply = claude.chat(&ChatRequest::user("Hello"), &Context::new()).await?;
/// # drop(reply); Ok(()) }
/// ```
#[derive(Clone)]
pub struct Anthropic {
    id: ModelId,
    caps: Capabilities,
    url: Arc<http::Target>,
    models_url: Arc<http::Target>,
    transport: Arc<Transport>,
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
            .field("id", &self.id)
            .field("url", &self.url.as_str())
            .field("auth", &self.transport.auth)
            .field("timeouts", &self.transport.timeouts)
            .finish_non_exhaustive()
    }
}

impl Anthropic {
    /// Builds an Anthropic provider.
    ///
    /// # Errors
    ///
    /// `Auth` for an empty key (or one that cannot be a header); `InvalidRequest` for a bad
    /// base URL, version or zero timeouts; `Network` when the TLS backend cannot start.
    pub fn new(cfg: AnthropicConfig) -> Result<Anthropic> {
        let what = "anthropic";
        let base = cfg.http.base_url.as_deref().unwrap_or(ANTHROPIC_BASE_URL);
        // Anthropic's SDKs take the host alone, OpenAI's take `…/v1`: both are accepted, so a
        // base URL copied from either convention never becomes `/v1/v1/messages`.
        let base = base.trim().trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        let url = http::Target::new(http::endpoint(base, "/v1/messages", what)?, what)?;
        let models_url = http::Target::new(http::endpoint(base, "/v1/models", what)?, what)?;
        let auth = Auth::header("x-api-key", cfg.api_key, what)?;
        let mut headers = HeaderMap::new();
        let version = cfg.version.as_deref().unwrap_or(ANTHROPIC_VERSION);
        let version = HeaderValue::from_str(version).map_err(|_| {
            Error::new(
                ErrorKind::InvalidRequest,
                "anthropic: invalid anthropic-version value",
            )
        })?;
        headers.insert(HeaderName::from_static("anthropic-version"), version);
        http::add_custom_headers(&mut headers, &cfg.http.headers, what)?;
        let transport = Transport::new(cfg.http.client, auth, headers, cfg.http.timeouts, what)?;
        let locality = if url.host_str() == Some("api.anthropic.com") {
            Locality::cloud_in("anthropic", "us")
        } else {
            Locality::cloud("anthropic")
        };
        // A final assistant message is continued as the answer's start (assistant prefill).
        let caps = cfg.http.capabilities.unwrap_or_else(|| {
            ModelInfo::lookup(models::TABLE, &models::DEFAULT, &cfg.model)
                .capabilities(locality)
                .with_assistant_prefill(true)
        });
        Ok(Anthropic {
            id: ModelId::new(
                cfg.http.name.unwrap_or_else(|| "anthropic".to_owned()),
                cfg.model,
            ),
            caps,
            url: Arc::new(url),
            models_url: Arc::new(models_url),
            transport: Arc::new(transport),
        })
    }

    /// [`AnthropicConfig::from_env`] then [`Anthropic::new`].
    ///
    /// # Errors
    ///
    /// As both.
    pub fn from_env(model: impl Into<String>) -> Result<Anthropic> {
        Anthropic::new(AnthropicConfig::from_env(model)?)
    }

    /// Replaces the time limits (a client the provider built itself is rebuilt when the
    /// connect limit changes; a shared client keeps its own).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for zero limits; `Network` when a new client cannot be built.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Result<Self> {
        self.transport = Arc::new(self.transport.with_timeouts(timeouts, "anthropic")?);
        Ok(self)
    }

    /// The time limits.
    pub fn timeouts(&self) -> &Timeouts {
        &self.transport.timeouts
    }
}

impl Adapter for Anthropic {
    fn parts(&self) -> (&'static str, &ModelId, &Target, &Transport) {
        let provider = telemetry::provider::ANTHROPIC;
        (provider, &self.id, &self.url, &self.transport)
    }

    async fn chat_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let (answer, json) = self.send(req, ctx, false).await?;
        let price = self.caps.price.as_ref();
        answer
            .whole(|raw| response::parse_message(raw, json, price))
            .await
    }

    async fn stream_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let (answer, json) = self.send(req, ctx, true).await?;
        let price = self.caps.price;
        answer
            .stream(
                |raw| response::parse_message(raw, json, price.as_ref()),
                SseParser::new(),
                stream::AnthropicDecoder::new(json, price),
            )
            .await
    }

    /// `GET {base}/v1/models` (spends no tokens), for an open breaker's background probe.
    fn liveness(&self) -> Option<Arc<dyn ripcord_core::Liveness>> {
        Some(Arc::new(http::ListModels::new(
            (*self.transport).clone(),
            (*self.models_url).clone(),
            Box::new(error_map::from_response),
        )))
    }
}

impl Anthropic {
    /// Builds the Messages body of `req` and sends it: the vendor's answer (a failure
    /// classified) and the JSON mode the body uses.
    async fn send<'a>(
        &'a self,
        req: &ChatRequest,
        ctx: &'a Context,
        stream: bool,
    ) -> Result<(Answer<'a>, request::JsonMode)> {
        let (body, json) =
            request::messages_body(&self.id.model, req, self.caps.max_output_tokens, stream)?;
        let sent = self
            .transport
            .send(ctx, &self.url, body, stream, error_map::from_response)
            .await?;
        Ok((Answer::new(&self.transport, ctx, &self.id, sent), json))
    }
}

attempt::link_impls!(Anthropic);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_capabilities() {
        let c = Anthropic::new(AnthropicConfig::new(
            "claude-sonnet-4-5-20250929",
            "sk-ant-x",
        ))
        .unwrap();
        assert_eq!(&*c.id.name, "anthropic");
        assert_eq!(c.url.as_str(), "https://api.anthropic.com/v1/messages");
        assert_eq!(c.caps.max_output_tokens, 64_000);
        assert!(c.caps.tools && c.caps.vision && c.caps.json_mode);
        assert_eq!(c.caps.locality, Locality::cloud_in("anthropic", "us"));
        let unknown = Anthropic::new(
            AnthropicConfig::new("claude-next", "k-1234").with_base_url("http://127.0.0.1:1/"),
        )
        .unwrap()
        .named("backup");
        assert_eq!(unknown.url.as_str(), "http://127.0.0.1:1/v1/messages");
        assert_eq!(&*unknown.id.name, "backup");
        // The OpenAI convention (`…/v1`) reaches the same endpoint.
        for base in [
            "http://127.0.0.1:1/v1",
            "http://127.0.0.1:1/v1/",
            " http://127.0.0.1:1 ",
        ] {
            let a =
                Anthropic::new(AnthropicConfig::new("m", "k-1234").with_base_url(base)).unwrap();
            assert_eq!(a.url.as_str(), "http://127.0.0.1:1/v1/messages", "{base:?}");
        }
        assert_eq!(unknown.caps.max_output_tokens, 8_192);
        let e = Anthropic::new(AnthropicConfig::new("m", "k").with_version("bad\nversion"))
            .unwrap_err();
        assert!(e.message().contains("anthropic-version"));
    }
}
