//! The Chat Completions and Embeddings request bodies, borrowed from the [`ChatRequest`].
//!
//! The wire structs hold references into the caller's request, so building a body copies
//! nothing but what the wire format forces (a `data:` URL is streamed straight into the JSON
//! writer), and the body is serialised exactly once per call.

use std::borrow::Cow;
use std::fmt;

use ripcord_core::{
    ChatRequest, ContentPart, EmbeddingRequest, Error, ErrorKind, FileSource, ImageSource, Message,
    ResponseFormat, Result, Role, ToolCall, ToolChoice, ToolSpec,
};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::{AssistantPrefill, Dialect, MaxTokensField};

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<WireFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    /// vLLM: the final (assistant) message stays open and the model writes on.
    #[serde(skip_serializing_if = "Option::is_none")]
    continue_final_message: Option<bool>,
    /// vLLM: no new assistant turn after the final message (it cannot go with the above).
    #[serde(skip_serializing_if = "Option::is_none")]
    add_generation_prompt: Option<bool>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: WireContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    /// DeepSeek: this final assistant message is the start of the answer to write on from.
    #[serde(skip_serializing_if = "Option::is_none")]
    prefix: Option<bool>,
}

/// Message content: a plain string when the message is text only (every compatible server
/// accepts that), the array-of-parts form only when it carries images, `null` for an assistant
/// turn that only called tools.
enum WireContent<'a> {
    Null,
    Text(Cow<'a, str>),
    Parts(&'a [ContentPart]),
}

impl Serialize for WireContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            WireContent::Null => s.serialize_none(),
            WireContent::Text(t) => s.serialize_str(t),
            WireContent::Parts(parts) => {
                let mut seq = s.serialize_seq(None)?;
                for p in parts.iter() {
                    match p {
                        ContentPart::Text { text } => {
                            seq.serialize_element(&TextPart { kind: "text", text })?
                        }
                        ContentPart::Image { image, detail } => {
                            seq.serialize_element(&ImagePart {
                                kind: "image_url",
                                image_url: ImageUrl {
                                    url: ImageUrlValue(image),
                                    detail: detail.as_deref(),
                                },
                            })?
                        }
                        ContentPart::File { file, filename } => {
                            let (file_data, file_id) = match file {
                                FileSource::Base64 { media_type, data } => {
                                    (Some(DataUrl { media_type, data }), None)
                                }
                                FileSource::Id { id } => (None, Some(id.as_str())),
                                _ => (None, None),
                            };
                            seq.serialize_element(&FilePart {
                                kind: "file",
                                file: FileBody {
                                    file_data: file_data.map(DataUrlValue),
                                    file_id,
                                    filename: filename.as_deref(),
                                },
                            })?
                        }
                        ContentPart::Audio { data, format } => {
                            seq.serialize_element(&AudioPart {
                                kind: "input_audio",
                                input_audio: AudioBody { data, format },
                            })?
                        }
                        _ => {}
                    }
                }
                seq.end()
            }
        }
    }
}

#[derive(Serialize)]
struct TextPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct ImagePart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    image_url: ImageUrl<'a>,
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: ImageUrlValue<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

/// An image as the `url` OpenAI takes: the URL itself, or a `data:` URL written straight into
/// the JSON (no intermediate copy of the base64 payload).
struct ImageUrlValue<'a>(&'a ImageSource);

impl Serialize for ImageUrlValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            ImageSource::Url { url } => s.serialize_str(url),
            ImageSource::Base64 { media_type, data } => {
                s.collect_str(&DataUrl { media_type, data })
            }
            _ => s.serialize_str(""),
        }
    }
}

#[derive(Serialize)]
struct FilePart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    file: FileBody<'a>,
}

#[derive(Serialize)]
struct FileBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    file_data: Option<DataUrlValue<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filename: Option<&'a str>,
}

/// A `data:` URL written straight into the JSON.
struct DataUrlValue<'a>(DataUrl<'a>);

impl Serialize for DataUrlValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

#[derive(Serialize)]
struct AudioPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    input_audio: AudioBody<'a>,
}

#[derive(Serialize)]
struct AudioBody<'a> {
    data: &'a str,
    format: &'a str,
}

struct DataUrl<'a> {
    media_type: &'a str,
    data: &'a str,
}

impl fmt::Display for DataUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "data:{};base64,{}", self.media_type, self.data)
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a serde_json::Value,
}

enum WireToolChoice<'a> {
    Mode(&'static str),
    Function(&'a str),
}

impl Serialize for WireToolChoice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            WireToolChoice::Mode(m) => s.serialize_str(m),
            WireToolChoice::Function(name) => {
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("type", "function")?;
                map.serialize_entry("function", &NameOnly { name })?;
                map.end()
            }
        }
    }
}

#[derive(Serialize)]
struct NameOnly<'a> {
    name: &'a str,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireFormat<'a> {
    JsonObject,
    JsonSchema { json_schema: JsonSchemaSpec<'a> },
}

#[derive(Serialize)]
struct JsonSchemaSpec<'a> {
    name: &'a str,
    schema: &'a serde_json::Value,
    strict: bool,
}

fn role(r: Role) -> &'static str {
    r.as_str()
}

fn content(m: &Message) -> WireContent<'_> {
    if m.has_non_text() {
        return WireContent::Parts(&m.content);
    }
    let mut texts = m.content.iter().filter_map(|p| match p {
        ContentPart::Text { text } => Some(text.as_str()),
        _ => None,
    });
    match (texts.next(), texts.next()) {
        (None, _) if m.role == Role::Assistant && !m.tool_calls.is_empty() => WireContent::Null,
        (None, _) => WireContent::Text(Cow::Borrowed("")),
        (Some(one), None) => WireContent::Text(Cow::Borrowed(one)),
        (Some(_), Some(_)) => WireContent::Text(Cow::Owned(m.text())),
    }
}

/// One message on the Chat Completions wire. An assistant message's reasoning
/// ([`Message::reasoning`]) is left out on purpose: OpenAI takes none in history, and DeepSeek
/// documents a 400 for `reasoning_content` in the input messages; reasoning of Anthropic's
/// (signed) means nothing to another vendor.
fn message(m: &Message) -> WireMessage<'_> {
    WireMessage {
        role: role(m.role),
        content: content(m),
        name: m.name.as_deref(),
        tool_calls: m.tool_calls.iter().map(tool_call).collect(),
        tool_call_id: m.tool_call_id.as_deref(),
        prefix: None,
    }
}

/// Whether the request continues its final assistant message by the vendor's prefill: the
/// vendor has one and the last message is an assistant's text (not a tool call).
pub(crate) fn prefills(req: &ChatRequest, dialect: &Dialect) -> bool {
    dialect.prefill != AssistantPrefill::None
        && req
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
}

fn tool_call(c: &ToolCall) -> WireToolCall<'_> {
    WireToolCall {
        id: &c.id,
        kind: "function",
        function: WireFunctionCall {
            name: &c.name,
            arguments: if c.arguments.is_empty() {
                "{}"
            } else {
                &c.arguments
            },
        },
    }
}

fn tool(t: &ToolSpec) -> WireTool<'_> {
    WireTool {
        kind: "function",
        function: WireFunction {
            name: &t.name,
            description: t.description.as_deref(),
            parameters: &t.parameters,
        },
    }
}

fn tool_choice(c: &ToolChoice) -> Option<WireToolChoice<'_>> {
    Some(match c {
        ToolChoice::Auto => WireToolChoice::Mode("auto"),
        ToolChoice::None => WireToolChoice::Mode("none"),
        ToolChoice::Required => WireToolChoice::Mode("required"),
        ToolChoice::Tool { name } => WireToolChoice::Function(name),
        _ => return None,
    })
}

/// The instruction added for vendors that take only `json_object`: the schema goes into the
/// prompt so the model still knows the shape.
fn schema_instruction(schema: &serde_json::Value) -> String {
    format!("Respond only with a JSON object that conforms to this JSON schema: {schema}")
}

/// Serialises the chat body.
pub(crate) fn chat_body(
    model: &str,
    req: &ChatRequest,
    dialect: &Dialect,
    stream: bool,
) -> Result<Vec<u8>> {
    req.refuse_vendor_tools("an OpenAI-wire link")?;
    if req.messages.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            "the request has no messages",
        ));
    }
    let mut extra_system: Option<String> = None;
    let response_format = match &req.response_format {
        ResponseFormat::Text => None,
        ResponseFormat::Json => Some(WireFormat::JsonObject),
        ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
        } => {
            if dialect.json_schema {
                Some(WireFormat::JsonSchema {
                    json_schema: JsonSchemaSpec {
                        name,
                        schema,
                        strict: *strict,
                    },
                })
            } else {
                extra_system = Some(schema_instruction(schema));
                Some(WireFormat::JsonObject)
            }
        }
        _ => None,
    };
    let mut messages = Vec::with_capacity(req.messages.len() + usize::from(extra_system.is_some()));
    if let Some(text) = &extra_system {
        messages.push(WireMessage {
            role: "system",
            content: WireContent::Text(Cow::Borrowed(text)),
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            prefix: None,
        });
    }
    messages.extend(req.messages.iter().map(message));
    let prefill = prefills(req, dialect).then_some(dialect.prefill);
    if let (Some(AssistantPrefill::Prefix { .. }), Some(last)) = (prefill, messages.last_mut()) {
        last.prefix = Some(true);
    }
    let continues = prefill == Some(AssistantPrefill::ContinueFinalMessage);
    let (max_tokens, max_completion_tokens) = match dialect.max_tokens {
        MaxTokensField::MaxTokens => (req.max_tokens, None),
        MaxTokensField::MaxCompletionTokens => (None, req.max_tokens),
    };
    let body = ChatBody {
        model,
        messages,
        tools: req.tools.iter().map(tool).collect(),
        tool_choice: req.tool_choice.as_ref().and_then(tool_choice),
        response_format,
        temperature: req.temperature,
        top_p: req.top_p,
        max_tokens,
        max_completion_tokens,
        stop: &req.stop,
        seed: req.seed,
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        // OpenAI refuses the flag on a request without tools.
        parallel_tool_calls: req.parallel_tool_calls.filter(|_| !req.tools.is_empty()),
        // A thinking budget (Anthropic's way) is sent as the effort of its band.
        reasoning_effort: req.reasoning.map(|r| r.effort_or_from_budget().as_str()),
        user: req.user.as_deref(),
        stream,
        stream_options: (stream && dialect.stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
        continue_final_message: continues.then_some(true),
        add_generation_prompt: continues.then_some(false),
    };
    // Sized once for the text plus the JSON around it, instead of growing from 128 bytes.
    let text: usize = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|p| match p {
            ContentPart::Text { text } => text.len(),
            _ => 0,
        })
        .sum();
    let mut out = Vec::with_capacity(256 + text + text / 8);
    serde_json::to_writer(&mut out, &body).map_err(|e| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("cannot serialise the chat request: {e}"),
        )
        .with_source(e)
    })?;
    Ok(out)
}

#[derive(Serialize)]
#[serde(untagged)]
enum EmbeddingInput<'a> {
    Texts(&'a [String]),
    Tokens(&'a [Vec<u32>]),
}

#[derive(Serialize)]
struct EmbeddingBody<'a> {
    model: &'a str,
    input: EmbeddingInput<'a>,
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
}

/// Serialises the embeddings body.
pub(crate) fn embedding_body(model: &str, req: &EmbeddingRequest) -> Result<Vec<u8>> {
    if req.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            "the embedding request has no inputs",
        ));
    }
    let body = EmbeddingBody {
        model,
        input: if req.tokens.is_empty() {
            EmbeddingInput::Texts(&req.inputs)
        } else {
            EmbeddingInput::Tokens(&req.tokens)
        },
        encoding_format: "float",
        dimensions: req.dimensions,
    };
    serde_json::to_vec(&body).map_err(|e| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("cannot serialise the embedding request: {e}"),
        )
        .with_source(e)
    })
}

#[cfg(test)]
mod tests {
    use ripcord_core::{ImageSource, Message, ToolCall, ToolSpec};
    use serde_json::{Value, json};

    use super::*;

    fn dialect() -> Dialect {
        Dialect::openai()
    }

    fn body(req: &ChatRequest, d: &Dialect, stream: bool) -> Value {
        serde_json::from_slice(&chat_body("gpt-4o", req, d, stream).unwrap()).unwrap()
    }

    #[test]
    fn prefill_marks_the_final_assistant_message_per_dialect() {
        let req = ChatRequest::new(vec![
            Message::user("Why is the sky blue?"),
            Message::assistant("Because air scatters"),
        ]);
        // OpenAI: no prefill, the body is as it always was.
        let plain = body(&req, &dialect(), true);
        assert!(plain["messages"][1].get("prefix").is_none());
        assert!(plain.get("continue_final_message").is_none());
        assert!(plain.get("add_generation_prompt").is_none());
        // DeepSeek: `prefix: true` on the last message only.
        let mut ds = dialect();
        ds.prefill = AssistantPrefill::Prefix {
            base_suffix: Some("/beta"),
        };
        assert!(prefills(&req, &ds));
        let v = body(&req, &ds, true);
        assert_eq!(v["messages"][1]["prefix"], true);
        assert_eq!(v["messages"][1]["content"], "Because air scatters");
        assert!(v["messages"][0].get("prefix").is_none());
        assert!(v.get("continue_final_message").is_none());
        // vLLM: the body's two flags, nothing on the message.
        let mut vl = dialect();
        vl.prefill = AssistantPrefill::ContinueFinalMessage;
        let v = body(&req, &vl, false);
        assert_eq!(v["continue_final_message"], true);
        assert_eq!(v["add_generation_prompt"], false);
        assert!(v["messages"][1].get("prefix").is_none());
        // A conversation that ends with the user's turn (the instruction form) is no prefill.
        let asked = ChatRequest::new(vec![
            Message::user("Why?"),
            Message::assistant("Because"),
            Message::user("Continue."),
        ]);
        assert!(!prefills(&asked, &ds));
        let v = body(&asked, &vl, false);
        assert!(v.get("continue_final_message").is_none());
        assert!(v["messages"][1].get("prefix").is_none());
    }

    #[test]
    fn reasoning_in_history_is_left_out_of_the_chat_wire() {
        let req = ChatRequest::new(vec![
            Message::user("q"),
            Message::assistant("a").with_reasoning(vec![
                ripcord_core::ReasoningBlock::thinking("t").with_signature("s"),
                ripcord_core::ReasoningBlock::thinking("deepseek's"),
            ]),
            Message::user("again"),
        ]);
        let v = body(&req, &dialect(), false);
        assert_eq!(
            v["messages"][1],
            json!({"role": "assistant", "content": "a"})
        );
    }

    #[test]
    fn representative_request_json() {
        let mut req = ChatRequest::new(vec![
            Message::system("Be brief."),
            Message::user("What is in this picture?").with_image(ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            }),
            Message::assistant_tool_calls(vec![ToolCall::new(
                "call_1",
                "weather",
                r#"{"city":"Paris"}"#,
            )]),
            Message::tool_result("call_1", "18C, cloudy"),
            Message::assistant("It is 18C."),
            Message::user("Thanks"),
        ])
        .with_tool(ToolSpec::new(
            "weather",
            "Current weather",
            json!({"type":"object","properties":{"city":{"type":"string"}}}),
        ))
        .with_tool_choice(ToolChoice::Tool {
            name: "weather".into(),
        })
        .with_response_format(ResponseFormat::Json)
        .with_max_tokens(100)
        .with_temperature(0.5)
        .with_stop("END")
        .with_seed(7);
        req.user = Some("user-42".into());
        req.top_p = Some(0.9);
        let v = body(&req, &dialect(), false);
        assert_eq!(
            v,
            json!({
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [
                        {"type": "text", "text": "What is in this picture?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
                    ]},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}
                    ]},
                    {"role": "tool", "content": "18C, cloudy", "tool_call_id": "call_1"},
                    {"role": "assistant", "content": "It is 18C."},
                    {"role": "user", "content": "Thanks"}
                ],
                "tools": [{"type": "function", "function": {"name": "weather", "description": "Current weather",
                    "parameters": {"type":"object","properties":{"city":{"type":"string"}}}}}],
                "tool_choice": {"type": "function", "function": {"name": "weather"}},
                "response_format": {"type": "json_object"},
                "temperature": 0.5,
                "top_p": 0.9,
                "max_completion_tokens": 100,
                "stop": ["END"],
                "seed": 7,
                "user": "user-42"
            })
        );
    }

    #[test]
    fn streaming_asks_for_usage_and_compat_uses_max_tokens() {
        let mut d = dialect();
        d.max_tokens = MaxTokensField::MaxTokens;
        let v = body(&ChatRequest::user("hi").with_max_tokens(5), &d, true);
        assert_eq!(v["stream"], json!(true));
        assert_eq!(v["stream_options"], json!({"include_usage": true}));
        assert_eq!(v["max_tokens"], json!(5));
        assert!(v.get("max_completion_tokens").is_none());
        let v = body(&ChatRequest::user("hi"), &d, false);
        assert!(v.get("stream").is_none() && v.get("stream_options").is_none());
    }

    #[test]
    fn json_schema_native_or_downgraded_with_instruction() {
        let schema =
            json!({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]});
        let req = ChatRequest::user("give a").with_response_format(ResponseFormat::JsonSchema {
            name: "thing".into(),
            schema: schema.clone(),
            strict: true,
        });
        let v = body(&req, &dialect(), false);
        assert_eq!(
            v["response_format"],
            json!({"type":"json_schema","json_schema":{"name":"thing","schema":schema,"strict":true}})
        );
        let mut d = dialect();
        d.json_schema = false;
        let v = body(&req, &d, false);
        assert_eq!(v["response_format"], json!({"type":"json_object"}));
        assert_eq!(v["messages"][0]["role"], "system");
        assert!(
            v["messages"][0]["content"]
                .as_str()
                .unwrap()
                .contains("\"required\":[\"a\"]")
        );
        assert_eq!(v["messages"][1]["content"], "give a");
    }

    #[test]
    fn image_url_with_detail_and_tool_choice_modes() {
        let mut m = Message::user("look");
        m.content.push(ContentPart::Image {
            image: ImageSource::Url {
                url: "https://example.invalid/cat.png".into(),
            },
            detail: Some("low".into()),
        });
        let v = body(
            &ChatRequest::new(vec![m]).with_tool_choice(ToolChoice::Required),
            &dialect(),
            false,
        );
        assert_eq!(
            v["messages"][0]["content"][1],
            json!({"type":"image_url","image_url":{"url":"https://example.invalid/cat.png","detail":"low"}})
        );
        assert_eq!(v["tool_choice"], json!("required"));
    }

    #[test]
    fn empty_requests_are_refused() {
        let e = chat_body("m", &ChatRequest::default(), &dialect(), false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        let e = embedding_body("m", &EmbeddingRequest::new(vec![])).unwrap_err();
        assert!(e.message().contains("no inputs"));
        let v: Value = serde_json::from_slice(
            &embedding_body("e", &EmbeddingRequest::new(vec!["a".into()])).unwrap(),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"model":"e","input":["a"],"encoding_format":"float"})
        );
        // Token arrays go to the vendor as they came.
        let v: Value = serde_json::from_slice(
            &embedding_body(
                "e",
                &EmbeddingRequest::from_tokens(vec![vec![1, 2], vec![3]]),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"model":"e","input":[[1, 2], [3]],"encoding_format":"float"})
        );
    }
}
