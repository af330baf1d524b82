//! The OpenAI Chat Completions wire, server side: requests in, responses and chunks out.
//!
//! Reference: <https://platform.openai.com/docs/api-reference/chat>. The wire's types are
//! [`ripcord_providers::openai_chat_wire`], the ones the OpenAI adapter writes and reads; this
//! module translates a request read through them into ripcord's [`ChatRequest`] (roles, the
//! deprecated `function_call`, refusals of what no link can give back) and names the field at
//! fault in every error (`messages[2].content[0].image_url.url`).

use std::borrow::Cow;

use ripcord_core::{
    ChatRequest, ContentPart, FileSource, ImageSource, Message, Reasoning, ReasoningEffort,
    ResponseFormat, Role, ToolCall, ToolChoice, ToolSpec,
};
use ripcord_providers::openai_chat_wire as oa;

use super::errors::GatewayError;
use serde_json::{Value, json};

/// A chat completions request as OpenAI SDKs send it.
pub(crate) type WireRequest = oa::ChatCompletionRequest<'static>;

/// True when the client asked for the usage chunk.
pub(crate) fn include_usage(r: &WireRequest) -> bool {
    r.stream_options.as_ref().is_some_and(|o| o.include_usage)
}

/// Refuses what no link can give back through this door: several choices, log
/// probabilities, and token biases (token ids mean something else on every vendor's
/// tokenizer, so they cannot follow a fallback).
fn refuse_unservable(r: &WireRequest) -> Result<(), GatewayError> {
    if r.n.is_some_and(|n| n != 1) {
        return Err(GatewayError::invalid_at(
            "n",
            "this gateway answers with one choice; send the request n times instead",
        ));
    }
    if r.logprobs == Some(true) || r.top_logprobs.is_some_and(|n| n > 0) {
        let param = if r.logprobs == Some(true) {
            "logprobs"
        } else {
            "top_logprobs"
        };
        return Err(GatewayError::invalid_at(
            param,
            "log probabilities are not returned by this gateway",
        ));
    }
    if r.logit_bias.as_ref().is_some_and(|b| !b.is_empty()) {
        return Err(GatewayError::invalid_at(
            "logit_bias",
            "token biases are not supported: token ids differ between the vendors a route may fall back to",
        ));
    }
    Ok(())
}

/// A tool call of a request's assistant message: the wire type reads a vendor's answer
/// leniently (no `id`, arguments as an object); a request must have them right.
fn tool_call(c: oa::ToolCall<'static>, at: String) -> Result<ToolCall, GatewayError> {
    let Some(id) = c.id else {
        return Err(GatewayError::invalid_at(at, "missing field `id`"));
    };
    let (name, arguments) = function_call(c.function, format!("{at}.function"))?;
    Ok(ToolCall::new(id, name, arguments))
}

/// A function call's name and arguments, `at` its path.
fn function_call(
    f: oa::FunctionCall<'static>,
    at: String,
) -> Result<(String, String), GatewayError> {
    let arguments = match f.arguments {
        oa::Arguments::Text(t) => t.into_owned(),
        // serde's own words, as when the field was read as a string: "invalid type: map,
        // expected a string".
        oa::Arguments::Json(v) => {
            let why = serde_json::from_value::<String>(v)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            return Err(GatewayError::invalid_at(format!("{at}.arguments"), why));
        }
    };
    match f.name {
        Some(name) => Ok((name.into_owned(), arguments)),
        None => Err(GatewayError::invalid_at(at, "missing field `name`")),
    }
}

/// Translates to ripcord's request.
pub(crate) fn into_chat_request(r: WireRequest) -> Result<ChatRequest, GatewayError> {
    refuse_unservable(&r)?;
    if r.messages.is_empty() {
        return Err(GatewayError::invalid_at("messages", "must not be empty"));
    }
    let mut messages = Vec::with_capacity(r.messages.len());
    for (i, m) in r.messages.into_iter().enumerate() {
        let Some(role_name) = m.role else {
            return Err(GatewayError::invalid_at(
                format!("messages[{i}]"),
                "missing field `role`",
            ));
        };
        let role = match role_name.as_ref() {
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
        msg.tool_call_id = m.tool_call_id.map(Cow::into_owned);
        if role == Role::Assistant
            && let Some(r) = m.reasoning_content.filter(|r| !r.is_empty())
        {
            msg.reasoning
                .push(ripcord_core::ReasoningBlock::thinking(r.into_owned()));
        }
        msg.tool_calls = m
            .tool_calls
            .into_iter()
            .enumerate()
            .map(|(j, c)| tool_call(c, format!("messages[{i}].tool_calls[{j}]")))
            .collect::<Result<_, _>>()?;
        if let Some(f) = m.function_call {
            // A deprecated `function_call` is a tool call with an id of our own.
            let (name, arguments) = function_call(f, format!("messages[{i}].function_call"))?;
            msg.tool_calls
                .push(ToolCall::new(format!("call_function_{i}"), name, arguments));
        }
        if role_name == "function" {
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
            msg.name = m.name.map(Cow::into_owned);
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
    req.tools = r
        .tools
        .into_iter()
        .map(|t| {
            let mut spec = ToolSpec::new(
                t.function.name,
                "",
                t.function.parameters.map_or_else(
                    || json!({"type": "object", "properties": {}}),
                    Cow::into_owned,
                ),
            );
            spec.description = t.function.description.map(Cow::into_owned);
            spec
        })
        .collect();
    req.tool_choice = match r.tool_choice {
        None => None,
        Some(oa::ToolChoice::Mode(s)) => Some(match s.as_ref() {
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
        Some(oa::ToolChoice::Function(f)) => Some(ToolChoice::Tool {
            name: f.function.name.into_owned(),
        }),
        // Any object naming a function names the tool, whatever its `type`.
        Some(oa::ToolChoice::Other(v)) => match v.pointer("/function/name").and_then(Value::as_str)
        {
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
    req.response_format = match r.response_format {
        None | Some(oa::ResponseFormat::Text) => ResponseFormat::Text,
        Some(oa::ResponseFormat::JsonObject) => ResponseFormat::Json,
        Some(oa::ResponseFormat::JsonSchema { json_schema }) => ResponseFormat::JsonSchema {
            name: json_schema.name.into_owned(),
            schema: json_schema
                .schema
                .map_or_else(|| json!({}), Cow::into_owned),
            strict: json_schema.strict.unwrap_or(false),
        },
    };
    req.temperature = r.temperature;
    req.top_p = r.top_p;
    req.max_tokens = r.max_completion_tokens.or(r.max_tokens);
    req.stop = r.stop.map(oa::Stop::into_vec).unwrap_or_default();
    req.seed = r.seed;
    req.user = r.user.map(Cow::into_owned);
    req.presence_penalty = r.presence_penalty;
    req.frequency_penalty = r.frequency_penalty;
    req.parallel_tool_calls = r.parallel_tool_calls;
    req.reasoning = match r.reasoning_effort.as_deref() {
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

fn parse_content(
    content: Option<oa::MessageContent<'static>>,
    i: usize,
) -> Result<Vec<ContentPart>, GatewayError> {
    match content {
        None => Ok(Vec::new()),
        Some(oa::MessageContent::Text(text)) => Ok(vec![ContentPart::Text {
            text: text.into_owned(),
        }]),
        Some(oa::MessageContent::Parts(parts)) => parts
            .into_iter()
            .enumerate()
            .map(|(j, p)| content_part(p, i, j))
            .collect(),
    }
}

fn content_part(
    p: oa::ContentPart<'static>,
    i: usize,
    j: usize,
) -> Result<ContentPart, GatewayError> {
    match p {
        oa::ContentPart::Text { text } => Ok(ContentPart::Text {
            text: text.into_owned(),
        }),
        oa::ContentPart::ImageUrl { image_url } => {
            let detail = image_url.detail.map(Cow::into_owned);
            Ok(image_part(&url_text(&image_url.url), detail))
        }
        oa::ContentPart::File { file } => file_part(file, i, j),
        oa::ContentPart::InputAudio { input_audio } => Ok(ContentPart::Audio {
            data: input_audio.data.into_owned(),
            format: input_audio.format.into_owned(),
        }),
        oa::ContentPart::Other(v) => unreadable_part(&v, i, j),
    }
}

/// A URL as text (a `data:` URL only comes this way from a part built in code).
fn url_text<'a>(url: &'a oa::Url<'_>) -> Cow<'a, str> {
    match url {
        oa::Url::Plain(u) => Cow::Borrowed(u),
        other => Cow::Owned(other.to_string()),
    }
}

/// A part the wire types could not read as its `type`'s (or of a type they do not model):
/// the 400 naming the field at fault. An image part whose only flaw is its `detail` is read
/// without one.
fn unreadable_part(p: &Value, i: usize, j: usize) -> Result<ContentPart, GatewayError> {
    let at = |field: &str| format!("messages[{i}].content[{j}]{field}");
    match p.get("type").and_then(Value::as_str).unwrap_or("") {
        "text" => Err(GatewayError::invalid_at(
            at(".text"),
            "a text part needs `text`",
        )),
        "image_url" => match p.pointer("/image_url/url").and_then(Value::as_str) {
            Some(url) => Ok(image_part(url, None)),
            None => Err(GatewayError::invalid_at(
                at(".image_url.url"),
                "an image part needs `image_url.url`",
            )),
        },
        "file" => Err(unreadable_file(p, &at(".file"))),
        "input_audio" => {
            let name = match p.pointer("/input_audio/data") {
                Some(Value::String(_)) => "format",
                _ => "data",
            };
            Err(GatewayError::invalid_at(
                at(&format!(".input_audio.{name}")),
                "an input_audio part needs `input_audio.data` and `input_audio.format` strings",
            ))
        }
        other => Err(GatewayError::invalid_at(
            at(".type"),
            format_args!("unsupported part type {other:?}"),
        )),
    }
}

/// Why a `file` part did not read: a field that is not a string, or not the one field of
/// `file_data` and `file_id`.
fn unreadable_file(p: &Value, at: &str) -> GatewayError {
    let field = |name: &str| p.pointer(&format!("/file/{name}")).filter(|v| !v.is_null());
    if field("filename").is_some_and(|v| !v.is_string()) {
        return GatewayError::invalid_at(format!("{at}.filename"), "expected a string");
    }
    match (field("file_data"), field("file_id")) {
        (Some(_), Some(_)) => GatewayError::invalid_at(at, ONE_OF_THEM),
        (Some(_), None) => GatewayError::invalid_at(format!("{at}.file_data"), "expected a string"),
        (None, Some(_)) => GatewayError::invalid_at(format!("{at}.file_id"), "expected a string"),
        (None, None) => GatewayError::invalid_at(at, NEEDS_ONE),
    }
}

const ONE_OF_THEM: &str = "give one of `file_data` and `file_id`, not both";
const NEEDS_ONE: &str = "a file part needs `file.file_data` or `file.file_id`";

/// A `file` part: `file.file_data` (a `data:<type>;base64,<data>` URL) or `file.file_id`, with
/// an optional `file.filename`.
fn file_part(f: oa::FileRef<'static>, i: usize, j: usize) -> Result<ContentPart, GatewayError> {
    let at = |field: &str| format!("messages[{i}].content[{j}].file{field}");
    let file = match (f.file_data, f.file_id) {
        (Some(url), None) => {
            let url = url_text(&url);
            let (media_type, data) = split_data_url(&url).ok_or_else(|| {
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
        (None, Some(id)) => FileSource::Id {
            id: id.into_owned(),
        },
        (Some(_), Some(_)) => return Err(GatewayError::invalid_at(at(""), ONE_OF_THEM)),
        (None, None) => return Err(GatewayError::invalid_at(at(""), NEEDS_ONE)),
    };
    Ok(ContentPart::File {
        file,
        filename: f.filename.map(Cow::into_owned),
    })
}

/// The media type and base64 data of a `data:<type>;base64,<data>` URL.
fn split_data_url(url: &str) -> Option<(&str, &str)> {
    url.strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
}

/// An image part from an OpenAI image URL: a `data:<type>;base64,<data>` URL is inline data,
/// anything else a URL the serving link fetches.
pub(crate) fn image_part(url: &str, detail: Option<String>) -> ContentPart {
    let image = match split_data_url(url) {
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

pub(crate) use out::{ChunkWriter, completion, delta};

#[cfg(test)]
mod tests {
    use ripcord_core::{ChatResponse, FinishReason, Usage};
    use ripcord_providers::openai_chat_wire::Delta;

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

    /// Parses a chat body as the door does and translates it.
    fn translate(body: Value) -> Result<ChatRequest, GatewayError> {
        let bytes = body.to_string();
        into_chat_request(super::super::reply::parse_body::<WireRequest>(
            bytes.as_bytes(),
        )?)
    }

    /// The errors the gateway gave when it read requests into types of its own (serde's, with
    /// the path, for what the shared types now read leniently), word for word.
    #[test]
    fn malformed_requests_get_the_errors_they_always_got() {
        let user = |content: Value| json!({"messages": [{"role": "user", "content": content}]});
        let call = |c: Value| json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [c]}]});
        let part = |p: Value| user(json!([p]));
        let file = |f: Value| part(json!({"type": "file", "file": f}));
        let cases = [
            (
                call(json!({"function": {"name": "f"}})),
                "messages[0].tool_calls[0]: missing field `id`",
            ),
            (
                call(json!({"id": "c", "function": {"arguments": "{}"}})),
                "messages[0].tool_calls[0].function: missing field `name`",
            ),
            (
                call(json!({"id": "c", "function": {"name": "f", "arguments": {"a": 1}}})),
                "messages[0].tool_calls[0].function.arguments: invalid type: map, expected a string",
            ),
            (
                call(json!({"id": 1})),
                "messages[0].tool_calls[0].id: invalid type: integer `1`, expected a string",
            ),
            (
                json!({"messages": [{"role": "assistant", "function_call": {"arguments": "{}"}}]}),
                "messages[0].function_call: missing field `name`",
            ),
            (
                json!({"messages": [{"content": "x"}]}),
                "messages[0]: missing field `role`",
            ),
            (
                json!({"messages": [{"role": "robot", "content": "x"}]}),
                "messages[0].role: unknown role \"robot\"",
            ),
            (
                user(json!(42)),
                "messages[0].content: expected a string or an array of parts",
            ),
            (
                user(json!({"type": "text"})),
                "messages[0].content: expected a string or an array of parts",
            ),
            (
                part(json!({"type": "text"})),
                "messages[0].content[0].text: a text part needs `text`",
            ),
            (
                part(json!({"type": "text", "text": 5})),
                "messages[0].content[0].text: a text part needs `text`",
            ),
            (
                part(json!({"type": "image_url", "image_url": {"detail": "low"}})),
                "messages[0].content[0].image_url.url: an image part needs `image_url.url`",
            ),
            (
                part(json!({"type": "input_audio", "input_audio": {"format": "wav"}})),
                "messages[0].content[0].input_audio.data: an input_audio part needs `input_audio.data` and `input_audio.format` strings",
            ),
            (
                part(json!({"type": "input_audio", "input_audio": {"data": "AA=="}})),
                "messages[0].content[0].input_audio.format: an input_audio part needs `input_audio.data` and `input_audio.format` strings",
            ),
            (
                part(json!({"type": "video"})),
                "messages[0].content[0].type: unsupported part type \"video\"",
            ),
            (
                part(json!("plain")),
                "messages[0].content[0].type: unsupported part type \"\"",
            ),
            (
                file(json!({"file_data": "data:a/b;base64,AA==", "filename": 5})),
                "messages[0].content[0].file.filename: expected a string",
            ),
            (
                file(json!({"file_data": 5})),
                "messages[0].content[0].file.file_data: expected a string",
            ),
            (
                file(json!({"file_id": 5})),
                "messages[0].content[0].file.file_id: expected a string",
            ),
            (
                file(json!({"file_data": 5, "file_id": "f"})),
                "messages[0].content[0].file: give one of `file_data` and `file_id`, not both",
            ),
            (
                file(json!({"file_data": "data:a/b;base64,AA==", "file_id": "f"})),
                "messages[0].content[0].file: give one of `file_data` and `file_id`, not both",
            ),
            (
                file(json!({"filename": "a"})),
                "messages[0].content[0].file: a file part needs `file.file_data` or `file.file_id`",
            ),
            (
                file(json!(7)),
                "messages[0].content[0].file: a file part needs `file.file_data` or `file.file_id`",
            ),
            (
                file(json!({"file_data": "not a data url"})),
                "messages[0].content[0].file.file_data: expected a `data:<media type>;base64,<data>` URL",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "stop": ["a", 1]}),
                "stop: expected a string or an array of strings",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": 5}),
                "tool_choice: expected a string or {\"type\":\"function\",\"function\":{\"name\":...}}",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": "maybe"}),
                "tool_choice: unknown value \"maybe\"",
            ),
        ];
        for (body, want) in cases {
            let e = translate(body.clone()).unwrap_err();
            assert_eq!(e.message(), want, "{body}");
        }
        // Read as before: an image's unreadable `detail` is dropped, a named tool choice's
        // `type` is not looked at, `null` is absent everywhere.
        let req = translate(part(json!({"type": "image_url", "image_url": {"url": "https://x.invalid/a.png", "detail": 5}}))).unwrap();
        assert!(matches!(
            &req.messages[0].content[0],
            ContentPart::Image { detail: None, .. }
        ));
        let req = translate(json!({"messages": [{"role": "user", "content": "x"}],
            "tool_choice": {"type": 5, "function": {"name": "f"}}, "tools": null, "stop": null,
            "stream": null, "n": null, "logit_bias": null}))
        .unwrap();
        assert_eq!(req.tool_choice, Some(ToolChoice::Tool { name: "f".into() }));
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
                delta::opening(),
                None,
                json!({"role": "assistant", "content": ""}),
            ),
            (
                delta::text("Rayleigh"),
                None,
                json!({"content": "Rayleigh"}),
            ),
            (
                delta::tool_call(1, Some("call_1"), Some("lookup"), "{\"q\""),
                None,
                json!({"tool_calls": [{"index": 1, "id": "call_1", "type": "function",
                    "function": {"name": "lookup", "arguments": "{\"q\""}}]}),
            ),
            (
                delta::tool_call(1, None, None, ":1}"),
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
