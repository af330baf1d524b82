//! The Anthropic wire: the Messages API (JSON and SSE) and Models.
//!
//! Shapes follow <https://docs.claude.com/en/api/messages> and
//! <https://docs.claude.com/en/docs/build-with-claude/streaming>: a `message` object; for
//! streams, named events `message_start`, `content_block_start`, `ping`, `content_block_delta`
//! (`text_delta`; `input_json_delta` for `tool_use` blocks), `content_block_stop`,
//! `message_delta` (stop reason, output tokens) and `message_stop`; errors mid-stream arrive as
//! `event: error`. A reply with reasoning opens with a `thinking` block (`thinking_delta`
//! pieces, then one `signature_delta`) and an optional `redacted_thinking` block, as extended
//! thinking does; a request whose history carries a thinking block without the signature the
//! fake issued for its text is refused as the real API refuses it.

use serde::Serialize;
use serde_json::Value;

use crate::http::Frames;
use crate::openai::Ctx;
use crate::reply::{Reply, signature_for, split_even};

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
    Thinking {
        thinking: &'a str,
        signature: String,
    },
    RedactedThinking {
        data: &'a str,
    },
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

/// Why the answer stopped, in Claude's words (Bedrock's Converse API uses the same ones).
pub(crate) fn stop_reason(reply: &Reply) -> &'static str {
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
    let mut content = Vec::with_capacity(3 + reply.tool_calls.len());
    if let Some(thinking) = &reply.reasoning {
        content.push(Block::Thinking {
            thinking,
            signature: signature_for(thinking),
        });
    }
    if let Some(data) = &reply.redacted_reasoning {
        content.push(Block::RedactedThinking { data });
    }
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
#[expect(clippy::enum_variant_names, reason = "the wire's own names")]
enum Delta<'a> {
    TextDelta { text: &'a str },
    InputJsonDelta { partial_json: &'a str },
    ThinkingDelta { thinking: &'a str },
    SignatureDelta { signature: String },
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

/// Appends the `content_block_start` of `block` at `index`.
fn block_start(f: &mut Frames, index: usize, block: Block<'_>, is_content: bool) {
    let start = BlockStart {
        kind: "content_block_start",
        index,
        content_block: block,
    };
    f.push(Some("content_block_start"), &start, is_content);
}

/// Appends a `content_block_delta` of the block at `index`.
fn block_delta(f: &mut Frames, index: usize, delta: Delta<'_>, is_content: bool) {
    let delta = BlockDelta {
        kind: "content_block_delta",
        index,
        delta,
    };
    f.push(Some("content_block_delta"), &delta, is_content);
}

/// Appends the `content_block_stop` of the block at `index`.
fn block_stop(f: &mut Frames, index: usize) {
    let stop = BlockStop {
        kind: "content_block_stop",
        index,
    };
    f.push(Some("content_block_stop"), &stop, false);
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
    if let Some(thinking) = &reply.reasoning {
        block_start(
            &mut f,
            index,
            Block::Thinking {
                thinking: "",
                signature: String::new(),
            },
            false,
        );
        for piece in split_even(thinking, reply.chunks) {
            block_delta(
                &mut f,
                index,
                Delta::ThinkingDelta { thinking: piece },
                true,
            );
        }
        block_delta(
            &mut f,
            index,
            Delta::SignatureDelta {
                signature: signature_for(thinking),
            },
            false,
        );
        block_stop(&mut f, index);
        index += 1;
    }
    if let Some(data) = &reply.redacted_reasoning {
        block_start(&mut f, index, Block::RedactedThinking { data }, true);
        block_stop(&mut f, index);
        index += 1;
    }
    if reply.text.is_empty() {
        f.push(Some("ping"), &ping, false);
    } else {
        block_start(&mut f, index, Block::Text { text: "" }, false);
        f.push(Some("ping"), &ping, false);
        for piece in reply.text_pieces() {
            block_delta(&mut f, index, Delta::TextDelta { text: piece }, true);
        }
        block_stop(&mut f, index);
        index += 1;
    }
    for (id, name, arguments) in &reply.tool_calls {
        // The block start names the tool: it is the first tool-call delta, so it counts as content.
        block_start(
            &mut f,
            index,
            Block::ToolUse {
                id,
                name,
                input: Value::Object(serde_json::Map::new()),
            },
            true,
        );
        for piece in split_even(arguments, reply.chunks) {
            block_delta(
                &mut f,
                index,
                Delta::InputJsonDelta {
                    partial_json: piece,
                },
                true,
            );
        }
        block_stop(&mut f, index);
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

/// The 400 the fake gives a request whose history carries a thinking block it did not issue:
/// a block without its signature, or with one that is not the fake's for the block's text
/// (Anthropic checks signatures the same way). `None` when every thinking block is intact.
pub(crate) fn thinking_error(request_id: &str, body: &[u8]) -> Option<String> {
    // Only a body that mentions a thinking block is read again.
    if !body.windows(10).any(|w| w == b"\"thinking\"") {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    let messages = v.get("messages")?.as_array()?;
    for (i, m) in messages.iter().enumerate() {
        let Some(blocks) = m.get("content").and_then(Value::as_array) else {
            continue;
        };
        for (j, b) in blocks.iter().enumerate() {
            if b.get("type").and_then(Value::as_str) != Some("thinking") {
                continue;
            }
            let text = b.get("thinking").and_then(Value::as_str).unwrap_or("");
            let message = match b.get("signature").and_then(Value::as_str) {
                None => format!("messages.{i}.content.{j}.thinking.signature: Field required"),
                Some(sig) if sig != signature_for(text) => {
                    format!("messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
                }
                Some(_) => continue,
            };
            return Some(crate::vendor_error::anthropic_error(
                "invalid_request_error",
                &message,
                request_id,
            ));
        }
    }
    None
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
        let ctx = Ctx::new("msg_1", "claude", 0);
        let reply = Reply::text_then_tool("toolu_1");
        let f = stream_frames(ctx, &reply, false);
        let events = f.sse_fields("event: ");
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
    fn reasoning_opens_the_message_signed_in_json_and_stream() {
        let ctx = Ctx::new("msg_1", "claude", 0);
        let reply = Reply::text("4")
            .with_chunks(2)
            .with_reasoning("2+2")
            .with_redacted_reasoning("opaque");
        let v: Value = serde_json::from_slice(&message(ctx, &reply)).unwrap_or_default();
        assert_eq!(
            v["content"],
            serde_json::json!([
                {"type": "thinking", "thinking": "2+2", "signature": signature_for("2+2")},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "4"}
            ])
        );
        let f = stream_frames(ctx, &reply, false);
        let data = f.sse_data();
        assert_eq!(
            data[1]["content_block"],
            serde_json::json!({"type": "thinking", "thinking": "", "signature": ""})
        );
        assert_eq!(data[2]["delta"]["type"], "thinking_delta");
        assert_eq!(
            data[4]["delta"],
            serde_json::json!({"type": "signature_delta", "signature": signature_for("2+2")})
        );
        assert_eq!(data[6]["content_block"]["type"], "redacted_thinking");
        assert_eq!(data[8]["index"], 2, "the text block comes third");
    }

    #[test]
    fn thinking_in_history_needs_the_fakes_signature() {
        let body = |block: Value| {
            serde_json::to_vec(&serde_json::json!({"messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [block, {"type": "text", "text": "a"}]}
            ]}))
            .unwrap_or_default()
        };
        let good = serde_json::json!({"type": "thinking", "thinking": "t", "signature": signature_for("t")});
        assert_eq!(thinking_error("r", &body(good)), None);
        let forged = serde_json::json!({"type": "thinking", "thinking": "t2", "signature": signature_for("t")});
        let e = thinking_error("r", &body(forged)).unwrap_or_default();
        assert!(
            e.contains("messages.1.content.0: Invalid `signature` in `thinking` block"),
            "{e}"
        );
        let bare = serde_json::json!({"type": "thinking", "thinking": "t"});
        let e = thinking_error("r", &body(bare)).unwrap_or_default();
        assert!(
            e.contains("messages.1.content.0.thinking.signature: Field required"),
            "{e}"
        );
        assert_eq!(
            thinking_error("r", br#"{"messages":[{"role":"user","content":"hi"}]}"#),
            None
        );
    }

    #[test]
    fn message_body_parses_tool_input() {
        let ctx = Ctx::new("msg_1", "claude", 0);
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
