//! [`ChatRequest`] → the body of `POST /v1/responses`, through the shared wire types.
//!
//! - Leading system messages become `instructions` (joined with a blank line); a system message
//!   later in the conversation stays where it is, as a `system` message item.
//! - User and assistant text becomes message items (a plain string when the message is text
//!   only); images become `input_image` parts (`detail: auto` unless given — the API requires
//!   one).
//! - An assistant turn's tool calls become `function_call` items after its text; a tool result
//!   becomes a `function_call_output` item.
//! - Tools are function tools with `strict: false`: the Responses API makes an unmarked function
//!   strict, and ripcord's tools are plain JSON Schemas written for Chat Completions.
//! - `response_format` becomes `text.format`; `max_tokens` becomes `max_output_tokens`.
//! - `store: false` always: ripcord keeps no state at the vendor, and every call carries the
//!   whole conversation.
//! - `stop` and `seed` do not exist on the Responses API and are not sent.

use ripcord_core::{
    ChatRequest, ContentPart, Error, ErrorKind, FileSource, ImageSource, Message, ResponseFormat,
    Result, Role, ToolChoice,
};

use crate::openai::responses_wire as wire;

/// Serialises the Responses body for `model`.
pub(crate) fn body(model: &str, req: &ChatRequest, stream: bool) -> Result<Vec<u8>> {
    req.refuse_vendor_tools("a Responses-API link")?;
    if req.messages.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            "the request has no messages",
        ));
    }
    let lead = req
        .messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .count();
    let instructions = (lead > 0).then(|| {
        req.messages[..lead]
            .iter()
            .map(Message::text)
            .collect::<Vec<_>>()
            .join("\n\n")
    });
    let mut items = Vec::with_capacity(req.messages.len() - lead + 2);
    for (i, m) in req.messages.iter().enumerate().skip(lead) {
        push_message(&mut items, i, m)?;
    }
    let body = wire::CreateResponse {
        model: Some(model.to_owned()),
        input: Some(wire::Input::Items(items)),
        instructions,
        tools: req.tools.iter().map(tool).collect(),
        tool_choice: req.tool_choice.as_ref().and_then(tool_choice),
        text: text_format(&req.response_format).map(|format| wire::TextConfig {
            format: Some(format),
            verbosity: None,
        }),
        max_output_tokens: req.max_tokens.map(u64::from),
        temperature: req.temperature.map(decimal),
        top_p: req.top_p.map(decimal),
        user: req.user.clone(),
        store: Some(false),
        stream: stream.then_some(true),
        ..wire::CreateResponse::default()
    };
    serde_json::to_vec(&body).map_err(|e| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("cannot serialise the responses request: {e}"),
        )
        .with_source(e)
    })
}

/// An `f32` as the `f64` with the same shortest decimal form (`0.2f32` is `0.2`, not
/// `0.20000000298023224`).
fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

fn push_message(items: &mut Vec<wire::InputItem>, i: usize, m: &Message) -> Result<()> {
    match m.role {
        Role::Tool => {
            let Some(call_id) = m.tool_call_id.clone() else {
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    format!("messages[{i}]: a tool result without tool_call_id"),
                ));
            };
            items.push(wire::InputItem::FunctionCallOutput(
                wire::FunctionCallOutput {
                    call_id,
                    output: wire::FunctionOutput::Text(m.text()),
                    id: None,
                    status: None,
                },
            ));
        }
        role => {
            let role = match role {
                Role::System => wire::Role::System,
                Role::Assistant => wire::Role::Assistant,
                _ => wire::Role::User,
            };
            let has_text = m
                .content
                .iter()
                .any(|p| matches!(p, ContentPart::Text { text } if !text.is_empty()));
            if has_text || m.has_non_text() || m.tool_calls.is_empty() {
                items.push(wire::InputItem::Message(wire::InputMessage {
                    role,
                    content: content(i, m)?,
                    id: None,
                    status: None,
                    phase: None,
                }));
            }
            for c in &m.tool_calls {
                items.push(wire::InputItem::FunctionCall(wire::FunctionCall {
                    call_id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: if c.arguments.is_empty() {
                        "{}".to_owned()
                    } else {
                        c.arguments.clone()
                    },
                    id: None,
                    status: None,
                }));
            }
        }
    }
    Ok(())
}

/// Text only: one string. With images or files: `input_text`, `input_image` and `input_file`
/// parts in order; audio is refused (the Responses API takes none as input).
fn content(i: usize, m: &Message) -> Result<wire::MessageContent> {
    if !m.has_non_text() {
        return Ok(wire::MessageContent::Text(m.text()));
    }
    let refuse = |j: usize, what: &str| {
        Err(Error::new(
            ErrorKind::InvalidRequest,
            format!("messages[{i}].content[{j}]: {what}"),
        ))
    };
    for (j, p) in m.content.iter().enumerate() {
        match p {
            ContentPart::Text { .. } | ContentPart::Image { .. } | ContentPart::File { .. } => {}
            ContentPart::Audio { .. } => {
                return refuse(
                    j,
                    "an input_audio part: the Responses API takes no audio input",
                );
            }
            _ => return refuse(j, "a content part the Responses API cannot take"),
        }
    }
    let parts = m
        .content
        .iter()
        .filter_map(|p| match p {
            ContentPart::File { file, filename } => {
                let (file_data, file_id) = match file {
                    FileSource::Base64 { media_type, data } => {
                        (Some(format!("data:{media_type};base64,{data}")), None)
                    }
                    FileSource::Id { id } => (None, Some(id.clone())),
                    _ => (None, None),
                };
                Some(wire::ContentPart::InputFile(wire::InputFile {
                    file_id,
                    file_data,
                    file_url: None,
                    filename: filename.clone(),
                }))
            }
            ContentPart::Text { text } => Some(wire::ContentPart::input_text(text.clone())),
            ContentPart::Image { image, detail } => {
                let url = match image {
                    ImageSource::Url { url } => url.clone(),
                    ImageSource::Base64 { media_type, data } => {
                        format!("data:{media_type};base64,{data}")
                    }
                    _ => return None,
                };
                Some(wire::ContentPart::InputImage(wire::InputImage {
                    image_url: Some(url),
                    file_id: None,
                    detail: Some(detail.clone().unwrap_or_else(|| "auto".to_owned())),
                }))
            }
            _ => None,
        })
        .collect();
    Ok(wire::MessageContent::Parts(parts))
}

fn tool(t: &ripcord_core::ToolSpec) -> wire::Tool {
    wire::Tool::Function(wire::FunctionTool {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: Some(t.parameters.clone()),
        strict: Some(false),
    })
}

fn tool_choice(c: &ToolChoice) -> Option<wire::ToolChoice> {
    Some(match c {
        ToolChoice::Auto => wire::ToolChoice::Mode(wire::ToolChoiceMode::Auto),
        ToolChoice::None => wire::ToolChoice::Mode(wire::ToolChoiceMode::None),
        ToolChoice::Required => wire::ToolChoice::Mode(wire::ToolChoiceMode::Required),
        ToolChoice::Tool { name } => {
            wire::ToolChoice::Function(wire::FunctionChoice { name: name.clone() })
        }
        _ => return None,
    })
}

fn text_format(f: &ResponseFormat) -> Option<wire::TextFormat> {
    match f {
        ResponseFormat::Text => None,
        ResponseFormat::Json => Some(wire::TextFormat::JsonObject),
        ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
        } => Some(wire::TextFormat::JsonSchema(wire::JsonSchemaFormat {
            name: name.clone(),
            schema: schema.clone(),
            description: None,
            strict: Some(*strict),
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use ripcord_core::ToolCall;
    use serde_json::{Value, json};

    use super::*;
    use crate::test_support::requests::{force_weather, user_with_image, weather_tool};

    fn v(req: &ChatRequest, stream: bool) -> Value {
        serde_json::from_slice(&body("gpt-5", req, stream).unwrap()).unwrap()
    }

    #[test]
    fn a_whole_conversation_maps_to_items() {
        let mut req = ChatRequest::new(vec![
            Message::system("Be brief."),
            Message::system("Answer in English."),
            user_with_image("What is this?", "image/png", "iVBORw0KGgo="),
            Message::assistant("A cat."),
            Message::assistant_tool_calls(vec![
                ToolCall::new("call_1", "weather", r#"{"city":"Oslo"}"#),
                ToolCall::new("call_2", "time", ""),
            ]),
            Message::tool_result("call_1", "sunny"),
            Message::tool_result("call_2", "noon"),
            Message::system("Now be polite."),
            Message::user("Thanks"),
        ])
        .with_tool(weather_tool(
            "Weather for a city",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        ))
        .with_tool_choice(force_weather())
        .with_response_format(ResponseFormat::JsonSchema {
            name: "answer".into(),
            schema: json!({"type": "object"}),
            strict: true,
        })
        .with_max_tokens(300)
        .with_temperature(0.2)
        .with_stop("END")
        .with_seed(3);
        req.top_p = Some(0.9);
        req.user = Some("u-1".into());
        assert_eq!(
            v(&req, true),
            json!({
                "model": "gpt-5",
                "instructions": "Be brief.\n\nAnswer in English.",
                "input": [
                    {"type": "message", "role": "user", "content": [
                        {"type": "input_text", "text": "What is this?"},
                        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}
                    ]},
                    {"type": "message", "role": "assistant", "content": "A cat."},
                    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
                    {"type": "function_call", "call_id": "call_2", "name": "time", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
                    {"type": "function_call_output", "call_id": "call_2", "output": "noon"},
                    {"type": "message", "role": "system", "content": "Now be polite."},
                    {"type": "message", "role": "user", "content": "Thanks"}
                ],
                "tools": [{"type": "function", "name": "weather", "description": "Weather for a city",
                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                           "strict": false}],
                "tool_choice": {"type": "function", "name": "weather"},
                "text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": true}},
                "max_output_tokens": 300,
                "temperature": 0.2,
                "top_p": 0.9,
                "user": "u-1",
                "store": false,
                "stream": true
            })
        );
    }

    #[test]
    fn plain_requests_are_minimal() {
        let b = v(
            &ChatRequest::user("hi")
                .with_response_format(ResponseFormat::Json)
                .with_tool_choice(ToolChoice::Required),
            false,
        );
        assert_eq!(
            b,
            json!({"model": "gpt-5", "input": [{"type": "message", "role": "user", "content": "hi"}],
                   "tool_choice": "required", "text": {"format": {"type": "json_object"}}, "store": false})
        );
    }

    #[test]
    fn bad_requests_name_what_is_wrong() {
        let e = body("m", &ChatRequest::default(), false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        let mut orphan = Message::tool_result("x", "y");
        orphan.tool_call_id = None;
        let e = body(
            "m",
            &ChatRequest::new(vec![Message::user("a"), orphan]),
            false,
        )
        .unwrap_err();
        assert!(e.message().contains("messages[1]"), "{e}");
    }
}
