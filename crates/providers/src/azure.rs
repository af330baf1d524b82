//! Azure OpenAI: the OpenAI wire format behind deployment URLs.
//!
//! Reference: <https://learn.microsoft.com/azure/ai-services/openai/reference>. Requests go to
//! `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=…` (and
//! `…/embeddings?…`) with an `api-key` header. Bodies, streams and error objects are OpenAI's,
//! so this is the OpenAI engine with other URLs and another auth header. Azure's content filter
//! answers a 400 with `code: content_filter` (and `innererror.code:
//! ResponsibleAIPolicyViolation`), which the shared rules classify as `ContentFiltered`; its
//! 429s carry `retry-after` / `retry-after-ms`.
//!
//! With [`OpenAiWire::Responses`] chat calls go to the Responses API in its documented v1
//! form, `POST {endpoint}/openai/v1/responses` with the deployment name as the body's `model`
//! and no `api-version` (<https://learn.microsoft.com/azure/ai-foundry/openai/how-to/responses>,
//! REST tab; <https://learn.microsoft.com/azure/ai-foundry/openai/api-version-lifecycle>).

use std::fmt;

use ::http::header::HeaderMap;
use ripcord_core::{Error, ErrorKind, Locality, Result};
use secrecy::SecretString;

use crate::http::{self, Auth, Settings};
use crate::models::ModelInfo;
use crate::openai::{Dialect, MaxTokensField, OpenAi, OpenAiConfig, OpenAiWire, Setup, models};

/// The `api-version` used by default (the GA version of October 2024).
pub const AZURE_API_VERSION: &str = "2024-10-21";

/// Configuration of an [`AzureOpenAi`] provider.
///
/// # Examples
///
/// ```
/// use ripcord_providers::{AzureConfig, AzureOpenAi};
/// let cfg = AzureConfig::new("https://my-res.openai.azure.com", "gpt4o-prod", "az-key-123")
///     .with_model("gpt-4o");
/// let azure = AzureOpenAi::from_config(cfg)?;
/// assert!(!format!("{azure:?}").contains("az-key-123"));
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct AzureConfig {
    endpoint: String,
    deployment: String,
    api_version: String,
    api_key: SecretString,
    model: Option<String>,
    region: Option<String>,
    max_tokens_field: MaxTokensField,
    wire: OpenAiWire,
    http: Settings,
}

impl AzureConfig {
    /// A configuration for a deployment of a resource (`https://<resource>.openai.azure.com`).
    pub fn new(
        endpoint: impl Into<String>,
        deployment: impl Into<String>,
        api_key: impl Into<SecretString>,
    ) -> Self {
        AzureConfig {
            endpoint: endpoint.into(),
            deployment: deployment.into(),
            api_version: AZURE_API_VERSION.to_owned(),
            api_key: api_key.into(),
            model: None,
            region: None,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            wire: OpenAiWire::ChatCompletions,
            http: Settings::default(),
        }
    }

    /// Reads `AZURE_OPENAI_ENDPOINT` and `AZURE_OPENAI_API_KEY` (required) and
    /// `OPENAI_API_VERSION` (optional, as the official SDKs do).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` without an endpoint, `Auth` without a key.
    pub fn from_env(deployment: impl Into<String>) -> Result<Self> {
        let endpoint = http::env("AZURE_OPENAI_ENDPOINT").ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidRequest,
                "azure: AZURE_OPENAI_ENDPOINT is not set",
            )
        })?;
        let key = http::env("AZURE_OPENAI_API_KEY")
            .ok_or_else(|| Error::new(ErrorKind::Auth, "azure: AZURE_OPENAI_API_KEY is not set"))?;
        let mut c = AzureConfig::new(endpoint, deployment, key);
        if let Some(v) = http::env("OPENAI_API_VERSION") {
            c.api_version = v;
        }
        Ok(c)
    }

    ripcord_core::setters! {
        /// Sets the `api-version` (default [`AZURE_API_VERSION`]).
        with_api_version(v: impl Into<String>) => api_version = v.into();
        /// Names the underlying model (for the capability table and the request body); default:
        /// the deployment name.
        with_model(model: impl Into<String>) => model = Some(model.into());
        /// Sets the Azure region of the resource (e.g. `eu`, `swedencentral`) for locality rules.
        with_region(region: impl Into<String>) => region = Some(region.into());
        /// Which field carries `max_tokens` (default `max_completion_tokens`; use `MaxTokens` for
        /// api-versions before 2024-09-01-preview).
        with_max_tokens_field(field: MaxTokensField) => max_tokens_field = field;
        /// Calls the Responses API (`{endpoint}/openai/v1/responses`, the deployment as `model`)
        /// instead of the deployment's Chat Completions path.
        with_wire(wire: OpenAiWire) => wire = wire;
    }
}

http::settings_setters!(AzureConfig, name: "`azure`");

/// An Azure OpenAI deployment.
///
/// # Examples
///
/// ```
/// use ripcord_core::ChatModel;
/// use ripcord_providers::AzureOpenAi;
/// let azure = AzureOpenAi::new("https://res.openai.azure.com", "prod-4o", "2024-10-21", "key-1")?;
/// assert_eq!(azure.id().to_string(), "azure/prod-4o");
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone)]
pub struct AzureOpenAi {
    inner: OpenAi,
}

impl fmt::Debug for AzureOpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AzureOpenAi").field(&self.inner).finish()
    }
}

impl AzureOpenAi {
    /// A deployment with default settings.
    ///
    /// # Errors
    ///
    /// As [`AzureOpenAi::from_config`].
    pub fn new(
        endpoint: impl Into<String>,
        deployment: impl Into<String>,
        api_version: impl Into<String>,
        api_key: impl Into<SecretString>,
    ) -> Result<AzureOpenAi> {
        AzureOpenAi::from_config(
            AzureConfig::new(endpoint, deployment, api_key).with_api_version(api_version),
        )
    }

    /// [`AzureConfig::from_env`] then [`AzureOpenAi::from_config`].
    ///
    /// # Errors
    ///
    /// As both.
    pub fn from_env(deployment: impl Into<String>) -> Result<AzureOpenAi> {
        AzureOpenAi::from_config(AzureConfig::from_env(deployment)?)
    }

    /// Builds the provider.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` for a bad endpoint, an empty deployment or api-version, or zero
    /// timeouts; `Auth` for a bad key.
    pub fn from_config(cfg: AzureConfig) -> Result<AzureOpenAi> {
        let what = "azure";
        let deployment = cfg.deployment.trim();
        if deployment.is_empty() || deployment.contains(['/', '?', '#']) {
            return Err(Error::new(
                ErrorKind::InvalidRequest,
                format!("azure: invalid deployment name {:?}", cfg.deployment),
            ));
        }
        if cfg.api_version.trim().is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidRequest,
                "azure: the api-version is empty",
            ));
        }
        let url = |op: &str| -> Result<http::Target> {
            let mut u = http::endpoint(
                &cfg.endpoint,
                &format!("/openai/deployments/{deployment}/{op}"),
                what,
            )?;
            u.query_pairs_mut()
                .append_pair("api-version", cfg.api_version.trim());
            http::Target::new(u, what)
        };
        let chat_url = url("chat/completions")?;
        let embeddings_url = url("embeddings")?;
        let responses_url = match cfg.wire {
            OpenAiWire::Responses => Some(http::Target::new(
                http::endpoint(&cfg.endpoint, "/openai/v1/responses", what)?,
                what,
            )?),
            _ => None,
        };
        let auth = Auth::header("api-key", cfg.api_key, what)?;
        // The link's model is the deployment (what Azure serves and bills); the table lookup
        // uses the underlying model name when given.
        let table_model = cfg.model.unwrap_or_else(|| deployment.to_owned());
        let locality = match cfg.region {
            Some(r) => Locality::cloud_in("azure", r),
            None => Locality::cloud("azure"),
        };
        let caps =
            ModelInfo::lookup(models::TABLE, &models::DEFAULT, &table_model).capabilities(locality);
        let mut dialect = Dialect::openai();
        dialect.max_tokens = cfg.max_tokens_field;
        // The link name defaults to the vendor, `azure`; the endpoint is the base URL.
        let mut oc = OpenAiConfig::keyless(deployment);
        oc.http = cfg.http;
        let inner = OpenAi::assemble(
            Setup {
                vendor: "azure",
                chat_url,
                embeddings_url,
                // Azure lists models per resource and api-version, not per deployment: no
                // liveness check that would say this deployment answers.
                models_url: None,
                auth,
                headers: HeaderMap::new(),
                dialect,
                caps,
            },
            oc,
        )?;
        let inner = match responses_url {
            Some(u) => inner.with_responses_url(u),
            None => inner,
        };
        Ok(AzureOpenAi { inner })
    }
}

crate::openai::engine_wrapper!(AzureOpenAi);

#[cfg(test)]
mod tests {
    use super::*;
    use ripcord_core::ChatModel;

    #[test]
    fn urls_and_validation() {
        let a = AzureOpenAi::from_config(
            AzureConfig::new("https://res.openai.azure.com/", "prod-4o", "key-1234")
                .with_model("gpt-4o"),
        )
        .unwrap();
        assert_eq!(
            a.inner.chat_url().as_str(),
            "https://res.openai.azure.com/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(a.capabilities().context_window, 128_000);
        assert_eq!(ChatModel::id(&a).to_string(), "azure/prod-4o");
        for bad in ["", "a/b", "x?y"] {
            let e = AzureOpenAi::new("https://r.openai.azure.com", bad, "2024-10-21", "k-12345")
                .unwrap_err();
            assert!(e.message().contains("deployment"), "{e}");
        }
        let e = AzureOpenAi::new("https://r.openai.azure.com", "d", " ", "k-12345").unwrap_err();
        assert!(e.message().contains("api-version"));
    }

    #[test]
    fn the_responses_wire_uses_the_v1_path() {
        let a = AzureOpenAi::from_config(
            AzureConfig::new("https://res.openai.azure.com/", "prod-5", "key-1234")
                .with_wire(OpenAiWire::Responses),
        )
        .unwrap();
        assert_eq!(a.inner.wire(), OpenAiWire::Responses);
        assert_eq!(
            a.inner.responses_url().map(|u| u.as_str()),
            Some("https://res.openai.azure.com/openai/v1/responses")
        );
    }
}
