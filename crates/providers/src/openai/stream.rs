//! The Chat Completions stream: `data: {chat.completion.chunk}` lines ending with `data: [DONE]`.
//!
//! OpenAI sends the chunk carrying `finish_reason` *before* the usage chunk (`choices: []`,
//! only with `stream_options.include_usage`), so the decoder holds the finish until `[DONE]`
//! and emits it last: ripcord's contract is exactly one `Finish`, as the final event. Tool-call
//! pieces are passed on by `index` (id and name in the first piece, arguments in fragments).
//! An error object in a chunk (under `error`, or at the top level as DashScope and Baidu send
//! it) or an `event: error` is classified like an HTTP error.

use std::collections::VecDeque;

use std::borrow::Cow;

use ripcord_core::{Error, FinishReason, Price, Result, StreamEvent};

use super::chat_wire as wire;
use super::error_map;
use super::response::{finish_reason, reasoning_of, to_usage};
use crate::driver::{Decoder, Step, malformed};
use crate::error_body::{ErrorBody, ErrorHook};
use crate::sse::SseEvent;

/// Decodes an OpenAI-family chat stream.
pub(crate) struct OpenAiDecoder {
    hook: Option<ErrorHook>,
    price: Option<Price>,
    finish: Option<FinishReason>,
    model: Option<String>,
}

impl OpenAiDecoder {
    pub(crate) fn new(hook: Option<ErrorHook>, price: Option<Price>) -> Self {
        OpenAiDecoder {
            hook,
            price,
            finish: None,
            model: None,
        }
    }

    fn in_band(&self, raw: &serde_json::Value) -> Error {
        let body = ErrorBody::from_value(raw)
            .or_else(|| ErrorBody::from_value(&serde_json::json!({ "error": raw })))
            .unwrap_or_else(|| ErrorBody::with_message(raw.to_string()));
        error_map::from_body(None, &body, self.hook)
    }
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<Step> {
        let data = ev.data.trim();
        if ev.event == "error" {
            let raw: serde_json::Value = serde_json::from_str(data)
                .unwrap_or_else(|_| serde_json::Value::String(data.to_owned()));
            return Err(self.in_band(&raw));
        }
        if data == "[DONE]" {
            out.push_back(StreamEvent::Finish {
                reason: self.finish.take().unwrap_or_default(),
                model: self.model.take(),
            });
            return Ok(Step::Done);
        }
        if data.is_empty() || !matches!(ev.event.as_str(), "" | "message") {
            // Keep-alives and vendor extras ("event: ping") carry no answer.
            return Ok(Step::More);
        }
        let chunk: wire::ChatCompletionChunk<'static> = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => return Ok(malformed(format!("malformed stream chunk: {e}"), e)),
        };
        if let Some(err) = &chunk.error {
            return Err(self.in_band(&serde_json::json!({ "error": err })));
        }
        if chunk.choices.is_empty()
            && chunk.usage.is_none()
            && let Some(b) = ErrorBody::parse(data.as_bytes())
        {
            // An error without an `error` key (DashScope's top-level `code`/`message`, Baidu's
            // `error_code`/`error_msg`) sent as a stream event.
            return Err(error_map::from_body(None, &b, self.hook));
        }
        if let Some(m) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = Some(m.into_owned());
        }
        for choice in chunk.choices {
            let delta = choice.delta;
            if let Some(text) = reasoning_of(delta.reasoning_content, delta.reasoning) {
                out.push_back(StreamEvent::ReasoningDelta { text });
            }
            if let Some(text) = delta
                .content
                .map(wire::MessageContent::into_text)
                .filter(|t| !t.is_empty())
            {
                out.push_back(StreamEvent::TextDelta { text });
            }
            if let Some(r) = delta.refusal.filter(|r| !r.is_empty()) {
                out.push_back(StreamEvent::TextDelta {
                    text: r.into_owned(),
                });
                self.finish = Some(FinishReason::ContentFilter);
            }
            for (pos, call) in delta.tool_calls.into_iter().enumerate() {
                let index = call.index.unwrap_or(u32::try_from(pos).unwrap_or(u32::MAX));
                if index > ripcord_core::stream::MAX_TOOL_INDEX {
                    return Err(ripcord_core::stream::index_out_of_bounds(
                        "tool-call",
                        u64::from(index),
                    ));
                }
                let (name, arguments) = match call.function {
                    Some(f) => (
                        f.name.filter(|n| !n.is_empty()).map(Cow::into_owned),
                        f.arguments.into_text(),
                    ),
                    None => (None, String::new()),
                };
                out.push_back(StreamEvent::ToolCallDelta {
                    index,
                    id: call.id.filter(|i| !i.is_empty()).map(Cow::into_owned),
                    name,
                    arguments,
                });
            }
            if let Some(r) = choice.finish_reason.as_deref().filter(|r| !r.is_empty())
                && self.finish != Some(FinishReason::ContentFilter)
            {
                self.finish = Some(finish_reason(r));
            }
            if let Some(u) = choice.usage {
                out.push_back(StreamEvent::Usage {
                    usage: to_usage(Some(u), self.price.as_ref()),
                });
            }
        }
        if let Some(u) = chunk.usage {
            out.push_back(StreamEvent::Usage {
                usage: to_usage(Some(u), self.price.as_ref()),
            });
        }
        Ok(Step::More)
    }

    fn truncated(&self) -> &'static str {
        "stream truncated: the connection closed before `data: [DONE]`"
    }

    fn clean_end(&mut self, out: &mut VecDeque<StreamEvent>) -> bool {
        // A `finish_reason` arrived: what `[DONE]` would have finished is complete.
        let Some(reason) = self.finish.take() else {
            return false;
        };
        out.push_back(StreamEvent::Finish {
            reason,
            model: self.model.take(),
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use ripcord_core::ToolCall;
    use ripcord_core::stream::Collector;

    use super::*;
    use crate::driver::{clean_end_answer, decode_sse};
    use ripcord_core::ErrorKind;

    fn run(input: &str) -> (Vec<StreamEvent>, Result<Step>) {
        decode_sse(
            OpenAiDecoder::new(None, Some(Price::per_million(1.0, 2.0))),
            input,
        )
    }

    #[test]
    fn a_tool_call_index_beyond_the_bound_is_an_invalid_response_not_an_allocation() {
        let input = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":4294967295,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n";
        let (events, last) = run(input);
        assert!(events.is_empty());
        let e = last.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        assert!(e.message().contains("4294967295"), "{e}");
    }

    #[test]
    fn text_tool_calls_usage_and_a_single_final_finish() {
        let input = concat!(
            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-2024\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14}}\n\n",
            "data: [DONE]\n\n",
        );
        let (events, last) = run(input);
        assert!(matches!(last, Ok(Step::Done)));
        assert!(
            matches!(events.last(), Some(StreamEvent::Finish { reason: FinishReason::ToolCalls, model: Some(m) }) if m == "gpt-4o-2024")
        );
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, StreamEvent::Finish { .. }))
                .count(),
            1
        );
        let mut c = Collector::new();
        for e in events {
            c.push(e);
        }
        let r = c.finish().unwrap();
        assert_eq!(r.content, "Hello");
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall::new("call_1", "f", "{\"a\":1}"),
                ToolCall::new("call_2", "g", "{}")
            ]
        );
        assert_eq!(r.usage.input_tokens, 10);
        assert_eq!(r.usage.output_tokens, 4);
        assert!(r.usage.cost_usd.is_some());
    }

    #[test]
    fn reasoning_content_deltas_stream_as_reasoning_before_the_answer() {
        let (events, last) = run(concat!(
            "data: {\"model\":\"deepseek-reasoner\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"Compare \"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"digits.\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\" (openrouter)\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"9.8\",\"reasoning_content\":null}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        ));
        assert!(matches!(last, Ok(Step::Done)));
        assert_eq!(events[0], StreamEvent::reasoning("Compare "));
        let mut c = Collector::new();
        events.into_iter().for_each(|e| c.push(e));
        let r = c.finish().unwrap();
        assert_eq!(r.content, "9.8");
        assert_eq!(
            r.reasoning,
            vec![ripcord_core::ReasoningBlock::thinking(
                "Compare digits. (openrouter)"
            )]
        );
    }

    #[test]
    fn in_band_errors_are_classified() {
        let (events, last) = run(concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            "data: {\"error\":{\"message\":\"You exceeded your current quota\",\"type\":\"insufficient_quota\",\"code\":\"insufficient_quota\"}}\n\n",
        ));
        assert_eq!(events.len(), 1);
        assert_eq!(last.unwrap_err().kind(), ErrorKind::QuotaExhausted);
        let (_, last) = run(
            "event: error\ndata: {\"error\":{\"type\":\"server_error\",\"message\":\"boom\"}}\n\n",
        );
        assert_eq!(last.unwrap_err().kind(), ErrorKind::ServerError);
    }

    #[test]
    fn malformed_chunks_are_reported_for_the_driver_to_skip_and_pings_ignored() {
        let (events, last) = run("event: ping\ndata: {}\n\ndata: {\"choices\": [\n\n");
        assert!(events.is_empty());
        match last {
            Ok(Step::Malformed(e)) => {
                assert_eq!(e.kind(), ErrorKind::InvalidResponse);
                assert!(e.message().contains("malformed stream chunk"), "{e}");
            }
            other => panic!("expected a malformed step, got {other:?}"),
        }
    }

    #[test]
    fn a_clean_end_after_finish_reason_completes_with_usage_but_not_without_one() {
        let r = clean_end_answer(
            OpenAiDecoder::new(None, None),
            "data: {\"model\":\"m-1\",\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n",
        )
        .unwrap();
        assert_eq!(
            (r.text(), r.usage.output_tokens, r.model.as_str()),
            ("Hi", 1, "m-1")
        );
        let no_stop = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
        assert!(clean_end_answer(OpenAiDecoder::new(None, None), no_stop).is_none());
    }

    #[test]
    fn moonshot_usage_inside_the_choice() {
        let (events, _) = run(
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\",\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}]}\n\ndata: [DONE]\n\n",
        );
        assert!(matches!(&events[0], StreamEvent::Usage { usage } if usage.input_tokens == 3));
        assert!(matches!(
            &events[1],
            StreamEvent::Finish {
                reason: FinishReason::Stop,
                ..
            }
        ));
    }
}
