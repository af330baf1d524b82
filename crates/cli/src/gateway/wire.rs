//! The OpenAI Chat Completions wire, server side: requests in, responses and chunks out.
//!
//! Reference: <https://platform.openai.com/docs/api-reference/chat>. Only what the gateway needs
//! to accept from OpenAI SDKs and to answer in their shapes.

use ripcord_core::{
    ChatRequest, ContentPart, FileSource, ImageSource, Message, Reasoning, ReasoningEffort,
    ResponseFormat, Role, ToolCall, ToolChoice, ToolSpec,
};

use super::errors::GatewayError;
use super::reply::{finite_f32, null_default};
use serde::Deserialize;
use serde_json::{Value, json};

/// A chat completions request as OpenAI SDKs send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRequest {
    #[serde(default)]
    pub(crate) model: Option<String>,
    pub(crate) messages: Vec<WireMessage>,
    #[serde(default, deserialize_with = "null_default")]
    tools: Vec<WireTool>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    response_format: Option<WireResponseFormat>,
    #[serde(default, deserialize_with = "finite_f32")]
    temperature: Option<f32>,
    #[serde(default, deserialize_with = "finite_f32")]
    top_p: Option<f32>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stop: Option<Value>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub(crate) stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    /// Forwarded to links that have them; refused by links that do not (see
    /// `docs/client-support.md`).
    #[serde(default, deserialize_with = "finite_f32")]
    presence_penalty: Option<f32>,
    #[serde(default, deserialize_with = "finite_f32")]
    frequency_penalty: Option<f32>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    /// `minimal`, `low`, `medium` or `high`: a budget's band on links that take budgets.
    #[serde(default)]
    reasoning_effort: Option<String>,
    /// Refused unless they ask for nothing (see [`WireRequest::refuse_unservable`]).
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    logprobs: Option<bool>,
    #[serde(default)]
    top_logprobs: Option<u32>,
    #[serde(default)]
    logit_bias: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default, deserialize_with = "null_default")]
    include_usage: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    tool_calls: Vec<WireToolCall>,
    /// The deprecated single function call of an assistant turn.
    #[serde(default)]
    function_call: Option<WireFunctionCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
    /// An earlier answer's reasoning, as this door renders it (and DeepSeek's SDK users send
    /// it back with `model_dump()`): kept on the assistant turn, unsigned, so no link sends
    /// it on (see `ripcord_core::Message::reasoning`).
    #[serde(default)]
    reasoning_content: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunctionCall,
}

#[derive(Debug, Deserialize)]
struct WireFunctionCall {
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    arguments: String,
}

#[derive(Debug, Deserialize)]
struct WireTool {
    function: WireFunction,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: WireJsonSchema },
}

#[derive(Debug, Deserialize)]
struct WireJsonSchema {
    name: String,
    #[serde(default)]
    schema: Option<Value>,
    #[serde(default)]
    strict: Option<bool>,
}

impl WireRequest {
    /// True when the client asked for the usage chunk.
    pub(crate) fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    }

    /// Refuses what no link can give back through this door: several choices, log
    /// probabilities, and token biases (token ids mean something else on every vendor's
    /// tokenizer, so they cannot follow a fallback).
    fn refuse_unservable(&self) -> Result<(), GatewayError> {
        if self.n.is_some_and(|n| n != 1) {
            return Err(GatewayError::invalid_at(
                "n",
                "this gateway answers with one choice; send the request n times instead",
            ));
        }
        if self.logprobs == Some(true) || self.top_logprobs.is_some_and(|n| n > 0) {
            let param = if self.logprobs == Some(true) {
                "logprobs"
            } else {
                "top_logprobs"
            };
            return Err(GatewayError::invalid_at(
                param,
                "log probabilities are not returned by this gateway",
            ));
        }
        if self.logit_bias.as_ref().is_some_and(|b| !b.is_empty()) {
            return Err(GatewayError::invalid_at(
                "logit_bias",
                "token biases are not supported: token ids differ between the vendors a route may fall back to",
            ));
        }
        Ok(())
    }

    /// Translates to ripcord's request.
    pub(crate) fn into_chat_request(self) -> Result<ChatRequest, GatewayError> {
        self.refuse_unservable()?;
        if self.messages.is_empty() {
            return Err(GatewayError::invalid_at("messages", "must not be empty"));
        }
        let mut messages = Vec::with_capacity(self.messages.len());
        for (i, m) in self.messages.into_iter().enumerate() {
            let role = match m.role.as_str() {
                "system" | "developer" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                // The deprecated function-calling turn: the result of the assistant's last
                // `function_call` of that name, which is a tool result by another name.
                "tool" | "function" => Role::Tool,
                other => {
                    return Err(GatewayError::invalid_at(
                        format!("messages[{i}].role"),
                        format_args!("unknown role {other:?}"),
                    ));
                }
            };
            let content = parse_content(m.content, i)?;
            let mut msg = Message::new(role, "");
            msg.content = content;
            msg.tool_call_id = m.tool_call_id;
            if role == Role::Assistant
                && let Some(r) = m.reasoning_content.filter(|r| !r.is_empty())
            {
                msg.reasoning
                    .push(ripcord_core::ReasoningBlock::thinking(r));
            }
            msg.tool_calls = m
                .tool_calls
                .into_iter()
                .map(|c| ToolCall::new(c.id, c.function.name, c.function.arguments))
                .collect();
            if let Some(f) = m.function_call {
                // A deprecated `function_call` is a tool call with an id of our own.
                msg.tool_calls.push(ToolCall::new(
                    format!("call_function_{i}"),
                    f.name,
                    f.arguments,
                ));
            }
            if m.role == "function" {
                let name = m.name.as_deref().unwrap_or_default();
                msg.tool_call_id = messages.iter().rev().find_map(|p: &Message| {
                    p.tool_calls
                        .iter()
                        .rev()
                        .find(|c| c.name == name)
                        .map(|c| c.id.clone())
                });
                if msg.tool_call_id.is_none() {
                    return Err(GatewayError::invalid_at(
                        format!("messages[{i}].name"),
                        format_args!(
                            "a function message answers an earlier assistant `function_call`; none is named {name:?}"
                        ),
                    ));
                }
            } else {
                msg.name = m.name;
            }
            if role == Role::Tool && msg.tool_call_id.is_none() {
                return Err(GatewayError::invalid_at(
                    format!("messages[{i}].tool_call_id"),
                    "a tool message needs `tool_call_id`",
                ));
            }
            messages.push(msg);
        }
        let mut req = ChatRequest::new(messages);
        req.tools = self
            .tools
            .into_iter()
            .map(|t| {
                let mut spec = ToolSpec::new(
                    t.function.name,
                    "",
                    t.function
                        .parameters
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                );
                spec.description = t.function.description;
                spec
            })
            .collect();
        req.tool_choice = match self.tool_choice {
            None => None,
            Some(Value::String(s)) => Some(match s.as_str() {
                "auto" => ToolChoice::Auto,
                "none" => ToolChoice::None,
                "required" => ToolChoice::Required,
                other => {
                    return Err(GatewayError::invalid_at(
                        "tool_choice",
                        format_args!("unknown value {other:?}"),
                    ));
                }
            }),
            Some(v) => match v.pointer("/function/name").and_then(Value::as_str) {
                Some(name) => Some(ToolChoice::Tool {
                    name: name.to_owned(),
                }),
                None => {
                    return Err(GatewayError::invalid_at(
                        "tool_choice",
                        "expected a string or {\"type\":\"function\",\"function\":{\"name\":...}}",
                    ));
                }
            },
        };
        req.response_format = match self.response_format {
            None | Some(WireResponseFormat::Text) => ResponseFormat::Text,
            Some(WireResponseFormat::JsonObject) => ResponseFormat::Json,
            Some(WireResponseFormat::JsonSchema { json_schema }) => ResponseFormat::JsonSchema {
                name: json_schema.name,
                schema: json_schema.schema.unwrap_or_else(|| json!({})),
                strict: json_schema.strict.unwrap_or(false),
            },
        };
        req.temperature = self.temperature;
        req.top_p = self.top_p;
        req.max_tokens = self.max_completion_tokens.or(self.max_tokens);
        req.stop = match self.stop {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s],
            Some(Value::Array(a)) => a
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(GatewayError::invalid_at(
                        "stop",
                        "expected a string or an array of strings",
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(GatewayError::invalid_at(
                    "stop",
                    "expected a string or an array of strings",
                ));
            }
        };
        req.seed = self.seed;
        req.user = self.user;
        req.presence_penalty = self.presence_penalty;
        req.frequency_penalty = self.frequency_penalty;
        req.parallel_tool_calls = self.parallel_tool_calls;
        req.reasoning = match self.reasoning_effort.as_deref() {
            None => None,
            Some(e) => Some(Reasoning::effort(ReasoningEffort::parse(e).ok_or_else(
                || {
                    GatewayError::invalid_at(
                        "reasoning_effort",
                        format_args!("{e:?} is not one of minimal, low, medium, high"),
                    )
                },
            )?)),
        };
        Ok(req)
    }
}

fn parse_content(content: Option<Value>, i: usize) -> Result<Vec<ContentPart>, GatewayError> {
    match content {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![ContentPart::Text { text }]),
        Some(Value::Array(parts)) => parts
            .into_iter()
            .enumerate()
            .map(|(j, p)| {
                let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
                match kind {
                    "text" => p
                        .get("text")
                        .and_then(Value::as_str)
                        .map(|t| ContentPart::Text { text: t.to_owned() })
                        .ok_or_else(|| {
                            GatewayError::invalid_at(
                                format!("messages[{i}].content[{j}].text"),
                                "a text part needs `text`",
                            )
                        }),
                    "image_url" => {
                        let url = p
                            .pointer("/image_url/url")
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                GatewayError::invalid_at(
                                    format!("messages[{i}].content[{j}].image_url.url"),
                                    "an image part needs `image_url.url`",
                                )
                            })?;
                        let detail = p
                            .pointer("/image_url/detail")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                        Ok(image_part(url, detail))
                    }
                    "file" => file_part(&p, i, j),
                    "input_audio" => audio_part(&p, i, j),
                    other => Err(GatewayError::invalid_at(
                        format!("messages[{i}].content[{j}].type"),
                        format_args!("unsupported part type {other:?}"),
                    )),
                }
            })
            .collect(),
        Some(_) => Err(GatewayError::invalid_at(
            format!("messages[{i}].content"),
            "expected a string or an array of parts",
        )),
    }
}

/// A `file` part: `file.file_data` (a `data:<type>;base64,<data>` URL) or `file.file_id`, with
/// an optional `file.filename`.
fn file_part(p: &Value, i: usize, j: usize) -> Result<ContentPart, GatewayError> {
    let at = |field: &str| format!("messages[{i}].content[{j}].file{field}");
    let str_at = |ptr: &str| p.pointer(ptr).filter(|v| !v.is_null());
    let filename = match str_at("/file/filename") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(GatewayError::invalid_at(
                at(".filename"),
                "expected a string",
            ));
        }
    };
    let file = match (str_at("/file/file_data"), str_at("/file/file_id")) {
        (Some(Value::String(url)), None) => {
            let (media_type, data) = url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"))
                .ok_or_else(|| {
                    GatewayError::invalid_at(
                        at(".file_data"),
                        "expected a `data:<media type>;base64,<data>` URL",
                    )
                })?;
            FileSource::Base64 {
                media_type: media_type.to_owned(),
                data: data.to_owned(),
            }
        }
        (None, Some(Value::String(id))) => FileSource::Id { id: id.clone() },
        (Some(_), Some(_)) => {
            return Err(GatewayError::invalid_at(
                at(""),
                "give one of `file_data` and `file_id`, not both",
            ));
        }
        (None, None) => {
            return Err(GatewayError::invalid_at(
                at(""),
                "a file part needs `file.file_data` or `file.file_id`",
            ));
        }
        (Some(_), None) => {
            return Err(GatewayError::invalid_at(
                at(".file_data"),
                "expected a string",
            ));
        }
        (None, Some(_)) => {
            return Err(GatewayError::invalid_at(
                at(".file_id"),
                "expected a string",
            ));
        }
    };
    Ok(ContentPart::File { file, filename })
}

/// An `input_audio` part: `input_audio.data` (base64) and `input_audio.format`.
fn audio_part(p: &Value, i: usize, j: usize) -> Result<ContentPart, GatewayError> {
    let field = |name: &str| {
        p.pointer(&format!("/input_audio/{name}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                GatewayError::invalid_at(
                    format!("messages[{i}].content[{j}].input_audio.{name}"),
                    "an input_audio part needs `input_audio.data` and `input_audio.format` strings",
                )
            })
    };
    Ok(ContentPart::Audio {
        data: field("data")?,
        format: field("format")?,
    })
}

/// An image part from an OpenAI image URL: a `data:<type>;base64,<data>` URL is inline data,
/// anything else a URL the serving link fetches.
pub(crate) fn image_part(url: &str, detail: Option<String>) -> ContentPart {
    let image = match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((media_type, data)) => ImageSource::Base64 {
            media_type: media_type.to_owned(),
            data: data.to_owned(),
        },
        None => ImageSource::Url {
            url: url.to_owned(),
        },
    };
    ContentPart::Image { image, detail }
}

mod out;

pub(crate) use out::{Chunk, ChunkWriter, Delta, completion};

#[cfg(test)]
mod tests {
    use ripcord_core::{ChatResponse, FinishReason, Usage};

    use super::out::finish_reason;
    use super::*;

    /// What the gateway sent before the typed [`Completion`]: the same object built as a
    /// `serde_json::Value`.
    fn as_value(id: &str, created: u64, model: &str, resp: &ChatResponse) -> Value {
        let mut message = json!({"role": "assistant", "content": resp.content});
        if !resp.tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(
                resp.tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect(),
            );
            if resp.content.is_empty() {
                message["content"] = Value::Null;
            }
        }
        json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(&resp.finish_reason), "logprobs": null}],
            "usage": {
                "prompt_tokens": resp.usage.input_tokens,
                "completion_tokens": resp.usage.output_tokens,
                "total_tokens": resp.usage.total_tokens(),
                "prompt_tokens_details": {"cached_tokens": resp.usage.cached_input_tokens},
            },
        })
    }

    /// What the gateway sent before the typed [`Chunk`]: the same chunk built as a `Value`.
    fn chunk_as_value(w: &ChunkWriter, delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": w.id,
            "object": "chat.completion.chunk",
            "created": w.created,
            "model": w.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        })
    }

    #[test]
    fn typed_chunks_serialise_to_the_same_json_as_before() {
        let w = ChunkWriter {
            id: "chatcmpl-1".into(),
            created: 7,
            model: "gpt-4o-mini".into(),
        };
        let cases = [
            (
                Delta::opening(),
                None,
                json!({"role": "assistant", "content": ""}),
            ),
            (
                Delta::text("Rayleigh"),
                None,
                json!({"content": "Rayleigh"}),
            ),
            (
                Delta::tool_call(1, Some("call_1"), Some("lookup"), "{\"q\""),
                None,
                json!({"tool_calls": [{"index": 1, "id": "call_1", "type": "function",
                    "function": {"name": "lookup", "arguments": "{\"q\""}}]}),
            ),
            (
                Delta::tool_call(1, None, None, ":1}"),
                None,
                json!({"tool_calls": [{"index": 1, "function": {"arguments": ":1}"}}]}),
            ),
            (Delta::default(), Some("stop"), json!({})),
        ];
        for (delta, finish, old) in cases {
            let typed = serde_json::to_value(w.chunk(delta, finish)).unwrap();
            assert_eq!(typed, chunk_as_value(&w, old, finish));
        }
        let usage = Usage::new(12, 9).with_cached_input(4);
        assert_eq!(
            serde_json::to_value(w.usage(&usage)).unwrap(),
            json!({
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 7,
                "model": "gpt-4o-mini",
                "choices": [],
                "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21,
                    "prompt_tokens_details": {"cached_tokens": 4}},
            })
        );
    }

    #[test]
    fn typed_completions_serialise_to_the_same_json_as_before() {
        let call = ToolCall::new("call_1", "lookup", r#"{"q":"sky"}"#);
        let cases = [
            ChatResponse::new("Rayleigh scattering.")
                .with_usage(Usage::new(12, 9).with_cached_input(4)),
            ChatResponse::new("").with_tool_calls(vec![call.clone()]),
            ChatResponse::new("Let me check.")
                .with_tool_calls(vec![call])
                .with_model("gpt-4o-2024-08-06")
                .with_finish_reason(FinishReason::ToolCalls),
            ChatResponse::new("cut").with_finish_reason(FinishReason::Length),
        ];
        for resp in &cases {
            let typed = serde_json::to_value(completion("chatcmpl-1", 7, "ripcord", resp)).unwrap();
            assert_eq!(
                typed,
                as_value("chatcmpl-1", 7, "ripcord", resp),
                "{resp:?}"
            );
        }
    }
}
