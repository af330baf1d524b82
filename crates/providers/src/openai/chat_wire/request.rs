//! The request body of `POST /v1/chat/completions` and its parts: messages, content parts,
//! tools, tool calls, tool choice, response format, stop sequences.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::de::{finite_f32, null_default};

/// The body of `POST /v1/chat/completions`
/// (<https://platform.openai.com/docs/api-reference/chat/create>).
///
/// Fields are written in this order and only when set, so a body built by the adapter is the
/// same bytes whatever the vendor. `null` counts as absent; fields this module does not list
/// are accepted and dropped.
///
/// # Examples
///
/// ```
/// use std::borrow::Cow;
/// use ripcord_providers::openai_chat_wire::{ChatCompletionRequest, Message, MessageContent};
/// let req: ChatCompletionRequest<'static> = serde_json::from_str(
///     r#"{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"tools":null,"n":null}"#,
/// )?;
/// assert_eq!(req.model.as_deref(), Some("gpt-4o"));
/// assert!(req.tools.is_empty() && req.n.is_none());
///
/// let text = String::from("Hi");
/// let out = ChatCompletionRequest {
///     model: Some(Cow::Borrowed("gpt-4o")),
///     messages: vec![Message {
///         role: Some(Cow::Borrowed("user")),
///         content: Some(MessageContent::Text(Cow::Borrowed(&text))),
///         ..Default::default()
///     }],
///     ..Default::default()
/// };
/// assert_eq!(
///     serde_json::to_string(&out)?,
///     r#"{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}]}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatCompletionRequest<'a> {
    /// The model (the gateway's route name on the way in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Cow<'a, str>>,
    /// The conversation; required.
    pub messages: Vec<Message<'a>>,
    /// Function tools.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tools: Vec<Tool<'a>>,
    /// How the model picks tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice<'a>>,
    /// Plain text, any JSON object, or JSON that follows a schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat<'a>>,
    /// Sampling temperature.
    #[serde(
        default,
        deserialize_with = "finite_f32",
        skip_serializing_if = "Option::is_none"
    )]
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    #[serde(
        default,
        deserialize_with = "finite_f32",
        skip_serializing_if = "Option::is_none"
    )]
    pub top_p: Option<f32>,
    /// The output cap under its older name (what most compatible servers read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The output cap, reasoning tokens included (OpenAI's current name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Up to four sequences that end the answer.
    #[serde(
        default,
        skip_serializing_if = "Stop::is_none_or_empty",
        deserialize_with = "Stop::deserialize_opt"
    )]
    pub stop: Option<Stop<'a>>,
    /// Best-effort deterministic sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Penalises tokens that appeared at all.
    #[serde(
        default,
        deserialize_with = "finite_f32",
        skip_serializing_if = "Option::is_none"
    )]
    pub presence_penalty: Option<f32>,
    /// Penalises tokens by how often they appeared.
    #[serde(
        default,
        deserialize_with = "finite_f32",
        skip_serializing_if = "Option::is_none"
    )]
    pub frequency_penalty: Option<f32>,
    /// Whether the model may call several tools at once (OpenAI refuses it without tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// `minimal`, `low`, `medium` or `high` (reasoning models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<Cow<'a, str>>,
    /// An end-user id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Cow<'a, str>>,
    /// Answer as a stream of `chat.completion.chunk` events.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub stream: bool,
    /// Streaming options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// vLLM: the final (assistant) message stays open and the model writes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_final_message: Option<bool>,
    /// vLLM: no new assistant turn after the final message (it cannot go with the above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_generation_prompt: Option<bool>,
    /// How many choices to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Return the log probabilities of the output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
    /// Return this many most likely tokens at each position (0–20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    /// Token id → bias (−100 to 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_bias: Option<Map<String, Value>>,
}

/// Streaming options.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with the usage and no choices.
    #[serde(default, deserialize_with = "null_default")]
    pub include_usage: bool,
}

/// One message of the conversation, and the assistant's message of a [`Choice`](super::Choice).
///
/// `content` is always written (`null` for an assistant turn that only called tools); the
/// other fields only when set.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Message<'a> {
    /// `system`, `developer`, `user`, `assistant`, `tool` or (deprecated) `function`;
    /// required in a request, sometimes missing from a vendor's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Cow<'a, str>>,
    /// A string or a list of parts.
    #[serde(default)]
    pub content: Option<MessageContent<'a>>,
    /// The reasoning of an assistant message (DeepSeek's field, which Qwen, vLLM and Ollama
    /// share). DeepSeek answers 400 when it comes back in a request's history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// The reasoning as OpenRouter (and newer vLLM) send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Cow<'a, str>>,
    /// A participant's name; a `function` message's function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Cow<'a, str>>,
    /// An assistant message's tool calls.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_calls: Vec<ToolCall<'a>>,
    /// The deprecated single function call of an assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall<'a>>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<Cow<'a, str>>,
    /// An answer's refusal, in place of its content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Cow<'a, str>>,
    /// DeepSeek: this final assistant message is the start of the answer to write on from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<bool>,
}

/// A message's `content`: a string, or a list of parts.
///
/// Read without buffering (an untagged enum would copy every string through an intermediate
/// tree, on every response and stream chunk); anything else is the error "expected a string
/// or an array of parts".
#[derive(Debug, Clone, PartialEq)]
pub enum MessageContent<'a> {
    /// Plain text.
    Text(Cow<'a, str>),
    /// Text, images, files, audio.
    Parts(Vec<ContentPart<'a>>),
}

impl MessageContent<'_> {
    /// The text: the string, or the text of every part that has some, joined.
    pub fn into_text(self) -> String {
        match self {
            MessageContent::Text(t) => t.into_owned(),
            MessageContent::Parts(parts) => parts.iter().filter_map(ContentPart::text).collect(),
        }
    }
}

impl Serialize for MessageContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MessageContent::Text(t) => s.serialize_str(t),
            MessageContent::Parts(parts) => {
                let mut seq = s.serialize_seq(Some(parts.len()))?;
                for p in parts {
                    seq.serialize_element(p)?;
                }
                seq.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for MessageContent<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        const WANT: &str = "expected a string or an array of parts";
        impl<'de, 'a> de::Visitor<'de> for V<'a> {
            type Value = MessageContent<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of parts")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(MessageContent::Text(Cow::Owned(s.to_owned())))
            }

            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(MessageContent::Text(Cow::Owned(s)))
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(p) = seq.next_element()? {
                    parts.push(p);
                }
                Ok(MessageContent::Parts(parts))
            }

            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Err(E::custom(WANT))
            }

            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Err(E::custom(WANT))
            }

            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Err(E::custom(WANT))
            }

            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Err(E::custom(WANT))
            }

            fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
                Err(de::Error::custom(WANT))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// One part of a message's content.
///
/// A part whose `type` is not one of these, or whose fields do not read as its type's, is
/// kept as [`ContentPart::Other`] (see the module's conventions). Not `#[non_exhaustive]`:
/// `Other` already takes what a newer vendor sends, and a part added here must make every
/// server that matches on parts decide what to do with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart<'a> {
    /// `{"type":"text","text":…}`.
    Text {
        /// The text.
        text: Cow<'a, str>,
    },
    /// `{"type":"image_url","image_url":{"url":…,"detail":…}}`.
    ImageUrl {
        /// The image.
        image_url: ImageUrl<'a>,
    },
    /// `{"type":"file","file":{…}}`: a document inline or by id.
    File {
        /// The file.
        #[serde(default, deserialize_with = "null_default")]
        file: FileRef<'a>,
    },
    /// `{"type":"input_audio","input_audio":{"data":…,"format":…}}`.
    InputAudio {
        /// The audio.
        input_audio: InputAudio<'a>,
    },
    /// Any other part, or a known one that does not read as its type, as sent.
    #[serde(untagged)]
    Other(Value),
}

impl ContentPart<'_> {
    /// The part's text: a text part's, or the `text` string of an unmodelled part (some
    /// compatible servers send `{"text": …}` without a type).
    pub fn text(&self) -> Option<&str> {
        match self {
            ContentPart::Text { text } => Some(text),
            ContentPart::Other(v) => v.get("text").and_then(Value::as_str),
            _ => None,
        }
    }
}

/// An image part's `image_url`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl<'a> {
    /// An `https:` URL or a `data:<type>;base64,<data>` URL.
    pub url: Url<'a>,
    /// `auto`, `low` or `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Cow<'a, str>>,
}

/// A file part's `file`: `file_data` (a `data:` URL) or `file_id`, and a name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FileRef<'a> {
    /// The file inline, as a `data:<type>;base64,<data>` URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<Url<'a>>,
    /// An uploaded file's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<Cow<'a, str>>,
    /// The file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<Cow<'a, str>>,
}

/// An audio part's `input_audio`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputAudio<'a> {
    /// Base64 audio.
    pub data: Cow<'a, str>,
    /// `wav`, `mp3`, ….
    pub format: Cow<'a, str>,
}

/// A URL as the wire carries it. [`Url::Data`] is written as a `data:<type>;base64,<data>`
/// URL straight into the JSON, without building the string (an image's base64 can be
/// megabytes); reading always gives [`Url::Plain`].
#[derive(Debug, Clone, PartialEq)]
pub enum Url<'a> {
    /// The URL as a string.
    Plain(Cow<'a, str>),
    /// Inline data, written as a `data:` URL.
    Data {
        /// The media type (`image/png`).
        media_type: Cow<'a, str>,
        /// The base64 payload.
        data: Cow<'a, str>,
    },
}

impl fmt::Display for Url<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Url::Plain(u) => f.write_str(u),
            Url::Data { media_type, data } => write!(f, "data:{media_type};base64,{data}"),
        }
    }
}

impl Serialize for Url<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Url::Plain(u) => s.serialize_str(u),
            Url::Data { .. } => s.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for Url<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Url::Plain(Cow::Owned(String::deserialize(d)?)))
    }
}

/// A tool the model may call: `{"type":"function","function":{…}}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Tool<'a> {
    /// `function` (the only kind this wire defines for Chat Completions functions).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Cow<'a, str>>,
    /// The function.
    pub function: FunctionDef<'a>,
}

/// A function tool's definition.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionDef<'a> {
    /// The function's name.
    pub name: Cow<'a, str>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Cow<'a, str>>,
    /// Its arguments as a JSON schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Cow<'a, Value>>,
}

/// A tool call of an assistant message: `{"id":…,"type":"function","function":{…}}`.
///
/// `id` may be missing in a vendor's answer; a server decides whether a request may omit it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCall<'a> {
    /// The call's id, which the `tool` message answering it names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Cow<'a, str>>,
    /// `function`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Cow<'a, str>>,
    /// The function called.
    pub function: FunctionCall<'a>,
}

/// A function call: the name and the arguments (a tool call's `function`, the deprecated
/// `function_call`, and a piece of either in a stream).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionCall<'a> {
    /// The function's name (in a stream, only on the call's first piece).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Cow<'a, str>>,
    /// The arguments, a JSON text (in a stream, a piece of it).
    #[serde(default, deserialize_with = "null_default")]
    pub arguments: Arguments<'a>,
}

/// Tool-call arguments: the JSON text OpenAI sends, or (a few compatible servers) the JSON
/// object itself. `null` is the empty text.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments<'a> {
    /// The arguments as JSON text.
    Text(Cow<'a, str>),
    /// Arguments sent as JSON instead of as a string.
    Json(Value),
}

impl Default for Arguments<'_> {
    fn default() -> Self {
        Arguments::Text(Cow::Borrowed(""))
    }
}

impl Arguments<'_> {
    /// The arguments as JSON text.
    pub fn into_text(self) -> String {
        match self {
            Arguments::Text(t) => t.into_owned(),
            Arguments::Json(v) => v.to_string(),
        }
    }
}

impl Serialize for Arguments<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Arguments::Text(t) => s.serialize_str(t),
            Arguments::Json(v) => s.collect_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for Arguments<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => Arguments::Text(Cow::Owned(s)),
            Value::Null => Arguments::default(),
            other => Arguments::Json(other),
        })
    }
}

/// `tool_choice`: a mode (`auto`, `none`, `required`) or one named function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice<'a> {
    /// `auto`, `none` or `required`.
    Mode(Cow<'a, str>),
    /// `{"type":"function","function":{"name":…}}`.
    Function(NamedToolChoice<'a>),
    /// Any other shape (`allowed_tools`, a custom tool), as sent.
    Other(Value),
}

/// A `tool_choice` that names one function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedToolChoice<'a> {
    /// `function`.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: Cow<'a, str>,
    /// The function.
    pub function: FunctionName<'a>,
}

impl<'a> NamedToolChoice<'a> {
    /// `{"type":"function","function":{"name": name}}`.
    pub fn function(name: impl Into<Cow<'a, str>>) -> Self {
        NamedToolChoice {
            kind: function_kind(),
            function: FunctionName { name: name.into() },
        }
    }
}

fn function_kind<'a>() -> Cow<'a, str> {
    Cow::Borrowed("function")
}

/// A function named by its name alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionName<'a> {
    /// The function's name.
    pub name: Cow<'a, str>,
}

/// `response_format`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat<'a> {
    /// Plain text.
    Text,
    /// Any JSON object (JSON mode).
    JsonObject,
    /// JSON that follows a schema (Structured Outputs).
    JsonSchema {
        /// The schema and its name.
        json_schema: JsonSchema<'a>,
    },
}

/// A `json_schema` response format's schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSchema<'a> {
    /// The schema's name.
    pub name: Cow<'a, str>,
    /// The schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Cow<'a, Value>>,
    /// Whether the output must follow the schema exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `stop`: one sequence or a list. Anything else is the error "expected a string or an
/// array of strings".
#[derive(Debug, Clone, PartialEq)]
pub enum Stop<'a> {
    /// One sequence.
    One(Cow<'a, str>),
    /// A list (written as given, even of one).
    Many(Cow<'a, [String]>),
}

impl Stop<'_> {
    /// The sequences.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Stop::One(s) => vec![s.into_owned()],
            Stop::Many(l) => l.into_owned(),
        }
    }

    fn is_none_or_empty(s: &Option<Stop<'_>>) -> bool {
        s.as_ref()
            .is_none_or(|s| matches!(s, Stop::Many(l) if l.is_empty()))
    }

    fn deserialize_opt<'de, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Stop<'a>>, D::Error> {
        const WANT: &str = "expected a string or an array of strings";
        match Option::<Value>::deserialize(d)? {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(Stop::One(Cow::Owned(s)))),
            Some(Value::Array(a)) => a
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(de::Error::custom(WANT)),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|l| Some(Stop::Many(Cow::Owned(l)))),
            Some(_) => Err(de::Error::custom(WANT)),
        }
    }
}

impl Serialize for Stop<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Stop::One(one) => s.serialize_str(one),
            Stop::Many(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Stop<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Stop::deserialize_opt(d)?
            .ok_or_else(|| de::Error::custom("expected a string or an array of strings"))
    }
}
