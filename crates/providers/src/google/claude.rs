//! Claude on Vertex AI: Anthropic's Messages wire at
//! `…/publishers/anthropic/models/{model}:rawPredict` (JSON) and `:streamRawPredict` (SSE),
//! per <https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude>.
//!
//! The body is the Messages body without `model` (the URL names it) and with
//! `anthropic_version: "vertex-2023-10-16"` instead of the `anthropic-version` header; the answer,
//! the stream and the model's own errors are Anthropic's, so the Anthropic adapter's request
//! mapping, response parser, stream decoder and error classification are reused as they are.
//! Vertex's front door answers some failures itself (quota, auth, a model not enabled in the
//! project) in Google's error envelope; those are classified as Google errors.

use std::fmt;
use std::sync::Arc;

use ::http::header::{AUTHORIZATION, HeaderMap};
use ripcord_core::{
    Capabilities, ChatRequest, ChatResponse, ChatStream, Context, Error, ModelId, Result,
};

use super::auth::TokenSource;
use super::error_map::GoogleError;
use super::{GCP_VERTEX_AI, VertexConfig};
use crate::anthropic::{error_map as anthropic_errors, models, request, response, stream};
use crate::attempt::{self, Adapter, Answer};
use crate::http::{self, Target, Timeouts, Transport};
use crate::models::ModelInfo;
use crate::sse::SseParser;

/// The `anthropic_version` Vertex AI expects in the body.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Claude served by Vertex AI.
///
/// # Examples
///
/// ```
/// use ripcord_providers::google::{GoogleCredentials, VertexAnthropic, VertexConfig};
/// let cfg = VertexConfig::new("claude-sonnet-4-5@20250929", "my-project", "us-east5",
///     GoogleCredentials::access_token("ya29.token"));
/// let claude = VertexAnthropic::new(cfg)?;
/// assert!(!format!("{claude:?}").contains("ya29"));
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone)]
pub struct VertexAnthropic {
    id: ModelId,
    caps: Capabilities,
    inner: Arc<Inner>,
}

struct Inner {
    predict: Target,
    stream: Target,
    transport: Transport,
    tokens: TokenSource,
}

impl fmt::Debug for VertexAnthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VertexAnthropic")
            .field("id", &self.id)
            .field("url", &self.inner.predict.as_str())
            .field("auth", &self.inner.tokens)
            .field("timeouts", &self.inner.transport.timeouts)
            .finish_non_exhaustive()
    }
}

/// A failed `rawPredict`: Vertex's own envelope, else the model's Anthropic error.
fn classify(status: u16, headers: &HeaderMap, body: &[u8]) -> Error {
    match GoogleError::parse(body).filter(|g| g.status.is_some()) {
        Some(g) => g.to_error(Some(status), Some(headers)),
        None => anthropic_errors::from_response(status, headers, body),
    }
}

impl VertexAnthropic {
    /// Builds a Claude-on-Vertex provider.
    ///
    /// # Errors
    ///
    /// `Auth` for unusable credentials; `InvalidRequest` for a bad project, location, model or
    /// base URL, or zero timeouts.
    pub fn new(cfg: VertexConfig) -> Result<VertexAnthropic> {
        let what = "vertex-anthropic";
        let predict = Target::new(cfg.model_url("anthropic", "rawPredict", what)?, what)?;
        let stream = Target::new(cfg.model_url("anthropic", "streamRawPredict", what)?, what)?;
        let (tokens, transport) = cfg.token_transport(what)?;
        // Vertex names versions `claude-sonnet-4-5@20250929`; the table is keyed by prefix.
        let caps = cfg.http.capabilities.clone().unwrap_or_else(|| {
            ModelInfo::lookup(models::TABLE, &models::DEFAULT, &cfg.model)
                .capabilities(cfg.locality())
        });
        Ok(VertexAnthropic {
            id: ModelId::new(
                cfg.http
                    .name
                    .unwrap_or_else(|| "vertex-anthropic".to_owned()),
                cfg.model,
            ),
            caps,
            inner: Arc::new(Inner {
                predict,
                stream,
                transport,
                tokens,
            }),
        })
    }

    /// The time limits.
    pub fn timeouts(&self) -> &Timeouts {
        &self.inner.transport.timeouts
    }

    fn body(&self, req: &ChatRequest, stream: bool) -> Result<(Vec<u8>, request::JsonMode)> {
        request::messages_body_for(
            request::BodyFor::Platform {
                anthropic_version: VERTEX_ANTHROPIC_VERSION,
            },
            req,
            self.caps.max_output_tokens,
            stream,
        )
    }

    /// Sends `body` to `target` with a fresh access token, a failure classified.
    async fn send(
        &self,
        ctx: &Context,
        target: &Target,
        body: Vec<u8>,
        stream: bool,
    ) -> Result<(http::Response, tokio::time::Instant)> {
        let i = &self.inner;
        let token = i.tokens.authorization(ctx).await?;
        let auth = Some((AUTHORIZATION, token));
        i.transport
            .send_with(ctx, target, body, stream, auth, classify)
            .await
    }
}

impl Adapter for VertexAnthropic {
    fn parts(&self) -> (&'static str, &ModelId, &Target, &Transport) {
        let i = &self.inner;
        (GCP_VERTEX_AI, &self.id, &i.predict, &i.transport)
    }

    async fn chat_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let (body, json) = self.body(req, false)?;
        let sent = self.send(ctx, &self.inner.predict, body, false).await?;
        let price = self.caps.price.as_ref();
        Answer::new(&self.inner.transport, ctx, &self.id, sent)
            .whole(|raw| response::parse_message(raw, json, price))
            .await
    }

    async fn stream_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let (body, json) = self.body(req, true)?;
        let sent = self.send(ctx, &self.inner.stream, body, true).await?;
        let price = self.caps.price;
        Answer::new(&self.inner.transport, ctx, &self.id, sent)
            .stream(
                |raw| response::parse_message(raw, json, price.as_ref()),
                SseParser::new(),
                stream::AnthropicDecoder::new(json, price),
            )
            .await
    }
}

attempt::link_impls!(VertexAnthropic);

#[cfg(test)]
mod tests {
    use ripcord_core::ErrorKind;

    use super::*;
    use crate::google::GoogleCredentials;

    #[test]
    fn urls_capabilities_and_both_error_envelopes() {
        let c = VertexAnthropic::new(VertexConfig::new(
            "claude-sonnet-4-5@20250929",
            "p",
            "global",
            GoogleCredentials::access_token("tok"),
        ))
        .unwrap();
        assert_eq!(
            c.inner.stream.as_str(),
            "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
        );
        assert_eq!(c.caps.max_output_tokens, 64_000);
        let h = HeaderMap::new();
        let e = classify(
            529,
            &h,
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(e.kind(), ErrorKind::Overloaded);
        let e = classify(
            429,
            &h,
            br#"{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: anthropic-claude-sonnet-4-5. Please submit a quota increase request.","status":"RESOURCE_EXHAUSTED"}}"#,
        );
        assert_eq!(e.kind(), ErrorKind::RateLimited);
        assert_eq!(e.vendor_code(), Some("RESOURCE_EXHAUSTED"));
    }
}
