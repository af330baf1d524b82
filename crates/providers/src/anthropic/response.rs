//! The Messages API response.

use ripcord_core::{
    ChatResponse, Error, ErrorKind, FinishReason, Price, ReasoningBlock, Result, ToolCall, Usage,
};
use serde::Deserialize;

use super::error_map;
use super::request::{JSON_TOOL, JsonMode};
use crate::answer::Answer;
use crate::error_body::ErrorBody;
use crate::stream_end::WireTokens;

#[derive(Deserialize)]
struct MessageResp {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Vec<RespBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// A content block: of the answer, or as a stream's `content_block_start` opens it (a text
/// block then starts empty, a tool call's `input` is `{}` and comes in deltas).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum RespBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: serde_json::Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    #[serde(other)]
    Other,
}

/// Anthropic's token counts: `input_tokens` excludes cache reads and writes.
#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(default)]
pub(crate) struct WireUsage {
    pub(crate) input_tokens: Option<u64>,
    pub(crate) output_tokens: Option<u64>,
    pub(crate) cache_read_input_tokens: Option<u64>,
    pub(crate) cache_creation_input_tokens: Option<u64>,
}

impl WireTokens for WireUsage {
    /// Our usage counts every prompt token (cached ones included) as input.
    fn to_usage(self, price: Option<&Price>) -> Usage {
        crate::models::usage_with_cache(
            self.input_tokens,
            self.output_tokens,
            self.cache_read_input_tokens,
            self.cache_creation_input_tokens,
            price,
        )
    }
}

/// Maps a `stop_reason`. In JSON mode the forced tool call *is* the answer, so `tool_use`
/// means a normal stop.
pub(crate) fn stop_reason(s: &str, json: JsonMode) -> FinishReason {
    match s {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" if json.0 => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Parses a 200 Messages body; an error object in it is classified like an HTTP error.
pub(crate) fn parse_message(
    body: &[u8],
    json: JsonMode,
    price: Option<&Price>,
) -> Result<ChatResponse> {
    let m: MessageResp =
        serde_json::from_slice(body).map_err(|e| match ErrorBody::parse(body) {
            Some(b) => error_map::from_body(None, &b),
            None => Error::new(
                ErrorKind::InvalidResponse,
                format!("the Anthropic response is not valid JSON: {e}"),
            )
            .with_source(e),
        })?;
    if m.kind.as_deref() == Some("error") {
        let b = ErrorBody::parse(body)
            .unwrap_or_else(|| ErrorBody::with_message("error without details"));
        return Err(error_map::from_body(None, &b));
    }
    let mut a = Answer::default();
    for block in m.content {
        match block {
            RespBlock::Text { text } => a.content.push_str(&text),
            RespBlock::ToolUse { name, input, .. } if json.0 && name == JSON_TOOL => {
                a.content.push_str(&input.to_string())
            }
            RespBlock::ToolUse { id, name, input } => {
                a.calls.push(ToolCall::new(id, name, input.to_string()))
            }
            RespBlock::Thinking {
                thinking,
                signature,
            } => a.reasoning.push(ReasoningBlock::Thinking {
                text: thinking,
                signature: signature.filter(|s| !s.is_empty()),
            }),
            RespBlock::RedactedThinking { data } => {
                a.reasoning.push(ReasoningBlock::redacted(data))
            }
            RespBlock::Other => {}
        }
    }
    let finish = m.stop_reason.as_deref().map(|s| stop_reason(s, json));
    a.into_response(
        finish.unwrap_or_default(),
        m.usage.unwrap_or_default().to_usage(price),
        m.model.unwrap_or_default(),
        crate::driver::refused_without_content,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::usage_counts;

    #[test]
    fn text_tools_usage_with_cache() {
        let body = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
            "content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Let me check."},
            {"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}}],
            "stop_reason":"tool_use","stop_sequence":null,
            "usage":{"input_tokens":20,"output_tokens":15,"cache_read_input_tokens":100,"cache_creation_input_tokens":5}}"#;
        let r = parse_message(
            body,
            JsonMode(false),
            Some(&Price::per_million(3.0, 15.0).with_cached_input(0.3)),
        )
        .unwrap();
        assert_eq!(r.content, "Let me check.");
        assert_eq!(
            r.reasoning,
            vec![ReasoningBlock::thinking("hm").with_signature("s")]
        );
        assert_eq!(
            r.tool_calls,
            vec![ToolCall::new("toolu_1", "weather", r#"{"city":"Paris"}"#)]
        );
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(usage_counts(&r.usage), (125, 100, 15));
        assert_eq!(r.model, "claude-sonnet-4-5-20250929");
    }

    #[test]
    fn thinking_and_redacted_blocks_are_kept_in_order() {
        let body = br#"{"type":"message","model":"claude-sonnet-4-5","content":[
            {"type":"thinking","thinking":"First, 2+2.","signature":"sig-a"},
            {"type":"redacted_thinking","data":"EmwKAhgB"},
            {"type":"text","text":"4"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
        let r = parse_message(body, JsonMode(false), None).unwrap();
        assert_eq!(r.content, "4");
        assert_eq!(
            r.reasoning,
            vec![
                ReasoningBlock::thinking("First, 2+2.").with_signature("sig-a"),
                ReasoningBlock::redacted("EmwKAhgB"),
            ]
        );
    }

    #[test]
    fn json_mode_answer_is_the_tool_input() {
        let body = br#"{"type":"message","content":[{"type":"tool_use","id":"t","name":"json_response","input":{"n":3}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}"#;
        let r = parse_message(body, JsonMode(true), None).unwrap();
        assert_eq!(r.content, r#"{"n":3}"#);
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.finish_reason, FinishReason::Stop);
    }

    #[test]
    fn error_bodies_and_garbage() {
        let e = parse_message(
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            JsonMode(false),
            None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Overloaded);
        assert_eq!(e.vendor_code(), Some("overloaded_error"));
        let e = parse_message(b"{\"type\":\"message\",", JsonMode(false), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        assert_eq!(
            stop_reason("refusal", JsonMode(false)),
            FinishReason::ContentFilter
        );
        assert_eq!(
            stop_reason("max_tokens", JsonMode(false)),
            FinishReason::Length
        );
    }
}
