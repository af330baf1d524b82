//! What an OpenAI-wire link is configured with: URLs, auth, the request-field dialect and the
//! vendor's own error codes.

use ripcord_core::{Error, ErrorKind, Result};
use secrecy::SecretString;

#[cfg(doc)]
use super::OpenAi;
use crate::error_body::ErrorHook;
use crate::http::{self, Settings};

/// The default OpenAI base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Which request field carries the output cap.
///
/// OpenAI deprecated `max_tokens` in favour of `max_completion_tokens` (reasoning models
/// reject the old one); most compatible servers still only know `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MaxTokensField {
    /// `max_tokens`.
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
}

/// Which OpenAI API a link calls.
///
/// # Examples
///
/// ```
/// use ripcord_providers::{OpenAi, OpenAiConfig, OpenAiWire};
/// let m = OpenAi::new(OpenAiConfig::new("o3-pro", "sk-x").with_wire(OpenAiWire::Responses))?;
/// assert_eq!(m.wire(), OpenAiWire::Responses);
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OpenAiWire {
    /// `POST {base}/chat/completions` (the default).
    #[default]
    ChatCompletions,
    /// `POST {base}/responses`: the Responses API, for models offered only there. Requests go
    /// with `store: false` (ripcord keeps no state at the vendor); `stop` and `seed` do not
    /// exist there and are not sent.
    Responses,
}

/// How an OpenAI-compatible server continues a final assistant message as its own answer
/// (assistant prefill). A chain continuing a cut stream asks a link with prefill to go on from
/// the delivered text as the start of its own message; a link without it (or one that refuses
/// the prefill with a 400) gets an explicit instruction instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AssistantPrefill {
    /// No prefill: a final assistant message is sent as it is, the link's capabilities say
    /// it has no prefill.
    #[default]
    None,
    /// The final assistant message carries `"prefix": true` (DeepSeek's chat prefix
    /// completion). With `base_suffix`, such a request goes to `{base}{suffix}/chat/completions`
    /// instead of the usual endpoint (DeepSeek serves it on its beta base URL,
    /// `https://api.deepseek.com/beta`); a base ending in `/v1` has it replaced.
    Prefix {
        /// Appended to the base URL for prefill requests (`"/beta"`), if anything.
        base_suffix: Option<&'static str>,
    },
    /// `continue_final_message: true` with `add_generation_prompt: false` in the body (vLLM:
    /// the chat template leaves the final message open and the model writes on).
    ContinueFinalMessage,
}

/// The wire details in which OpenAI-compatible servers differ.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dialect {
    pub(crate) max_tokens: MaxTokensField,
    /// Send `stream_options.include_usage` on streams.
    pub(crate) stream_usage: bool,
    /// `response_format: json_schema` is understood (else: `json_object` + the schema in a
    /// system message).
    pub(crate) json_schema: bool,
    /// The vendor's own error codes.
    pub(crate) hook: Option<ErrorHook>,
    /// How a final assistant message is continued, if it is.
    pub(crate) prefill: AssistantPrefill,
}

impl Dialect {
    pub(crate) const fn openai() -> Dialect {
        Dialect {
            max_tokens: MaxTokensField::MaxCompletionTokens,
            stream_usage: true,
            json_schema: true,
            hook: None,
            prefill: AssistantPrefill::None,
        }
    }
}

/// Configuration of an [`OpenAi`] provider.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_providers::{OpenAi, OpenAiConfig, Timeouts};
/// let cfg = OpenAiConfig::new("gpt-4o", "sk-test")
///     .with_base_url("http://127.0.0.1:8080/v1")
///     .with_timeouts(Timeouts::default().with_first_token(Duration::from_secs(20)));
/// let model = OpenAi::new(cfg)?.named("primary");
/// assert!(!format!("{model:?}").contains("sk-test"));
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    pub(crate) model: String,
    pub(crate) api_key: Option<SecretString>,
    pub(crate) organization: Option<String>,
    pub(crate) project: Option<String>,
    pub(crate) max_tokens_field: Option<MaxTokensField>,
    pub(crate) wire: OpenAiWire,
    pub(crate) http: Settings,
}

impl OpenAiConfig {
    /// A configuration for `model` with this API key and defaults for everything else.
    pub fn new(model: impl Into<String>, api_key: impl Into<SecretString>) -> Self {
        let mut c = OpenAiConfig::keyless(model);
        c.api_key = Some(api_key.into());
        c
    }

    /// A configuration without a key, for servers that need none (Ollama, a local vLLM);
    /// add one with [`OpenAiConfig::with_api_key`].
    pub fn keyless(model: impl Into<String>) -> Self {
        OpenAiConfig {
            model: model.into(),
            api_key: None,
            organization: None,
            project: None,
            max_tokens_field: None,
            wire: OpenAiWire::ChatCompletions,
            http: Settings::default(),
        }
    }

    /// Reads `OPENAI_API_KEY` (required), and `OPENAI_BASE_URL`, `OPENAI_ORG_ID`,
    /// `OPENAI_PROJECT_ID` (optional) from the environment.
    ///
    /// # Errors
    ///
    /// `Auth` when `OPENAI_API_KEY` is unset or empty.
    pub fn from_env(model: impl Into<String>) -> Result<Self> {
        let key = http::env("OPENAI_API_KEY")
            .ok_or_else(|| Error::new(ErrorKind::Auth, "openai: OPENAI_API_KEY is not set"))?;
        let mut c = OpenAiConfig::new(model, key);
        c.http.base_url = http::env("OPENAI_BASE_URL");
        c.organization = http::env("OPENAI_ORG_ID");
        c.project = http::env("OPENAI_PROJECT_ID");
        Ok(c)
    }

    ripcord_core::setters! {
        /// Sets the API key.
        with_api_key(key: impl Into<SecretString>) => api_key = Some(key.into());
        /// Sends `OpenAI-Organization`.
        with_organization(org: impl Into<String>) => organization = Some(org.into());
        /// Sends `OpenAI-Project`.
        with_project(project: impl Into<String>) => project = Some(project.into());
        /// Overrides which field carries `max_tokens`.
        with_max_tokens_field(field: MaxTokensField) => max_tokens_field = Some(field);
        /// Calls the Responses API (`{base}/responses`) instead of Chat Completions. Honoured by
        /// [`OpenAi::new`]; the OpenAI-compatible presets speak Chat Completions only.
        with_wire(wire: OpenAiWire) => wire = wire;
    }
}

http::settings_setters!(
    OpenAiConfig,
    name: "`openai`, a preset's vendor name",
    base_url: "Sets the base URL (default [`OPENAI_BASE_URL`]); requests go to \
        `{base}/chat/completions` and `{base}/embeddings`."
);
