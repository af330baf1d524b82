//! The Response object: what `POST /v1/responses` answers and what the stream's
//! `response.*` lifecycle events carry.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::de::{null_default, null_true, timestamp, yes};
use super::items::{OutputContent, OutputItem};
use super::request::{Input, Reasoning, TextConfig, Tool, ToolChoice};

/// A Response object (<https://platform.openai.com/docs/api-reference/responses/object>).
///
/// Fields OpenAI always sends are always serialized (`null` when unset), as OpenAI does; the
/// rarer ones only when set. [`Response::default`] is a valid empty object to fill in.
///
/// # Examples
///
/// ```
/// use ripcord_providers::openai_responses_wire::*;
/// let r = Response {
///     id: "resp_1".into(),
///     model: "gpt-4.1".into(),
///     created_at: 1_741_476_542,
///     status: Some(ResponseStatus::Completed),
///     output: vec![OutputItem::Message(OutputMessage::assistant(
///         "msg_1",
///         ItemStatus::Completed,
///         vec![OutputContent::text("Hi!")],
///     ))],
///     ..Response::default()
/// };
/// assert_eq!(r.aggregate_output_text(), "Hi!");
/// let json = serde_json::to_value(&r)?;
/// assert_eq!(json["object"], "response");
/// assert_eq!(json["output"][0]["content"][0]["annotations"], serde_json::json!([]));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The response id (`resp_…`).
    pub id: String,
    /// Always `"response"`.
    #[serde(default = "response_object", deserialize_with = "object_if_null")]
    pub object: String,
    /// Unix seconds.
    #[serde(default, deserialize_with = "timestamp")]
    pub created_at: u64,
    /// `completed`, `incomplete`, `failed`, `in_progress`, ….
    #[serde(default)]
    pub status: Option<ResponseStatus>,
    /// Why the response failed (with `status: failed`).
    #[serde(default)]
    pub error: Option<ResponseError>,
    /// Why the response is incomplete (with `status: incomplete`).
    #[serde(default)]
    pub incomplete_details: Option<IncompleteDetails>,
    /// The instructions the response was made with (a string, or items).
    #[serde(default)]
    pub instructions: Option<Input>,
    /// The output cap it was made with.
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// The model that made it.
    #[serde(default, deserialize_with = "null_default")]
    pub model: String,
    /// Messages, function calls, reasoning items.
    #[serde(default, deserialize_with = "null_default")]
    pub output: Vec<OutputItem>,
    /// Whether parallel tool calls were allowed (default `true`).
    #[serde(default = "yes", deserialize_with = "null_true")]
    pub parallel_tool_calls: bool,
    /// The response this one continues.
    #[serde(default)]
    pub previous_response_id: Option<String>,
    /// Reasoning settings.
    #[serde(default)]
    pub reasoning: Option<Reasoning>,
    /// Whether it is stored.
    #[serde(default)]
    pub store: Option<bool>,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The text format settings.
    #[serde(default)]
    pub text: Option<TextConfig>,
    /// The tool choice (default `"auto"`).
    #[serde(default, deserialize_with = "null_default")]
    pub tool_choice: ToolChoice,
    /// The tools it could use.
    #[serde(default, deserialize_with = "null_default")]
    pub tools: Vec<Tool>,
    /// Nucleus sampling.
    #[serde(default)]
    pub top_p: Option<f64>,
    /// `auto` or `disabled`.
    #[serde(default)]
    pub truncation: Option<String>,
    /// Token counts.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// The end-user id.
    #[serde(default)]
    pub user: Option<String>,
    /// The request's metadata.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// The concatenated `output_text` parts, a convenience some servers add (the SDKs compute
    /// it themselves); serialized only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_text: Option<String>,
    /// Unix seconds when it completed.
    #[serde(default)]
    pub completed_at: Option<u64>,
    /// Whether it ran in the background.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    /// The service tier that served it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    /// The built-in tool call cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u64>,
    /// Log probabilities requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    /// The prompt cache key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    /// The safety identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_identifier: Option<String>,
}

impl Default for Response {
    fn default() -> Self {
        Response {
            id: String::new(),
            object: response_object(),
            created_at: 0,
            status: None,
            error: None,
            incomplete_details: None,
            instructions: None,
            max_output_tokens: None,
            model: String::new(),
            output: Vec::new(),
            parallel_tool_calls: true,
            previous_response_id: None,
            reasoning: None,
            store: None,
            temperature: None,
            text: None,
            tool_choice: ToolChoice::default(),
            tools: Vec::new(),
            top_p: None,
            truncation: None,
            usage: None,
            user: None,
            metadata: None,
            output_text: None,
            completed_at: None,
            background: None,
            service_tier: None,
            max_tool_calls: None,
            top_logprobs: None,
            prompt_cache_key: None,
            safety_identifier: None,
        }
    }
}

impl Response {
    /// The text of every `output_text` part of every message, concatenated (what the SDKs'
    /// `output_text` property computes); `""` when there is none.
    pub fn aggregate_output_text(&self) -> String {
        let mut out = String::new();
        for item in &self.output {
            if let OutputItem::Message(m) = item {
                for part in &m.content {
                    if let OutputContent::OutputText(t) = part {
                        out.push_str(&t.text);
                    }
                }
            }
        }
        out
    }
}

fn response_object() -> String {
    "response".to_owned()
}

fn object_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_else(response_object))
}

/// A response's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseStatus {
    /// Finished.
    Completed,
    /// Failed (see `error`).
    Failed,
    /// Being generated.
    InProgress,
    /// Cancelled (background responses).
    Cancelled,
    /// Waiting to start (background responses).
    Queued,
    /// Cut short (see `incomplete_details`).
    Incomplete,
    /// A status this module does not know (serialized as `"other"`).
    #[serde(other)]
    Other,
}

/// Why a response failed: `{code, message}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ResponseError {
    /// `server_error`, `rate_limit_exceeded`, `invalid_prompt`, … (OpenAI's in-band failures
    /// also use the HTTP error codes: `insufficient_quota`, `context_length_exceeded`, …).
    #[serde(default, deserialize_with = "null_default")]
    pub code: String,
    /// A human-readable description.
    #[serde(default, deserialize_with = "null_default")]
    pub message: String,
}

/// Why a response is incomplete.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IncompleteDetails {
    /// `max_output_tokens` or `content_filter` (kept as sent: older servers say `max_tokens`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// Token counts of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    #[serde(default, deserialize_with = "null_default")]
    pub input_tokens: u64,
    /// The input breakdown (always serialized).
    #[serde(default, deserialize_with = "null_default")]
    pub input_tokens_details: InputTokensDetails,
    /// Output tokens, reasoning tokens included.
    #[serde(default, deserialize_with = "null_default")]
    pub output_tokens: u64,
    /// The output breakdown (always serialized).
    #[serde(default, deserialize_with = "null_default")]
    pub output_tokens_details: OutputTokensDetails,
    /// Input plus output.
    #[serde(default, deserialize_with = "null_default")]
    pub total_tokens: u64,
}

impl Usage {
    /// Usage with these counts and `total_tokens` = input + output.
    pub fn new(input_tokens: u64, cached_tokens: u64, output_tokens: u64) -> Usage {
        Usage {
            input_tokens,
            input_tokens_details: InputTokensDetails {
                cached_tokens,
                cache_write_tokens: None,
            },
            output_tokens,
            output_tokens_details: OutputTokensDetails::default(),
            total_tokens: input_tokens.saturating_add(output_tokens),
        }
    }
}

/// The input breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InputTokensDetails {
    /// Input tokens served from the prompt cache.
    #[serde(default, deserialize_with = "null_default")]
    pub cached_tokens: u64,
    /// Input tokens written to the prompt cache (newer models); serialized only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

/// The output breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OutputTokensDetails {
    /// Output tokens spent on reasoning.
    #[serde(default, deserialize_with = "null_default")]
    pub reasoning_tokens: u64,
}
