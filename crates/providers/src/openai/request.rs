//! The Chat Completions and Embeddings request bodies, borrowed from the [`ChatRequest`].
//!
//! The chat body is the shared [`chat_wire`](super::chat_wire) request built with
//! `Cow::Borrowed` references into the caller's request, so building it copies nothing but
//! what the wire format forces (several text parts joined into one string; a `data:` URL is
//! streamed straight into the JSON writer), and the body is serialised exactly once per call.

use std::borrow::Cow;

use ripcord_core::{
    ChatRequest, ContentPart, EmbeddingRequest, Error, ErrorKind, FileSource, ImageSource, Message,
    ResponseFormat, Result, Role, ToolCall, ToolChoice, ToolSpec,
};
use serde::Serialize;

use super::chat_wire as wire;
use super::{AssistantPrefill, Dialect, MaxTokensField};

/// An image or file as the `url` / `file_data` OpenAI takes: the URL itself, or a `data:` URL
/// written straight into the JSON (no intermediate copy of the base64 payload).
fn image_url(image: &ImageSource) -> wire::Url<'_> {
    match image {
        ImageSource::Url { url } => wire::Url::Plain(Cow::Borrowed(url)),
        ImageSource::Base64 { media_type, data } => data_url(media_type, data),
        _ => wire::Url::Plain(Cow::Borrowed("")),
    }
}

fn data_url<'a>(media_type: &'a str, data: &'a str) -> wire::Url<'a> {
    wire::Url::Data {
        media_type: Cow::Borrowed(media_type),
        data: Cow::Borrowed(data),
    }
}

/// One content part on the wire; `None` for a part the wire has no form for.
fn part(p: &ContentPart) -> Option<wire::ContentPart<'_>> {
    Some(match p {
        ContentPart::Text { text } => wire::ContentPart::Text {
            text: Cow::Borrowed(text),
        },
        ContentPart::Image { image, detail } => wire::ContentPart::ImageUrl {
            image_url: wire::ImageUrl {
                url: image_url(image),
                detail: detail.as_deref().map(Cow::Borrowed),
            },
        },
        ContentPart::File { file, filename } => {
            let (file_data, file_id) = match file {
                FileSource::Base64 { media_type, data } => (Some(data_url(media_type, data)), None),
                FileSource::Id { id } => (None, Some(Cow::Borrowed(id.as_str()))),
                _ => (None, None),
            };
            wire::ContentPart::File {
                file: wire::FileRef {
                    file_data,
                    file_id,
                    filename: filename.as_deref().map(Cow::Borrowed),
                },
            }
        }
        ContentPart::Audio { data, format } => wire::ContentPart::InputAudio {
            input_audio: wire::InputAudio {
                data: Cow::Borrowed(data),
                format: Cow::Borrowed(format),
            },
        },
        _ => return None,
    })
}

/// Message content: a plain string when the message is text only (every compatible server
/// accepts that), the array-of-parts form only when it carries images, `null` for an assistant
/// turn that only called tools.
fn content(m: &Message) -> Option<wire::MessageContent<'_>> {
    if m.has_non_text() {
        return Some(wire::MessageContent::Parts(
            m.content.iter().filter_map(part).collect(),
        ));
    }
    let mut texts = m.content.iter().filter_map(|p| match p {
        ContentPart::Text { text } => Some(text.as_str()),
        _ => None,
    });
    let text = match (texts.next(), texts.next()) {
        (None, _) if m.role == Role::Assistant && !m.tool_calls.is_empty() => return None,
        (None, _) => Cow::Borrowed(""),
        (Some(one), None) => Cow::Borrowed(one),
        (Some(_), Some(_)) => Cow::Owned(m.text()),
    };
    Some(wire::MessageContent::Text(text))
}

/// One message on the Chat Completions wire. An assistant message's reasoning
/// ([`Message::reasoning`]) is left out on purpose: OpenAI takes none in history, and DeepSeek
/// documents a 400 for `reasoning_content` in the input messages; reasoning of Anthropic's
/// (signed) means nothing to another vendor.
fn message(m: &Message) -> wire::Message<'_> {
    wire::Message {
        role: Some(Cow::Borrowed(m.role.as_str())),
        content: content(m),
        name: m.name.as_deref().map(Cow::Borrowed),
        tool_calls: m.tool_calls.iter().map(tool_call).collect(),
        tool_call_id: m.tool_call_id.as_deref().map(Cow::Borrowed),
        ..Default::default()
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

fn tool_call(c: &ToolCall) -> wire::ToolCall<'_> {
    wire::ToolCall {
        id: Some(Cow::Borrowed(&c.id)),
        kind: Some(Cow::Borrowed("function")),
        function: wire::FunctionCall {
            name: Some(Cow::Borrowed(&c.name)),
            arguments: wire::Arguments::Text(Cow::Borrowed(if c.arguments.is_empty() {
                "{}"
            } else {
                &c.arguments
            })),
        },
    }
}

fn tool(t: &ToolSpec) -> wire::Tool<'_> {
    wire::Tool {
        kind: Some(Cow::Borrowed("function")),
        function: wire::FunctionDef {
            name: Cow::Borrowed(&t.name),
            description: t.description.as_deref().map(Cow::Borrowed),
            parameters: Some(Cow::Borrowed(&t.parameters)),
        },
    }
}

fn tool_choice(c: &ToolChoice) -> Option<wire::ToolChoice<'_>> {
    let mode = |m: &'static str| wire::ToolChoice::Mode(Cow::Borrowed(m));
    Some(match c {
        ToolChoice::Auto => mode("auto"),
        ToolChoice::None => mode("none"),
        ToolChoice::Required => mode("required"),
        ToolChoice::Tool { name } => {
            wire::ToolChoice::Function(wire::NamedToolChoice::function(name.as_str()))
        }
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
        ResponseFormat::Json => Some(wire::ResponseFormat::JsonObject),
        ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
        } => {
            if dialect.json_schema {
                Some(wire::ResponseFormat::JsonSchema {
                    json_schema: wire::JsonSchema {
                        name: Cow::Borrowed(name),
                        schema: Some(Cow::Borrowed(schema)),
                        strict: Some(*strict),
                    },
                })
            } else {
                extra_system = Some(schema_instruction(schema));
                Some(wire::ResponseFormat::JsonObject)
            }
        }
        _ => None,
    };
    let mut messages = Vec::with_capacity(req.messages.len() + usize::from(extra_system.is_some()));
    if let Some(text) = &extra_system {
        messages.push(wire::Message {
            role: Some(Cow::Borrowed("system")),
            content: Some(wire::MessageContent::Text(Cow::Borrowed(text))),
            ..Default::default()
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
    let body = wire::ChatCompletionRequest {
        model: Some(Cow::Borrowed(model)),
        messages,
        tools: req.tools.iter().map(tool).collect(),
        tool_choice: req.tool_choice.as_ref().and_then(tool_choice),
        response_format,
        temperature: req.temperature,
        top_p: req.top_p,
        max_tokens,
        max_completion_tokens,
        stop: (!req.stop.is_empty()).then_some(wire::Stop::Many(Cow::Borrowed(&req.stop))),
        seed: req.seed,
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        // OpenAI refuses the flag on a request without tools.
        parallel_tool_calls: req.parallel_tool_calls.filter(|_| !req.tools.is_empty()),
        // A thinking budget (Anthropic's way) is sent as the effort of its band.
        reasoning_effort: req
            .reasoning
            .map(|r| Cow::Borrowed(r.effort_or_from_budget().as_str())),
        user: req.user.as_deref().map(Cow::Borrowed),
        stream,
        stream_options: (stream && dialect.stream_usage).then_some(wire::StreamOptions {
            include_usage: true,
        }),
        continue_final_message: continues.then_some(true),
        add_generation_prompt: continues.then_some(false),
        ..Default::default()
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
    use ripcord_core::{ImageSource, Message};
    use serde_json::{Value, json};

    use super::*;
    use crate::test_support::requests::{
        force_weather, user_with_image, weather_call, weather_tool,
    };

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
            user_with_image("What is in this picture?", "image/png", "iVBORw0KGgo="),
            weather_call("call_1", "Paris"),
            Message::tool_result("call_1", "18C, cloudy"),
            Message::assistant("It is 18C."),
            Message::user("Thanks"),
        ])
        .with_tool(weather_tool(
            "Current weather",
            json!({"type":"object","properties":{"city":{"type":"string"}}}),
        ))
        .with_tool_choice(force_weather())
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
