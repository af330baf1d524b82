//! The `generateContent` response (<https://ai.google.dev/api/generate-content#generatecontentresponse>),
//! shared by the JSON answer and each chunk of a stream.
//!
//! - Text parts are the answer; parts with `thought: true` are the model's thought summaries
//!   and are kept apart from it (never in the answer text; their tokens count as output).
//! - `functionCall` parts are tool calls (several = parallel calls), each with its id and
//!   thought signature folded into the ripcord call id (see the request module).
//! - Usage: `promptTokenCount` (cached tokens included, as ripcord counts input) plus
//!   `toolUsePromptTokenCount` is input; `candidatesTokenCount` plus `thoughtsTokenCount` is
//!   output (Google bills thinking as output); `cachedContentTokenCount` is cached input.
//! - Finish reasons: `STOP` (or `ToolCalls` when the answer called tools), `MAX_TOKENS` is
//!   `Length`; `SAFETY`, `PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`, `RECITATION` and the image
//!   variants are a content-filter stop (an answer with nothing else in it is a
//!   `ContentFiltered` error); `MALFORMED_FUNCTION_CALL` and `UNEXPECTED_TOOL_CALL` mean the
//!   model produced an unusable call: an `InvalidResponse` (retry may well succeed). A
//!   `promptFeedback.blockReason` (the prompt itself was refused, no candidates) is
//!   `ContentFiltered`.

use ripcord_core::{ChatResponse, Error, ErrorKind, FinishReason, Price, Result, ToolCall, Usage};
use serde::Deserialize;

use super::error_map::GoogleError;
use super::request::join_call_id;
use crate::answer::Answer;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GenerateResponse {
    #[serde(default)]
    pub(crate) candidates: Vec<Candidate>,
    #[serde(default)]
    pub(crate) prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    pub(crate) usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    pub(crate) model_version: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Candidate {
    #[serde(default)]
    pub(crate) content: Option<Content>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
    #[serde(default)]
    pub(crate) finish_message: Option<String>,
}

#[derive(Deserialize, Default)]
pub(crate) struct Content {
    #[serde(default)]
    pub(crate) parts: Vec<RespPart>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RespPart {
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) thought: bool,
    #[serde(default)]
    pub(crate) function_call: Option<WireCall>,
    #[serde(default)]
    pub(crate) thought_signature: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct WireCall {
    #[serde(default)]
    pub(crate) id: Option<String>,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) args: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptFeedback {
    #[serde(default)]
    pub(crate) block_reason: Option<String>,
    #[serde(default)]
    pub(crate) block_reason_message: Option<String>,
}

/// Gemini's token counts.
#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UsageMetadata {
    #[serde(default)]
    pub(crate) prompt_token_count: u64,
    #[serde(default)]
    pub(crate) candidates_token_count: u64,
    #[serde(default)]
    pub(crate) cached_content_token_count: u64,
    #[serde(default)]
    pub(crate) thoughts_token_count: u64,
    #[serde(default)]
    pub(crate) tool_use_prompt_token_count: u64,
}

impl UsageMetadata {
    pub(crate) fn to_usage(self, price: Option<&Price>) -> Usage {
        Usage::new(
            self.prompt_token_count + self.tool_use_prompt_token_count,
            self.candidates_token_count + self.thoughts_token_count,
        )
        .with_cached_input(self.cached_content_token_count)
        .priced(price)
    }
}

/// What a finish reason means for the answer.
pub(crate) enum Finish {
    /// A usable answer that stopped for this reason.
    Reason(FinishReason),
    /// No usable answer: this error.
    Fail(Error),
}

/// Maps a candidate's `finishReason`. `calls` says whether the answer called tools.
pub(crate) fn finish_reason(reason: &str, calls: bool, message: Option<&str>) -> Finish {
    Finish::Reason(match reason {
        "STOP" if calls => FinishReason::ToolCalls,
        "STOP" | "FINISH_REASON_UNSPECIFIED" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "PROHIBITED_CONTENT"
        | "BLOCKLIST"
        | "SPII"
        | "RECITATION"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" => {
            let detail = message.map(|m| format!(": {m}")).unwrap_or_default();
            return Finish::Fail(
                Error::new(
                    ErrorKind::InvalidResponse,
                    format!("Gemini produced an unusable function call ({reason}){detail}"),
                )
                .with_vendor_code(reason.to_owned()),
            );
        }
        other => FinishReason::Other(other.to_owned()),
    })
}

/// The error of a prompt Gemini refused (`promptFeedback.blockReason`).
pub(crate) fn blocked(feedback: &PromptFeedback) -> Option<Error> {
    let reason = feedback.block_reason.as_deref()?;
    let detail = feedback
        .block_reason_message
        .as_deref()
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    Some(
        Error::new(
            ErrorKind::ContentFiltered,
            format!("Gemini refused the prompt (blockReason {reason}){detail}"),
        )
        .with_vendor_code(reason.to_owned()),
    )
}

/// The error of a content-filter stop with nothing else in the answer.
pub(crate) fn filtered(reason: &str) -> Error {
    Error::new(
        ErrorKind::ContentFiltered,
        format!(
            "Gemini's safety filter stopped the answer before any content (finishReason {reason})"
        ),
    )
    .with_vendor_code(reason.to_owned())
}

/// A function call as a ripcord tool call (the `n`-th of the answer).
pub(crate) fn tool_call(call: WireCall, signature: Option<&str>, n: u32) -> ToolCall {
    let args = match call.args {
        Some(v @ serde_json::Value::Object(_)) => v.to_string(),
        _ => "{}".to_owned(),
    };
    ToolCall::new(
        join_call_id(call.id.as_deref(), n, signature),
        call.name,
        args,
    )
}

/// Parses a 200 `generateContent` body; an error object in it is classified like an HTTP error.
pub(crate) fn parse_generate(body: &[u8], price: Option<&Price>) -> Result<ChatResponse> {
    let r: GenerateResponse =
        serde_json::from_slice(body).map_err(|e| match GoogleError::parse(body) {
            Some(g) => g.to_error(None, None),
            None => Error::new(
                ErrorKind::InvalidResponse,
                format!("the Gemini response is not valid JSON: {e}"),
            )
            .with_source(e),
        })?;
    if let Some(g) = GoogleError::parse(body) {
        return Err(g.to_error(None, None));
    }
    if let Some(e) = r.prompt_feedback.as_ref().and_then(blocked) {
        return Err(e);
    }
    let Some(candidate) = r.candidates.into_iter().next() else {
        return Err(Error::new(
            ErrorKind::InvalidResponse,
            "the Gemini response has no candidates and no block reason",
        ));
    };
    let mut a = Answer::default();
    for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
        if let Some(call) = part.function_call {
            let n = a.calls.len() as u32;
            a.calls
                .push(tool_call(call, part.thought_signature.as_deref(), n));
        } else if let Some(text) = part.text
            && !part.thought
        {
            a.content.push_str(&text);
        }
    }
    let reason = candidate.finish_reason.as_deref().unwrap_or("STOP");
    let finish = match finish_reason(
        reason,
        !a.calls.is_empty(),
        candidate.finish_message.as_deref(),
    ) {
        Finish::Fail(e) => return Err(e),
        Finish::Reason(f) => f,
    };
    a.into_response(
        finish,
        r.usage_metadata.unwrap_or_default().to_usage(price),
        r.model_version.unwrap_or_default(),
        || filtered(reason),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::usage_counts;

    #[test]
    fn text_thoughts_parallel_calls_and_usage() {
        let body = br#"{"candidates":[{"content":{"role":"model","parts":[
            {"text":"Thinking about weather","thought":true},
            {"text":"Checking both."},
            {"functionCall":{"name":"weather","args":{"city":"Paris"}},"thoughtSignature":"U0lH"},
            {"functionCall":{"id":"fc_2","name":"weather","args":{"city":"Oslo"}}}]},
            "finishReason":"STOP","index":0}],
            "usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":20,"totalTokenCount":150,
              "cachedContentTokenCount":40,"thoughtsTokenCount":30},
            "modelVersion":"gemini-2.5-flash","responseId":"r1"}"#;
        let r = parse_generate(
            body,
            Some(&Price::per_million(0.3, 2.5).with_cached_input(0.03)),
        )
        .unwrap();
        assert_eq!(r.content, "Checking both.");
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].id, "gemini_call_0__thought__U0lH");
        assert_eq!(r.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
        assert_eq!(r.tool_calls[1].id, "fc_2");
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(usage_counts(&r.usage), (100, 40, 50));
        assert!(r.usage.cost_usd.is_some());
        assert_eq!(r.model, "gemini-2.5-flash");
    }

    #[test]
    fn stops_blocks_and_errors() {
        let r = parse_generate(
            br#"{"candidates":[{"content":{"parts":[{"text":"The sky"}]},"finishReason":"MAX_TOKENS"}]}"#,
            None,
        )
        .unwrap();
        assert_eq!(r.finish_reason, FinishReason::Length);
        let e = parse_generate(
            br#"{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":12}}"#,
            None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ContentFiltered);
        assert_eq!(e.vendor_code(), Some("PROHIBITED_CONTENT"));
        for reason in [
            "SAFETY",
            "RECITATION",
            "SPII",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
        ] {
            let body = format!(r#"{{"candidates":[{{"finishReason":"{reason}","index":0}}]}}"#);
            let e = parse_generate(body.as_bytes(), None).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ContentFiltered, "{reason}");
        }
        // Partial text before a safety stop is kept, marked as filtered.
        let r = parse_generate(
            br#"{"candidates":[{"content":{"parts":[{"text":"Once"}]},"finishReason":"SAFETY"}]}"#,
            None,
        )
        .unwrap();
        assert_eq!(r.finish_reason, FinishReason::ContentFilter);
        let e = parse_generate(
            br#"{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL","finishMessage":"Malformed function call: print(x)"}]}"#,
            None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        assert!(e.message().contains("print(x)"), "{e}");
        let e = parse_generate(
            br#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
            None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Overloaded);
        let e = parse_generate(b"{\"candidates\":[", None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        let e = parse_generate(b"{}", None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
    }
}
