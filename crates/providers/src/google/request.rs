//! The `generateContent` request body, borrowed from the [`ChatRequest`].
//!
//! Gemini's format (<https://ai.google.dev/api/generate-content#request-body>) differs from the
//! neutral request in ways callers must never see:
//!
//! - system messages become `systemInstruction` (one text part each, in order);
//! - roles are `user` and `model`; consecutive messages of one role are merged into one
//!   `contents` entry, and tool results travel as `functionResponse` parts of a `user` turn;
//! - a tool result names the *function*, not a call id, so the name is looked up from the
//!   assistant turn that made the call (the nearest earlier one with that id);
//! - tool-call arguments are a JSON *object* (`args`), embedded as raw JSON, never re-parsed;
//!   a tool result's text becomes the `response` object (itself when it is a JSON object,
//!   else `{"output": …}`, as Google's function-calling guide shows);
//! - images are `inlineData` (base64, or a `data:` URL decoded into one) or `fileData` (a
//!   `gs://` or `https://` URI whose image type is known from its extension);
//! - `tool_choice` becomes `toolConfig.functionCallingConfig` (`AUTO`, `NONE`, `ANY`, `ANY` with
//!   `allowedFunctionNames` for one named tool);
//! - JSON mode is `responseMimeType: application/json`, a JSON schema also
//!   `responseJsonSchema` (the JSON-Schema field, not the OpenAPI-subset `responseSchema`);
//! - the provider's [`Thinking`] settings become `generationConfig.thinkingConfig` (the neutral
//!   request has no reasoning settings of its own);
//! - `seed` is a 32-bit integer on Gemini: a larger seed is folded into 31 bits (the same seed
//!   always folds to the same value, so reproducibility holds); `user` has no Gemini field.
//!
//! Gemini 2.5 and 3 attach a `thoughtSignature` to function-call parts and want it back with
//! the call in the next turn. ripcord's tool call has no field for it, so it travels inside the
//! call id: `{id}` [`THOUGHT_SEPARATOR`] `{signature}`. Clients echo tool-call ids verbatim, so
//! the signature comes back and is split off here.

use std::borrow::Cow;

use ripcord_core::{
    ChatRequest, ContentPart, Error, ErrorKind, ImageSource, Message, ResponseFormat, Result, Role,
    ToolChoice,
};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::turns::TurnWire;

/// Separates a call id from the thought signature carried in it.
pub const THOUGHT_SEPARATOR: &str = "__thought__";

/// The prefix of call ids ripcord made up for calls Gemini sent without one. Such ids are not
/// sent back to Gemini (it never issued them).
pub(crate) const SYNTHETIC_ID: &str = "gemini_call_";

/// Gemini's thinking settings (`generationConfig.thinkingConfig`).
///
/// # Examples
///
/// ```
/// use ripcord_providers::google::Thinking;
/// let t = Thinking::budget(1024).with_thoughts();
/// assert_eq!(t.budget, Some(1024));
/// assert!(t.include_thoughts);
/// let off = Thinking::budget(0);
/// assert_eq!(off.budget, Some(0));
/// assert_eq!(Thinking::level("high").level.as_deref(), Some("high"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Thinking {
    /// `thinkingBudget`: thinking tokens (0 turns thinking off where the model allows it, -1
    /// lets the model decide).
    pub budget: Option<i32>,
    /// `includeThoughts`: ask for thought summaries (they are kept apart from the answer).
    pub include_thoughts: bool,
    /// `thinkingLevel` (Gemini 3: `low`, `high`).
    pub level: Option<String>,
}

impl Thinking {
    /// A thinking budget in tokens.
    pub fn budget(tokens: i32) -> Self {
        Thinking {
            budget: Some(tokens),
            ..Thinking::default()
        }
    }

    /// A thinking level (Gemini 3).
    pub fn level(level: impl Into<String>) -> Self {
        Thinking {
            level: Some(level.into()),
            ..Thinking::default()
        }
    }

    ripcord_core::setters! {
        /// Also asks for thought summaries.
        with_thoughts() => include_thoughts = true;
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerateBody<'a> {
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "GenerationConfig::is_empty")]
    generation_config: GenerationConfig<'a>,
}

#[derive(Serialize)]
struct SystemInstruction<'a> {
    parts: Vec<TextPart<'a>>,
}

#[derive(Serialize)]
struct TextPart<'a> {
    text: &'a str,
}

#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: Vec<Part<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Part<'a> {
    Text {
        text: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    InlineData {
        inline_data: Blob<'a>,
    },
    #[serde(rename_all = "camelCase")]
    FileData {
        file_data: FileData<'a>,
    },
    #[serde(rename_all = "camelCase")]
    FunctionCall {
        function_call: FunctionCall<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        thought_signature: Option<&'a str>,
    },
    #[serde(rename_all = "camelCase")]
    FunctionResponse {
        function_response: FunctionResponse<'a>,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Blob<'a> {
    mime_type: Cow<'a, str>,
    data: Cow<'a, str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FileData<'a> {
    mime_type: &'static str,
    file_uri: &'a str,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
    args: &'a RawValue,
}

#[derive(Serialize)]
struct FunctionResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
    response: serde_json::Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tool<'a> {
    function_declarations: Vec<FunctionDeclaration<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionDeclaration<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters_json_schema: &'a serde_json::Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    function_calling_config: FunctionCallingConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCallingConfig<'a> {
    mode: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allowed_function_names: Vec<&'a str>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_json_schema: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig<'a>>,
}

impl GenerationConfig<'_> {
    fn is_empty(&self) -> bool {
        self.temperature.is_none()
            && self.top_p.is_none()
            && self.max_output_tokens.is_none()
            && self.stop_sequences.is_empty()
            && self.seed.is_none()
            && self.response_mime_type.is_none()
            && self.thinking_config.is_none()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_budget: Option<i32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    include_thoughts: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_level: Option<&'a str>,
}

/// Splits a ripcord call id into Gemini's id (`None` for an id ripcord made up) and the thought
/// signature carried in it.
pub(crate) fn split_call_id(id: &str) -> (Option<&str>, Option<&str>) {
    let (base, sig) = match id.split_once(THOUGHT_SEPARATOR) {
        Some((b, s)) => (b, Some(s).filter(|s| !s.is_empty())),
        None => (id, None),
    };
    let base = (!base.is_empty() && !base.starts_with(SYNTHETIC_ID)).then_some(base);
    (base, sig)
}

/// Joins Gemini's call id (or a made-up one) and a thought signature into a ripcord call id.
pub(crate) fn join_call_id(id: Option<&str>, n: u32, signature: Option<&str>) -> String {
    let base = match id {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => format!("{SYNTHETIC_ID}{n}"),
    };
    match signature {
        Some(s) if !s.is_empty() => format!("{base}{THOUGHT_SEPARATOR}{s}"),
        _ => base,
    }
}

/// The Gemini wire's turns and refusals.
const WIRE: TurnWire = TurnWire {
    name: "Gemini",
    assistant: "model",
    invalid: |m| Error::new(ErrorKind::InvalidRequest, m),
};

/// The image type a URI's extension names, for `fileData`.
fn mime_of_uri(uri: &str) -> Option<&'static str> {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        "heif" => "image/heif",
        _ => return None,
    })
}

fn image_part<'a>(i: usize, image: &'a ImageSource) -> Result<Part<'a>> {
    match image {
        ImageSource::Base64 { media_type, data } => Ok(Part::InlineData {
            inline_data: Blob {
                mime_type: Cow::Borrowed(media_type),
                data: Cow::Borrowed(data),
            },
        }),
        ImageSource::Url { url } if url.starts_with("data:") => {
            // data:<type>;base64,<data>
            let (head, data) = url["data:".len()..].split_once(',').ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidRequest,
                    format!("message {i}: a data: image URL without a comma"),
                )
            })?;
            let Some(mime) = head.strip_suffix(";base64") else {
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    format!("message {i}: a data: image URL must be base64 (`;base64,`)"),
                ));
            };
            Ok(Part::InlineData {
                inline_data: Blob {
                    mime_type: Cow::Borrowed(mime),
                    data: Cow::Borrowed(data),
                },
            })
        }
        ImageSource::Url { url } => match mime_of_uri(url) {
            Some(mime_type) => Ok(Part::FileData {
                file_data: FileData {
                    mime_type,
                    file_uri: url,
                },
            }),
            None => Err(Error::new(
                ErrorKind::InvalidRequest,
                format!(
                    "message {i}: Gemini needs an image inline (base64) or as a URI whose type its \
                     extension names (.png, .jpg, .webp, .gif, .heic); got {url:?}"
                ),
            )),
        },
        _ => Err(Error::new(
            ErrorKind::InvalidRequest,
            format!("message {i}: an image source Gemini cannot take"),
        )),
    }
}

/// The function name of the call `id` answers: the nearest earlier assistant call with it.
fn called_name<'a>(messages: &'a [Message], before: usize, id: &str) -> Option<&'a str> {
    messages[..before]
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls.iter().rev())
        .find(|c| c.id == id)
        .map(|c| c.name.as_str())
}

/// A tool result's text as Gemini's `response` object.
fn response_object(text: &str) -> serde_json::Value {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(other) => serde_json::json!({ "output": other }),
        Err(_) => serde_json::json!({ "output": text }),
    }
}

fn parts<'a>(req: &'a ChatRequest, i: usize, m: &'a Message) -> Result<Vec<Part<'a>>> {
    if m.role == Role::Tool {
        let id = WIRE.tool_result_id(i, m)?;
        let name = called_name(&req.messages, i, id)
            .or(m.name.as_deref())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidRequest,
                    format!(
                        "message {i}: the tool result for call {id:?} answers no earlier tool \
                         call, and Gemini needs the function's name"
                    ),
                )
            })?;
        return Ok(vec![Part::FunctionResponse {
            function_response: FunctionResponse {
                id: split_call_id(id).0,
                name,
                response: response_object(&m.text()),
            },
        }]);
    }
    let mut out = Vec::with_capacity(m.content.len() + m.tool_calls.len());
    for part in &m.content {
        match part {
            ContentPart::Text { text } if text.is_empty() => {}
            ContentPart::Text { text } => out.push(Part::Text { text }),
            ContentPart::Image { image, .. } => out.push(image_part(i, image)?),
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    format!("message {i}: a content part Gemini cannot take"),
                ));
            }
        }
    }
    for call in &m.tool_calls {
        let (id, thought_signature) = split_call_id(&call.id);
        out.push(Part::FunctionCall {
            function_call: FunctionCall {
                id,
                name: &call.name,
                args: WIRE.object_arguments(
                    &call.arguments,
                    format_args!("message {i}: tool call {:?}", call.name),
                )?,
            },
            thought_signature,
        });
    }
    Ok(out)
}

/// Serialises the `generateContent` body (the streaming call takes the same body).
pub(crate) fn generate_body(req: &ChatRequest, thinking: Option<&Thinking>) -> Result<Vec<u8>> {
    req.refuse_vendor_tools("a Gemini link")?;
    let mut system_text = Vec::new();
    let contents: Vec<Content<'_>> = WIRE
        .turns(req, Some(&mut system_text), |i, m| parts(req, i, m))?
        .into_iter()
        .map(|t| Content {
            role: t.role,
            parts: t.parts,
        })
        .collect();
    let system: Vec<TextPart<'_>> = system_text
        .into_iter()
        .map(|text| TextPart { text })
        .collect();

    let tools = if req.tools.is_empty() {
        Vec::new()
    } else {
        vec![Tool {
            function_declarations: req
                .tools
                .iter()
                .map(|t| FunctionDeclaration {
                    name: &t.name,
                    description: t.description.as_deref(),
                    parameters_json_schema: &t.parameters,
                })
                .collect(),
        }]
    };
    let tool_config = match &req.tool_choice {
        None => None,
        Some(choice) => {
            let (mode, allowed) = match choice {
                ToolChoice::Auto => ("AUTO", Vec::new()),
                ToolChoice::None => ("NONE", Vec::new()),
                ToolChoice::Required => ("ANY", Vec::new()),
                ToolChoice::Tool { name } => ("ANY", vec![name.as_str()]),
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidRequest,
                        "a tool_choice Gemini cannot express",
                    ));
                }
            };
            Some(ToolConfig {
                function_calling_config: FunctionCallingConfig {
                    mode,
                    allowed_function_names: allowed,
                },
            })
        }
    };
    let (response_mime_type, response_json_schema) = match &req.response_format {
        ResponseFormat::Json => (Some("application/json"), None),
        ResponseFormat::JsonSchema { schema, .. } => (Some("application/json"), Some(schema)),
        _ => (None, None),
    };
    let generation_config = GenerationConfig {
        temperature: req.temperature,
        top_p: req.top_p,
        max_output_tokens: req.max_tokens,
        stop_sequences: &req.stop,
        // Gemini's seed is an int32: fold larger seeds into 31 bits, deterministically.
        seed: req.seed.map(|s| (s & 0x7fff_ffff) as i32),
        response_mime_type,
        response_json_schema,
        thinking_config: thinking.map(|t| ThinkingConfig {
            thinking_budget: t.budget,
            include_thoughts: t.include_thoughts,
            thinking_level: t.level.as_deref(),
        }),
    };
    let body = GenerateBody {
        contents,
        system_instruction: (!system.is_empty()).then_some(SystemInstruction { parts: system }),
        tools,
        tool_config,
        generation_config,
    };
    serde_json::to_vec(&body).map_err(|e| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("cannot serialise the Gemini request: {e}"),
        )
        .with_source(e)
    })
}

#[cfg(test)]
mod tests {
    use ripcord_core::{ImageSource, Message, ToolCall};
    use serde_json::{Value, json};

    use super::*;
    use crate::test_support::requests::{force_weather, user_with_image, weather_tool};

    fn body(req: &ChatRequest, thinking: Option<&Thinking>) -> Value {
        serde_json::from_slice(&generate_body(req, thinking).unwrap()).unwrap()
    }

    #[test]
    fn representative_request_json() {
        let sig_id = format!("call_7{THOUGHT_SEPARATOR}c2lnbmF0dXJl");
        let req = ChatRequest::new(vec![
            Message::system("Be brief."),
            user_with_image("Look:", "image/png", "iVBORw0K"),
            Message::user("Weather in Paris and Oslo?"),
            Message::assistant_tool_calls(vec![
                ToolCall::new(sig_id.clone(), "weather", r#"{"city":"Paris"}"#),
                ToolCall::new("gemini_call_1", "weather", r#"{"city":"Oslo"}"#),
            ]),
            Message::tool_result(sig_id, "18C"),
            Message::tool_result("gemini_call_1", r#"{"temp":"9C"}"#),
            Message::system("Use Celsius."),
            Message::assistant("Paris 18C, Oslo 9C."),
        ])
        .with_tool(weather_tool(
            "Current weather",
            json!({"type":"object","properties":{"city":{"type":"string"}}}),
        ))
        .with_tool_choice(force_weather())
        .with_temperature(0.5)
        .with_max_tokens(300)
        .with_stop("END")
        .with_seed(u64::MAX);
        let v = body(&req, Some(&Thinking::budget(512).with_thoughts()));
        assert_eq!(
            v,
            json!({
                "contents": [
                    {"role": "user", "parts": [
                        {"text": "Look:"},
                        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}},
                        {"text": "Weather in Paris and Oslo?"}
                    ]},
                    {"role": "model", "parts": [
                        {"functionCall": {"id": "call_7", "name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnbmF0dXJl"},
                        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}
                    ]},
                    {"role": "user", "parts": [
                        {"functionResponse": {"id": "call_7", "name": "weather", "response": {"output": "18C"}}},
                        {"functionResponse": {"name": "weather", "response": {"temp": "9C"}}}
                    ]},
                    {"role": "model", "parts": [{"text": "Paris 18C, Oslo 9C."}]}
                ],
                "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use Celsius."}]},
                "tools": [{"functionDeclarations": [{
                    "name": "weather", "description": "Current weather",
                    "parametersJsonSchema": {"type":"object","properties":{"city":{"type":"string"}}}
                }]}],
                "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}},
                "generationConfig": {
                    "temperature": 0.5, "maxOutputTokens": 300, "stopSequences": ["END"],
                    "seed": 2147483647,
                    "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": true}
                }
            })
        );
    }

    #[test]
    fn json_modes_and_tool_choices() {
        let schema = json!({"type":"object","properties":{"n":{"type":"integer"}}});
        let v = body(
            &ChatRequest::user("n?").with_response_format(ResponseFormat::JsonSchema {
                name: "n".into(),
                schema: schema.clone(),
                strict: true,
            }),
            None,
        );
        assert_eq!(
            v["generationConfig"]["responseMimeType"],
            "application/json"
        );
        assert_eq!(v["generationConfig"]["responseJsonSchema"], schema);
        let v = body(
            &ChatRequest::user("x").with_response_format(ResponseFormat::Json),
            None,
        );
        assert_eq!(
            v["generationConfig"],
            json!({"responseMimeType": "application/json"})
        );
        for (choice, mode) in [
            (ToolChoice::Auto, "AUTO"),
            (ToolChoice::None, "NONE"),
            (ToolChoice::Required, "ANY"),
        ] {
            let v = body(&ChatRequest::user("x").with_tool_choice(choice), None);
            assert_eq!(
                v["toolConfig"]["functionCallingConfig"],
                json!({"mode": mode})
            );
        }
        // A plain request has no generationConfig at all.
        let v = body(&ChatRequest::user("hi"), None);
        assert!(v.get("generationConfig").is_none(), "{v}");
        let v = body(&ChatRequest::user("hi"), Some(&Thinking::level("high")));
        assert_eq!(
            v["generationConfig"]["thinkingConfig"],
            json!({"thinkingLevel": "high"})
        );
    }

    #[test]
    fn images_by_uri_and_data_url() {
        let req = ChatRequest::new(vec![
            Message::user("a").with_image(ImageSource::Url {
                url: "gs://bucket/cat.JPG".into(),
            }),
            Message::user("b").with_image(ImageSource::Url {
                url: "data:image/webp;base64,UklGR".into(),
            }),
        ]);
        let v = body(&req, None);
        let parts = &v["contents"][0]["parts"];
        assert_eq!(
            parts[1],
            json!({"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://bucket/cat.JPG"}})
        );
        assert_eq!(
            parts[3],
            json!({"inlineData": {"mimeType": "image/webp", "data": "UklGR"}})
        );
        let e = generate_body(
            &ChatRequest::new(vec![Message::user("a").with_image(ImageSource::Url {
                url: "https://example.com/picture".into(),
            })]),
            None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        assert!(e.message().contains("message 0"), "{e}");
    }

    #[test]
    fn bad_input_is_refused_with_where() {
        let e = generate_body(
            &ChatRequest::new(vec![
                Message::user("q"),
                Message::tool_result("nobody", "x"),
            ]),
            None,
        )
        .unwrap_err();
        assert!(
            e.message().contains("message 1") && e.message().contains("nobody"),
            "{e}"
        );
        let e = generate_body(
            &ChatRequest::new(vec![Message::assistant_tool_calls(vec![ToolCall::new(
                "c", "f", "[1]",
            )])]),
            None,
        )
        .unwrap_err();
        assert!(e.message().contains("JSON object"), "{e}");
        let e = generate_body(&ChatRequest::new(vec![Message::system("only")]), None).unwrap_err();
        assert!(e.message().contains("no user or assistant"), "{e}");
    }

    #[test]
    fn call_ids_carry_thought_signatures() {
        assert_eq!(split_call_id("abc"), (Some("abc"), None));
        assert_eq!(split_call_id("gemini_call_3"), (None, None));
        let joined = join_call_id(None, 3, Some("SIG"));
        assert_eq!(joined, "gemini_call_3__thought__SIG");
        assert_eq!(split_call_id(&joined), (None, Some("SIG")));
        assert_eq!(join_call_id(Some("x"), 0, None), "x");
    }
}
