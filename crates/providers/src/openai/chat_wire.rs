//! OpenAI's Chat Completions API (`POST /v1/chat/completions`) as serde types, used in both
//! directions: the gateway's `/v1/chat/completions` door deserializes [`ChatCompletionRequest`]
//! and serializes [`ChatCompletion`] and [`ChatCompletionChunk`]s; the OpenAI adapter (and every
//! OpenAI-compatible preset) serializes [`ChatCompletionRequest`] and deserializes the other two.
//! One set of types, so the two sides cannot drift.
//!
//! API reference: <https://platform.openai.com/docs/api-reference/chat/create>, the chunk
//! object: <https://platform.openai.com/docs/api-reference/chat-streaming>. The shapes follow the
//! official SDK's generated types (`openai-python`, `src/openai/types/chat/`), plus the fields
//! compatible vendors add that the adapter reads or writes (each documented where it appears:
//! DeepSeek's `prefix` and `reasoning_content`, vLLM's `continue_final_message`, Moonshot's
//! usage inside a choice, DeepSeek's cache counts, OpenRouter's `reasoning`).
//!
//! ## Borrowed or owned: `Cow<'a, str>`
//!
//! Every string is a [`Cow<'a, str>`](std::borrow::Cow) and every JSON value a
//! `Cow<'a, Value>`. The adapter builds a request from ripcord's `ChatRequest` with
//! `Cow::Borrowed`, so serializing a body copies no message text, schema or argument (and a
//! `data:` URL is written straight into the JSON by [`Url::Data`] without being assembled);
//! deserializing always yields `Cow::Owned`, so the gateway holds a
//! `ChatCompletionRequest<'static>` it can keep past the request body. A lifetime with plain
//! `&'a str` fields would have forced the gateway to keep the body alive (and to fail on
//! strings with escapes); owned `String`s would have forced the adapter to copy every message.
//!
//! ## Conventions
//!
//! - **Null is absent.** Every optional field accepts an explicit JSON `null` as if it were
//!   missing (`Option<T>`, or the default for lists and flags), because SDKs send both
//!   (`tool_calls: null` in a `model_dump()`, `stream: null`). `messages` is the one required
//!   field of a request.
//! - **Unknown fields are accepted** and dropped; a request field a server must act on has a
//!   field here (e.g. [`ChatCompletionRequest::n`], [`ChatCompletionRequest::logit_bias`]) so
//!   the gateway can refuse it by name instead of ignoring it.
//! - **Readable or kept.** A content part whose `type` this module does not model, or whose
//!   fields do not read as that type's (an image part without `image_url.url`), parses as
//!   [`ContentPart::Other`] holding the JSON; a `tool_choice` that is neither a mode nor a named
//!   function is [`ToolChoice::Other`]; tool arguments sent as a JSON object instead of a string
//!   are [`Arguments::Json`]. Nothing is lost, so a newer vendor does not break the adapter and
//!   the gateway can name the field it refuses (`messages[2].content[0].image_url.url`).
//!   `response_format` is a closed set: an unknown `type` is an error naming the variants.
//! - **Lenient where vendors differ.** A response's tool call may lack its `id` and its
//!   function its `name` (the adapter makes an id; the gateway refuses a request that does so),
//!   a message's `content` may be a string or a list of parts, `created` may be a float.
//! - **Sampling numbers must fit an `f32`** (`temperature`, `top_p`, the penalties): serde
//!   would turn `1e39` into infinity, which JSON writes as `null`, silently dropping the
//!   caller's number; here it is an error naming the field.
//! - **Construction is plain struct literals.** Structs have public fields and implement
//!   `Default`; build with `..Default::default()` so fields added later do not break callers.

mod request;
mod response;
mod stream;
#[cfg(test)]
mod tests;

pub use request::{
    Arguments, ChatCompletionRequest, ContentPart, FileRef, FunctionCall, FunctionDef,
    FunctionName, ImageUrl, InputAudio, JsonSchema, Message, MessageContent, NamedToolChoice,
    ResponseFormat, Stop, StreamOptions, Tool, ToolCall, ToolChoice, Url,
};
pub use response::{
    ChatCompletion, Choice, Completion, CompletionTokensDetails, PromptTokensDetails, Usage,
};
pub use stream::{ChatCompletionChunk, ChunkChoice, Delta, ToolCallDelta};

/// Deserialization helpers shared by the submodules.
mod de {
    use serde::{Deserialize, Deserializer};

    pub(super) use crate::openai::wire_de::null_default;

    /// An optional sampling number as `f32`, refusing one that is not a finite `f32` (serde
    /// would make `1e39` infinity, which JSON then writes as `null`).
    pub(super) fn finite_f32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
        match Option::<f64>::deserialize(d)? {
            None => Ok(None),
            // In range: checked just before.
            Some(x) if x.is_finite() && x.abs() <= f64::from(f32::MAX) => Ok(Some(x as f32)),
            Some(x) => Err(serde::de::Error::custom(format!(
                "{x:e} is out of range: expected a finite number no larger than {:e} in size",
                f32::MAX
            ))),
        }
    }

    /// A Unix time in seconds: an integer, or a float (its fraction dropped); `null` is 0.
    pub(super) fn unix_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Ok(match Option::<serde_json::Number>::deserialize(d)? {
            None => 0,
            Some(n) => match n.as_u64() {
                Some(n) => n,
                // Saturates: a negative or fractional time becomes whole seconds from 0.
                None => n.as_f64().map_or(0, |f| f.max(0.0) as u64),
            },
        })
    }
}
