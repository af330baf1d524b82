//! The Converse response: `output.message.content` blocks, `stopReason`, `usage`.
//!
//! Reference: <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_ResponseSyntax>.
//! `reasoningContent` blocks (Claude's thinking) come back as the answer's reasoning: a
//! `reasoningText` with its signature, or `redactedContent`; a `guardrail_intervened` stop is a [`ErrorKind::ContentFiltered`] error whatever
//! text the guardrail put in place of the answer.

use ripcord_core::{
    ChatResponse, Error, ErrorKind, FinishReason, Price, ReasoningBlock, Result, ToolCall, Usage,
};
use serde::Deserialize;

use super::request::{JSON_TOOL, JsonMode};
use crate::answer::Answer;
use crate::stream_end::WireTokens;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConverseResp {
    output: Option<Output>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Output {
    message: Option<OutMessage>,
}

#[derive(Deserialize)]
struct OutMessage {
    #[serde(default)]
    content: Vec<RespBlock>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RespBlock {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<RespToolUse>,
    #[serde(default)]
    reasoning_content: Option<RespReasoning>,
}

/// A `reasoningContent` block: the reasoning text with its signature, or encrypted content.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RespReasoning {
    #[serde(default)]
    reasoning_text: Option<RespReasoningText>,
    #[serde(default)]
    redacted_content: Option<String>,
}

#[derive(Deserialize)]
struct RespReasoningText {
    #[serde(default)]
    text: String,
    #[serde(default)]
    signature: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RespToolUse {
    tool_use_id: String,
    name: String,
    #[serde(default)]
    input: serde_json::Value,
}

/// Bedrock's token counts: `inputTokens` excludes cache reads and writes (as Anthropic's).
#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct WireUsage {
    pub(crate) input_tokens: Option<u64>,
    pub(crate) output_tokens: Option<u64>,
    pub(crate) cache_read_input_tokens: Option<u64>,
    pub(crate) cache_write_input_tokens: Option<u64>,
}

impl WireTokens for WireUsage {
    /// Our usage counts every prompt token (cache reads and writes included) as input.
    fn to_usage(self, price: Option<&Price>) -> Usage {
        crate::models::usage_with_cache(
            self.input_tokens,
            self.output_tokens,
            self.cache_read_input_tokens,
            self.cache_write_input_tokens,
            price,
        )
    }
}

/// The guardrail replaced the answer.
pub(crate) const GUARDRAIL: &str = "guardrail_intervened";

/// Maps a `stopReason`. In JSON mode the forced tool call is the answer.
pub(crate) fn stop_reason(s: &str, json: JsonMode) -> FinishReason {
    match s {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" if json.0 => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        GUARDRAIL | "content_filtered" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The error of an answer a guardrail replaced; `said` is the guardrail's own text.
pub(crate) fn guardrail_error(said: &str) -> Error {
    let said = said.trim();
    let m = if said.is_empty() {
        "the Bedrock guardrail intervened".to_owned()
    } else {
        format!("the Bedrock guardrail intervened: {said}")
    };
    Error::new(ErrorKind::ContentFiltered, m).with_vendor_code(GUARDRAIL)
}

/// The model's output could not be parsed by Bedrock (`malformed_model_output`,
/// `malformed_tool_use`): not an answer, and another attempt may do better.
pub(crate) fn malformed_stop(stop: &str) -> Option<Error> {
    matches!(stop, "malformed_model_output" | "malformed_tool_use").then(|| {
        Error::new(
            ErrorKind::InvalidResponse,
            format!("Bedrock stopped the answer with `{stop}`: the model's output was malformed"),
        )
        .with_vendor_code(stop)
    })
}

/// Parses a 200 Converse body; `model` names what served (the response does not).
pub(crate) fn parse_converse(
    body: &[u8],
    json: JsonMode,
    model: &str,
    price: Option<&Price>,
) -> Result<ChatResponse> {
    let r: ConverseResp = serde_json::from_slice(body).map_err(|e| {
        Error::new(
            ErrorKind::InvalidResponse,
            format!("the Bedrock Converse response is not valid: {e}"),
        )
        .with_source(e)
    })?;
    let Some(message) = r.output.and_then(|o| o.message) else {
        return Err(Error::new(
            ErrorKind::InvalidResponse,
            "the Bedrock Converse response has no output.message",
        ));
    };
    let mut a = Answer::default();
    for block in message.content {
        if let Some(r) = block.reasoning_content {
            if let Some(t) = r.reasoning_text {
                a.reasoning.push(ReasoningBlock::Thinking {
                    text: t.text,
                    signature: t.signature.filter(|s| !s.is_empty()),
                });
            }
            if let Some(data) = r.redacted_content {
                a.reasoning.push(ReasoningBlock::redacted(data));
            }
        }
        if let Some(t) = block.text {
            a.content.push_str(&t);
        }
        match block.tool_use {
            Some(t) if json.0 && t.name == JSON_TOOL => a.content.push_str(&t.input.to_string()),
            Some(t) => a
                .calls
                .push(ToolCall::new(t.tool_use_id, t.name, t.input.to_string())),
            None => {}
        }
    }
    let stop = r.stop_reason.as_deref().unwrap_or("");
    if stop == GUARDRAIL {
        return Err(guardrail_error(&a.content));
    }
    if let Some(e) = malformed_stop(stop) {
        return Err(e);
    }
    let finish = if stop.is_empty() {
        FinishReason::default()
    } else {
        stop_reason(stop, json)
    };
    a.into_response(
        finish,
        r.usage.unwrap_or_default().to_usage(price),
        model.to_owned(),
        crate::driver::refused_without_content,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::usage_counts;

    #[test]
    fn text_tool_use_reasoning_and_cache_usage() {
        let body = br#"{"output":{"message":{"role":"assistant","content":[
            {"reasoningContent":{"reasoningText":{"text":"Let me think.","signature":"sig"}}},
            {"text":"Checking the weather."},
            {"toolUse":{"toolUseId":"tooluse_abc","name":"weather","input":{"city":"Oslo"}}}]}},
            "stopReason":"tool_use",
            "usage":{"inputTokens":20,"outputTokens":15,"totalTokens":140,"cacheReadInputTokens":100,"cacheWriteInputTokens":5},
            "metrics":{"latencyMs":812}}"#;
        let price = Price::per_million(3.0, 15.0).with_cached_input(0.3);
        let r = parse_converse(
            body,
            JsonMode(false),
            "us.anthropic.claude-sonnet-4-5",
            Some(&price),
        )
        .unwrap();
        assert_eq!(r.content, "Checking the weather.");
        assert_eq!(
            r.reasoning,
            vec![ReasoningBlock::thinking("Let me think.").with_signature("sig")]
        );
        assert_eq!(
            r.tool_calls,
            vec![ToolCall::new(
                "tooluse_abc",
                "weather",
                r#"{"city":"Oslo"}"#
            )]
        );
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(usage_counts(&r.usage), (125, 100, 15));
        assert!(r.usage.cost_usd.is_some());
        assert_eq!(r.model, "us.anthropic.claude-sonnet-4-5");
    }

    #[test]
    fn json_mode_guardrail_and_garbage() {
        let body = br#"{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"json_response","input":{"n":3}}}]}},"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":1}}"#;
        let r = parse_converse(body, JsonMode(true), "m", None).unwrap();
        assert_eq!(r.content, r#"{"n":3}"#);
        assert_eq!(r.finish_reason, FinishReason::Stop);

        let blocked = br#"{"output":{"message":{"role":"assistant","content":[{"text":"Sorry, the model cannot answer this question."}]}},"stopReason":"guardrail_intervened","usage":{"inputTokens":9,"outputTokens":0}}"#;
        let e = parse_converse(blocked, JsonMode(false), "m", None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ContentFiltered);
        assert!(e.message().contains("cannot answer"), "{e}");

        let e = parse_converse(b"{\"output\":", JsonMode(false), "m", None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        let e = parse_converse(b"{\"stopReason\":\"end_turn\"}", JsonMode(false), "m", None)
            .unwrap_err();
        assert!(e.message().contains("output.message"), "{e}");
        assert_eq!(
            stop_reason("max_tokens", JsonMode(false)),
            FinishReason::Length
        );
        assert_eq!(
            stop_reason("content_filtered", JsonMode(false)),
            FinishReason::ContentFilter
        );
    }
}
