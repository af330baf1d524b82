//! Response validation: an answer that fails a check is an `InvalidResponse` failure.
//!
//! A model that was asked for JSON and answered prose has failed, even with HTTP 200. The
//! [`Validate`] decorator runs a [`Validator`] on every answer and turns a rejection into
//! [`ErrorKind::InvalidResponse`], whose disposition is `Retry`: put it inside the retry and the
//! breaker, and a bad answer is retried, counted and finally falls back like any other failure.
//!
//! Streams are checked when their finish event arrives: the finish is replaced by the error, so
//! the consumer never sees a bad answer end normally.

mod json;

use std::fmt;

use async_trait::async_trait;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, ModelId, Result,
    StreamEvent, ToolCall,
};

pub use json::JsonValidator;

use crate::error::tag;
use crate::stream_util::{End, Observed, StreamObserver};

/// Checks an answer. `Err` holds a human-readable reason.
///
/// Closures work through [`validator_fn`].
pub trait Validator: Send + Sync + fmt::Debug + 'static {
    /// Accepts or rejects `resp` as an answer to `req`.
    ///
    /// # Errors
    ///
    /// Why the answer is rejected.
    fn validate(&self, req: &ChatRequest, resp: &ChatResponse) -> std::result::Result<(), String>;
}

/// A validator from a closure.
pub struct FnValidator<F>(F);

impl<F> fmt::Debug for FnValidator<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnValidator")
    }
}

impl<F> Validator for FnValidator<F>
where
    F: Fn(&ChatRequest, &ChatResponse) -> std::result::Result<(), String> + Send + Sync + 'static,
{
    fn validate(&self, req: &ChatRequest, resp: &ChatResponse) -> std::result::Result<(), String> {
        (self.0)(req, resp)
    }
}

/// Makes a [`Validator`] of a closure.
///
/// # Examples
///
/// ```
/// use ripcord_core::{ChatRequest, ChatResponse};
/// use ripcord_resilience::{Validator, validator_fn};
/// let not_empty = validator_fn(|_req: &ChatRequest, resp: &ChatResponse| {
///     if resp.text().trim().is_empty() { Err("empty answer".to_owned()) } else { Ok(()) }
/// });
/// assert!(not_empty.validate(&ChatRequest::user("x"), &ChatResponse::new(" ")).is_err());
/// ```
pub fn validator_fn<F>(f: F) -> FnValidator<F>
where
    F: Fn(&ChatRequest, &ChatResponse) -> std::result::Result<(), String> + Send + Sync + 'static,
{
    FnValidator(f)
}

/// A model whose answers are checked by a [`Validator`].
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind, ResponseFormat};
/// use ripcord_resilience::{ChatModelExt, JsonValidator};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let model = ScriptedModel::new("chatty").reply("Sure! Here is your JSON.").with_validation(JsonValidator);
/// let req = ChatRequest::user("Give me JSON").with_response_format(ResponseFormat::Json);
/// let err = model.chat(&req, &Context::new()).await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidResponse);
/// # }
/// ```
#[derive(Debug)]
pub struct Validate<M, V> {
    inner: M,
    validator: std::sync::Arc<V>,
}

impl<M: ChatModel, V: Validator> Validate<M, V> {
    /// Wraps `inner` with the validator.
    pub fn new(inner: M, validator: V) -> Self {
        Validate {
            inner,
            validator: std::sync::Arc::new(validator),
        }
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, mutably.
    pub fn get_mut(&mut self) -> &mut M {
        &mut self.inner
    }

    /// Unwraps the model.
    pub fn into_inner(self) -> M {
        self.inner
    }
}

fn rejected(reason: &str, id: &ModelId) -> Error {
    tracing::info!(ripcord.link = %id.name, reason, message = ripcord_core::telemetry::event::VALIDATION_FAILED);
    tag(
        Error::new(
            ErrorKind::InvalidResponse,
            format!("validation failed: {reason}"),
        ),
        id,
    )
}

/// Assembles a streamed answer and checks it at the finish.
struct ValidateObserver<V> {
    validator: std::sync::Arc<V>,
    req: ChatRequest,
    id: ModelId,
    text: String,
    calls: Vec<ToolCall>,
}

impl<V: Validator> StreamObserver for ValidateObserver<V> {
    fn on_item(&mut self, item: Result<StreamEvent>) -> Result<StreamEvent> {
        match &item {
            Ok(StreamEvent::TextDelta { text }) => self.text.push_str(text),
            Ok(StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            }) => {
                let i = *index as usize;
                while self.calls.len() <= i {
                    self.calls.push(ToolCall::new("", "", ""));
                }
                let call = &mut self.calls[i];
                if let Some(id) = id {
                    call.id.clone_from(id);
                }
                if let Some(name) = name {
                    call.name.push_str(name);
                }
                call.arguments.push_str(arguments);
            }
            Ok(StreamEvent::Restarted { .. }) => {
                self.text.clear();
                self.calls.clear();
            }
            Ok(StreamEvent::Finish { .. }) => {
                let resp = ChatResponse::new(std::mem::take(&mut self.text))
                    .with_tool_calls(std::mem::take(&mut self.calls));
                if let Err(reason) = self.validator.validate(&self.req, &resp) {
                    return Err(rejected(&reason, &self.id));
                }
            }
            _ => {}
        }
        item
    }

    fn on_end(&mut self, _end: End<'_>) {}
}

#[async_trait]
impl<M: ChatModel, V: Validator> ripcord_core::Decorator for Validate<M, V> {
    // `bounds_itself` forwards to this model: validation adds no wait.
    inner_model!(inner: M);

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let resp = self.inner.chat(req, ctx).await?;
        match self.validator.validate(req, &resp) {
            Ok(()) => Ok(resp),
            Err(reason) => Err(rejected(&reason, self.inner.id())),
        }
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let stream = self.inner.stream(req, ctx).await?;
        Ok(Observed::boxed(
            stream,
            ValidateObserver {
                validator: self.validator.clone(),
                req: req.clone(),
                id: self.inner.id().clone(),
                text: String::new(),
                calls: Vec::new(),
            },
        ))
    }
}
