//! The `streamGenerateContent?alt=sse` stream: one `data:` event per chunk, each a whole
//! `GenerateContentResponse` holding the parts generated since the last one.
//!
//! There is no terminator event: the chunk that carries the candidate's `finishReason` (and the
//! final `usageMetadata`) is the last, and the server closes the body after it. A body that
//! ends before any `finishReason` is a truncated stream, never a short answer. Text parts are
//! streamed as they come; thought parts (`thought: true`) are kept apart from the answer;
//! each `functionCall` part arrives whole and becomes one tool-call delta carrying its id, name
//! and complete arguments (several in one stream are parallel calls, numbered 0, 1, …). An
//! `{"error": …}` chunk is Google's in-band error, classified like the HTTP error it stands for;
//! a `promptFeedback.blockReason` in the first chunk is a refused prompt.

use std::collections::VecDeque;

use ripcord_core::{Price, Result, StreamEvent};

use super::error_map::GoogleError;
use super::response::{Finish, GenerateResponse, UsageMetadata, blocked, finish_reason, tool_call};
use crate::driver::{Decoder, Step, malformed};
use crate::sse::SseEvent;

/// Decodes a Gemini stream.
pub(crate) struct GeminiDecoder {
    price: Option<Price>,
    usage: Option<UsageMetadata>,
    model: Option<String>,
    calls: u32,
}

impl GeminiDecoder {
    pub(crate) fn new(price: Option<Price>) -> Self {
        GeminiDecoder {
            price,
            usage: None,
            model: None,
            calls: 0,
        }
    }
}

impl Decoder for GeminiDecoder {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<Step> {
        let data = ev.data.trim();
        if data.is_empty() {
            return Ok(Step::More);
        }
        let value: serde_json::Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => return Ok(malformed(format!("malformed Gemini stream chunk: {e}"), e)),
        };
        if let Some(g) = GoogleError::from_value(&value) {
            return Err(g.to_error(None, None));
        }
        let chunk: GenerateResponse = match serde_json::from_value(value) {
            Ok(c) => c,
            Err(e) => return Ok(malformed(format!("malformed Gemini stream chunk: {e}"), e)),
        };
        if let Some(u) = chunk.usage_metadata {
            self.usage = Some(u);
        }
        if chunk.model_version.is_some() {
            self.model = chunk.model_version;
        }
        if let Some(e) = chunk.prompt_feedback.as_ref().and_then(blocked) {
            return Err(e);
        }
        let Some(candidate) = chunk.candidates.into_iter().next() else {
            return Ok(Step::More);
        };
        for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
            if let Some(call) = part.function_call {
                let n = self.calls;
                self.calls += 1;
                let call = tool_call(call, part.thought_signature.as_deref(), n);
                out.push_back(StreamEvent::ToolCallDelta {
                    index: n,
                    id: Some(call.id),
                    name: Some(call.name),
                    arguments: call.arguments,
                });
            } else if let Some(text) = part.text
                && !part.thought
                && !text.is_empty()
            {
                out.push_back(StreamEvent::TextDelta { text });
            }
        }
        let Some(reason) = candidate.finish_reason else {
            return Ok(Step::More);
        };
        let reason =
            match finish_reason(&reason, self.calls > 0, candidate.finish_message.as_deref()) {
                Finish::Fail(e) => return Err(e),
                Finish::Reason(r) => r,
            };
        out.push_back(StreamEvent::Usage {
            usage: self.usage.unwrap_or_default().to_usage(self.price.as_ref()),
        });
        out.push_back(StreamEvent::Finish {
            reason,
            model: self.model.take(),
        });
        Ok(Step::Done)
    }

    fn truncated(&self) -> &'static str {
        "the Gemini stream ended before a finishReason (stream truncated)"
    }
}

#[cfg(test)]
mod tests {
    use ripcord_core::stream::Collector;
    use ripcord_core::{ErrorKind, FinishReason};

    use super::*;
    use crate::driver::decode_sse;

    fn run(input: &str) -> (Vec<StreamEvent>, Result<Step>) {
        decode_sse(GeminiDecoder::new(None), input)
    }

    #[test]
    fn text_thoughts_and_a_final_chunk_with_usage() {
        let input = concat!(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Let me think\",\"thought\":true}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":9},\"modelVersion\":\"gemini-2.5-pro\"}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"The sky \"}],\"role\":\"model\"},\"index\":0}],\"modelVersion\":\"gemini-2.5-pro\"}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"is blue.\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":4,\"thoughtsTokenCount\":12,\"totalTokenCount\":25},\"modelVersion\":\"gemini-2.5-pro\"}\r\n\r\n",
        );
        let (events, last) = run(input);
        assert!(matches!(last, Ok(Step::Done)));
        let mut c = Collector::new();
        events.into_iter().for_each(|e| c.push(e));
        let r = c.finish().unwrap();
        assert_eq!(r.content, "The sky is blue.");
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (9, 16));
        assert_eq!(r.finish_reason, FinishReason::Stop);
        assert_eq!(r.model, "gemini-2.5-pro");
    }

    #[test]
    fn parallel_function_calls_arrive_whole() {
        let input = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"weather\",\"args\":{\"city\":\"Paris\"}},\"thoughtSignature\":\"QUJD\"},{\"functionCall\":{\"name\":\"weather\",\"args\":{\"city\":\"Oslo\"}}}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":30,\"candidatesTokenCount\":10}}\n\n";
        let (events, _) = run(input);
        let mut c = Collector::new();
        events.into_iter().for_each(|e| c.push(e));
        let r = c.finish().unwrap();
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].id, "gemini_call_0__thought__QUJD");
        assert_eq!(r.tool_calls[1].arguments, r#"{"city":"Oslo"}"#);
    }

    #[test]
    fn in_band_errors_blocks_and_malformed_calls() {
        let (_, last) = run(
            "data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded. Please try again later.\",\"status\":\"UNAVAILABLE\"}}\n\n",
        );
        assert_eq!(last.unwrap_err().kind(), ErrorKind::Overloaded);
        let (_, last) = run(
            "data: {\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\"},\"usageMetadata\":{\"promptTokenCount\":13}}\n\n",
        );
        assert_eq!(last.unwrap_err().kind(), ErrorKind::ContentFiltered);
        let (_, last) = run(
            "data: {\"candidates\":[{\"finishReason\":\"MALFORMED_FUNCTION_CALL\",\"index\":0}]}\n\n",
        );
        assert_eq!(last.unwrap_err().kind(), ErrorKind::InvalidResponse);
        let (events, last) = run("data: {\"candidates\":[{\"finishReason\":\"SAFETY\"}]}\n\n");
        assert!(matches!(last, Ok(Step::Done)));
        assert!(events.iter().any(|e| matches!(
            e,
            StreamEvent::Finish {
                reason: FinishReason::ContentFilter,
                ..
            }
        )));
        let (_, last) = run("data: {\"candidates\":[{\"content\":\n\n");
        assert!(matches!(last, Ok(Step::Malformed(_))));
    }
}
