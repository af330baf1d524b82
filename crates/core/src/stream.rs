//! Streaming answers: events, the stream type, and collecting a stream into a response.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::reasoning::{ReasoningAccumulator, ReasoningBlock};
use crate::request::ToolCall;
use crate::response::{ChatResponse, FinishReason, Provenance, Usage};

/// One event of a streamed answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEvent {
    /// A piece of answer text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A piece of a tool call; pieces with the same `index` belong to one call.
    ToolCallDelta {
        /// Which tool call (0-based, in the order the model started them).
        index: u32,
        /// The call id, when this piece carries it (usually the first).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The function name, when this piece carries it (usually the first).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// A fragment of the JSON arguments.
        #[serde(default)]
        arguments: String,
    },
    /// A piece of the model's reasoning text. Pieces append to the open thinking block; a
    /// piece after a [`StreamEvent::ReasoningSignature`] or a [`StreamEvent::RedactedReasoning`]
    /// starts a new block (see [`crate::reasoning::ReasoningAccumulator`]).
    ReasoningDelta {
        /// The text.
        text: String,
    },
    /// The vendor's signature over the open thinking block, which closes it (Anthropic's
    /// `signature_delta`).
    ReasoningSignature {
        /// The signature, as the vendor sent it.
        signature: String,
    },
    /// One whole redacted reasoning block (Anthropic's `redacted_thinking`).
    RedactedReasoning {
        /// The opaque data, as the vendor sent it.
        data: String,
    },
    /// Token counts (usually near the end).
    Usage {
        /// The usage.
        usage: Usage,
    },
    /// The model finished. A well-formed stream ends with exactly one `Finish`; a stream that
    /// ends without one was truncated and its consumer sees an `InvalidResponse` error instead.
    Finish {
        /// Why the model stopped.
        reason: FinishReason,
        /// The model that answered, as the vendor named it, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// The link serving this stream failed after content was shown and the chain restarts the
    /// whole answer on another link: discard everything shown so far.
    Restarted {
        /// What failed.
        reason: ErrorKind,
        /// The failure, as text.
        message: String,
    },
    /// Provenance of the answer, emitted by chains: once when a link commits (before its first
    /// content event, so a gateway can set headers) and once more at the end. The last one wins.
    Provenance {
        /// The provenance so far.
        provenance: Box<Provenance>,
    },
}

impl StreamEvent {
    /// A text delta.
    pub fn text(text: impl Into<String>) -> Self {
        StreamEvent::TextDelta { text: text.into() }
    }

    /// A normal finish.
    pub fn finish(reason: FinishReason) -> Self {
        StreamEvent::Finish {
            reason,
            model: None,
        }
    }

    /// A piece of reasoning text.
    pub fn reasoning(text: impl Into<String>) -> Self {
        StreamEvent::ReasoningDelta { text: text.into() }
    }

    /// The text of a [`StreamEvent::TextDelta`]; `None` for every other event.
    ///
    /// ```
    /// use ripcord_core::StreamEvent;
    /// let events = [StreamEvent::text("Hel"), StreamEvent::reasoning("hm"), StreamEvent::text("lo")];
    /// let text: String = events.iter().filter_map(StreamEvent::text_delta).collect();
    /// assert_eq!(text, "Hello");
    /// ```
    pub fn text_delta(&self) -> Option<&str> {
        match self {
            StreamEvent::TextDelta { text } => Some(text),
            _ => None,
        }
    }

    /// True for events that show the caller answer content (text, reasoning or tool-call
    /// pieces).
    ///
    /// The chain commits to a link at its first content event: before it, fallback is free.
    /// Reasoning counts: a client shown a model's thinking has been shown that model's answer.
    pub fn is_content(&self) -> bool {
        match self {
            StreamEvent::TextDelta { text } | StreamEvent::ReasoningDelta { text } => {
                !text.is_empty()
            }
            StreamEvent::ToolCallDelta { .. }
            | StreamEvent::ReasoningSignature { .. }
            | StreamEvent::RedactedReasoning { .. } => true,
            _ => false,
        }
    }
}

/// A stream of answer events. Dropping it cancels the upstream request.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<StreamEvent>> + Send + 'static>>;

/// Turns a complete response into a stream (for models that cannot stream).
///
/// # Examples
///
/// ```
/// use ripcord_core::{stream, ChatResponse};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let s = stream::from_response(ChatResponse::new("hi"));
/// let back = stream::collect(s).await.unwrap();
/// assert_eq!(back.text(), "hi");
/// # }
/// ```
pub fn from_response(resp: ChatResponse) -> ChatStream {
    let mut events = Vec::with_capacity(4 + 2 * resp.reasoning.len());
    for block in resp.reasoning {
        match block {
            ReasoningBlock::Thinking { text, signature } => {
                if !text.is_empty() {
                    events.push(Ok(StreamEvent::ReasoningDelta { text }));
                }
                if let Some(signature) = signature {
                    events.push(Ok(StreamEvent::ReasoningSignature { signature }));
                }
            }
            ReasoningBlock::Redacted { data } => {
                events.push(Ok(StreamEvent::RedactedReasoning { data }));
            }
        }
    }
    if !resp.content.is_empty() {
        events.push(Ok(StreamEvent::TextDelta { text: resp.content }));
    }
    for (i, call) in resp.tool_calls.into_iter().enumerate() {
        events.push(Ok(StreamEvent::ToolCallDelta {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            id: Some(call.id),
            name: Some(call.name),
            arguments: call.arguments,
        }));
    }
    events.push(Ok(StreamEvent::Usage { usage: resp.usage }));
    events.push(Ok(StreamEvent::Finish {
        reason: resp.finish_reason,
        model: (!resp.model.is_empty()).then_some(resp.model),
    }));
    Box::pin(futures::stream::iter(events))
}

/// The largest tool-call index a stream may carry. Indexes count the calls of one answer from
/// zero; one far beyond any real answer is a broken or hostile stream, and honouring it would
/// allocate a slot for every index below it.
pub const MAX_TOOL_INDEX: u32 = 1024;

/// The error of a tool-call (or content-block) index beyond [`MAX_TOOL_INDEX`].
pub fn index_out_of_bounds(what: &str, index: u64) -> Error {
    Error::new(
        ErrorKind::InvalidResponse,
        format!("the vendor sent {what} index {index}, beyond the bound of {MAX_TOOL_INDEX}"),
    )
}

/// Accumulates stream events into a response.
///
/// `Restarted` discards what came before it; the last `Provenance` wins.
#[derive(Debug, Default)]
pub struct Collector {
    resp: ChatResponse,
    calls: Vec<ToolCall>,
    reasoning: ReasoningAccumulator,
    finished: bool,
    /// A tool-call index beyond [`MAX_TOOL_INDEX`] that was refused.
    bad_index: Option<u32>,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Self {
        Collector::default()
    }

    /// Takes one event.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::TextDelta { text } => self.resp.content.push_str(&text),
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                if index > MAX_TOOL_INDEX {
                    self.bad_index.get_or_insert(index);
                    return;
                }
                let i = index as usize;
                while self.calls.len() <= i {
                    self.calls.push(ToolCall::new("", "", ""));
                }
                let call = &mut self.calls[i];
                if let Some(id) = id {
                    call.id = id;
                }
                if let Some(name) = name {
                    call.name.push_str(&name);
                }
                call.arguments.push_str(&arguments);
            }
            StreamEvent::ReasoningDelta { text } => self.reasoning.text(&text),
            StreamEvent::ReasoningSignature { signature } => self.reasoning.signature(&signature),
            StreamEvent::RedactedReasoning { data } => self.reasoning.redacted(&data),
            StreamEvent::Usage { usage } => self.resp.usage = usage,
            StreamEvent::Finish { reason, model } => {
                self.resp.finish_reason = reason;
                if let Some(m) = model {
                    self.resp.model = m;
                }
                self.finished = true;
            }
            StreamEvent::Restarted { .. } => {
                let provenance = std::mem::take(&mut self.resp.provenance);
                self.resp = ChatResponse {
                    provenance,
                    ..ChatResponse::default()
                };
                self.calls.clear();
                self.reasoning = ReasoningAccumulator::new();
                self.finished = false;
            }
            StreamEvent::Provenance { provenance } => self.resp.provenance = *provenance,
        }
    }

    /// True once a `Finish` event arrived.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The response so far; `InvalidResponse` ("truncated") when no `Finish` arrived, or when
    /// a tool-call index beyond [`MAX_TOOL_INDEX`] did.
    pub fn finish(mut self) -> Result<ChatResponse> {
        if let Some(i) = self.bad_index {
            return Err(index_out_of_bounds("tool-call", u64::from(i)));
        }
        if !self.finished {
            return Err(Error::new(
                ErrorKind::InvalidResponse,
                "stream truncated: it ended without its finish event",
            ));
        }
        self.resp.tool_calls = self.calls;
        self.resp.reasoning = self.reasoning.into_blocks();
        Ok(self.resp)
    }
}

/// The last provenance a stream carried, readable while the stream is consumed and after it
/// ended; see [`watch_provenance`].
#[derive(Debug, Clone, Default)]
pub struct ProvenanceWatch(std::sync::Arc<std::sync::Mutex<Option<Provenance>>>);

impl ProvenanceWatch {
    /// The provenance of the newest [`StreamEvent::Provenance`] seen so far: after the stream
    /// ended, the final one (which link served it, every attempt, what was skipped). `None`
    /// when the stream carried none (a bare vendor model's stream, not a chain's).
    pub fn get(&self) -> Option<Provenance> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Passes `stream` through unchanged and keeps its last provenance in the returned watch, so a
/// caller that prints the text as it comes reads where it came from in one call at the end:
///
/// ```
/// # use ripcord_core::{Chain, ChatModel, ChatRequest, Context, StreamEvent, stream};
/// # use ripcord_core::testing::ScriptedModel;
/// # use futures::StreamExt;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ripcord_core::Result<()> {
/// # let chain = Chain::builder().link(ScriptedModel::new("backup").reply("hi")).build()?;
/// let (mut s, watch) = stream::watch_provenance(
///     chain.stream(&ChatRequest::user("hi"), &Context::new()).await?,
/// );
/// while let Some(event) = s.next().await {
///     if let StreamEvent::TextDelta { text } = event? {
///         print!("{text}");
///     }
/// }
/// assert_eq!(watch.get().unwrap().served_by(), "backup");
/// # Ok(()) }
/// ```
pub fn watch_provenance(stream: ChatStream) -> (ChatStream, ProvenanceWatch) {
    let watch = ProvenanceWatch::default();
    let slot = watch.clone();
    let stream = stream.map(move |item| {
        if let Ok(StreamEvent::Provenance { provenance }) = &item {
            *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((**provenance).clone());
        }
        item
    });
    (Box::pin(stream), watch)
}

/// Reads a stream to its end and assembles the response.
///
/// # Errors
///
/// The first error event of the stream, or `InvalidResponse` when the stream ends without a
/// `Finish` event (a truncated stream is never a short answer).
pub async fn collect(mut stream: ChatStream) -> Result<ChatResponse> {
    let mut c = Collector::new();
    while let Some(ev) = stream.next().await {
        c.push(ev?);
    }
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reasoning_survives_a_round_trip_through_a_stream() {
        let resp = ChatResponse::new("4").with_reasoning(vec![
            ReasoningBlock::thinking("2 and 2").with_signature("sig"),
            ReasoningBlock::redacted("opaque"),
            ReasoningBlock::thinking("unsigned"),
        ]);
        let back = collect(from_response(resp.clone())).await.unwrap();
        assert_eq!(back.reasoning, resp.reasoning);
        assert_eq!(back.text(), "4");
    }

    #[test]
    fn reasoning_is_content_and_a_restart_discards_it() {
        assert!(StreamEvent::reasoning("x").is_content());
        assert!(!StreamEvent::reasoning("").is_content());
        let mut c = Collector::new();
        c.push(StreamEvent::reasoning("old"));
        c.push(StreamEvent::Restarted {
            reason: ErrorKind::Timeout,
            message: "cut".into(),
        });
        c.push(StreamEvent::reasoning("new"));
        c.push(StreamEvent::finish(FinishReason::Stop));
        let r = c.finish().unwrap();
        assert_eq!(r.reasoning, vec![ReasoningBlock::thinking("new")]);
    }
}
