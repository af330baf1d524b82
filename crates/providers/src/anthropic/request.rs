//! The Messages API request body, borrowed from the [`ChatRequest`].
//!
//! Anthropic's format differs from the neutral request in ways callers must never see:
//!
//! - the system prompt is a top-level `system` field, not a message (all system messages are
//!   lifted out, in order, joined by blank lines);
//! - roles must alternate, so consecutive messages of the same role are merged into one, and
//!   tool results travel as `tool_result` blocks of a *user* message (placed first, as the API
//!   requires);
//! - `max_tokens` is mandatory: the request's value, else [`DEFAULT_MAX_TOKENS`] capped at the
//!   model's output limit;
//! - tool-call arguments are JSON *objects* (`input`), not JSON text: they are embedded as raw
//!   JSON, validated, never re-parsed into a tree;
//! - there is no JSON mode: `Json` / `JsonSchema` become one forced tool, [`JSON_TOOL`], whose
//!   input schema is the requested schema; the response decoders turn its input back into the
//!   answer text. When the request has tools of its own, the schema goes into the system prompt
//!   instead;
//! - `seed` does not exist: a request with one is refused naming it (as the penalties are),
//!   never sent on without it; `user` becomes `metadata.user_id`.
//! - an assistant message's reasoning goes back as `thinking` (with its signature) and
//!   `redacted_thinking` blocks at the start of its turn; thinking without a signature (another
//!   vendor's reasoning) is left out, since Anthropic refuses unsigned blocks.

use std::borrow::Cow;
use std::sync::LazyLock;

use ripcord_core::{
    ChatRequest, ContentPart, Error, ErrorKind, FileSource, ImageSource, Message, ReasoningBlock,
    ResponseFormat, Result, Role, ToolChoice,
};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::turns::{TurnWire, tool_result_text};

/// The `max_tokens` sent when the request sets none (capped at the model's output limit).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The name of the forced tool that carries JSON-mode answers.
pub(crate) const JSON_TOOL: &str = "json_response";

static ANY_OBJECT: LazyLock<serde_json::Value> =
    LazyLock::new(|| serde_json::json!({ "type": "object" }));

#[derive(Serialize)]
struct MessagesBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    anthropic_version: Option<&'a str>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<Cow<'a, str>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
}

/// Extended thinking: `{"type": "enabled", "budget_tokens": n}`.
#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// The smallest thinking budget Anthropic accepts.
const MIN_THINKING_BUDGET: u32 = 1_024;

/// The thinking of a request that asks for reasoning: its budget (or its effort's), kept
/// under `max_tokens` as Anthropic requires; a `max_tokens` that leaves no room for the
/// smallest budget is refused, naming both.
fn thinking(req: &ChatRequest, max_tokens: u32) -> Result<Option<Thinking>> {
    let Some(r) = req.reasoning else {
        return Ok(None);
    };
    if max_tokens <= MIN_THINKING_BUDGET {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            format!(
                "thinking: Anthropic needs max_tokens above {MIN_THINKING_BUDGET} for extended thinking (it is {max_tokens})"
            ),
        ));
    }
    let budget = r
        .budget_or_from_effort()
        .clamp(MIN_THINKING_BUDGET, max_tokens - 1);
    Ok(Some(Thinking {
        kind: "enabled",
        budget_tokens: budget,
    }))
}

#[derive(Serialize)]
struct Metadata<'a> {
    user_id: &'a str,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: Source<'a>,
    },
    /// A PDF, from a chat-door `file` part.
    Document {
        source: Source<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a RawValue,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Cow<'a, str>,
    },
    /// A thinking block of an earlier assistant turn, sent back verbatim with its signature.
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    /// A redacted thinking block of an earlier assistant turn, sent back verbatim.
    RedactedThinking {
        data: &'a str,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Source<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

#[derive(Serialize)]
struct WireTool<'a> {
    /// Set for an Anthropic-defined tool (`bash_20250124`), which has no schema.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_schema: Option<&'a serde_json::Value>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireToolChoice<'a> {
    Auto {
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        disable_parallel_tool_use: bool,
    },
    Any {
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        disable_parallel_tool_use: bool,
    },
    None,
    Tool {
        name: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        disable_parallel_tool_use: bool,
    },
}

/// A request field Anthropic's Messages API has no equivalent for: refused, never dropped.
fn refuse_unmappable(req: &ChatRequest) -> Result<()> {
    for (name, v) in [
        ("presence_penalty", req.presence_penalty),
        ("frequency_penalty", req.frequency_penalty),
    ] {
        if v.is_some_and(|p| p != 0.0) {
            return Err(Error::new(
                ErrorKind::InvalidRequest,
                format!(
                    "{name}: Anthropic's Messages API has no {name}; leave it unset or 0 for a route that may reach Claude"
                ),
            ));
        }
    }
    if req.seed.is_some() {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            "seed: Anthropic's Messages API has no seed (its sampling cannot be made repeatable); leave it unset for a route that may reach Claude",
        ));
    }
    Ok(())
}

/// Whether the body asks for JSON through the forced [`JSON_TOOL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JsonMode(pub(crate) bool);

fn system_prompt<'a>(req: &'a ChatRequest, extra: Option<String>) -> Option<Cow<'a, str>> {
    let mut texts = req
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match p {
            ContentPart::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        });
    let first = texts.next();
    let second = texts.next();
    match (first, second, extra) {
        (None, _, None) => None,
        (Some(one), None, None) => Some(Cow::Borrowed(one)),
        (first, second, extra) => {
            let mut s = String::new();
            for t in first.into_iter().chain(second).chain(texts) {
                if !s.is_empty() {
                    s.push_str("\n\n");
                }
                s.push_str(t);
            }
            if let Some(e) = extra {
                if !s.is_empty() {
                    s.push_str("\n\n");
                }
                s.push_str(&e);
            }
            Some(Cow::Owned(s))
        }
    }
}

/// The Messages wire's turns and refusals.
const WIRE: TurnWire = TurnWire {
    name: "Anthropic",
    assistant: "assistant",
    invalid: |m| Error::new(ErrorKind::InvalidRequest, m),
};

fn blocks<'a>(i: usize, m: &'a Message) -> Result<Vec<Block<'a>>> {
    if m.role == Role::Tool {
        let id = WIRE.tool_result_id(i, m)?;
        let content = tool_result_text(m);
        return Ok(vec![Block::ToolResult {
            tool_use_id: id,
            content,
        }]);
    }
    let mut out = Vec::with_capacity(m.content.len() + m.tool_calls.len() + m.reasoning.len());
    if m.role == Role::Assistant {
        // Thinking goes back first in the assistant turn, exactly as it came: Anthropic checks
        // each block's signature, and requires the signed blocks of a turn that called tools
        // while thinking is on. A thinking block without a signature came from another vendor
        // (DeepSeek's `reasoning_content`, a Responses summary): Anthropic would refuse it, and
        // it is no reasoning of Claude's, so it is left out on purpose.
        for block in &m.reasoning {
            match block {
                ReasoningBlock::Thinking {
                    text,
                    signature: Some(signature),
                } => out.push(Block::Thinking {
                    thinking: text,
                    signature,
                }),
                ReasoningBlock::Redacted { data } => out.push(Block::RedactedThinking { data }),
                _ => {}
            }
        }
    }
    for (j, part) in m.content.iter().enumerate() {
        let refuse = |what: &str| {
            Error::new(
                ErrorKind::InvalidRequest,
                format!("messages[{i}].content[{j}]: {what}"),
            )
        };
        match part {
            ContentPart::Text { text } if text.is_empty() => {}
            ContentPart::Text { text } => out.push(Block::Text { text }),
            ContentPart::Image { image, .. } => out.push(Block::Image {
                source: match image {
                    ImageSource::Url { url } => Source::Url { url },
                    ImageSource::Base64 { media_type, data } => Source::Base64 { media_type, data },
                    _ => return Err(refuse("an image source Anthropic cannot take")),
                },
            }),
            ContentPart::File {
                file: FileSource::Base64 { media_type, data },
                ..
            } if media_type == "application/pdf" => out.push(Block::Document {
                source: Source::Base64 { media_type, data },
            }),
            ContentPart::File {
                file: FileSource::Base64 { media_type, .. },
                ..
            } => {
                return Err(refuse(&format!(
                    "a file of type {media_type:?}: Anthropic's Messages API takes PDF documents (application/pdf) only"
                )));
            }
            ContentPart::File { .. } => {
                return Err(refuse(
                    "a file by file_id: an id from another vendor means nothing to Anthropic; send the file inline as file_data",
                ));
            }
            ContentPart::Audio { .. } => {
                return Err(refuse(
                    "an input_audio part: Anthropic's Messages API takes no audio",
                ));
            }
            _ => return Err(refuse("a content part Anthropic cannot take")),
        }
    }
    for call in &m.tool_calls {
        out.push(Block::ToolUse {
            id: &call.id,
            name: &call.name,
            input: WIRE.call_input(call)?,
        });
    }
    Ok(out)
}

/// Who reads the body: Anthropic's Messages API (the model in the body, the version in a
/// header), or a cloud platform serving Claude that takes the model from the URL and the API
/// version in the body (Vertex AI: `anthropic_version: "vertex-2023-10-16"`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum BodyFor<'a> {
    /// The Messages API.
    Messages {
        /// The model.
        model: &'a str,
    },
    /// A platform endpoint (`:rawPredict`).
    #[cfg_attr(not(feature = "vertex-anthropic"), allow(dead_code))]
    Platform {
        /// The `anthropic_version` body field.
        anthropic_version: &'a str,
    },
}

/// Serialises the Messages body. `max_output` caps the default `max_tokens`.
pub(crate) fn messages_body(
    model: &str,
    req: &ChatRequest,
    max_output: u32,
    stream: bool,
) -> Result<(Vec<u8>, JsonMode)> {
    messages_body_for(BodyFor::Messages { model }, req, max_output, stream)
}

/// [`messages_body`] for any reader of the Messages wire.
pub(crate) fn messages_body_for(
    target: BodyFor<'_>,
    req: &ChatRequest,
    max_output: u32,
    stream: bool,
) -> Result<(Vec<u8>, JsonMode)> {
    // The system prompt is built apart (`system_prompt`).
    let mut messages: Vec<WireMessage<'_>> = WIRE
        .turns(req, None, blocks)?
        .into_iter()
        .map(|t| WireMessage {
            role: t.role,
            content: t.parts,
        })
        .collect();
    for m in messages.iter_mut().filter(|m| m.role == "user") {
        // Tool results must open the user turn.
        m.content
            .sort_by_key(|b| !matches!(b, Block::ToolResult { .. }));
    }

    let mut tools: Vec<WireTool<'_>> = req
        .tools
        .iter()
        .map(|t| match t.vendor_type.as_deref() {
            Some(kind) => WireTool {
                kind: Some(kind),
                name: &t.name,
                description: None,
                input_schema: None,
            },
            None => WireTool {
                kind: None,
                name: &t.name,
                description: t.description.as_deref(),
                input_schema: Some(&t.parameters),
            },
        })
        .collect();
    refuse_unmappable(req)?;
    // OpenAI's `parallel_tool_calls: false` is Anthropic's `disable_parallel_tool_use`, which
    // lives on the tool choice (an `auto` one when the request named none).
    let serial = req.parallel_tool_calls == Some(false) && !req.tools.is_empty();
    let mut tool_choice = match req.tool_choice.as_ref() {
        None if serial => Some(WireToolChoice::Auto {
            disable_parallel_tool_use: true,
        }),
        None => None,
        Some(c) => match c {
            ToolChoice::Auto => Some(WireToolChoice::Auto {
                disable_parallel_tool_use: serial,
            }),
            ToolChoice::Required => Some(WireToolChoice::Any {
                disable_parallel_tool_use: serial,
            }),
            ToolChoice::None => Some(WireToolChoice::None),
            ToolChoice::Tool { name } => Some(WireToolChoice::Tool {
                name,
                disable_parallel_tool_use: serial,
            }),
            _ => None,
        },
    };

    let schema = match &req.response_format {
        ResponseFormat::Json => Some(&*ANY_OBJECT),
        ResponseFormat::JsonSchema { schema, .. } => Some(schema),
        _ => None,
    };
    let mut json_mode = JsonMode(false);
    let mut extra_system = None;
    if let Some(schema) = schema {
        if req.tools.is_empty() {
            tools.push(WireTool {
                kind: None,
                name: JSON_TOOL,
                description: Some("Give the answer as a JSON object through this tool."),
                input_schema: Some(schema),
            });
            tool_choice = Some(WireToolChoice::Tool {
                name: JSON_TOOL,
                disable_parallel_tool_use: false,
            });
            json_mode = JsonMode(true);
        } else {
            extra_system = Some(format!(
                "When you answer without calling a tool, respond only with a JSON object that conforms to this JSON schema: {schema}"
            ));
        }
    }

    let (model, anthropic_version) = match target {
        BodyFor::Messages { model } => (Some(model), None),
        BodyFor::Platform { anthropic_version } => (None, Some(anthropic_version)),
    };
    let max_tokens = req
        .max_tokens
        .unwrap_or(DEFAULT_MAX_TOKENS.min(max_output.max(1)));
    let thinking = thinking(req, max_tokens)?;
    let body = MessagesBody {
        model,
        anthropic_version,
        max_tokens,
        thinking,
        system: system_prompt(req, extra_system),
        messages,
        tools,
        tool_choice,
        temperature: req.temperature,
        top_p: req.top_p,
        stop_sequences: &req.stop,
        stream,
        metadata: req.user.as_deref().map(|user_id| Metadata { user_id }),
    };
    let bytes = serde_json::to_vec(&body).map_err(|e| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("cannot serialise the Anthropic request: {e}"),
        )
        .with_source(e)
    })?;
    Ok((bytes, json_mode))
}

#[cfg(test)]
mod tests {
    use ripcord_core::{Message, ToolCall, ToolSpec};
    use serde_json::{Value, json};

    use super::*;
    use crate::test_support::requests::{user_with_image, weather_call, weather_tool};

    fn body(req: &ChatRequest) -> (Value, JsonMode) {
        let (b, j) = messages_body("claude-sonnet-4-5", req, 64_000, false).unwrap();
        (serde_json::from_slice(&b).unwrap(), j)
    }

    #[test]
    fn representative_request_json() {
        let mut req = ChatRequest::new(vec![
            Message::system("Be brief."),
            user_with_image("Look:", "image/jpeg", "/9j/4AAQ"),
            Message::user("What is the weather there?"),
            weather_call("toolu_1", "Paris"),
            Message::tool_result("toolu_1", "18C"),
            Message::system("Use Celsius."),
            Message::assistant("18C."),
        ])
        .with_tool(weather_tool("Current weather", json!({"type":"object"})))
        .with_tool_choice(ToolChoice::Required)
        .with_temperature(0.25)
        .with_stop("END");
        req.user = Some("u-1".into());
        let (v, j) = body(&req);
        assert_eq!(j, JsonMode(false));
        assert_eq!(
            v,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "system": "Be brief.\n\nUse Celsius.",
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "Look:"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
                        {"type": "text", "text": "What is the weather there?"}
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}
                    ]},
                    {"role": "assistant", "content": [{"type": "text", "text": "18C."}]}
                ],
                "tools": [{"name": "weather", "description": "Current weather", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "any"},
                "temperature": 0.25,
                "stop_sequences": ["END"],
                "metadata": {"user_id": "u-1"}
            })
        );
    }

    #[test]
    fn a_platform_body_has_the_version_and_no_model() {
        let (b, _) = messages_body_for(
            BodyFor::Platform {
                anthropic_version: "vertex-2023-10-16",
            },
            &ChatRequest::user("hi"),
            64_000,
            true,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["anthropic_version"], "vertex-2023-10-16");
        assert!(v.get("model").is_none(), "{v}");
        assert_eq!(v["stream"], true);
        assert_eq!(v["messages"][0]["content"][0]["text"], "hi");
    }

    #[test]
    fn json_mode_is_a_forced_tool() {
        let schema = json!({"type":"object","properties":{"n":{"type":"integer"}}});
        let req = ChatRequest::user("n?")
            .with_max_tokens(50)
            .with_response_format(ResponseFormat::JsonSchema {
                name: "n".into(),
                schema: schema.clone(),
                strict: true,
            });
        let (v, j) = body(&req);
        assert_eq!(j, JsonMode(true));
        assert_eq!(v["max_tokens"], 50);
        assert_eq!(v["tools"][0]["name"], JSON_TOOL);
        assert_eq!(v["tools"][0]["input_schema"], schema);
        assert_eq!(v["tool_choice"], json!({"type":"tool","name":JSON_TOOL}));
        let (v, _) = body(&ChatRequest::user("x").with_response_format(ResponseFormat::Json));
        assert_eq!(v["tools"][0]["input_schema"], json!({"type":"object"}));
        // With tools of its own, the schema goes into the system prompt.
        let req = ChatRequest::user("x")
            .with_tool(ToolSpec::new("t", "d", json!({"type":"object"})))
            .with_response_format(ResponseFormat::Json);
        let (v, j) = body(&req);
        assert_eq!(j, JsonMode(false));
        assert_eq!(v["tools"].as_array().unwrap().len(), 1);
        assert!(v["system"].as_str().unwrap().contains("JSON object"));
    }

    #[test]
    fn tool_results_open_the_user_turn_and_max_tokens_is_capped() {
        let req = ChatRequest::new(vec![
            Message::assistant_tool_calls(vec![ToolCall::new("a", "f", "")]),
            Message::user("and also"),
            Message::tool_result("a", "done"),
        ]);
        let (b, _) = messages_body("claude-3-haiku", &req, 1024, false).unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["max_tokens"], 1024);
        assert_eq!(v["messages"][0]["content"][0]["input"], json!({}));
        assert_eq!(v["messages"][1]["content"][0]["type"], "tool_result");
        assert_eq!(v["messages"][1]["content"][1]["type"], "text");
    }

    #[test]
    fn a_pdf_file_is_a_document_and_audio_is_refused_by_part() {
        let mut m = Message::user("read");
        m.content.push(ContentPart::File {
            file: FileSource::Base64 {
                media_type: "application/pdf".into(),
                data: "JVBERi0=".into(),
            },
            filename: Some("a.pdf".into()),
        });
        let (b, _) = messages_body("m", &ChatRequest::new(vec![m]), 10, false).unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v["messages"][0]["content"][1],
            json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}})
        );
        let mut m = Message::user("hear");
        m.content.push(ContentPart::Audio {
            data: "UklGRg==".into(),
            format: "wav".into(),
        });
        let e = messages_body("m", &ChatRequest::new(vec![m]), 10, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        assert!(e.message().starts_with("messages[0].content[1]: "), "{e}");
    }

    #[test]
    fn an_anthropic_defined_tool_goes_as_type_and_name() {
        let req = ChatRequest::new(vec![Message::user("ls")])
            .with_tool(ToolSpec::anthropic_defined("bash_20250124", "bash"))
            .with_tool(ToolSpec::new("f", "F", json!({"type": "object"})));
        let (b, _) = messages_body("m", &req, 10, false).unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v["tools"],
            json!([{"type": "bash_20250124", "name": "bash"},
                {"name": "f", "description": "F", "input_schema": {"type": "object"}}])
        );
        let e = req.refuse_vendor_tools("x").unwrap_err();
        assert!(e.message().starts_with("tools[0]: "), "{e}");
    }

    #[test]
    fn signed_thinking_in_history_goes_back_first_and_verbatim_unsigned_is_left_out() {
        let turn = Message::assistant_tool_calls(vec![ToolCall::new("t1", "f", "{}")])
            .with_reasoning(vec![
                ReasoningBlock::thinking("from deepseek"),
                ReasoningBlock::thinking("I should call f.").with_signature("sig-9"),
                ReasoningBlock::redacted("opaque=="),
            ]);
        let req = ChatRequest::new(vec![
            Message::user("go"),
            turn,
            Message::tool_result("t1", "ok"),
        ]);
        let (v, _) = body(&req);
        assert_eq!(
            v["messages"][1]["content"],
            json!([
                {"type": "thinking", "thinking": "I should call f.", "signature": "sig-9"},
                {"type": "redacted_thinking", "data": "opaque=="},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
            ])
        );
        // A user message's reasoning (none is meaningful) never reaches the wire.
        let req = ChatRequest::new(vec![
            Message::user("hi").with_reasoning(vec![ReasoningBlock::redacted("x")]),
        ]);
        let (v, _) = body(&req);
        assert_eq!(
            v["messages"][0]["content"],
            json!([{"type": "text", "text": "hi"}])
        );
    }

    #[test]
    fn a_seed_is_refused_by_name_not_dropped() {
        let req = ChatRequest::new(vec![Message::user("hi")]).with_seed(9);
        let e = messages_body("m", &req, 10, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        assert!(e.message().starts_with("seed: "), "{e}");
    }

    #[test]
    fn bad_input_is_refused_with_where() {
        let mut no_id = Message::tool_result("x", "y");
        no_id.tool_call_id = None;
        let calls =
            |args: &str| Message::assistant_tool_calls(vec![ToolCall::new("c9", "f", args)]);
        // Each request, with what its refusal must name.
        let cases = [
            (vec![calls("{oops")], "\"c9\" (f)"),
            (vec![Message::user("a"), no_id], "message 1"),
            (vec![Message::system("only")], "no user or assistant"),
            (vec![calls("[1]")], "JSON object"),
        ];
        for (messages, named) in cases {
            let e = messages_body("m", &ChatRequest::new(messages), 10, false).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidRequest, "{named}");
            assert!(e.message().contains(named), "{named}: {e}");
        }
    }
}
