//! The Messages stream: `message_start`, `content_block_start` / `_delta` / `_stop`,
//! `message_delta` (stop reason, output tokens), `message_stop`, `ping`, and `error`.
//!
//! Content blocks are numbered across text and tool use; ripcord numbers tool calls on their
//! own (0, 1, … in the order the model started them), so the decoder keeps a small map from
//! block index to what the block is. Usage (input from `message_start`, output from the last
//! `message_delta`) is emitted once, just before the single `Finish` at `message_stop`.

use std::collections::VecDeque;

use ripcord_core::{Error, Price, Result, StreamEvent};
use serde::Deserialize;

use super::error_map;
use super::request::{JSON_TOOL, JsonMode};
use super::response::{RespBlock, WireUsage, stop_reason};
use crate::driver::{Decoder, Step, malformed};
use crate::error_body::ErrorBody;
use crate::sse::SseEvent;
use crate::stream_end::StreamEnd;

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: RespBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {},
    MessageDelta {
        #[serde(default)]
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop {},
    Ping {},
    Error {},
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[expect(clippy::enum_variant_names, reason = "the wire's own names")]
enum Delta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    Tool(u32),
    Json,
    Other,
}

/// An in-band `error` event, classified like the HTTP error it stands for.
fn in_band(data: &str) -> Error {
    let body = ErrorBody::parse(data.as_bytes())
        .unwrap_or_else(|| ErrorBody::with_message(data.trim().to_owned()));
    error_map::from_body(None, &body)
}

/// Decodes an Anthropic Messages stream.
pub(crate) struct AnthropicDecoder {
    json: JsonMode,
    end: StreamEnd<WireUsage>,
    blocks: Vec<Block>,
    tools: u32,
}

impl AnthropicDecoder {
    pub(crate) fn new(json: JsonMode, price: Option<Price>) -> Self {
        AnthropicDecoder {
            json,
            end: StreamEnd::new(price, None),
            blocks: Vec::new(),
            tools: 0,
        }
    }

    fn block(&self, index: usize) -> Block {
        self.blocks.get(index).copied().unwrap_or(Block::Other)
    }

    fn set_block(&mut self, index: usize, b: Block) {
        if self.blocks.len() <= index {
            self.blocks.resize(index + 1, Block::Other);
        }
        self.blocks[index] = b;
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<Step> {
        if ev.event == "error" {
            return Err(in_band(&ev.data));
        }
        if ev.event == "ping" || ev.data.trim().is_empty() {
            return Ok(Step::More);
        }
        let parsed: Event = match serde_json::from_str(&ev.data) {
            Ok(p) => p,
            Err(e) => {
                return Ok(malformed(
                    format!("malformed `{}` stream event: {e}", ev.name()),
                    e,
                ));
            }
        };
        if let Event::ContentBlockStart { index, .. } | Event::ContentBlockDelta { index, .. } =
            &parsed
            && *index > ripcord_core::stream::MAX_TOOL_INDEX as usize
        {
            return Err(ripcord_core::stream::index_out_of_bounds(
                "content-block",
                *index as u64,
            ));
        }
        match parsed {
            Event::MessageStart { message } => {
                self.end.model = message.model;
                if let Some(u) = message.usage {
                    self.end.usage = u;
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                RespBlock::Text { text } => {
                    self.set_block(index, Block::Text);
                    if !text.is_empty() {
                        out.push_back(StreamEvent::TextDelta { text });
                    }
                }
                RespBlock::ToolUse { name, .. } if self.json.0 && name == JSON_TOOL => {
                    self.set_block(index, Block::Json);
                }
                RespBlock::ToolUse { id, name, .. } => {
                    let n = self.tools;
                    self.tools += 1;
                    self.set_block(index, Block::Tool(n));
                    out.push_back(StreamEvent::ToolCallDelta {
                        index: n,
                        id: Some(id),
                        name: Some(name),
                        arguments: String::new(),
                    });
                }
                RespBlock::Thinking {
                    thinking,
                    signature,
                } => {
                    self.set_block(index, Block::Thinking);
                    if !thinking.is_empty() {
                        out.push_back(StreamEvent::ReasoningDelta { text: thinking });
                    }
                    if let Some(signature) = signature.filter(|s| !s.is_empty()) {
                        out.push_back(StreamEvent::ReasoningSignature { signature });
                    }
                }
                RespBlock::RedactedThinking { data } => {
                    self.set_block(index, Block::Other);
                    out.push_back(StreamEvent::RedactedReasoning { data });
                }
                RespBlock::Other => self.set_block(index, Block::Other),
            },
            Event::ContentBlockDelta { index, delta } => match (self.block(index), delta) {
                (Block::Text, Delta::TextDelta { text }) if !text.is_empty() => {
                    out.push_back(StreamEvent::TextDelta { text });
                }
                (Block::Thinking, Delta::ThinkingDelta { thinking }) if !thinking.is_empty() => {
                    out.push_back(StreamEvent::ReasoningDelta { text: thinking });
                }
                (Block::Thinking, Delta::SignatureDelta { signature }) => {
                    out.push_back(StreamEvent::ReasoningSignature { signature });
                }
                (Block::Tool(n), Delta::InputJsonDelta { partial_json }) => {
                    out.push_back(StreamEvent::ToolCallDelta {
                        index: n,
                        id: None,
                        name: None,
                        arguments: partial_json,
                    });
                }
                (Block::Json, Delta::InputJsonDelta { partial_json })
                    if !partial_json.is_empty() =>
                {
                    out.push_back(StreamEvent::TextDelta { text: partial_json });
                }
                _ => {}
            },
            Event::MessageDelta { delta, usage } => {
                if let Some(s) = delta.stop_reason {
                    self.end.stop = Some(stop_reason(&s, self.json));
                }
                if let Some(u) = usage {
                    // Output tokens are cumulative; input fields, when repeated, win too.
                    self.end.usage.output_tokens = u.output_tokens.or(self.end.usage.output_tokens);
                    self.end.usage.input_tokens = u.input_tokens.or(self.end.usage.input_tokens);
                    self.end.usage.cache_read_input_tokens = u
                        .cache_read_input_tokens
                        .or(self.end.usage.cache_read_input_tokens);
                    self.end.usage.cache_creation_input_tokens = u
                        .cache_creation_input_tokens
                        .or(self.end.usage.cache_creation_input_tokens);
                }
            }
            Event::MessageStop {} => {
                self.end.finish(out);
                return Ok(Step::Done);
            }
            Event::ContentBlockStop {} | Event::Ping {} | Event::Unknown => {}
            Event::Error {} => return Err(in_band(&ev.data)),
        }
        Ok(Step::More)
    }

    fn truncated(&self) -> &'static str {
        "stream truncated: the connection closed before `message_stop`"
    }

    fn clean_end(&mut self, out: &mut VecDeque<StreamEvent>) -> bool {
        // A `message_delta` carried the stop reason: `message_stop` would add nothing.
        self.end.clean_end(out)
    }
}

#[cfg(test)]
mod tests {
    use ripcord_core::stream::Collector;
    use ripcord_core::{FinishReason, ToolCall};

    use super::*;
    use crate::driver::{clean_end_answer, decode_sse};
    use ripcord_core::ErrorKind;

    fn run(input: &str, json: bool) -> (Vec<StreamEvent>, Result<Step>) {
        decode_sse(AnthropicDecoder::new(JsonMode(json), None), input)
    }

    const STREAM: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"weather\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Oslo\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":30}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    #[test]
    fn a_content_block_index_beyond_the_bound_is_an_invalid_response_not_an_allocation() {
        let input = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":18446744073709551615,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
        let (events, last) = run(input, false);
        assert!(events.is_empty());
        assert_eq!(last.unwrap_err().kind(), ErrorKind::InvalidResponse);
    }

    #[test]
    fn text_then_tool_call_usage_and_finish_last() {
        let (events, last) = run(STREAM, false);
        assert!(matches!(last, Ok(Step::Done)));
        assert!(matches!(
            events.last(),
            Some(StreamEvent::Finish {
                reason: FinishReason::ToolCalls,
                ..
            })
        ));
        let mut c = Collector::new();
        for e in events {
            c.push(e);
        }
        let r = c.finish().unwrap();
        assert_eq!(r.content, "Checking");
        assert_eq!(
            r.tool_calls,
            vec![ToolCall::new("toolu_9", "weather", "{\"city\":\"Oslo\"}")]
        );
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (25, 30));
        assert_eq!(r.model, "claude-sonnet-4-5");
    }

    #[test]
    fn thinking_blocks_stream_as_reasoning_with_their_signatures() {
        let input = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":5}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Two \"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"and two.\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig-1\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"opaque\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"4\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let (events, last) = run(input, false);
        assert!(matches!(last, Ok(Step::Done)));
        assert_eq!(events[0], StreamEvent::reasoning("Two "));
        let mut c = Collector::new();
        events.into_iter().for_each(|e| c.push(e));
        let r = c.finish().unwrap();
        assert_eq!(r.content, "4");
        assert_eq!(
            r.reasoning,
            vec![
                ripcord_core::ReasoningBlock::thinking("Two and two.").with_signature("sig-1"),
                ripcord_core::ReasoningBlock::redacted("opaque"),
            ]
        );
    }

    #[test]
    fn mid_stream_error_event() {
        let input = concat!(
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
        );
        let (events, last) = run(input, false);
        assert_eq!(events.len(), 1);
        let e = last.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Overloaded);
        assert_eq!(e.message(), "Overloaded");
    }

    #[test]
    fn json_mode_streams_the_tool_input_as_text() {
        let input = concat!(
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"json_response\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"n\\\":\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"3}\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let (events, _) = run(input, true);
        let mut c = Collector::new();
        for e in events {
            c.push(e);
        }
        let r = c.finish().unwrap();
        assert_eq!(r.content, "{\"n\":3}");
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.finish_reason, FinishReason::Stop);
    }

    #[test]
    fn malformed_event_is_reported_for_the_driver_to_skip() {
        let (_, last) = run(
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\n\n",
            false,
        );
        match last {
            Ok(Step::Malformed(e)) => {
                assert_eq!(e.kind(), ErrorKind::InvalidResponse);
                assert!(e.message().contains("content_block_delta"), "{e}");
            }
            other => panic!("expected a malformed step, got {other:?}"),
        }
    }

    #[test]
    fn a_clean_end_after_the_stop_reason_completes_with_usage() {
        // Everything but `message_stop`.
        let cut = STREAM.rsplit_once("event: message_stop").unwrap().0;
        let r = clean_end_answer(AnthropicDecoder::new(JsonMode(false), None), cut).unwrap();
        assert_eq!(r.usage.output_tokens, 30);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        // Without the `message_delta` there is no stop reason: truncated.
        let cut = STREAM.rsplit_once("event: message_delta").unwrap().0;
        assert!(clean_end_answer(AnthropicDecoder::new(JsonMode(false), None), cut).is_none());
    }
}
