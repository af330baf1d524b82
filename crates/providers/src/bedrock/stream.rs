//! The ConverseStream answer: `application/vnd.amazon.eventstream` messages, each a prelude
//! (total and header lengths, CRC32), typed headers, a JSON payload and a CRC32 of the whole.
//!
//! Reference: <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html>
//! and, for the framing, <https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html#streaming-event-stream>.
//!
//! Framing and both checksums are the AWS SDK's own decoder's (`aws-smithy-eventstream`'s
//! `read_message_from`): [`EventStreamFramer`] only waits until the prelude's length is
//! buffered, refuses frames over [`MAX_FRAME_BYTES`], and hands each whole frame over. A
//! checksum that does not match is an `InvalidResponse` — nothing after it can be trusted. A
//! body that ends inside a frame, or without `messageStop`, is a truncated stream (the driver's
//! error, as for every vendor).
//!
//! Events (`:message-type: event`, name in `:event-type`): `messageStart`;
//! `contentBlockStart` (a `toolUse` start names the tool); `contentBlockDelta` with `text`,
//! `toolUse.input` (a piece of the arguments' JSON) or `reasoningContent` (Claude's thinking:
//! not part of the answer, not emitted); `contentBlockStop`; `messageStop` with the
//! `stopReason`; then `metadata` with the usage — Bedrock sends it *after* `messageStop`, so
//! `metadata` is the terminator, and a body that ends cleanly after `messageStop` is complete
//! without usage. `:message-type: exception` frames (`throttlingException`,
//! `modelStreamErrorException`, …) and `error` frames are classified like HTTP errors (see
//! the error module).

use std::collections::VecDeque;

use aws_smithy_eventstream::frame::read_message_from;
use aws_smithy_types::event_stream::Message;
use bytes::BytesMut;
use ripcord_core::{Error, ErrorKind, Price, Result, StreamEvent};
use serde::Deserialize;

use super::error_map;
use super::request::{JSON_TOOL, JsonMode};
use super::response::{GUARDRAIL, WireUsage, guardrail_error, malformed_stop, stop_reason};
use crate::driver::{Decoder, Framer, Step, malformed};
use crate::stream_end::StreamEnd;

/// The largest frame accepted (the event-stream format's own limit is 16 MiB).
pub(crate) const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The smallest valid frame: a prelude (12 bytes) and the message CRC (4).
const MIN_FRAME_BYTES: usize = 16;

/// Cuts a body into event-stream messages.
#[derive(Debug, Default)]
pub(crate) struct EventStreamFramer {
    buf: BytesMut,
}

impl EventStreamFramer {
    pub(crate) fn new() -> Self {
        EventStreamFramer::default()
    }
}

fn corrupt(detail: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::InvalidResponse,
        format!("corrupt event-stream frame from Bedrock: {detail}"),
    )
}

impl Framer for EventStreamFramer {
    type Frame = Message;

    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn next_frame(&mut self) -> Option<Result<Message>> {
        if self.buf.len() < 4 {
            return None;
        }
        let total = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let total = total as usize;
        if !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&total) {
            self.buf.clear();
            return Some(Err(corrupt(format!(
                "a frame length of {total} bytes (allowed: {MIN_FRAME_BYTES} to {MAX_FRAME_BYTES})"
            ))));
        }
        if self.buf.len() < total {
            return None;
        }
        let frame = self.buf.split_to(total).freeze();
        match read_message_from(frame) {
            Ok(m) => Some(Ok(m)),
            Err(e) => {
                self.buf.clear();
                Some(Err(corrupt(&e).with_source(e)))
            }
        }
    }

    fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }
}

/// A string header of a message.
fn header<'m>(m: &'m Message, name: &str) -> Option<&'m str> {
    m.headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|s| s.as_str())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockStart {
    #[serde(default)]
    content_block_index: u64,
    #[serde(default)]
    start: Option<Start>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Start {
    #[serde(default)]
    tool_use: Option<StartToolUse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartToolUse {
    tool_use_id: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockDelta {
    #[serde(default)]
    content_block_index: u64,
    delta: Delta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Delta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<DeltaToolUse>,
    #[serde(default)]
    reasoning_content: Option<DeltaReasoning>,
}

/// A `reasoningContent` delta: a piece of the text, the signature, or encrypted content.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeltaReasoning {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    redacted_content: Option<String>,
}

#[derive(Deserialize)]
struct DeltaToolUse {
    #[serde(default)]
    input: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageStop {
    stop_reason: String,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Tool(u32),
    Json,
    Other,
}

/// Decodes a ConverseStream answer.
pub(crate) struct BedrockDecoder {
    json: JsonMode,
    end: StreamEnd<WireUsage>,
    /// Block index → what the block is (text blocks have no start event; unknown is text).
    blocks: Vec<(u64, Block)>,
    tools: u32,
    /// The text the answer has so far (only kept to quote a guardrail's replacement).
    guardrail_text: String,
}

impl BedrockDecoder {
    pub(crate) fn new(json: JsonMode, price: Option<Price>, model: String) -> Self {
        BedrockDecoder {
            json,
            end: StreamEnd::new(price, Some(model)),
            blocks: Vec::new(),
            tools: 0,
            guardrail_text: String::new(),
        }
    }

    fn block(&self, index: u64) -> Option<Block> {
        self.blocks
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| *b)
    }

    fn event(
        &mut self,
        name: &str,
        payload: &[u8],
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<Step> {
        let parse_err = |e: serde_json::Error| {
            Ok(malformed(
                format!("malformed `{name}` stream event: {e}"),
                e,
            ))
        };
        match name {
            "messageStart" | "contentBlockStop" => {}
            "contentBlockStart" => {
                let s: BlockStart = match serde_json::from_slice(payload) {
                    Ok(s) => s,
                    Err(e) => return parse_err(e),
                };
                check_index(s.content_block_index)?;
                let Some(tool) = s.start.and_then(|s| s.tool_use) else {
                    self.blocks.push((s.content_block_index, Block::Other));
                    return Ok(Step::More);
                };
                if self.json.0 && tool.name == JSON_TOOL {
                    self.blocks.push((s.content_block_index, Block::Json));
                    return Ok(Step::More);
                }
                let n = self.tools;
                self.tools += 1;
                self.blocks.push((s.content_block_index, Block::Tool(n)));
                out.push_back(StreamEvent::ToolCallDelta {
                    index: n,
                    id: Some(tool.tool_use_id),
                    name: Some(tool.name),
                    arguments: String::new(),
                });
            }
            "contentBlockDelta" => {
                let d: BlockDelta = match serde_json::from_slice(payload) {
                    Ok(d) => d,
                    Err(e) => return parse_err(e),
                };
                check_index(d.content_block_index)?;
                let block = self.block(d.content_block_index);
                match (block, d.delta) {
                    (
                        Some(Block::Tool(n)),
                        Delta {
                            tool_use: Some(t), ..
                        },
                    ) => {
                        out.push_back(StreamEvent::ToolCallDelta {
                            index: n,
                            id: None,
                            name: None,
                            arguments: t.input,
                        });
                    }
                    (
                        Some(Block::Json),
                        Delta {
                            tool_use: Some(t), ..
                        },
                    ) if !t.input.is_empty() => {
                        out.push_back(StreamEvent::TextDelta { text: t.input });
                    }
                    (
                        _,
                        Delta {
                            text: Some(text), ..
                        },
                    ) if !text.is_empty() => {
                        if self.guardrail_text.len() < 4096 {
                            self.guardrail_text.push_str(&text);
                        }
                        out.push_back(StreamEvent::TextDelta { text });
                    }
                    // Claude's thinking, as Anthropic streams it: text pieces, then the
                    // signature that closes the block; or a redacted block whole.
                    (
                        _,
                        Delta {
                            reasoning_content: Some(r),
                            ..
                        },
                    ) => {
                        if let Some(text) = r.text.filter(|t| !t.is_empty()) {
                            out.push_back(StreamEvent::ReasoningDelta { text });
                        }
                        if let Some(signature) = r.signature.filter(|s| !s.is_empty()) {
                            out.push_back(StreamEvent::ReasoningSignature { signature });
                        }
                        if let Some(data) = r.redacted_content {
                            out.push_back(StreamEvent::RedactedReasoning { data });
                        }
                    }
                    // A tool delta for a block never started has no call to belong to.
                    (
                        _,
                        Delta {
                            tool_use: Some(_), ..
                        },
                    ) => {
                        return Err(Error::new(
                            ErrorKind::InvalidResponse,
                            format!(
                                "a toolUse delta for content block {} that never started",
                                d.content_block_index
                            ),
                        ));
                    }
                    _ => {}
                }
            }
            "messageStop" => {
                let s: MessageStop = match serde_json::from_slice(payload) {
                    Ok(s) => s,
                    Err(e) => return parse_err(e),
                };
                if s.stop_reason == GUARDRAIL {
                    return Err(guardrail_error(&self.guardrail_text).with_request_delivered());
                }
                if let Some(e) = malformed_stop(&s.stop_reason) {
                    return Err(e.with_request_delivered());
                }
                self.end.stop = Some(stop_reason(&s.stop_reason, self.json));
            }
            "metadata" => {
                let m: Metadata = match serde_json::from_slice(payload) {
                    Ok(m) => m,
                    Err(e) => return parse_err(e),
                };
                if let Some(u) = m.usage {
                    self.end.usage = u;
                }
                if self.end.stop.is_some() {
                    self.end.finish(out);
                    return Ok(Step::Done);
                }
            }
            // Events added to the API later carry nothing we use.
            _ => {}
        }
        Ok(Step::More)
    }
}

fn check_index(index: u64) -> Result<()> {
    if index > u64::from(ripcord_core::stream::MAX_TOOL_INDEX) {
        return Err(ripcord_core::stream::index_out_of_bounds(
            "content-block",
            index,
        ));
    }
    Ok(())
}

impl Decoder<Message> for BedrockDecoder {
    fn event(&mut self, m: Message, out: &mut VecDeque<StreamEvent>) -> Result<Step> {
        match header(&m, ":message-type") {
            Some("event") => {
                let name = header(&m, ":event-type").unwrap_or("").to_owned();
                self.event(&name, m.payload(), out)
            }
            Some("exception") => {
                let t = header(&m, ":exception-type").unwrap_or("UnknownException");
                Err(error_map::from_exception(t, m.payload(), None))
            }
            Some("error") => {
                let code = header(&m, ":error-code").unwrap_or("UnknownError");
                let message = header(&m, ":error-message");
                Err(error_map::from_exception(code, m.payload(), message))
            }
            other => Err(Error::new(
                ErrorKind::InvalidResponse,
                format!(
                    "an event-stream frame with message type {:?}",
                    other.unwrap_or("(none)")
                ),
            )),
        }
    }

    fn truncated(&self) -> &'static str {
        "stream truncated: the connection closed before `messageStop`"
    }

    fn clean_end(&mut self, out: &mut VecDeque<StreamEvent>) -> bool {
        // `messageStop` came: `metadata` (usage) would add nothing to the answer.
        self.end.clean_end(out)
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
