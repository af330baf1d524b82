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
use ripcord_core::telemetry;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ModelId,
    Provenance, Result, async_trait,
};

use super::auth::TokenSource;
use super::error_map::GoogleError;
use super::{GCP_VERTEX_AI, VertexConfig};
use crate::anthropic::{error_map as anthropic_errors, models, request, response, stream};
use crate::driver::{self, Labels};
use crate::http::{self, Auth, Target, Timeouts, Transport};
use crate::models::ModelInfo;

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
        let tokens = TokenSource::new(
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
        // Vertex names versions `claude-sonnet-4-5@20250929`; the table is keyed by prefix.
        let caps = cfg.capabilities.clone().unwrap_or_else(|| {
            ModelInfo::lookup(models::TABLE, &models::DEFAULT, &cfg.model)
                .capabilities(cfg.locality())
        });
        Ok(VertexAnthropic {
            id: ModelId::new(
                cfg.name.unwrap_or_else(|| "vertex-anthropic".to_owned()),
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

    /// The time limits.
    pub fn timeouts(&self) -> &Timeouts {
        &self.inner.transport.timeouts
    }

    fn attempt_span(&self, stream: bool) -> tracing::Span {
        telemetry::attempt_span(
            telemetry::operation::CHAT,
            GCP_VERTEX_AI,
            &self.id,
            stream,
            self.inner.predict.host_str(),
            telemetry::SpanKind::Client,
        )
    }

    fn labels(&self) -> Labels {
        Labels {
            name: self.id.name.clone(),
            model: self.id.model.clone(),
            auth: self.inner.transport.auth.clone(),
        }
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

    fn served(&self, mut r: ChatResponse, started: tokio::time::Instant) -> ChatResponse {
        r.provenance = Provenance::served(
            self.id.name.clone(),
            self.id.model.clone(),
            started.elapsed(),
        );
        r
    }

    async fn chat_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let i = &self.inner;
        let (body, json) = self.body(req, false)?;
        let token = i.tokens.authorization(ctx).await?;
        let (mut resp, started) = i
            .transport
            .send_with(
                ctx,
                &i.predict,
                body,
                false,
                Some((AUTHORIZATION, token)),
                classify,
            )
            .await?;
        let raw = i.transport.body(ctx, started, &mut resp).await?;
        let r = response::parse_message(&raw, json, self.caps.price.as_ref())?;
        Ok(self.served(r, started))
    }

    async fn stream_inner(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let i = &self.inner;
        let (body, json) = self.body(req, true)?;
        let token = i.tokens.authorization(ctx).await?;
        let (mut resp, started) = i
            .transport
            .send_with(
                ctx,
                &i.stream,
                body,
                true,
                Some((AUTHORIZATION, token)),
                classify,
            )
            .await?;
        if http::is_json(&resp) {
            let raw = i.transport.body(ctx, started, &mut resp).await?;
            let r = response::parse_message(&raw, json, self.caps.price.as_ref())?;
            return Ok(ripcord_core::stream::from_response(self.served(r, started)));
        }
        Ok(driver::drive(
            resp,
            stream::AnthropicDecoder::new(json, self.caps.price),
            ctx,
            i.transport.timeouts,
            started,
            self.labels(),
        ))
    }
}

#[async_trait]
impl ChatModel for VertexAnthropic {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

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
