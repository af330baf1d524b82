//! The Converse / ConverseStream request body, borrowed from the [`ChatRequest`].
//!
//! Reference: <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html>.
//! What differs from the neutral request, and how it is bridged:
//!
//! - system messages become `system` blocks (`[{"text": …}]`, one per system text, in order);
//! - roles alternate `user` / `assistant`: consecutive messages of one role are merged, and
//!   tool results travel as `toolResult` blocks at the start of a *user* message;
//! - content is a list of blocks: `text`, `image` (`format` + `source.bytes` base64, or an
//!   `s3://` URI as `s3Location`; Bedrock cannot fetch `https:` images, so those are refused
//!   with an error naming the message), `toolUse` (`input` is a JSON object), `toolResult`;
//! - tools are `toolConfig.tools[].toolSpec` with `inputSchema.json`; `toolChoice` is
//!   `{"auto":{}}`, `{"any":{}}` (required) or `{"tool":{"name"}}`. Converse has no "none":
//!   without tool blocks in the conversation the tools are left out, with them the request is
//!   refused (Bedrock needs `toolConfig` whenever `toolUse` / `toolResult` blocks are sent);
//! - JSON mode is a forced tool, as for Anthropic ([`JSON_TOOL`]);
//! - `inferenceConfig` carries `maxTokens` (always sent: the request's, else the default capped
//!   at the model's output limit), `temperature`, `topP`, `stopSequences`;
//! - Claude's extended thinking goes in `additionalModelRequestFields.thinking`, with any other
//!   model-specific fields the provider was configured with;
//! - a guardrail is `guardrailConfig` (with `streamProcessingMode` on streams);
//! - prompt caching: with caching on, a `cachePoint` block closes the system blocks and the
//!   tool list, so the whole prefix is cached;
//! - `user` becomes `requestMetadata.user` (it shows in the invocation logs); `seed` does not
//!   exist on Converse and is not sent.

use std::borrow::Cow;
use std::sync::LazyLock;

use ripcord_core::{
    ChatRequest, ContentPart, Error, ErrorKind, ImageSource, Message, ResponseFormat, Result, Role,
    ToolChoice,
};
use serde::Serialize;
use serde_json::value::RawValue;

use super::{Guardrail, Thinking};
use crate::turns::{TurnWire, tool_result_text};

/// The `maxTokens` sent when the request sets none (capped at the model's output limit).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The name of the forced tool that carries JSON-mode answers.
pub(crate) const JSON_TOOL: &str = "json_response";

static ANY_OBJECT: LazyLock<serde_json::Value> =
    LazyLock::new(|| serde_json::json!({ "type": "object" }));

/// Whether the body asks for JSON through the forced [`JSON_TOOL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JsonMode(pub(crate) bool);

/// The provider's settings that shape every body.
#[derive(Debug, Clone, Default)]
pub(crate) struct BodyOptions<'a> {
    pub(crate) thinking: Option<Thinking>,
    pub(crate) guardrail: Option<&'a Guardrail>,
    pub(crate) prompt_cache: bool,
    pub(crate) additional_fields: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConverseBody<'a> {
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<SystemBlock<'a>>,
    inference_config: InferenceConfig<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    guardrail_config: Option<GuardrailConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    additional_model_request_fields: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_metadata: Option<RequestMetadata<'a>>,
}

#[derive(Serialize)]
struct RequestMetadata<'a> {
    user: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InferenceConfig<'a> {
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GuardrailConfig<'a> {
    guardrail_identifier: &'a str,
    guardrail_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_processing_mode: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum SystemBlock<'a> {
    Text(Cow<'a, str>),
    CachePoint(CachePoint),
}

#[derive(Serialize)]
struct CachePoint {
    #[serde(rename = "type")]
    kind: &'static str,
}

const CACHE_POINT: CachePoint = CachePoint { kind: "default" };

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Block<'a> {
    Text(&'a str),
    Image(Image<'a>),
    ToolUse(ToolUse<'a>),
    ToolResult(ToolResult<'a>),
}

#[derive(Serialize)]
struct Image<'a> {
    format: &'a str,
    source: ImageBytes<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum ImageBytes<'a> {
    Bytes(&'a str),
    S3Location { uri: &'a str },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse<'a> {
    tool_use_id: &'a str,
    name: &'a str,
    input: &'a RawValue,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult<'a> {
    tool_use_id: &'a str,
    content: [ResultText<'a>; 1],
}

#[derive(Serialize)]
struct ResultText<'a> {
    text: Cow<'a, str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    tools: Vec<ToolEntry<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum ToolEntry<'a> {
    ToolSpec(ToolSpecWire<'a>),
    CachePoint(CachePoint),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolSpecWire<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: JsonSchema<'a>,
}

#[derive(Serialize)]
struct JsonSchema<'a> {
    json: &'a serde_json::Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum WireToolChoice<'a> {
    Auto(Empty),
    Any(Empty),
    Tool { name: &'a str },
}

#[derive(Serialize)]
struct Empty {}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidRequest, format!("bedrock: {message}"))
}

/// The Converse image `format` of a media type.
fn image_format(media_type: &str) -> Option<&'static str> {
    match media_type.trim().to_ascii_lowercase().as_str() {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

/// The format an `s3://` URI's extension names.
fn s3_format(uri: &str) -> Option<&'static str> {
    let ext = uri.rsplit_once('.')?.1.to_ascii_lowercase();
    image_format(&format!("image/{ext}"))
}

/// The Converse wire's turns and refusals.
const WIRE: TurnWire = TurnWire {
    name: "Converse",
    assistant: "assistant",
    invalid,
};

fn blocks<'a>(i: usize, m: &'a Message) -> Result<Vec<Block<'a>>> {
    if m.role == Role::Tool {
        let id = WIRE.tool_result_id(i, m)?;
        let text = tool_result_text(m);
        return Ok(vec![Block::ToolResult(ToolResult {
            tool_use_id: id,
            content: [ResultText { text }],
        })]);
    }
    let mut out = Vec::with_capacity(m.content.len() + m.tool_calls.len());
    for part in &m.content {
        match part {
            ContentPart::Text { text } if text.is_empty() => {}
            ContentPart::Text { text } => out.push(Block::Text(text)),
            ContentPart::Image { image, .. } => {
                let image = match image {
                    ImageSource::Base64 { media_type, data } => Image {
                        format: image_format(media_type).ok_or_else(|| {
                            invalid(format!(
                                "message {i}: image type {media_type:?} is not one Converse takes (png, jpeg, gif, webp)"
                            ))
                        })?,
                        source: ImageBytes::Bytes(data),
                    },
                    ImageSource::Url { url } if url.starts_with("s3://") => Image {
                        format: s3_format(url).ok_or_else(|| {
                            invalid(format!(
                                "message {i}: cannot tell the image format of {url:?} (png, jpeg, gif, webp)"
                            ))
                        })?,
                        source: ImageBytes::S3Location { uri: url },
                    },
                    ImageSource::Url { .. } => {
                        return Err(invalid(format!(
                            "message {i}: Bedrock does not fetch image URLs; send the image as base64 bytes or an s3:// URI"
                        )));
                    }
                    _ => {
                        return Err(invalid(format!(
                            "message {i}: an image source Converse cannot take"
                        )));
                    }
                };
                out.push(Block::Image(image));
            }
            _ => {
                return Err(invalid(format!(
                    "message {i}: a content part Converse cannot take"
                )));
            }
        }
    }
    for call in &m.tool_calls {
        out.push(Block::ToolUse(ToolUse {
            tool_use_id: &call.id,
            name: &call.name,
            input: WIRE.call_input(call)?,
        }));
    }
    Ok(out)
}

/// Serialises the Converse body. `max_output` caps the default `maxTokens`.
pub(crate) fn converse_body(
    req: &ChatRequest,
    max_output: u32,
    stream: bool,
    opts: &BodyOptions<'_>,
) -> Result<(Vec<u8>, JsonMode)> {
    req.refuse_vendor_tools("a Bedrock Converse link")?;
    let mut system_text = Vec::new();
    let mut messages: Vec<WireMessage<'_>> = WIRE
        .turns(req, Some(&mut system_text), blocks)?
        .into_iter()
        .map(|t| WireMessage {
            role: t.role,
            content: t.parts,
        })
        .collect();
    let has_tool_blocks = messages
        .iter()
        .flat_map(|m| &m.content)
        .any(|b| matches!(b, Block::ToolUse(_) | Block::ToolResult(_)));
    let mut system: Vec<SystemBlock<'_>> = system_text
        .into_iter()
        .map(|text| SystemBlock::Text(Cow::Borrowed(text)))
        .collect();
    for m in messages.iter_mut().filter(|m| m.role == "user") {
        // Tool results open the user turn.
        m.content
            .sort_by_key(|b| !matches!(b, Block::ToolResult(_)));
    }

    let mut tools: Vec<ToolEntry<'_>> = req
        .tools
        .iter()
        .map(|t| {
            ToolEntry::ToolSpec(ToolSpecWire {
                name: &t.name,
                description: t.description.as_deref(),
                input_schema: JsonSchema {
                    json: &t.parameters,
                },
            })
        })
        .collect();
    let mut tool_choice = match &req.tool_choice {
        None => None,
        Some(ToolChoice::Auto) => Some(WireToolChoice::Auto(Empty {})),
        Some(ToolChoice::Required) => Some(WireToolChoice::Any(Empty {})),
        Some(ToolChoice::Tool { name }) => Some(WireToolChoice::Tool { name }),
        Some(ToolChoice::None) if has_tool_blocks => {
            return Err(invalid(
                "tool_choice `none` cannot be honoured: Converse has no such choice and needs \
                 the tools whenever the conversation holds tool calls or results"
                    .to_owned(),
            ));
        }
        Some(ToolChoice::None) => {
            tools.clear();
            None
        }
        Some(_) => return Err(invalid("a tool_choice Converse cannot take".to_owned())),
    };

    let schema = match &req.response_format {
        ResponseFormat::Json => Some(&*ANY_OBJECT),
        ResponseFormat::JsonSchema { schema, .. } => Some(schema),
        _ => None,
    };
    let mut json_mode = JsonMode(false);
    if let Some(schema) = schema {
        if req.tools.is_empty() {
            tools.push(ToolEntry::ToolSpec(ToolSpecWire {
                name: JSON_TOOL,
                description: Some("Give the answer as a JSON object through this tool."),
                input_schema: JsonSchema { json: schema },
            }));
            tool_choice = Some(WireToolChoice::Tool { name: JSON_TOOL });
            json_mode = JsonMode(true);
        } else {
            system.push(SystemBlock::Text(Cow::Owned(format!(
                "When you answer without calling a tool, respond only with a JSON object that conforms to this JSON schema: {schema}"
            ))));
        }
    }
    if opts.prompt_cache {
        if !system.is_empty() {
            system.push(SystemBlock::CachePoint(CACHE_POINT));
        }
        if !tools.is_empty() {
            tools.push(ToolEntry::CachePoint(CACHE_POINT));
        }
    }
    let tool_config = (!tools.is_empty()).then_some(ToolConfig { tools, tool_choice });

    let mut additional = opts.additional_fields.cloned();
    if let Some(t) = opts.thinking {
        additional.get_or_insert_with(serde_json::Map::new).insert(
            "thinking".to_owned(),
            serde_json::json!({ "type": "enabled", "budget_tokens": t.budget_tokens }),
        );
    }
    let body = ConverseBody {
        messages,
        system,
        inference_config: InferenceConfig {
            max_tokens: req
                .max_tokens
                .unwrap_or(DEFAULT_MAX_TOKENS.min(max_output.max(1))),
            temperature: req.temperature,
            top_p: req.top_p,
            stop_sequences: &req.stop,
        },
        tool_config,
        guardrail_config: opts.guardrail.map(|g| GuardrailConfig {
            guardrail_identifier: &g.identifier,
            guardrail_version: &g.version,
            trace: g.trace.then_some("enabled"),
            stream_processing_mode: stream.then_some(if g.async_stream { "async" } else { "sync" }),
        }),
        additional_model_request_fields: additional,
        request_metadata: req.user.as_deref().map(|user| RequestMetadata { user }),
    };
    let bytes = serde_json::to_vec(&body).map_err(|e| {
        invalid(format!("cannot serialise the Converse request: {e}")).with_source(e)
    })?;
    Ok((bytes, json_mode))
}

#[cfg(test)]
mod tests {
    use ripcord_core::{ToolCall, ToolSpec};
    use serde_json::{Value, json};

    use super::*;
    use crate::test_support::requests::{user_with_image, weather_call, weather_tool};

    fn body_with(req: &ChatRequest, opts: &BodyOptions<'_>, stream: bool) -> (Value, JsonMode) {
        let (b, j) = converse_body(req, 64_000, stream, opts).unwrap();
        (serde_json::from_slice(&b).unwrap(), j)
    }

    fn body(req: &ChatRequest) -> Value {
        body_with(req, &BodyOptions::default(), false).0
    }

    #[test]
    fn system_text_images_tools_and_results() {
        let mut req = ChatRequest::new(vec![
            Message::system("Be brief."),
            Message::system("Answer in English."),
            user_with_image(
                "What is in this picture, and the weather?",
                "image/png",
                "iVBORw0KGgo=",
            ),
            weather_call("tooluse_1", "Oslo"),
            Message::tool_result("tooluse_1", "12°C, rain"),
            Message::user("Thanks."),
        ])
        .with_max_tokens(300)
        .with_temperature(0.2)
        .with_stop("END")
        .with_tool(weather_tool(
            "The weather in a city",
            json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}),
        ))
        .with_tool_choice(ToolChoice::Required);
        req.top_p = Some(0.9);
        req.user = Some("user-42".into());
        let v = body(&req);
        assert_eq!(
            v["system"],
            json!([{"text":"Be brief."},{"text":"Answer in English."}])
        );
        assert_eq!(
            v["messages"][0],
            json!({"role":"user","content":[
                {"text":"What is in this picture, and the weather?"},
                {"image":{"format":"png","source":{"bytes":"iVBORw0KGgo="}}}
            ]})
        );
        assert_eq!(
            v["messages"][1],
            json!({"role":"assistant","content":[{"toolUse":{"toolUseId":"tooluse_1","name":"weather","input":{"city":"Oslo"}}}]})
        );
        // The tool result and the next user text merge into one user turn, result first.
        assert_eq!(
            v["messages"][2],
            json!({"role":"user","content":[
                {"toolResult":{"toolUseId":"tooluse_1","content":[{"text":"12°C, rain"}]}},
                {"text":"Thanks."}
            ]})
        );
        assert_eq!(
            v["inferenceConfig"],
            json!({"maxTokens":300,"temperature":0.2,"topP":0.9,"stopSequences":["END"]})
        );
        assert_eq!(
            v["toolConfig"],
            json!({"tools":[{"toolSpec":{"name":"weather","description":"The weather in a city",
                "inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}}],
                "toolChoice":{"any":{}}})
        );
        assert_eq!(v["requestMetadata"], json!({"user":"user-42"}));
        assert!(v.get("guardrailConfig").is_none());
        assert!(v.get("additionalModelRequestFields").is_none());
    }

    #[test]
    fn tool_choices() {
        let tool = ToolSpec::new("f", "", json!({"type":"object"}));
        let with = |c: Option<ToolChoice>| {
            let mut r = ChatRequest::user("hi").with_tool(tool.clone());
            r.tool_choice = c;
            body(&r)["toolConfig"].clone()
        };
        assert!(
            with(None).get("toolChoice").is_none(),
            "auto is the default"
        );
        assert_eq!(
            with(Some(ToolChoice::Auto))["toolChoice"],
            json!({"auto":{}})
        );
        assert_eq!(
            with(Some(ToolChoice::Tool { name: "f".into() }))["toolChoice"],
            json!({"tool":{"name":"f"}})
        );
        assert_eq!(with(Some(ToolChoice::None)), Value::Null, "tools left out");
        let mut r = ChatRequest::new(vec![
            Message::user("hi"),
            Message::assistant_tool_calls(vec![ToolCall::new("t1", "f", "{}")]),
            Message::tool_result("t1", "ok"),
        ])
        .with_tool(tool);
        r.tool_choice = Some(ToolChoice::None);
        let e = converse_body(&r, 1000, false, &BodyOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        assert!(e.message().contains("none"), "{e}");
    }

    #[test]
    fn thinking_guardrail_cache_points_and_extra_fields() {
        let g = Guardrail::new("gr-abc123", "1").with_trace(true);
        let mut extra = serde_json::Map::new();
        extra.insert("top_k".into(), json!(50));
        let opts = BodyOptions {
            thinking: Some(Thinking::new(2048)),
            guardrail: Some(&g),
            prompt_cache: true,
            additional_fields: Some(&extra),
        };
        let req = ChatRequest::new(vec![Message::system("Long prompt."), Message::user("hi")])
            .with_tool(ToolSpec::new("f", "", json!({"type":"object"})));
        let (v, _) = body_with(&req, &opts, true);
        assert_eq!(
            v["additionalModelRequestFields"],
            json!({"top_k":50,"thinking":{"type":"enabled","budget_tokens":2048}})
        );
        assert_eq!(
            v["guardrailConfig"],
            json!({"guardrailIdentifier":"gr-abc123","guardrailVersion":"1","trace":"enabled","streamProcessingMode":"sync"})
        );
        assert_eq!(
            v["system"],
            json!([{"text":"Long prompt."},{"cachePoint":{"type":"default"}}])
        );
        assert_eq!(
            v["toolConfig"]["tools"][1],
            json!({"cachePoint":{"type":"default"}})
        );
        let (v, _) = body_with(&req, &opts, false);
        assert!(v["guardrailConfig"].get("streamProcessingMode").is_none());
    }

    #[test]
    fn json_mode_is_a_forced_tool_and_default_max_tokens_is_capped() {
        let req =
            ChatRequest::user("List three colours").with_response_format(ResponseFormat::Json);
        let (b, j) = converse_body(&req, 1000, false, &BodyOptions::default()).unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert!(j.0);
        assert_eq!(
            v["toolConfig"]["toolChoice"],
            json!({"tool":{"name":JSON_TOOL}})
        );
        assert_eq!(v["inferenceConfig"]["maxTokens"], 1000);
    }

    #[test]
    fn images_converse_cannot_take_are_refused_with_the_message_named() {
        let url = ChatRequest::new(vec![Message::user("x").with_image(ImageSource::Url {
            url: "https://example.com/cat.png".into(),
        })]);
        let e = converse_body(&url, 1000, false, &BodyOptions::default()).unwrap_err();
        assert!(
            e.message().contains("message 0") && e.message().contains("s3://"),
            "{e}"
        );
        let s3 = ChatRequest::new(vec![Message::user("x").with_image(ImageSource::Url {
            url: "s3://bucket/cat.JPG".into(),
        })]);
        assert_eq!(
            body(&s3)["messages"][0]["content"][1],
            json!({"image":{"format":"jpeg","source":{"s3Location":{"uri":"s3://bucket/cat.JPG"}}}})
        );
        let tiff = ChatRequest::new(vec![user_with_image("x", "image/tiff", "AA==")]);
        let e = converse_body(&tiff, 1000, false, &BodyOptions::default()).unwrap_err();
        assert!(e.message().contains("image/tiff"), "{e}");
        let none = ChatRequest::new(vec![Message::system("only a system prompt")]);
        assert!(converse_body(&none, 1000, false, &BodyOptions::default()).is_err());
        let bad_args = ChatRequest::new(vec![
            Message::user("x"),
            Message::assistant_tool_calls(vec![ToolCall::new("t", "f", "[1]")]),
        ]);
        let e = converse_body(&bad_args, 1000, false, &BodyOptions::default()).unwrap_err();
        assert!(e.message().contains("JSON object"), "{e}");
    }
}
