//! AWS Bedrock's Converse and ConverseStream APIs.
//!
//! API reference: <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html>,
//! streaming: <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html>,
//! inference profiles: <https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-support.html>,
//! API keys: <https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html>,
//! SigV4: <https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html>,
//! errors: <https://docs.aws.amazon.com/bedrock/latest/userguide/troubleshooting-api-error-codes.html>.
//!
//! One model, one region: requests go to `POST {base}/model/{modelId}/converse` (and
//! `/converse-stream`) with `base` = `https://bedrock-runtime.{region}.amazonaws.com` unless
//! overridden. The model id may be a foundation model, a cross-region inference profile
//! (`us.`, `eu.`, `apac.`, `global.` …) or an ARN; it is percent-encoded into the path (an ARN's
//! `:` and `/`, a version's `:0`), as the AWS SDKs do. Requests are signed with SigV4 (see the
//! signing module) or carry a Bedrock API key as a bearer token.

mod credentials;
mod error_map;
mod models;
mod request;
mod response;
mod signing;
mod stream;

use std::fmt;
use std::sync::Arc;

use ripcord_core::telemetry;
use ripcord_core::{
    Capabilities, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Locality,
    ModelId, Result,
};
use secrecy::ExposeSecret;

pub use credentials::{BEDROCK_API_KEY_ENV, BedrockCredentials, CredentialSource};

use crate::attempt::{self, Adapter, Answer};
use crate::driver::Labels;
use crate::http::{self, Auth, Settings, Timeouts, Transport};
use crate::models::ModelInfo;
use credentials::Secret;
use request::BodyOptions;

/// Claude's extended thinking on Bedrock (`additionalModelRequestFields.thinking`).
///
/// # Examples
///
/// ```
/// use ripcord_providers::Thinking;
/// assert_eq!(Thinking::new(2048).budget_tokens, 2048);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Thinking {
    /// The most tokens the model may think with (Claude needs at least 1024, and fewer than
    /// the request's `max_tokens`).
    pub budget_tokens: u32,
}

impl Thinking {
    /// Thinking with this budget.
    pub const fn new(budget_tokens: u32) -> Self {
        Thinking { budget_tokens }
    }
}

/// A Bedrock guardrail applied to every call (`guardrailConfig`).
///
/// # Examples
///
/// ```
/// use ripcord_providers::Guardrail;
/// let g = Guardrail::new("gr-abc123", "1").with_trace(true);
/// assert_eq!(g.identifier, "gr-abc123");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Guardrail {
    /// The guardrail's id or ARN.
    pub identifier: String,
    /// Its version (`DRAFT` or a number).
    pub version: String,
    /// Ask for the guardrail trace.
    pub trace: bool,
    /// Streams: check the answer asynchronously (faster, may show text the guardrail later
    /// blocks) instead of synchronously (the default).
    pub async_stream: bool,
}

impl Guardrail {
    /// A guardrail by id (or ARN) and version.
    pub fn new(identifier: impl Into<String>, version: impl Into<String>) -> Self {
        Guardrail {
            identifier: identifier.into(),
            version: version.into(),
            trace: false,
            async_stream: false,
        }
    }

    ripcord_core::setters! {
        /// Sets whether the trace is requested.
        with_trace(trace: bool) => trace = trace;
        /// Sets asynchronous checking on streams.
        with_async_stream(on: bool) => async_stream = on;
    }
}

/// Configuration of a [`Bedrock`] provider.
///
/// # Examples
///
/// ```
/// use ripcord_providers::{Bedrock, BedrockConfig, BedrockCredentials};
/// let creds = BedrockCredentials::keys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", None);
/// let claude = Bedrock::new(
///     BedrockConfig::new("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us-east-1")
///         .with_credentials(creds),
/// )?;
/// assert!(!format!("{claude:?}").contains("wJalr"));
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BedrockConfig {
    model: String,
    region: Option<String>,
    credentials: Option<BedrockCredentials>,
    profile: Option<String>,
    thinking: Option<Thinking>,
    guardrail: Option<Guardrail>,
    prompt_cache: bool,
    additional_fields: Option<serde_json::Map<String, serde_json::Value>>,
    http: Settings,
}

impl BedrockConfig {
    /// A configuration for `model` in `region`; credentials from the environment unless set
    /// (see [`BedrockCredentials::from_env`]).
    pub fn new(model: impl Into<String>, region: impl Into<String>) -> Self {
        let mut c = BedrockConfig::without_region(model);
        c.region = Some(region.into());
        c
    }

    fn without_region(model: impl Into<String>) -> Self {
        BedrockConfig {
            model: model.into(),
            region: None,
            credentials: None,
            profile: None,
            thinking: None,
            guardrail: None,
            prompt_cache: false,
            additional_fields: None,
            http: Settings::default(),
        }
    }

    /// Reads the region from an ARN model id, else `AWS_REGION` / `AWS_DEFAULT_REGION`, the
    /// base URL from `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` / `AWS_ENDPOINT_URL`, and
    /// the credentials when the provider is built.
    pub fn from_env(model: impl Into<String>) -> Self {
        BedrockConfig::from_env_with(&http::env, model)
    }

    /// [`BedrockConfig::from_env`] over another environment (credentials too).
    ///
    /// # Errors
    ///
    /// None here; the credentials are looked up (and may fail) at once, and a missing region
    /// fails in [`Bedrock::new`].
    pub fn from_env_with(env: &dyn Fn(&str) -> Option<String>, model: impl Into<String>) -> Self {
        let get = |n: &str| env(n).filter(|v| !v.trim().is_empty());
        let mut c = BedrockConfig::without_region(model);
        // An ARN names its region; requests for it must go there.
        c.region = models::arn_region(&c.model)
            .map(str::to_owned)
            .or_else(|| get("AWS_REGION"))
            .or_else(|| get("AWS_DEFAULT_REGION"));
        c.http.base_url =
            get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME").or_else(|| get("AWS_ENDPOINT_URL"));
        c.credentials = BedrockCredentials::from_env_with(env, None).ok();
        c
    }

    ripcord_core::setters! {
        /// Sets the region.
        with_region(region: impl Into<String>) => region = Some(region.into());
        /// Uses these credentials.
        with_credentials(credentials: BedrockCredentials) => credentials = Some(credentials);
        /// Reads the credentials from this profile of the shared credentials file (when no
        /// credentials were set explicitly).
        with_profile(profile: impl Into<String>) => profile = Some(profile.into());
        /// Turns on Claude's extended thinking.
        with_thinking(thinking: Thinking) => thinking = Some(thinking);
        /// Applies a guardrail to every call.
        with_guardrail(guardrail: Guardrail) => guardrail = Some(guardrail);
        /// Marks the system prompt and the tool list as a cached prefix (`cachePoint` blocks).
        with_prompt_cache(on: bool) => prompt_cache = on;
    }

    /// Model-specific fields sent as `additionalModelRequestFields` (`top_k`, …).
    pub fn with_additional_fields(
        mut self,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        self.additional_fields = Some(fields);
        self
    }
}

http::settings_setters!(
    BedrockConfig,
    name: "`bedrock`",
    base_url: "Sets the base URL (default `https://bedrock-runtime.{region}.amazonaws.com`): a \
        VPC endpoint, a proxy, a test server."
);

/// A model on AWS Bedrock through the Converse API.
///
/// # Examples
///
/// ```no_run
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_providers::{Bedrock, BedrockConfig};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ripcord_core::Result<()> {
/// let claude = Bedrock::new(BedrockConfig::from_env("us.anthropic.claude-sonnet-4-5-20250929-v1:0"))?;
/// let reply = claude.chat(&ChatRequest::user("Hello"), &Context::new()).await?;
/// # drop(reply); Ok(()) }
/// ```
#[derive(Clone)]
pub struct Bedrock {
    id: ModelId,
    caps: Capabilities,
    region: Arc<str>,
    converse: Arc<http::Target>,
    converse_stream: Arc<http::Target>,
    transport: Arc<Transport>,
    options: Arc<Options>,
    /// The credentials' secrets, to scrub from vendor text.
    scrub: Arc<Secret>,
}

#[derive(Debug)]
struct Options {
    thinking: Option<Thinking>,
    guardrail: Option<Guardrail>,
    prompt_cache: bool,
    additional_fields: Option<serde_json::Map<String, serde_json::Value>>,
}

impl fmt::Debug for Bedrock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bedrock")
            .field("id", &self.id)
            .field("region", &self.region)
            .field("url", &self.converse.as_str())
            .field("auth", &self.transport.auth)
            .field("timeouts", &self.transport.timeouts)
            .finish_non_exhaustive()
    }
}

/// Checks a region name: lower-case letters, digits and dashes (`us-east-1`).
fn check_region(region: &str) -> Result<()> {
    let ok = !region.is_empty()
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::InvalidRequest,
            format!("bedrock: {region:?} is not an AWS region name (e.g. us-east-1)"),
        ))
    }
}

/// The model id as one path segment: everything but unreserved characters percent-encoded.
fn path_segment(model: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(model, SET).to_string()
}

impl Bedrock {
    /// Builds a Bedrock provider.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for an empty model, no region (or a malformed one), a bad base URL
    /// or zero timeouts; `Auth` when no credentials can be found or they are empty;
    /// `Network` when the TLS backend cannot start.
    pub fn new(cfg: BedrockConfig) -> Result<Bedrock> {
        let what = "bedrock";
        let model = cfg.model.trim().to_owned();
        if model.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidRequest,
                "bedrock: the model id is empty",
            ));
        }
        let region = match cfg.region.as_deref().map(str::trim) {
            Some(r) if !r.is_empty() => r.to_owned(),
            _ => models::arn_region(&model)
                .map(str::to_owned)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidRequest,
                        "bedrock: no region: set one (or AWS_REGION), or use a model ARN",
                    )
                })?,
        };
        check_region(&region)?;
        let base = cfg
            .http
            .base_url
            .unwrap_or_else(|| format!("https://bedrock-runtime.{region}.amazonaws.com"));
        let segment = path_segment(&model);
        let converse = http::Target::new(
            http::endpoint(&base, &format!("/model/{segment}/converse"), what)?,
            what,
        )?;
        let converse_stream = http::Target::new(
            http::endpoint(&base, &format!("/model/{segment}/converse-stream"), what)?,
            what,
        )?;
        let credentials = match cfg.credentials {
            Some(c) => c,
            None => BedrockCredentials::from_env(cfg.profile.as_deref())?,
        };
        let (auth, signer) = match &credentials.secret {
            Secret::ApiKey(key) => (
                Auth::bearer(
                    secrecy::SecretString::from(key.expose_secret().to_owned()),
                    what,
                )?,
                None,
            ),
            keys => (Auth::none(), signing::SigV4::new(keys, &region)?),
        };
        // Added before signing, so SigV4 signs them with the rest.
        let headers = http::custom_headers(&cfg.http.headers, what)?;
        let mut transport =
            Transport::new(cfg.http.client, auth, headers, cfg.http.timeouts, what)?
                .with_stream_accept("application/vnd.amazon.eventstream");
        if let Some(s) = signer {
            transport = transport.with_signer(Arc::new(s));
        }
        let locality = Locality::cloud_in("aws-bedrock", region.clone());
        let caps = cfg.http.capabilities.unwrap_or_else(|| {
            ModelInfo::lookup(
                models::TABLE,
                &models::DEFAULT,
                models::foundation_model(&model),
            )
            .capabilities(locality)
        });
        Ok(Bedrock {
            id: ModelId::new(cfg.http.name.unwrap_or_else(|| "bedrock".to_owned()), model),
            caps,
            region: region.into(),
            converse: Arc::new(converse),
            converse_stream: Arc::new(converse_stream),
            transport: Arc::new(transport),
            options: Arc::new(Options {
                thinking: cfg.thinking,
                guardrail: cfg.guardrail,
                prompt_cache: cfg.prompt_cache,
                additional_fields: cfg.additional_fields,
            }),
            scrub: Arc::new(credentials.secret),
        })
    }

    /// Replaces the time limits (a client the provider built itself is rebuilt when the
    /// connect limit changes).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for zero limits; `Network` when a new client cannot be built.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Result<Self> {
        self.transport = Arc::new(self.transport.with_timeouts(timeouts, "bedrock")?);
        Ok(self)
    }

    /// The region requests go to.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The time limits.
    pub fn timeouts(&self) -> &Timeouts {
        &self.transport.timeouts
    }

    fn body(&self, req: &ChatRequest, stream: bool) -> Result<(Vec<u8>, request::JsonMode)> {
        let o = &self.options;
        request::converse_body(
            req,
            self.caps.max_output_tokens,
            stream,
            &BodyOptions {
                thinking: o.thinking,
                guardrail: o.guardrail.as_ref(),
                prompt_cache: o.prompt_cache,
                additional_fields: o.additional_fields.as_ref(),
            },
        )
    }
}

impl Adapter for Bedrock {
    fn parts(&self) -> (&'static str, &ModelId, &http::Target, &Transport) {
        let provider = telemetry::provider::AWS_BEDROCK;
        (provider, &self.id, &self.converse, &self.transport)
    }

    /// Labels the error and removes any credential a vendor text might echo.
    fn finish(&self, e: Error) -> Error {
        let mut e = Labels::of(&self.id, &self.transport).finish(e);
        for secret in self.scrub.exposed() {
            if secret.len() >= 4 && e.message().contains(secret) {
                let m = e.message().replace(secret, "[redacted]");
                e = e.with_message(m);
            }
        }
        e
    }

    async fn chat_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let (body, json) = self.body(req, false)?;
        let sent = self
            .transport
            .send(ctx, &self.converse, body, false, error_map::from_response)
            .await?;
        let price = self.caps.price.as_ref();
        Answer::new(&self.transport, ctx, &self.id, sent)
            .whole(|raw| response::parse_converse(raw, json, &self.id.model, price))
            .await
    }

    async fn stream_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let (body, json) = self.body(req, true)?;
        let target = &self.converse_stream;
        let sent = self
            .transport
            .send(ctx, target, body, true, error_map::from_response)
            .await?;
        let price = self.caps.price;
        // A proxy may answer the whole message at once: it is replayed as a stream.
        Answer::new(&self.transport, ctx, &self.id, sent)
            .stream(
                |raw| response::parse_converse(raw, json, &self.id.model, price.as_ref()),
                stream::EventStreamFramer::new(),
                stream::BedrockDecoder::new(json, price, self.id.model.to_string()),
            )
            .await
    }
}

attempt::link_impls!(Bedrock);

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> BedrockCredentials {
        BedrockCredentials::keys("AKIDEXAMPLE", "secret-key-123", None)
    }

    #[test]
    fn urls_regions_and_capabilities() {
        let c = Bedrock::new(
            BedrockConfig::new("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us-east-1")
                .with_credentials(keys()),
        )
        .unwrap();
        assert_eq!(
            c.converse.as_str(),
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
        );
        assert!(
            c.converse_stream
                .as_str()
                .ends_with("v1%3A0/converse-stream")
        );
        assert_eq!(c.caps.max_output_tokens, 64_000);
        assert_eq!(
            c.caps.locality,
            Locality::cloud_in("aws-bedrock", "us-east-1")
        );
        assert_eq!(&*c.id.name, "bedrock");

        let arn = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-7-sonnet-20250219-v1:0";
        let b = Bedrock::new(
            BedrockConfig::from_env_with(&|_| None, arn)
                .with_credentials(keys())
                .with_base_url("http://127.0.0.1:9/"),
        )
        .unwrap();
        assert_eq!(b.region(), "eu-west-1", "the ARN names the region");
        assert_eq!(
            b.converse.as_str(),
            "http://127.0.0.1:9/model/arn%3Aaws%3Abedrock%3Aeu-west-1%3A123456789012%3Ainference-profile%2Feu.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse"
        );
        assert_eq!(b.caps.max_output_tokens, 64_000);

        let e = Bedrock::new(BedrockConfig::from_env_with(&|_| None, "m").with_credentials(keys()))
            .unwrap_err();
        assert!(e.message().contains("no region"), "{e}");
        let e =
            Bedrock::new(BedrockConfig::new("m", "US East").with_credentials(keys())).unwrap_err();
        assert!(e.message().contains("not an AWS region"), "{e}");
        let e = Bedrock::new(BedrockConfig::new(" ", "us-east-1").with_credentials(keys()))
            .unwrap_err();
        assert!(e.message().contains("empty"), "{e}");
    }

    #[test]
    fn the_environment_supplies_region_endpoint_and_credentials() {
        let env = |n: &str| {
            match n {
                "AWS_REGION" => Some("ap-southeast-2"),
                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME" => Some("http://127.0.0.1:4566"),
                "AWS_BEARER_TOKEN_BEDROCK" => Some("ABSKbedrock-api-key"),
                _ => None,
            }
            .map(str::to_owned)
        };
        let b = Bedrock::new(BedrockConfig::from_env_with(
            &env,
            "apac.amazon.nova-pro-v1:0",
        ))
        .unwrap();
        assert_eq!(b.region(), "ap-southeast-2");
        assert!(
            b.converse
                .as_str()
                .starts_with("http://127.0.0.1:4566/model/")
        );
        assert!(format!("{b:?}").contains("authorization: [redacted]"));
        assert!(!format!("{b:?}").contains("ABSK"));
        assert_eq!(b.caps.context_window, 300_000);
    }
}
