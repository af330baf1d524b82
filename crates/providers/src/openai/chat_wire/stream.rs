//! The `chat.completion.chunk` object a stream sends, one per `data:` event.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::de::null_default;
use super::request::{FunctionCall, MessageContent};
use super::response::{Completion, Usage};

/// A `chat.completion.chunk` (<https://platform.openai.com/docs/api-reference/chat-streaming>).
///
/// The last chunk of a stream that asked for `stream_options.include_usage` has no choices
/// and the usage. Read leniently like [`ChatCompletion`](super::ChatCompletion): an in-band
/// `error` object is kept for the caller to classify.
///
/// # Examples
///
/// ```
/// use std::borrow::Cow;
/// use ripcord_providers::openai_chat_wire::{ChatCompletionChunk, ChunkChoice, Delta, MessageContent};
/// let chunk = ChatCompletionChunk {
///     id: Some(Cow::Borrowed("chatcmpl-1")),
///     object: Cow::Borrowed("chat.completion.chunk"),
///     choices: vec![ChunkChoice {
///         delta: Delta { content: Some(MessageContent::Text(Cow::Borrowed("Hel"))), ..Default::default() },
///         ..Default::default()
///     }],
///     ..Default::default()
/// };
/// let json = serde_json::to_string(&chunk)?;
/// assert_eq!(
///     json,
///     r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null,"logprobs":null}]}"#
/// );
/// let back: ChatCompletionChunk<'static> = serde_json::from_str(&json)?;
/// assert_eq!(back, chunk);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub type ChatCompletionChunk<'a> = Completion<'a, ChunkChoice<'a>>;

/// One answer's piece in a [`ChatCompletionChunk`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChunkChoice<'a> {
    /// Which answer.
    #[serde(default, deserialize_with = "null_default")]
    pub index: u32,
    /// What this piece adds.
    #[serde(default, deserialize_with = "null_default")]
    pub delta: Delta<'a>,
    /// Why the answer ended (on its last piece only).
    #[serde(default)]
    pub finish_reason: Option<Cow<'a, str>>,
    /// Log probabilities (kept as JSON; `null` unless asked for).
    #[serde(default)]
    pub logprobs: Option<Value>,
    /// Moonshot: the usage inside the last choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// What one piece adds to the answer; absent parts are left out of the JSON.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Delta<'a> {
    /// `assistant`, on the first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Cow<'a, str>>,
    /// A piece of the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<MessageContent<'a>>,
    /// A piece of the reasoning (DeepSeek's field, which Qwen, vLLM and Ollama share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// A piece of the reasoning as OpenRouter sends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Cow<'a, str>>,
    /// A piece of a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Cow<'a, str>>,
    /// Pieces of tool calls.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_calls: Vec<ToolCallDelta<'a>>,
}

/// A piece of a tool call: the first piece of a call has its id (and `type`) and name, the
/// later ones pieces of its arguments.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallDelta<'a> {
    /// Which call (its place in the message's `tool_calls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// The call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Cow<'a, str>>,
    /// `function`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Cow<'a, str>>,
    /// The name and a piece of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionCall<'a>>,
}
