//! The streaming events of `POST /v1/responses` with `stream: true`
//! (<https://platform.openai.com/docs/api-reference/responses-streaming>): one SSE event per
//! [`StreamEvent`], its `event:` line the [`StreamEvent::event_type`], its `data:` the JSON.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::de::{Tagged, null_default};
use super::items::{OutputContent, OutputItem, SummaryPart, type_of};
use super::response::Response;

/// One streaming event, tagged by `type`. Every event carries a `sequence_number` (the SDKs
/// require it; it is read as 0 when an older server leaves it out).
///
/// # Examples
///
/// ```
/// use ripcord_providers::openai_responses_wire::{StreamEvent, TextDeltaEvent};
/// let mut e = StreamEvent::OutputTextDelta(TextDeltaEvent {
///     item_id: "msg_1".into(),
///     delta: "Hi".into(),
///     ..Default::default()
/// });
/// e.set_sequence_number(4);
/// assert_eq!(e.event_type(), "response.output_text.delta");
/// let json = serde_json::to_string(&e)?;
/// assert!(json.starts_with(r#"{"type":"response.output_text.delta","#), "{json}");
/// let back: StreamEvent = serde_json::from_str(&json)?;
/// assert_eq!(back, e);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum StreamEvent {
    /// `response.created`: the first event.
    #[serde(rename = "response.created")]
    Created(ResponseEvent),
    /// `response.queued` (background responses).
    #[serde(rename = "response.queued")]
    Queued(ResponseEvent),
    /// `response.in_progress`.
    #[serde(rename = "response.in_progress")]
    InProgress(ResponseEvent),
    /// `response.output_item.added`: an item starts.
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded(OutputItemEvent),
    /// `response.output_item.done`: an item is complete.
    #[serde(rename = "response.output_item.done")]
    OutputItemDone(OutputItemEvent),
    /// `response.content_part.added`: a part of a message starts.
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded(ContentPartEvent),
    /// `response.content_part.done`: a part is complete.
    #[serde(rename = "response.content_part.done")]
    ContentPartDone(ContentPartEvent),
    /// `response.output_text.delta`: more text.
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta(TextDeltaEvent),
    /// `response.output_text.done`: the whole text of a part.
    #[serde(rename = "response.output_text.done")]
    OutputTextDone(TextDoneEvent),
    /// `response.refusal.delta`.
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta(RefusalDeltaEvent),
    /// `response.refusal.done`.
    #[serde(rename = "response.refusal.done")]
    RefusalDone(RefusalDoneEvent),
    /// `response.function_call_arguments.delta`.
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta(FunctionCallArgumentsDeltaEvent),
    /// `response.function_call_arguments.done`.
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone(FunctionCallArgumentsDoneEvent),
    /// `response.reasoning_summary_part.added`.
    #[serde(rename = "response.reasoning_summary_part.added")]
    ReasoningSummaryPartAdded(ReasoningSummaryPartEvent),
    /// `response.reasoning_summary_part.done`.
    #[serde(rename = "response.reasoning_summary_part.done")]
    ReasoningSummaryPartDone(ReasoningSummaryPartEvent),
    /// `response.reasoning_summary_text.delta`.
    #[serde(rename = "response.reasoning_summary_text.delta")]
    ReasoningSummaryTextDelta(ReasoningSummaryTextDeltaEvent),
    /// `response.reasoning_summary_text.done`.
    #[serde(rename = "response.reasoning_summary_text.done")]
    ReasoningSummaryTextDone(ReasoningSummaryTextDoneEvent),
    /// `response.completed`: the last event of a finished response.
    #[serde(rename = "response.completed")]
    Completed(ResponseEvent),
    /// `response.incomplete`: the last event of a response cut short.
    #[serde(rename = "response.incomplete")]
    Incomplete(ResponseEvent),
    /// `response.failed`: the last event of a failed response.
    #[serde(rename = "response.failed")]
    Failed(ResponseEvent),
    /// `error`: the stream failed.
    #[serde(rename = "error")]
    Error(ErrorEvent),
    /// Any other event type (tool progress, annotations, audio, …), kept as JSON.
    #[serde(untagged)]
    Other(Value),
}

/// Applies `$f` to the payload of every typed variant (they all have a `sequence_number`);
/// `Other` is handled by the caller before.
macro_rules! sequence_field {
    ($e:expr, |$x:ident| $body:expr) => {
        match $e {
            StreamEvent::Created($x)
            | StreamEvent::Queued($x)
            | StreamEvent::InProgress($x)
            | StreamEvent::Completed($x)
            | StreamEvent::Incomplete($x)
            | StreamEvent::Failed($x) => $body,
            StreamEvent::OutputItemAdded($x) | StreamEvent::OutputItemDone($x) => $body,
            StreamEvent::ContentPartAdded($x) | StreamEvent::ContentPartDone($x) => $body,
            StreamEvent::OutputTextDelta($x) => $body,
            StreamEvent::OutputTextDone($x) => $body,
            StreamEvent::RefusalDelta($x) => $body,
            StreamEvent::RefusalDone($x) => $body,
            StreamEvent::FunctionCallArgumentsDelta($x) => $body,
            StreamEvent::FunctionCallArgumentsDone($x) => $body,
            StreamEvent::ReasoningSummaryPartAdded($x)
            | StreamEvent::ReasoningSummaryPartDone($x) => $body,
            StreamEvent::ReasoningSummaryTextDelta($x) => $body,
            StreamEvent::ReasoningSummaryTextDone($x) => $body,
            StreamEvent::Error($x) => $body,
            StreamEvent::Other(_) => Default::default(),
        }
    };
}

impl StreamEvent {
    /// The event's `type` (also its SSE `event:` name).
    pub fn event_type(&self) -> &str {
        match self {
            StreamEvent::Created(_) => "response.created",
            StreamEvent::Queued(_) => "response.queued",
            StreamEvent::InProgress(_) => "response.in_progress",
            StreamEvent::OutputItemAdded(_) => "response.output_item.added",
            StreamEvent::OutputItemDone(_) => "response.output_item.done",
            StreamEvent::ContentPartAdded(_) => "response.content_part.added",
            StreamEvent::ContentPartDone(_) => "response.content_part.done",
            StreamEvent::OutputTextDelta(_) => "response.output_text.delta",
            StreamEvent::OutputTextDone(_) => "response.output_text.done",
            StreamEvent::RefusalDelta(_) => "response.refusal.delta",
            StreamEvent::RefusalDone(_) => "response.refusal.done",
            StreamEvent::FunctionCallArgumentsDelta(_) => "response.function_call_arguments.delta",
            StreamEvent::FunctionCallArgumentsDone(_) => "response.function_call_arguments.done",
            StreamEvent::ReasoningSummaryPartAdded(_) => "response.reasoning_summary_part.added",
            StreamEvent::ReasoningSummaryPartDone(_) => "response.reasoning_summary_part.done",
            StreamEvent::ReasoningSummaryTextDelta(_) => "response.reasoning_summary_text.delta",
            StreamEvent::ReasoningSummaryTextDone(_) => "response.reasoning_summary_text.done",
            StreamEvent::Completed(_) => "response.completed",
            StreamEvent::Incomplete(_) => "response.incomplete",
            StreamEvent::Failed(_) => "response.failed",
            StreamEvent::Error(_) => "error",
            StreamEvent::Other(v) => type_of(v),
        }
    }

    /// The event's `sequence_number` (an `Other` event's, when it has one; else 0).
    pub fn sequence_number(&self) -> u64 {
        match self {
            StreamEvent::Other(v) => v
                .get("sequence_number")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            e => sequence_field!(e, |x| x.sequence_number),
        }
    }

    /// Sets the event's `sequence_number` (a server numbers its events in one place).
    pub fn set_sequence_number(&mut self, n: u64) {
        match self {
            StreamEvent::Other(Value::Object(m)) => {
                m.insert("sequence_number".to_owned(), n.into());
            }
            StreamEvent::Other(_) => {}
            e => sequence_field!(e, |x| x.sequence_number = n),
        }
    }

    /// Whether this event ends the stream (`response.completed`, `.incomplete`, `.failed`,
    /// `error`).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            StreamEvent::Completed(_)
                | StreamEvent::Incomplete(_)
                | StreamEvent::Failed(_)
                | StreamEvent::Error(_)
        )
    }
}

impl<'de> Deserialize<'de> for StreamEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use StreamEvent as E;
        let t = Tagged::read(d, "stream event")?;
        let w = "event";
        match t.tag() {
            Some("response.created") => t.parse(w).map(E::Created),
            Some("response.queued") => t.parse(w).map(E::Queued),
            Some("response.in_progress") => t.parse(w).map(E::InProgress),
            Some("response.output_item.added") => t.parse(w).map(E::OutputItemAdded),
            Some("response.output_item.done") => t.parse(w).map(E::OutputItemDone),
            Some("response.content_part.added") => t.parse(w).map(E::ContentPartAdded),
            Some("response.content_part.done") => t.parse(w).map(E::ContentPartDone),
            Some("response.output_text.delta") => t.parse(w).map(E::OutputTextDelta),
            Some("response.output_text.done") => t.parse(w).map(E::OutputTextDone),
            Some("response.refusal.delta") => t.parse(w).map(E::RefusalDelta),
            Some("response.refusal.done") => t.parse(w).map(E::RefusalDone),
            Some("response.function_call_arguments.delta") => {
                t.parse(w).map(E::FunctionCallArgumentsDelta)
            }
            Some("response.function_call_arguments.done") => {
                t.parse(w).map(E::FunctionCallArgumentsDone)
            }
            Some("response.reasoning_summary_part.added") => {
                t.parse(w).map(E::ReasoningSummaryPartAdded)
            }
            Some("response.reasoning_summary_part.done") => {
                t.parse(w).map(E::ReasoningSummaryPartDone)
            }
            Some("response.reasoning_summary_text.delta") => {
                t.parse(w).map(E::ReasoningSummaryTextDelta)
            }
            Some("response.reasoning_summary_text.done") => {
                t.parse(w).map(E::ReasoningSummaryTextDone)
            }
            Some("response.completed") => t.parse(w).map(E::Completed),
            Some("response.incomplete") => t.parse(w).map(E::Incomplete),
            Some("response.failed") => t.parse(w).map(E::Failed),
            Some("error") => t.parse(w).map(E::Error),
            None => Err(Tagged::untyped("stream event")),
            Some(_) => t.other().map(E::Other),
        }
    }
}

/// `response.created`, `.queued`, `.in_progress`, `.completed`, `.incomplete`, `.failed`: the
/// Response object as it stands.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResponseEvent {
    /// The response.
    pub response: Response,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.output_item.added` / `.done`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputItemEvent {
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The item (empty or in progress when added, complete when done).
    pub item: OutputItem,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.content_part.added` / `.done`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentPartEvent {
    /// The message item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The part's index in the item's `content`.
    #[serde(default, deserialize_with = "null_default")]
    pub content_index: u32,
    /// The part (empty when added, complete when done).
    pub part: OutputContent,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.output_text.delta`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TextDeltaEvent {
    /// The message item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The part's index in the item's `content`.
    #[serde(default, deserialize_with = "null_default")]
    pub content_index: u32,
    /// The new text.
    #[serde(default, deserialize_with = "null_default")]
    pub delta: String,
    /// Log probabilities of the new tokens (always serialized, `[]` when none).
    #[serde(default, deserialize_with = "null_default")]
    pub logprobs: Vec<Value>,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.output_text.done`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TextDoneEvent {
    /// The message item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The part's index in the item's `content`.
    #[serde(default, deserialize_with = "null_default")]
    pub content_index: u32,
    /// The part's whole text.
    #[serde(default, deserialize_with = "null_default")]
    pub text: String,
    /// Log probabilities (always serialized, `[]` when none).
    #[serde(default, deserialize_with = "null_default")]
    pub logprobs: Vec<Value>,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.refusal.delta`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RefusalDeltaEvent {
    /// The message item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The part's index in the item's `content`.
    #[serde(default, deserialize_with = "null_default")]
    pub content_index: u32,
    /// The new refusal text.
    #[serde(default, deserialize_with = "null_default")]
    pub delta: String,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.refusal.done`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RefusalDoneEvent {
    /// The message item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The part's index in the item's `content`.
    #[serde(default, deserialize_with = "null_default")]
    pub content_index: u32,
    /// The whole refusal.
    #[serde(default, deserialize_with = "null_default")]
    pub refusal: String,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.function_call_arguments.delta`. The call's `call_id` and `name` come with the
/// `response.output_item.added` event of the same `item_id`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionCallArgumentsDeltaEvent {
    /// The function call item's id (`fc_…`).
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// More of the arguments.
    #[serde(default, deserialize_with = "null_default")]
    pub delta: String,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.function_call_arguments.done`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionCallArgumentsDoneEvent {
    /// The function call item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The function's name (older servers leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The whole arguments.
    #[serde(default, deserialize_with = "null_default")]
    pub arguments: String,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.reasoning_summary_part.added` / `.done`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningSummaryPartEvent {
    /// The reasoning item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The part's index in the item's `summary`.
    #[serde(default, deserialize_with = "null_default")]
    pub summary_index: u32,
    /// The part (empty when added, complete when done).
    pub part: SummaryPart,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.reasoning_summary_text.delta`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReasoningSummaryTextDeltaEvent {
    /// The reasoning item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The part's index in the item's `summary`.
    #[serde(default, deserialize_with = "null_default")]
    pub summary_index: u32,
    /// More summary text.
    #[serde(default, deserialize_with = "null_default")]
    pub delta: String,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// `response.reasoning_summary_text.done`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReasoningSummaryTextDoneEvent {
    /// The reasoning item's id.
    #[serde(default, deserialize_with = "null_default")]
    pub item_id: String,
    /// The item's index in `output`.
    #[serde(default, deserialize_with = "null_default")]
    pub output_index: u32,
    /// The part's index in the item's `summary`.
    #[serde(default, deserialize_with = "null_default")]
    pub summary_index: u32,
    /// The part's whole text.
    #[serde(default, deserialize_with = "null_default")]
    pub text: String,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

/// The `error` event. The SDKs' type is flat (`code`, `message`, `param`); OpenAI's servers
/// have also been seen to nest the same fields under `error` (with a `type`), so both are read
/// — use [`ErrorEvent::code`] and [`ErrorEvent::message`] to get either.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ErrorEvent {
    /// The error code (`insufficient_quota`, `rate_limit_exceeded`, `server_error`, …).
    #[serde(default)]
    pub code: Option<String>,
    /// A human-readable description (always serialized).
    #[serde(default, deserialize_with = "null_default")]
    pub message: String,
    /// The request parameter at fault.
    #[serde(default)]
    pub param: Option<String>,
    /// The nested form, when the server sent it; serialized only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorEventDetail>,
    /// The event's place in the stream.
    #[serde(default, deserialize_with = "null_default")]
    pub sequence_number: u64,
}

impl ErrorEvent {
    /// The error code, flat or nested.
    pub fn code(&self) -> Option<&str> {
        self.code
            .as_deref()
            .or_else(|| self.error.as_ref().and_then(|e| e.code.as_deref()))
    }

    /// The nested error `type` (`invalid_request_error`, …), when sent.
    pub fn error_type(&self) -> Option<&str> {
        self.error.as_ref().and_then(|e| e.r#type.as_deref())
    }

    /// The message, flat or nested (`""` when neither).
    pub fn message(&self) -> &str {
        match self.error.as_ref().and_then(|e| e.message.as_deref()) {
            Some(m) if self.message.is_empty() => m,
            _ => &self.message,
        }
    }
}

/// The nested `error` of an `error` event.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ErrorEventDetail {
    /// The error type (`invalid_request_error`, `server_error`, …).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub r#type: Option<String>,
    /// The error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The request parameter at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
}
