//! Vertex AI's addressing: one configuration for Gemini on Vertex ([`super::Gemini::vertex`])
//! and Claude on Vertex ([`super::VertexAnthropic`]).
//!
//! A model lives at `projects/{project}/locations/{location}/publishers/{publisher}/models/{model}`
//! (<https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.publishers.models>),
//! served from the regional host `{location}-aiplatform.googleapis.com`, or from
//! `aiplatform.googleapis.com` for the `global` location. The base URL (host and API version)
//! can be overridden — a private endpoint, a proxy, a fake on loopback.

use ripcord_core::{Error, ErrorKind, Locality, Result};

use super::auth::{GoogleCredentials, TokenSource};
use super::check_segment;
use crate::http::{self, Auth, Settings, Transport};

/// The location used when none is configured.
pub const DEFAULT_VERTEX_LOCATION: &str = "us-central1";

/// Configuration of a Vertex AI provider (Gemini or Claude on Vertex).
///
/// The time limits and the HTTP client (`with_timeouts`, `with_client`) serve the token
/// exchange as well as the model calls.
///
/// # Examples
///
/// ```
/// use ripcord_providers::google::{GoogleCredentials, VertexConfig};
/// let cfg = VertexConfig::new("gemini-2.5-pro", "my-project", "europe-west4", GoogleCredentials::access_token("ya29.x"));
/// assert_eq!(cfg.base_url(), "https://europe-west4-aiplatform.googleapis.com/v1");
/// let global = VertexConfig::new("gemini-2.5-pro", "my-project", "global", GoogleCredentials::access_token("ya29.x"));
/// assert_eq!(global.base_url(), "https://aiplatform.googleapis.com/v1");
/// assert!(!format!("{cfg:?}").contains("ya29"));
/// ```
#[derive(Clone, Debug)]
pub struct VertexConfig {
    pub(crate) model: String,
    pub(crate) project: String,
    pub(crate) location: String,
    pub(crate) credentials: GoogleCredentials,
    pub(crate) http: Settings,
    #[cfg(feature = "vertex")]
    pub(crate) thinking: Option<super::Thinking>,
    #[cfg(feature = "vertex")]
    pub(crate) task_type: Option<String>,
}

impl VertexConfig {
    /// `model` in `project` at `location` (`us-central1`, `europe-west4`, `global`, …).
    pub fn new(
        model: impl Into<String>,
        project: impl Into<String>,
        location: impl Into<String>,
        credentials: GoogleCredentials,
    ) -> Self {
        VertexConfig {
            model: model.into(),
            project: project.into(),
            location: location.into(),
            credentials,
            http: Settings::default(),
            #[cfg(feature = "vertex")]
            thinking: None,
            #[cfg(feature = "vertex")]
            task_type: None,
        }
    }

    /// From the environment: the key file `GOOGLE_APPLICATION_CREDENTIALS` names, the project
    /// `GOOGLE_CLOUD_PROJECT` names (else the key's own), the location `GOOGLE_CLOUD_LOCATION`
    /// names (else [`DEFAULT_VERTEX_LOCATION`]).
    ///
    /// # Errors
    ///
    /// `Auth` without usable credentials; `InvalidRequest` when no project is known.
    pub fn from_env(model: impl Into<String>) -> Result<Self> {
        let creds = GoogleCredentials::from_env()?;
        let project = http::env("GOOGLE_CLOUD_PROJECT")
            .or_else(|| creds.project_id().map(str::to_owned))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidRequest,
                    "vertex: no project: set GOOGLE_CLOUD_PROJECT (the key file names none)",
                )
            })?;
        let location = http::env("GOOGLE_CLOUD_LOCATION")
            .unwrap_or_else(|| DEFAULT_VERTEX_LOCATION.to_owned());
        Ok(VertexConfig::new(model, project, location, creds))
    }

    ripcord_core::setters! {
        /// Gemini's thinking settings (Claude on Vertex ignores them).
        #[cfg(feature = "vertex")]
        with_thinking(thinking: super::Thinking) => thinking = Some(thinking);
        /// The `task_type` sent with every input of a text-embedding call (`RETRIEVAL_DOCUMENT`,
        /// `RETRIEVAL_QUERY`, `SEMANTIC_SIMILARITY`, `CLASSIFICATION`, `CLUSTERING`,
        /// `QUESTION_ANSWERING`, `FACT_VERIFICATION`, `CODE_RETRIEVAL_QUERY`); none by default,
        /// so the model uses its own default. Chat ignores it.
        #[cfg(feature = "vertex")]
        with_task_type(task_type: impl Into<String>) => task_type = Some(task_type.into());
    }

    /// The token source and the transport of a provider built from this configuration: both
    /// use the configured client and time limits (the token exchange included), the transport
    /// carries the custom headers and no fixed auth (each call adds a fresh access token).
    pub(crate) fn token_transport(&self, what: &str) -> Result<(TokenSource, Transport)> {
        let h = &self.http;
        let tokens =
            TokenSource::new(self.credentials.clone(), h.client.clone(), h.timeouts, what)?;
        let headers = http::custom_headers(&h.headers, what)?;
        let transport = Transport::new(h.client.clone(), Auth::none(), headers, h.timeouts, what)?;
        Ok((tokens, transport))
    }

    /// The base URL requests go to: the override, else the location's host with `/v1`.
    pub fn base_url(&self) -> String {
        match &self.http.base_url {
            Some(u) => u.clone(),
            None if self.location == "global" => "https://aiplatform.googleapis.com/v1".to_owned(),
            None => format!("https://{}-aiplatform.googleapis.com/v1", self.location),
        }
    }

    /// Where the model's data is processed.
    pub(crate) fn locality(&self) -> Locality {
        if self.location == "global" {
            Locality::cloud("google")
        } else {
            Locality::cloud_in("google", self.location.clone())
        }
    }

    /// The URL of `{model}:{method}` of `publisher`, checked.
    pub(crate) fn model_url(&self, publisher: &str, method: &str, what: &str) -> Result<url::Url> {
        for (field, value) in [
            ("project", &self.project),
            ("location", &self.location),
            ("model", &self.model),
        ] {
            check_segment(value, field, what)?;
        }
        let path = format!(
            "/projects/{}/locations/{}/publishers/{publisher}/models/{}:{method}",
            self.project, self.location, self.model
        );
        http::endpoint(&self.base_url(), &path, what)
    }
}

http::settings_setters!(
    VertexConfig,
    name: "`vertex` / `vertex-anthropic`",
    base_url: "Overrides the base URL (host and API version, e.g. `https://host/v1`)."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_by_location_and_checked_segments() {
        let c = VertexConfig::new(
            "claude-sonnet-4-5@20250929",
            "proj-1",
            "us-east5",
            GoogleCredentials::access_token("t"),
        );
        assert_eq!(
            c.model_url("anthropic", "rawPredict", "t")
                .unwrap()
                .as_str(),
            "https://us-east5-aiplatform.googleapis.com/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
        );
        assert_eq!(c.locality(), Locality::cloud_in("google", "us-east5"));
        let c = c.with_base_url("http://127.0.0.1:9/v1/");
        assert_eq!(
            c.model_url("google", "streamGenerateContent?alt=sse", "t")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:9/v1/projects/proj-1/locations/us-east5/publishers/google/models/claude-sonnet-4-5@20250929:streamGenerateContent?alt=sse"
        );
        let bad = VertexConfig::new("m/../x", "p", "l", GoogleCredentials::access_token("t"));
        let e = bad
            .model_url("google", "generateContent", "vertex")
            .unwrap_err();
        assert!(e.message().contains("model"), "{e}");
    }
}
