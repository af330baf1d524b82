//! The Anthropic Messages wire, server side: requests in, messages, stream events and errors
//! out.
//!
//! Reference: <https://docs.anthropic.com/en/api/messages>,
//! <https://docs.anthropic.com/en/docs/build-with-claude/streaming>,
//! <https://docs.anthropic.com/en/api/errors>. The neutral-to-Anthropic names (stop reasons,
//! error types, the usage split) come from the Anthropic adapter
//! ([`ripcord_providers::anthropic_wire`]), so the front door and the adapter cannot drift.
//!
//! Parsing goes through `serde_path_to_error`, so a bad request is refused with the path of
//! what is wrong (`messages[0].content[1]: unknown variant `video`…`), not only a column.

use std::fmt;
use std::marker::PhantomData;

use axum::body::Bytes;
use ripcord_core::{
    ChatRequest, ChatResponse, ContentPart, ImageSource, Message, ReasoningBlock, ResponseFormat,
    Role, ToolCall, ToolChoice, ToolSpec, Usage,
};
use ripcord_providers::anthropic_wire;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::errors::GatewayError;
use super::reply::{finite_f32, null_default, parse_body};

/// A `POST /v1/messages` (or `/v1/messages/count_tokens`) body. Required fields are `Option`
/// so that their absence is refused with Anthropic's own wording (`max_tokens: Field required`).
#[derive(Debug, Deserialize)]
pub(crate) struct MessagesRequest {
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    messages: Option<Vec<InMessage>>,
    #[serde(default)]
    system: Option<TextOr<InSystemBlock>>,
    #[serde(default, deserialize_with = "null_default")]
    tools: Vec<InTool>,
    #[serde(default)]
    tool_choice: Option<InToolChoice>,
    #[serde(default, deserialize_with = "null_default")]
    stop_sequences: Vec<String>,
    #[serde(default, deserialize_with = "finite_f32")]
    temperature: Option<f32>,
    #[serde(default, deserialize_with = "finite_f32")]
    top_p: Option<f32>,
    #[serde(default)]
    metadata: Option<InMetadata>,
    #[serde(default, deserialize_with = "null_default")]
    pub(crate) stream: bool,
    /// Structured outputs: `output_config.format` (and its beta name, `output_format`).
    #[serde(default)]
    output_config: Option<InOutputConfig>,
    #[serde(default)]
    output_format: Option<InOutputFormat>,
    /// Extended thinking: a budget, mapped to an effort on links that take efforts.
    #[serde(default)]
    thinking: Option<InThinking>,
    // Accepted and ignored: no other vendor has it, and dropping it changes no meaning.
    #[serde(default, rename = "top_k")]
    _top_k: Option<u32>,
}

/// `thinking`: `{"type": "enabled", "budget_tokens": n}` or `{"type": "disabled"}`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InThinking {
    Enabled { budget_tokens: u32 },
    Disabled {},
}

/// `output_config`: the answer's format.
#[derive(Debug, Deserialize)]
struct InOutputConfig {
    #[serde(default)]
    format: Option<InOutputFormat>,
}

/// A structured-output format: a JSON schema the answer follows.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InOutputFormat {
    JsonSchema { schema: Value },
}

/// A string, or an array of blocks (Anthropic accepts both for `system`, `content` and a tool
/// result's `content`). Written by hand so that a bad block keeps its path and its message.
#[derive(Debug)]
enum TextOr<T> {
    Text(String),
    Blocks(Vec<T>),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for TextOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = TextOr<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(TextOr::Text(s.to_owned()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(TextOr::Text(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(TextOr::Blocks(out))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InSystemBlock {
    Text { text: String },
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum InRole {
    User,
    Assistant,
}

#[derive(Debug, Deserialize)]
struct InMessage {
    role: InRole,
    content: TextOr<InBlock>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InBlock {
    Text {
        text: String,
    },
    Image {
        source: InSource,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<TextOr<InResultBlock>>,
        #[serde(default, deserialize_with = "null_default")]
        is_error: bool,
    },
    /// Extended thinking from an earlier Claude turn, kept on the assistant message with its
    /// signature: an Anthropic link sends it back verbatim (Anthropic requires the signed
    /// blocks of a turn that called tools), links of other vendors leave it out.
    Thinking {
        #[serde(default, deserialize_with = "null_default")]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    /// Encrypted thinking from an earlier Claude turn, kept like [`InBlock::Thinking`].
    RedactedThinking {
        data: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InResultBlock {
    Text { text: String },
    Image { source: InSource },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InSource {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

impl From<InSource> for ImageSource {
    fn from(s: InSource) -> Self {
        match s {
            InSource::Base64 { media_type, data } => ImageSource::Base64 { media_type, data },
            InSource::Url { url } => ImageSource::Url { url },
        }
    }
}

/// Anthropic-defined client tools: the model asks, the client runs them (unlike server tools
/// such as `web_search_20250305`, which Anthropic runs). Their types are dated: `bash_20250124`,
/// `text_editor_20250124` / `text_editor_20250429` / `text_editor_20250728`, `computer_20250124`.
fn is_anthropic_client_tool(kind: &str) -> bool {
    ["bash_", "text_editor_", "computer_"].iter().any(|prefix| {
        kind.strip_prefix(prefix)
            .is_some_and(|date| date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[derive(Debug, Deserialize)]
struct InTool {
    name: String,
    /// `custom` (or absent) for a client tool; Anthropic's server tools carry a dated type
    /// (`web_search_20250305`) that no other vendor can run.
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    input_schema: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InToolChoice {
    Auto {
        #[serde(default, deserialize_with = "null_default")]
        disable_parallel_tool_use: bool,
    },
    Any {
        #[serde(default, deserialize_with = "null_default")]
        disable_parallel_tool_use: bool,
    },
    None {},
    Tool {
        name: String,
        #[serde(default, deserialize_with = "null_default")]
        disable_parallel_tool_use: bool,
    },
}

#[derive(Debug, Deserialize)]
struct InMetadata {
    #[serde(default)]
    user_id: Option<String>,
}

/// Parses a request body; the error names the field at fault (its JSON path) or says the body
/// is not JSON.
pub(crate) fn parse_request(body: &[u8]) -> Result<MessagesRequest, GatewayError> {
    parse_body(body)
}

impl MessagesRequest {
    /// Translates to ripcord's request. `max_tokens` is required for `/v1/messages` and
    /// optional for `count_tokens`, as on Anthropic's API.
    pub(crate) fn into_chat_request(
        self,
        require_max_tokens: bool,
    ) -> Result<ChatRequest, GatewayError> {
        if self.model.is_none() {
            return Err(GatewayError::invalid_at("model", "Field required"));
        }
        match self.max_tokens {
            None if require_max_tokens => {
                return Err(GatewayError::invalid_at("max_tokens", "Field required"));
            }
            Some(0) => {
                return Err(GatewayError::invalid_at(
                    "max_tokens",
                    "must be greater than or equal to 1",
                ));
            }
            _ => {}
        }
        let Some(in_messages) = self.messages else {
            return Err(GatewayError::invalid_at("messages", "Field required"));
        };
        if in_messages.is_empty() {
            return Err(GatewayError::invalid_at(
                "messages",
                "at least one message is required",
            ));
        }
        let mut messages = Vec::with_capacity(in_messages.len() + 1);
        let system = match self.system {
            None => String::new(),
            Some(TextOr::Text(t)) => t,
            Some(TextOr::Blocks(b)) => b
                .into_iter()
                .map(|InSystemBlock::Text { text }| text)
                .collect::<Vec<_>>()
                .join("\n\n"),
        };
        if !system.is_empty() {
            messages.push(Message::system(system));
        }
        for (i, m) in in_messages.into_iter().enumerate() {
            push_message(&mut messages, i, m)?;
        }
        let mut req = ChatRequest::new(messages);
        for (i, t) in self.tools.into_iter().enumerate() {
            if let Some(kind) = t.kind.as_deref().filter(|k| *k != "custom") {
                if is_anthropic_client_tool(kind) {
                    req.tools.push(ToolSpec::anthropic_defined(kind, t.name));
                    continue;
                }
                return Err(GatewayError::invalid_at(
                    format!("tools[{i}].type"),
                    format_args!(
                        "the server tool {kind:?} is Anthropic's own and cannot run on other vendors; only client tools (with `input_schema`) and Anthropic-defined client tools (bash, text editor, computer) are supported"
                    ),
                ));
            }
            let Some(schema) = t.input_schema else {
                return Err(GatewayError::invalid_at(
                    format!("tools[{i}].input_schema"),
                    "Field required",
                ));
            };
            let mut spec = ToolSpec::new(t.name, "", schema);
            spec.description = t.description;
            req.tools.push(spec);
        }
        let mut serial = false;
        req.tool_choice = self.tool_choice.map(|c| match c {
            InToolChoice::Auto {
                disable_parallel_tool_use,
            } => {
                serial = disable_parallel_tool_use;
                ToolChoice::Auto
            }
            InToolChoice::Any {
                disable_parallel_tool_use,
            } => {
                serial = disable_parallel_tool_use;
                ToolChoice::Required
            }
            InToolChoice::None {} => ToolChoice::None,
            InToolChoice::Tool {
                name,
                disable_parallel_tool_use,
            } => {
                serial = disable_parallel_tool_use;
                ToolChoice::Tool { name }
            }
        });
        // OpenAI's `parallel_tool_calls: false` is the same request.
        if serial {
            req.parallel_tool_calls = Some(false);
        }
        // The same path as the chat door's `response_format: json_schema`: each link gets it
        // in its own wire (OpenAI's `response_format`, Anthropic's own, a forced tool).
        let format = self
            .output_config
            .and_then(|c| c.format)
            .or(self.output_format);
        if let Some(InOutputFormat::JsonSchema { schema }) = format {
            if !schema.is_object() {
                return Err(GatewayError::invalid_at(
                    "output_config.format.schema",
                    "must be a JSON schema object",
                ));
            }
            req.response_format = ResponseFormat::JsonSchema {
                name: "output".to_owned(),
                schema,
                strict: true,
            };
        }
        if let Some(InThinking::Enabled { budget_tokens }) = self.thinking {
            if budget_tokens < 1_024 {
                return Err(GatewayError::invalid_at(
                    "thinking.budget_tokens",
                    "must be at least 1024",
                ));
            }
            req.reasoning = Some(ripcord_core::Reasoning::budget(budget_tokens));
        }
        req.temperature = self.temperature;
        req.top_p = self.top_p;
        req.max_tokens = self.max_tokens;
        req.stop = self.stop_sequences;
        req.user = self.metadata.and_then(|m| m.user_id);
        Ok(req)
    }
}

/// Appends one Anthropic message: tool results become tool messages (before the rest of the
/// user turn, as Anthropic orders them), `tool_use` blocks become the assistant's tool calls.
fn push_message(out: &mut Vec<Message>, i: usize, m: InMessage) -> Result<(), GatewayError> {
    let role = match m.role {
        InRole::User => Role::User,
        InRole::Assistant => Role::Assistant,
    };
    let blocks = match m.content {
        TextOr::Text(text) => vec![InBlock::Text { text }],
        TextOr::Blocks(b) => b,
    };
    let mut msg = Message::new(role, "");
    msg.content.clear();
    for (j, block) in blocks.into_iter().enumerate() {
        let at = || format!("messages[{i}].content[{j}]");
        match block {
            InBlock::Text { text } => msg.content.push(ContentPart::Text { text }),
            InBlock::Image { source } => msg.content.push(ContentPart::Image {
                image: source.into(),
                detail: None,
            }),
            InBlock::ToolUse { id, name, input } if role == Role::Assistant => {
                let input = if input.is_null() { json!({}) } else { input };
                if !input.is_object() {
                    return Err(GatewayError::invalid_at(
                        format!("{}.input", at()),
                        "must be a JSON object",
                    ));
                }
                msg.tool_calls
                    .push(ToolCall::new(id, name, input.to_string()));
            }
            InBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } if role == Role::User => {
                let mut result = Message::tool_result(tool_use_id, "");
                result.content.clear();
                match content {
                    None => {}
                    Some(TextOr::Text(text)) => result.content.push(ContentPart::Text { text }),
                    Some(TextOr::Blocks(b)) => {
                        for part in b {
                            result.content.push(match part {
                                InResultBlock::Text { text } => ContentPart::Text { text },
                                InResultBlock::Image { source } => ContentPart::Image {
                                    image: source.into(),
                                    detail: None,
                                },
                            });
                        }
                    }
                }
                if is_error {
                    // No other wire has the flag: the model reads it as words instead.
                    result.content.insert(
                        0,
                        ContentPart::Text {
                            text: "[the tool reported an error]\n".to_owned(),
                        },
                    );
                }
                out.push(result);
            }
            InBlock::ToolUse { .. } => {
                return Err(GatewayError::invalid_at(
                    at(),
                    "a `tool_use` block belongs in an assistant message",
                ));
            }
            InBlock::ToolResult { .. } => {
                return Err(GatewayError::invalid_at(
                    at(),
                    "a `tool_result` block belongs in a user message",
                ));
            }
            InBlock::Thinking {
                thinking,
                signature,
            } if role == Role::Assistant => msg.reasoning.push(ReasoningBlock::Thinking {
                text: thinking,
                signature: signature.filter(|s| !s.is_empty()),
            }),
            InBlock::RedactedThinking { data } if role == Role::Assistant => {
                msg.reasoning.push(ReasoningBlock::redacted(data));
            }
            InBlock::Thinking { .. } | InBlock::RedactedThinking { .. } => {
                return Err(GatewayError::invalid_at(
                    at(),
                    "a thinking block belongs in an assistant message",
                ));
            }
        }
    }
    if !msg.content.is_empty() || !msg.tool_calls.is_empty() || !msg.reasoning.is_empty() {
        out.push(msg);
    }
    Ok(())
}

/// A `message` object, borrowed from the response.
#[derive(Debug, Serialize)]
pub(crate) struct OutMessage<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: Vec<OutBlock<'a>>,
    stop_reason: &'a str,
    stop_sequence: Option<&'a str>,
    usage: OutUsage,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutBlock<'a> {
    Thinking {
        thinking: &'a str,
        /// Empty for reasoning a vendor did not sign (DeepSeek's, a Responses summary): the
        /// SDKs need the field, and Anthropic would refuse such a block if it came back.
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a RawValue,
    },
}

/// Anthropic's usage object (`input_tokens` excludes cache reads).
#[derive(Debug, Serialize)]
pub(crate) struct OutUsage {
    input_tokens: u64,
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
    output_tokens: u64,
}

impl OutUsage {
    pub(crate) fn of(u: &Usage) -> Self {
        let (input, read, output) = anthropic_wire::usage(u);
        OutUsage {
            input_tokens: input,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: read,
            output_tokens: output,
        }
    }
}

/// A tool call's arguments as the JSON object Anthropic's `input` must be; a serving model
/// that produced anything else is a bad upstream answer (502), never an invented `{}`.
fn tool_input(c: &ToolCall) -> Result<&RawValue, GatewayError> {
    let args = c.arguments.trim();
    let args = if args.is_empty() { "{}" } else { args };
    match serde_json::from_str::<&RawValue>(args) {
        Ok(raw) if raw.get().starts_with('{') => Ok(raw),
        _ => Err(GatewayError::new(
            502,
            "api_error",
            format!(
                "the serving model's tool call {:?} ({}) has arguments that are not a JSON object",
                c.id, c.name
            ),
        )),
    }
}

/// The `message` object of an answer; `model` names the model that served it.
pub(crate) fn message<'a>(
    id: &'a str,
    model: &'a str,
    resp: &'a ChatResponse,
) -> Result<OutMessage<'a>, GatewayError> {
    let mut content = Vec::with_capacity(1 + resp.tool_calls.len() + resp.reasoning.len());
    for block in &resp.reasoning {
        content.push(match block {
            ReasoningBlock::Thinking { text, signature } => OutBlock::Thinking {
                thinking: text,
                signature: signature.as_deref().unwrap_or(""),
            },
            ReasoningBlock::Redacted { data } => OutBlock::RedactedThinking { data },
            _ => continue,
        });
    }
    if !resp.content.is_empty() || resp.tool_calls.is_empty() {
        content.push(OutBlock::Text {
            text: &resp.content,
        });
    }
    for c in &resp.tool_calls {
        content.push(OutBlock::ToolUse {
            id: &c.id,
            name: &c.name,
            input: tool_input(c)?,
        });
    }
    Ok(OutMessage {
        id,
        kind: "message",
        role: "assistant",
        model,
        content,
        stop_reason: anthropic_wire::stop_reason(&resp.finish_reason),
        stop_sequence: None,
        usage: OutUsage::of(&resp.usage),
    })
}

/// One SSE event with Anthropic's event name.
pub(crate) fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

#[cfg(test)]
mod tests {
    use ripcord_core::FinishReason;

    use super::*;
    use crate::gateway::errors::Shape;

    fn parse(v: Value) -> Result<ChatRequest, GatewayError> {
        parse_request(v.to_string().as_bytes())?.into_chat_request(true)
    }

    #[test]
    fn a_full_request_translates() {
        let req = parse(json!({
            "model": "claude-sonnet-4-5", "max_tokens": 100,
            "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use Celsius.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                    {"type": "text", "text": "Thanks"}]}
            ],
            "tools": [{"name": "weather", "description": "Weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 5,
            "metadata": {"user_id": "u-1"}
        }))
        .unwrap();
        assert_eq!(req.messages[0].role, Role::System);
        assert_eq!(req.messages[0].text(), "Be brief.\n\nUse Celsius.");
        assert_eq!(req.messages[1].content.len(), 2);
        assert_eq!(
            req.messages[2].tool_calls,
            vec![ToolCall::new("toolu_1", "weather", r#"{"city":"Paris"}"#)]
        );
        assert_eq!(req.messages[2].text(), "Checking.");
        assert_eq!(
            req.messages[2].reasoning,
            vec![ReasoningBlock::thinking("hm").with_signature("s")]
        );
        assert_eq!(req.messages[3].role, Role::Tool);
        assert_eq!(req.messages[3].tool_call_id.as_deref(), Some("toolu_1"));
        assert_eq!(req.messages[4].text(), "Thanks");
        assert_eq!(req.tool_choice, Some(ToolChoice::Required));
        assert_eq!(req.max_tokens, Some(100));
        assert_eq!(req.stop, vec!["END".to_owned()]);
        assert_eq!(req.user.as_deref(), Some("u-1"));
        assert_eq!((req.temperature, req.top_p), (Some(0.5), Some(0.9)));
    }

    #[test]
    fn bad_input_names_the_field() {
        let e = parse(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
            .unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(
            e.body(Shape::Anthropic)["error"]["type"],
            "invalid_request_error"
        );
        assert_eq!(e.message(), "max_tokens: Field required");
        let e = parse(
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "a"}, {"type": "video", "url": "x"}]}]}),
        )
        .unwrap_err();
        assert!(
            e.message()
                .starts_with("messages[0].content[1].type: unknown variant `video`"),
            "{}",
            e.message()
        );
        let e = parse_request(b"{\"model\": \"m\", \"max_tokens\": 5,").unwrap_err();
        assert!(e.message().contains("not valid JSON"), "{}", e.message());
        let e = parse(
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}),
        )
        .unwrap_err();
        assert!(
            e.message()
                .starts_with("messages[0].role: unknown variant `robot`"),
            "{}",
            e.message()
        );
        let e = parse(
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}),
        )
        .unwrap_err();
        assert!(
            e.message().contains("messages[0].content[0]"),
            "{}",
            e.message()
        );
        let e = parse(
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
        )
        .unwrap_err();
        assert!(e.message().starts_with("tools[0].type"), "{}", e.message());
    }

    #[test]
    fn messages_serialise_with_served_model_and_tool_input() {
        let resp = ChatResponse::new("")
            .with_tool_calls(vec![ToolCall::new(
                "call_1",
                "weather",
                r#"{"city":"Oslo"}"#,
            )])
            .with_finish_reason(FinishReason::ToolCalls)
            .with_usage(Usage::new(30, 7).with_cached_input(10));
        let v = serde_json::to_value(message("msg_1", "gpt-4o", &resp).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "gpt-4o",
                "content": [{"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"}}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 10, "output_tokens": 7}})
        );
        let bad = ChatResponse::new("").with_tool_calls(vec![ToolCall::new("c", "f", "[1]")]);
        let e = message("msg_2", "m", &bad).unwrap_err();
        assert_eq!(e.status, 502);
        assert_eq!(e.body(Shape::Anthropic)["error"]["type"], "api_error");
    }

    #[test]
    fn thinking_renders_first_with_its_signature_and_parses_back_onto_the_assistant_turn() {
        let resp = ChatResponse::new("4").with_reasoning(vec![
            ReasoningBlock::thinking("2+2").with_signature("sig"),
            ReasoningBlock::redacted("opaque"),
            ReasoningBlock::thinking("unsigned"),
        ]);
        let v = serde_json::to_value(message("msg_1", "m", &resp).unwrap()).unwrap();
        assert_eq!(
            v["content"],
            json!([
                {"type": "thinking", "thinking": "2+2", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "thinking", "thinking": "unsigned", "signature": ""},
                {"type": "text", "text": "4"}
            ])
        );
        let mut history = v["content"].clone();
        history.as_array_mut().unwrap().truncate(3);
        let req = parse(json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": history},
            {"role": "user", "content": "and?"}]}))
        .unwrap();
        assert_eq!(
            req.messages[1].reasoning,
            vec![
                ReasoningBlock::thinking("2+2").with_signature("sig"),
                ReasoningBlock::redacted("opaque"),
                ReasoningBlock::thinking("unsigned"),
            ],
            "a thinking-only assistant turn is kept, an empty signature is none"
        );
        let e = parse(json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": [{"type": "redacted_thinking", "data": "x"}]}]}))
        .unwrap_err();
        assert!(
            e.message().starts_with("messages[0].content[0]"),
            "{}",
            e.message()
        );
    }
}
