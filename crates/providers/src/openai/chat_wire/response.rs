//! The `chat.completion` object: choices, the assistant's message, usage.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::de::{null_default, unix_seconds};
use super::request::Message;

/// A `chat.completion` object
/// (<https://platform.openai.com/docs/api-reference/chat/object>).
///
/// Also read leniently from compatible vendors: everything but the choices may be missing,
/// and an in-band `error` object is kept for the caller to classify.
///
/// # Examples
///
/// ```
/// use ripcord_providers::openai_chat_wire::ChatCompletion;
/// let c: ChatCompletion<'static> = serde_json::from_str(
///     r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o",
///        "choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],
///        "usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
/// )?;
/// let message = c.choices[0].message.clone().unwrap();
/// assert_eq!(message.content.unwrap().into_text(), "Hi");
/// assert_eq!(c.usage.unwrap().completion_tokens, 1);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub type ChatCompletion<'a> = Completion<'a, Choice<'a>>;

/// What a [`ChatCompletion`] and a [`ChatCompletionChunk`](super::ChatCompletionChunk) share:
/// all but the type `C` of their choices.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Completion<'a, C> {
    /// The completion's id (the same on every chunk of a stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Cow<'a, str>>,
    /// `chat.completion`, or `chat.completion.chunk`.
    #[serde(default, deserialize_with = "null_default")]
    pub object: Cow<'a, str>,
    /// When the completion was made, in Unix seconds.
    #[serde(default, deserialize_with = "unix_seconds")]
    pub created: u64,
    /// The model that answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Cow<'a, str>>,
    /// The answers (one unless the request asked for `n`), or a chunk's pieces of each.
    #[serde(
        default,
        deserialize_with = "null_default",
        bound(deserialize = "C: Deserialize<'de>")
    )]
    pub choices: Vec<C>,
    /// Token counts (in a stream, on the last chunk, when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// An error object some vendors put in a 200 body, or send in the middle of a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// One answer of a [`ChatCompletion`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Choice<'a> {
    /// Its place among the choices.
    #[serde(default, deserialize_with = "null_default")]
    pub index: u32,
    /// The assistant's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message<'a>>,
    /// `stop`, `length`, `tool_calls`, `content_filter`, … (vendors add their own).
    #[serde(default)]
    pub finish_reason: Option<Cow<'a, str>>,
    /// Log probabilities (kept as JSON; `null` unless asked for).
    #[serde(default)]
    pub logprobs: Option<Value>,
}

/// Token counts, with OpenAI's details and DeepSeek's cache counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    #[serde(default, deserialize_with = "null_default")]
    pub prompt_tokens: u64,
    /// Output tokens, reasoning included.
    #[serde(default, deserialize_with = "null_default")]
    pub completion_tokens: u64,
    /// The sum.
    #[serde(default, deserialize_with = "null_default")]
    pub total_tokens: u64,
    /// Where the input tokens went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Where the output tokens went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
    /// DeepSeek: input tokens read from its context cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_hit_tokens: Option<u64>,
    /// DeepSeek: input tokens not in its context cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_miss_tokens: Option<u64>,
}

impl Usage {
    /// Cached input tokens: OpenAI's `prompt_tokens_details.cached_tokens`, else DeepSeek's
    /// `prompt_cache_hit_tokens`, else 0.
    pub fn cached_tokens(&self) -> u64 {
        self.prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
            .unwrap_or(0)
    }
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Input tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Input audio tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_tokens: Option<u64>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    /// Output tokens spent reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Output audio tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_tokens: Option<u64>,
    /// Predicted-output tokens that appeared in the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_prediction_tokens: Option<u64>,
    /// Predicted-output tokens that did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_prediction_tokens: Option<u64>,
}
