//! The Anthropic wire: the Messages API (JSON and SSE) and Models.
//!
//! Shapes follow <https://docs.claude.com/en/api/messages> and
//! <https://docs.claude.com/en/docs/build-with-claude/streaming>: a `message` object; for
//! streams, named events `message_start`, `content_block_start`, `ping`, `content_block_delta`
//! (`text_delta`; `input_json_delta` for `tool_use` blocks), `content_block_stop`,
//! `message_delta` (stop reason, output tokens) and `message_stop`; errors mid-stream arrive as
//! `event: error`.

use serde::Serialize;
use serde_json::Value;

use crate::http::Frames;
use crate::openai::Ctx;
use crate::reply::{Reply, split_even};

#[derive(Serialize)]
struct Message<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: Vec<Block<'a>>,
    stop_reason: Option<&'static str>,
    stop_sequence: Option<()>,
    usage: Usage,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
}

#[derive(Serialize)]
struct Usage {
    input_tokens: u64,
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
    output_tokens: u64,
}

fn stop_reason(reply: &Reply) -> &'static str {
    if reply.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

/// A tool call's `input`: the arguments parsed as JSON (a string when they are not JSON).
fn tool_input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

/// The `message` JSON body.
pub(crate) fn message(ctx: Ctx<'_>, reply: &Reply) -> Vec<u8> {
    let mut content = Vec::with_capacity(1 + reply.tool_calls.len());
    if !reply.text.is_empty() {
        content.push(Block::Text { text: &reply.text });
    }
    for (id, name, arguments) in &reply.tool_calls {
        content.push(Block::ToolUse {
            id,
            name,
            input: tool_input(arguments),
        });
    }
    let body = Message {
        id: ctx.id,
        kind: "message",
        role: "assistant",
        model: ctx.model,
        content,
        stop_reason: Some(stop_reason(reply)),
        stop_sequence: None,
        usage: Usage {
            input_tokens: reply.input_tokens,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
            output_tokens: reply.output_tokens,
        },
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

#[derive(Serialize)]
struct MessageStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: Message<'a>,
}

#[derive(Serialize)]
struct BlockStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: usize,
    content_block: Block<'a>,
}

#[derive(Serialize)]
struct BlockDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: usize,
    delta: Delta<'a>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta<'a> {
    TextDelta { text: &'a str },
    InputJsonDelta { partial_json: &'a str },
}

#[derive(Serialize)]
struct BlockStop {
    #[serde(rename = "type")]
    kind: &'static str,
    index: usize,
}

#[derive(Serialize)]
struct MessageDelta {
    #[serde(rename = "type")]
    kind: &'static str,
    delta: StopDelta,
    usage: OutputUsage,
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: &'static str,
    stop_sequence: Option<()>,
}

#[derive(Serialize)]
struct OutputUsage {
    output_tokens: u64,
}

#[derive(Serialize)]
struct Bare {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The SSE events of a streamed message.
pub(crate) fn stream_frames(ctx: Ctx<'_>, reply: &Reply, broken: bool) -> Frames {
    let mut f = Frames::new(broken);
    let start = MessageStart {
        kind: "message_start",
        message: Message {
            id: ctx.id,
            kind: "message",
            role: "assistant",
            model: ctx.model,
            content: Vec::new(),
            stop_reason: None,
            stop_sequence: None,
            usage: Usage {
                input_tokens: reply.input_tokens,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 0,
                output_tokens: 1,
            },
        },
    };
    f.push(Some("message_start"), &start, false);
    let ping = Bare { kind: "ping" };
    let mut index = 0;
    if reply.text.is_empty() {
        f.push(Some("ping"), &ping, false);
    } else {
        let block = BlockStart {
            kind: "content_block_start",
            index,
            content_block: Block::Text { text: "" },
        };
        f.push(Some("content_block_start"), &block, false);
        f.push(Some("ping"), &ping, false);
        for piece in reply.text_pieces() {
            let delta = BlockDelta {
                kind: "content_block_delta",
                index,
                delta: Delta::TextDelta { text: piece },
            };
            f.push(Some("content_block_delta"), &delta, true);
        }
        let stop = BlockStop {
            kind: "content_block_stop",
            index,
        };
        f.push(Some("content_block_stop"), &stop, false);
        index += 1;
    }
    for (id, name, arguments) in &reply.tool_calls {
        // The block start names the tool: it is the first tool-call delta, so it counts as content.
        let block = BlockStart {
            kind: "content_block_start",
            index,
            content_block: Block::ToolUse {
                id,
                name,
                input: Value::Object(serde_json::Map::new()),
            },
        };
        f.push(Some("content_block_start"), &block, true);
        for piece in split_even(arguments, reply.chunks) {
            let delta = BlockDelta {
                kind: "content_block_delta",
                index,
                delta: Delta::InputJsonDelta {
                    partial_json: piece,
                },
            };
            f.push(Some("content_block_delta"), &delta, true);
        }
        let stop = BlockStop {
            kind: "content_block_stop",
            index,
        };
        f.push(Some("content_block_stop"), &stop, false);
        index += 1;
    }
    f.start_tail();
    let delta = MessageDelta {
        kind: "message_delta",
        delta: StopDelta {
            stop_reason: stop_reason(reply),
            stop_sequence: None,
        },
        usage: OutputUsage {
            output_tokens: reply.output_tokens,
        },
    };
    f.push(Some("message_delta"), &delta, false);
    f.push(
        Some("message_stop"),
        &Bare {
            kind: "message_stop",
        },
        false,
    );
    f
}

/// The event name of an in-band error.
pub(crate) const INBAND_ERROR_EVENT: Option<&str> = Some("error");

/// Request fields the fake needs from a Messages request.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub(crate) struct MessagesProbe<'a> {
    #[serde(borrow)]
    pub(crate) model: Option<std::borrow::Cow<'a, str>>,
    pub(crate) stream: Option<bool>,
    pub(crate) max_tokens: Option<serde::de::IgnoredAny>,
    /// Claude on Vertex AI: the API version travels in the body.
    pub(crate) anthropic_version: Option<serde::de::IgnoredAny>,
    pub(crate) messages: Option<serde::de::IgnoredAny>,
}

/// A 400 for a request body that is not JSON.
pub(crate) fn invalid_json_error(request_id: &str, detail: &str) -> String {
    crate::vendor_error::anthropic_error(
        "invalid_request_error",
        &format!("There was an issue with your request body: invalid JSON ({detail})"),
        request_id,
    )
}

/// A 400 for a missing required field.
pub(crate) fn missing_field_error(request_id: &str, field: &str) -> String {
    crate::vendor_error::anthropic_error(
        "invalid_request_error",
        &format!("{field}: Field required"),
        request_id,
    )
}

/// The `GET /v1/models` list.
pub(crate) fn models(chat_model: &str) -> Vec<u8> {
    serde_json::json!({
        "data": [{
            "type": "model",
            "id": chat_model,
            "display_name": chat_model,
            "created_at": "2025-09-29T00:00:00Z",
        }],
        "has_more": false,
        "first_id": chat_model,
        "last_id": chat_model,
    })
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_frames_have_blocks_in_order() {
        let ctx = Ctx {
            id: "msg_1",
            model: "claude",
            created: 0,
        };
        let reply = Reply::text("abcd")
            .with_chunks(2)
            .with_tool_call("toolu_1", "f", "{\"a\":1}");
        let f = stream_frames(ctx, &reply, false);
        let text = String::from_utf8_lossy(f.bytes(0..f.len())).into_owned();
        let events: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            events,
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        // text deltas 3, 4; tool start 6; argument deltas 7, 8
        assert_eq!(f.content(), &[3, 4, 6, 7, 8]);
        assert_eq!(f.tail_start(), 10);
    }

    #[test]
    fn message_body_parses_tool_input() {
        let ctx = Ctx {
            id: "msg_1",
            model: "claude",
            created: 0,
        };
        let reply = Reply::text("").with_tool_call("toolu_1", "f", "{\"a\":1}");
        let v: Value = serde_json::from_slice(&message(ctx, &reply)).unwrap_or_default();
        assert_eq!(v["content"][0]["input"]["a"], 1);
        assert_eq!(v["stop_reason"], "tool_use");
        assert_eq!(
            v["content"].as_array().map(Vec::len),
            Some(1),
            "no empty text block"
        );
    }
}
