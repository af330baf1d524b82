//! Google's wire: Gemini on Google AI Studio, Gemini on Vertex AI, and Claude on Vertex AI.
//!
//! API references:
//! - Gemini API (AI Studio): <https://ai.google.dev/api/generate-content> (`generateContent`,
//!   `streamGenerateContent?alt=sse`), <https://ai.google.dev/api/embeddings>,
//!   function calling <https://ai.google.dev/gemini-api/docs/function-calling>, structured
//!   output <https://ai.google.dev/gemini-api/docs/structured-output>, thinking
//!   <https://ai.google.dev/gemini-api/docs/thinking>, errors
//!   <https://ai.google.dev/gemini-api/docs/troubleshooting>.
//! - Vertex AI: <https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/projects.locations.publishers.models/generateContent>,
//!   Claude on Vertex <https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude>,
//!   errors <https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429>.
//! - Service-account auth: <https://developers.google.com/identity/protocols/oauth2/service-account>.
//!
//! The pieces: the `generateContent` mapping (request, response, stream), Google's error
//! envelope, the model table, embeddings, Vertex addressing, and the OAuth token source. The
//! Claude adapter reuses the Anthropic adapter's mapping and classification.
//!
//! Features: `gemini` ([`Gemini`] on AI Studio), `vertex` ([`Gemini::vertex`], the token
//! source), `vertex-anthropic` ([`VertexAnthropic`]).

#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
mod auth;
#[cfg(feature = "vertex-anthropic")]
mod claude;
#[cfg(feature = "gemini")]
mod embed;
mod error_map;
#[cfg(feature = "gemini")]
mod gemini;
#[cfg(feature = "gemini")]
mod models;
#[cfg(feature = "gemini")]
mod request;
#[cfg(feature = "gemini")]
mod response;
#[cfg(feature = "gemini")]
mod stream;
#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
mod vertex;

use ripcord_core::{Error, ErrorKind, Result};

#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
pub use auth::{CLOUD_PLATFORM_SCOPE, GOOGLE_TOKEN_URI, GoogleCredentials, ServiceAccountKey};
#[cfg(feature = "vertex-anthropic")]
pub use claude::{VERTEX_ANTHROPIC_VERSION, VertexAnthropic};
#[cfg(feature = "gemini")]
pub use gemini::{GEMINI_BASE_URL, Gemini, GeminiConfig};
#[cfg(feature = "gemini")]
pub use request::{THOUGHT_SEPARATOR, Thinking};
#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
pub use vertex::{DEFAULT_VERTEX_LOCATION, VertexConfig};

/// `gen_ai.provider.name` of Gemini on AI Studio (OpenTelemetry's registered value).
#[cfg_attr(not(feature = "gemini"), allow(dead_code))]
const GCP_GEMINI: &str = "gcp.gemini";
/// `gen_ai.provider.name` of Vertex AI (OpenTelemetry's registered value).
#[cfg_attr(
    not(any(feature = "vertex", feature = "vertex-anthropic")),
    allow(dead_code)
)]
const GCP_VERTEX_AI: &str = "gcp.vertex_ai";

/// A URL path segment (a model, a project, a location): letters, digits and `-_.@` only
/// (`claude-sonnet-4-5@20250929`), so nothing a config says can change the path's shape.
#[cfg_attr(
    not(any(feature = "gemini", feature = "vertex-anthropic")),
    allow(dead_code)
)]
pub(crate) fn check_segment(value: &str, field: &str, what: &str) -> Result<()> {
    let ok = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::InvalidRequest,
            format!(
                "{what}: the {field} {value:?} cannot be part of a URL path (letters, digits, `-_.@`)"
            ),
        ))
    }
}
