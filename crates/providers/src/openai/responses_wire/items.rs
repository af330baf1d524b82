//! Items and content parts: what `input` holds and what `output` holds. Function calls and
//! reasoning items appear on both sides (a previous turn's output is the next turn's input).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::de::{Tagged, TextOrList, null_default};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// The end user.
    User,
    /// The model (a previous turn).
    Assistant,
    /// System instructions.
    System,
    /// Developer instructions (the newer name for system).
    Developer,
}

/// The status of an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemStatus {
    /// Still being generated.
    InProgress,
    /// Finished.
    Completed,
    /// Cut short (see the response's `incomplete_details`).
    Incomplete,
    /// A status this module does not know (serialized as `"other"`).
    #[serde(other)]
    Other,
}

/// One item of a request's `input` list.
///
/// # Examples
///
/// ```
/// use ripcord_providers::openai_responses_wire::{InputItem, MessageContent, Role};
/// // The SDKs send messages without `type`.
/// let item: InputItem = serde_json::from_str(r#"{"role":"user","content":"Hi"}"#)?;
/// let InputItem::Message(m) = item else { panic!("a message") };
/// assert_eq!(m.role, Role::User);
/// assert!(matches!(m.content, MessageContent::Text(ref t) if t == "Hi"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum InputItem {
    /// A message (`type: "message"`, or no `type` with a `role`).
    Message(InputMessage),
    /// A function call the model made in an earlier turn.
    FunctionCall(FunctionCall),
    /// The result of a function call.
    FunctionCallOutput(FunctionCallOutput),
    /// A reasoning item from an earlier turn.
    Reasoning(ReasoningItem),
    /// A reference to a stored item (`type` may be omitted).
    ItemReference(ItemReference),
    /// Any other item type (`computer_call_output`, `mcp_call`, …), kept as JSON.
    #[serde(untagged)]
    Other(Value),
}

impl InputItem {
    /// The item's `type` (`message` for messages sent without one).
    pub fn type_name(&self) -> &str {
        match self {
            InputItem::Message(_) => "message",
            InputItem::FunctionCall(_) => "function_call",
            InputItem::FunctionCallOutput(_) => "function_call_output",
            InputItem::Reasoning(_) => "reasoning",
            InputItem::ItemReference(_) => "item_reference",
            InputItem::Other(v) => type_of(v),
        }
    }
}

impl<'de> Deserialize<'de> for InputItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = Tagged::read(d, "input item")?;
        match t.tag() {
            Some("message") => t.parse("item").map(InputItem::Message),
            None if t.has_role() => t.parse("item").map(InputItem::Message),
            Some("function_call") => t.parse("item").map(InputItem::FunctionCall),
            Some("function_call_output") => t.parse("item").map(InputItem::FunctionCallOutput),
            Some("reasoning") => t.parse("item").map(InputItem::Reasoning),
            Some("item_reference") => t.parse("item").map(InputItem::ItemReference),
            None if t.has_id() => t.parse("item").map(InputItem::ItemReference),
            None => Err(Tagged::untyped("input item")),
            Some(_) => t.other().map(InputItem::Other),
        }
    }
}

/// A message in `input`: the user's turn, instructions, or an earlier assistant answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputMessage {
    /// Who wrote it.
    pub role: Role,
    /// A string or a list of parts.
    pub content: MessageContent,
    /// The item id (earlier assistant messages carry one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The item status (earlier assistant messages carry one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
    /// `commentary` or `final_answer` on some models' assistant messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

impl InputMessage {
    /// A message with text content.
    pub fn text(role: Role, text: impl Into<String>) -> InputMessage {
        InputMessage {
            role,
            content: MessageContent::Text(text.into()),
            id: None,
            status: None,
            phase: None,
        }
    }
}

/// A message's content: a plain string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Text, images, files, and (in assistant history) output text and refusals.
    Parts(Vec<ContentPart>),
}

impl<'de> Deserialize<'de> for MessageContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match TextOrList::deserialize(d)? {
            TextOrList::Text(t) => MessageContent::Text(t),
            TextOrList::List(p) => MessageContent::Parts(p),
        })
    }
}

/// One part of a message's (or a tool result's) content.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// `input_text`.
    InputText(InputText),
    /// `input_image`: a URL (`data:` URLs included) or an uploaded file.
    InputImage(InputImage),
    /// `input_file`.
    InputFile(InputFile),
    /// `output_text`, in an earlier assistant message.
    OutputText(OutputText),
    /// `refusal`, in an earlier assistant message.
    Refusal(Refusal),
    /// Any other part type (`input_audio`, …), kept as JSON.
    #[serde(untagged)]
    Other(Value),
}

impl ContentPart {
    /// An `input_text` part.
    pub fn input_text(text: impl Into<String>) -> ContentPart {
        ContentPart::InputText(InputText { text: text.into() })
    }

    /// The part's `type`.
    pub fn type_name(&self) -> &str {
        match self {
            ContentPart::InputText(_) => "input_text",
            ContentPart::InputImage(_) => "input_image",
            ContentPart::InputFile(_) => "input_file",
            ContentPart::OutputText(_) => "output_text",
            ContentPart::Refusal(_) => "refusal",
            ContentPart::Other(v) => type_of(v),
        }
    }
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = Tagged::read(d, "content part")?;
        match t.tag() {
            Some("input_text") => t.parse("part").map(ContentPart::InputText),
            Some("input_image") => t.parse("part").map(ContentPart::InputImage),
            Some("input_file") => t.parse("part").map(ContentPart::InputFile),
            Some("output_text") => t.parse("part").map(ContentPart::OutputText),
            Some("refusal") => t.parse("part").map(ContentPart::Refusal),
            None => Err(Tagged::untyped("content part")),
            Some(_) => t.other().map(ContentPart::Other),
        }
    }
}

/// An `input_text` part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct InputText {
    /// The text.
    pub text: String,
}

/// An `input_image` part. OpenAI requires `detail` on requests (`low`, `high`, `auto`,
/// `original`); clients often omit it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct InputImage {
    /// An `https:` or `data:` URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    /// An uploaded file's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// `low`, `high`, `auto` or `original`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// An `input_file` part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct InputFile {
    /// An uploaded file's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// The file's content, base64 (a `data:` URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
    /// A URL to fetch the file from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_url: Option<String>,
    /// The file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

/// An `output_text` part: the model's text.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OutputText {
    /// The text.
    pub text: String,
    /// Citations (always serialized, `[]` when none).
    #[serde(default, deserialize_with = "null_default")]
    pub annotations: Vec<Value>,
    /// Token log probabilities (always serialized, `[]` when none).
    #[serde(default, deserialize_with = "null_default")]
    pub logprobs: Vec<Value>,
}

impl OutputText {
    /// Text without annotations or log probabilities.
    pub fn new(text: impl Into<String>) -> OutputText {
        OutputText {
            text: text.into(),
            ..OutputText::default()
        }
    }
}

/// A `refusal` part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Refusal {
    /// The model's explanation.
    pub refusal: String,
}

/// A `function_call` item: the model asks for a function to be run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The id the result must quote (`call_…`).
    pub call_id: String,
    /// The function's name.
    pub name: String,
    /// The arguments, a JSON document as a string (`""` while streaming starts).
    #[serde(default, deserialize_with = "null_default")]
    pub arguments: String,
    /// The item id (`fc_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The item status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
}

/// A `function_call_output` item: the result of a function call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallOutput {
    /// The `call_id` of the call this answers.
    pub call_id: String,
    /// A string or a list of parts (`input_text`, `input_image`, `input_file`).
    pub output: FunctionOutput,
    /// The item id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The item status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
}

/// A function result: a plain string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FunctionOutput {
    /// Plain text (usually JSON).
    Text(String),
    /// Text, images and files.
    Parts(Vec<ContentPart>),
}

impl<'de> Deserialize<'de> for FunctionOutput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match TextOrList::deserialize(d)? {
            TextOrList::Text(t) => FunctionOutput::Text(t),
            TextOrList::List(p) => FunctionOutput::Parts(p),
        })
    }
}

/// A `reasoning` item: a reasoning model's summary and, when asked for, its encrypted state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReasoningItem {
    /// The item id (`rs_…`).
    pub id: String,
    /// Summary parts (always serialized, `[]` when none).
    #[serde(default, deserialize_with = "null_default")]
    pub summary: Vec<SummaryPart>,
    /// The reasoning text, on models that return it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ReasoningContent>>,
    /// The opaque reasoning state (`include: ["reasoning.encrypted_content"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
    /// The item status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
}

/// One part of a reasoning summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SummaryPart {
    /// `summary_text`.
    SummaryText(SummaryText),
}

impl SummaryPart {
    /// A `summary_text` part.
    pub fn text(text: impl Into<String>) -> SummaryPart {
        SummaryPart::SummaryText(SummaryText { text: text.into() })
    }
}

/// The text of a `summary_text` part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SummaryText {
    /// The text.
    pub text: String,
}

/// One part of a reasoning item's `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReasoningContent {
    /// `reasoning_text`.
    ReasoningText(ReasoningText),
}

/// The text of a `reasoning_text` part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReasoningText {
    /// The text.
    pub text: String,
}

/// An `item_reference` item.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ItemReference {
    /// The referenced item's id.
    pub id: String,
}

/// One item of a response's `output`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutputItem {
    /// An assistant message.
    Message(OutputMessage),
    /// A function call.
    FunctionCall(FunctionCall),
    /// A reasoning item.
    Reasoning(ReasoningItem),
    /// Any other item (built-in tool calls, …), kept as JSON.
    #[serde(untagged)]
    Other(Value),
}

impl OutputItem {
    /// The item's `type`.
    pub fn type_name(&self) -> &str {
        match self {
            OutputItem::Message(_) => "message",
            OutputItem::FunctionCall(_) => "function_call",
            OutputItem::Reasoning(_) => "reasoning",
            OutputItem::Other(v) => type_of(v),
        }
    }

    /// The item's `id`, when it has one.
    pub fn id(&self) -> Option<&str> {
        match self {
            OutputItem::Message(m) => Some(&m.id),
            OutputItem::FunctionCall(f) => f.id.as_deref(),
            OutputItem::Reasoning(r) => Some(&r.id),
            OutputItem::Other(v) => v.get("id").and_then(Value::as_str),
        }
    }
}

impl<'de> Deserialize<'de> for OutputItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = Tagged::read(d, "output item")?;
        match t.tag() {
            Some("message") => t.parse("item").map(OutputItem::Message),
            Some("function_call") => t.parse("item").map(OutputItem::FunctionCall),
            Some("reasoning") => t.parse("item").map(OutputItem::Reasoning),
            None => Err(Tagged::untyped("output item")),
            Some(_) => t.other().map(OutputItem::Other),
        }
    }
}

/// An assistant message in `output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputMessage {
    /// The item id (`msg_…`).
    pub id: String,
    /// Always [`Role::Assistant`] from OpenAI.
    #[serde(default = "assistant")]
    pub role: Role,
    /// The item status.
    #[serde(default = "completed", deserialize_with = "completed_if_null")]
    pub status: ItemStatus,
    /// Output text and refusal parts.
    #[serde(default, deserialize_with = "null_default")]
    pub content: Vec<OutputContent>,
    /// `commentary` or `final_answer` on some models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

impl OutputMessage {
    /// An assistant message with these parts.
    pub fn assistant(
        id: impl Into<String>,
        status: ItemStatus,
        content: Vec<OutputContent>,
    ) -> OutputMessage {
        OutputMessage {
            id: id.into(),
            role: Role::Assistant,
            status,
            content,
            phase: None,
        }
    }
}

fn assistant() -> Role {
    Role::Assistant
}

fn completed() -> ItemStatus {
    ItemStatus::Completed
}

fn completed_if_null<'de, D: Deserializer<'de>>(d: D) -> Result<ItemStatus, D::Error> {
    Ok(Option::<ItemStatus>::deserialize(d)?.unwrap_or(ItemStatus::Completed))
}

/// One part of an output message (also the `part` of `response.content_part.*` events).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutputContent {
    /// `output_text`.
    OutputText(OutputText),
    /// `refusal`.
    Refusal(Refusal),
    /// `reasoning_text` (content part events of reasoning items).
    ReasoningText(ReasoningText),
    /// Any other part, kept as JSON.
    #[serde(untagged)]
    Other(Value),
}

impl OutputContent {
    /// An `output_text` part without annotations.
    pub fn text(text: impl Into<String>) -> OutputContent {
        OutputContent::OutputText(OutputText::new(text))
    }

    /// The part's `type`.
    pub fn type_name(&self) -> &str {
        match self {
            OutputContent::OutputText(_) => "output_text",
            OutputContent::Refusal(_) => "refusal",
            OutputContent::ReasoningText(_) => "reasoning_text",
            OutputContent::Other(v) => type_of(v),
        }
    }
}

impl<'de> Deserialize<'de> for OutputContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = Tagged::read(d, "content part")?;
        match t.tag() {
            Some("output_text") => t.parse("part").map(OutputContent::OutputText),
            Some("refusal") => t.parse("part").map(OutputContent::Refusal),
            Some("reasoning_text") => t.parse("part").map(OutputContent::ReasoningText),
            None => Err(Tagged::untyped("content part")),
            Some(_) => t.other().map(OutputContent::Other),
        }
    }
}

/// The `type` of a JSON object kept as it was (`""` when it has none).
pub(super) fn type_of(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}
