//! The Responses stream: typed events (`response.created`, `response.output_text.delta`, …)
//! ending with `response.completed`, `response.incomplete` or `response.failed`.
//!
//! Text deltas are passed on as they come. A function call starts with
//! `response.output_item.added` (its `call_id` and `name`) and its arguments follow in
//! `response.function_call_arguments.delta` events naming the item; each call gets the next
//! tool-call index. `.done` events only fill in what no delta carried (a server that sends the
//! whole text or arguments at once). Usage and the finish reason come with the final event.
//! `response.failed` and `error` are classified like HTTP errors (docs/pitfalls.md rule 3);
//! a stream that ends before a final event is truncated (rule 2).

use std::collections::VecDeque;

use ripcord_core::{Error, ErrorKind, FinishReason, Price, Result, StreamEvent};

use super::response::{classified, failed, finish, usage};
use crate::driver::{Decoder, Step, malformed};
use crate::error_body::ErrorHook;
use crate::openai::responses_wire as wire;
use crate::sse::SseEvent;

/// One function call of the stream.
struct Call {
    item_id: String,
    output_index: u32,
    index: u32,
    /// Some arguments were passed on.
    arguments: bool,
}

/// Decodes a Responses stream.
pub(crate) struct ResponsesDecoder {
    hook: Option<ErrorHook>,
    price: Option<Price>,
    model: Option<String>,
    calls: Vec<Call>,
    /// Message items (and content indexes) whose text came in deltas.
    texts: Vec<(String, u32)>,
    /// Reasoning summary parts (item, summary index) whose text came in deltas, and the last
    /// part passed on (a new part is set off from it by a blank line).
    summaries: Vec<(String, u32)>,
    refused: bool,
}

impl ResponsesDecoder {
    pub(crate) fn new(hook: Option<ErrorHook>, price: Option<Price>) -> Self {
        ResponsesDecoder {
            hook,
            price,
            model: None,
            calls: Vec::new(),
            texts: Vec::new(),
            summaries: Vec::new(),
            refused: false,
        }
    }

    /// A piece of a reasoning summary part; `done` pieces carry the whole part and are only
    /// passed on when no delta of the part was.
    fn summary(
        &mut self,
        item_id: &str,
        index: u32,
        text: &str,
        done: bool,
        out: &mut VecDeque<StreamEvent>,
    ) {
        let key = (item_id.to_owned(), index);
        let seen = self.summaries.contains(&key);
        if text.is_empty() || (done && seen) {
            return;
        }
        if !seen {
            if !self.summaries.is_empty() {
                out.push_back(StreamEvent::ReasoningDelta {
                    text: "\n\n".to_owned(),
                });
            }
            self.summaries.push(key);
        }
        out.push_back(StreamEvent::ReasoningDelta {
            text: text.to_owned(),
        });
    }

    /// The call an event names, by item id (else by output index).
    fn call(&mut self, item_id: &str, output_index: u32) -> Option<&mut Call> {
        let at = self
            .calls
            .iter()
            .position(|c| !item_id.is_empty() && c.item_id == item_id)
            .or_else(|| {
                self.calls
                    .iter()
                    .position(|c| c.output_index == output_index)
            })?;
        self.calls.get_mut(at)
    }

    /// A call seen for the first time (`output_item.added`, or `.done` without it).
    fn start_call(
        &mut self,
        f: &wire::FunctionCall,
        output_index: u32,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<()> {
        let index = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
        if index > ripcord_core::stream::MAX_TOOL_INDEX {
            return Err(ripcord_core::stream::index_out_of_bounds(
                "tool-call",
                u64::from(index),
            ));
        }
        self.calls.push(Call {
            item_id: f.id.clone().unwrap_or_default(),
            output_index,
            index,
            arguments: !f.arguments.is_empty(),
        });
        out.push_back(StreamEvent::ToolCallDelta {
            index,
            id: Some(f.call_id.clone()).filter(|i| !i.is_empty()),
            name: Some(f.name.clone()).filter(|n| !n.is_empty()),
            arguments: f.arguments.clone(),
        });
        Ok(())
    }

    fn arguments(
        &mut self,
        item_id: &str,
        output_index: u32,
        text: &str,
        whole: bool,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<()> {
        let Some(call) = self.call(item_id, output_index) else {
            return Err(Error::new(
                ErrorKind::InvalidResponse,
                format!(
                    "function call arguments for item {item_id:?}, which the stream never started"
                ),
            ));
        };
        if whole && call.arguments {
            return Ok(());
        }
        call.arguments |= !text.is_empty();
        let index = call.index;
        if !text.is_empty() {
            out.push_back(StreamEvent::ToolCallDelta {
                index,
                id: None,
                name: None,
                arguments: text.to_owned(),
            });
        }
        Ok(())
    }

    fn text(
        &mut self,
        item_id: &str,
        content_index: u32,
        text: &str,
        whole: bool,
        out: &mut VecDeque<StreamEvent>,
    ) {
        let seen = self
            .texts
            .iter()
            .any(|(i, c)| i == item_id && *c == content_index);
        if whole && seen {
            return;
        }
        if !seen {
            self.texts.push((item_id.to_owned(), content_index));
        }
        if !text.is_empty() {
            out.push_back(StreamEvent::TextDelta {
                text: text.to_owned(),
            });
        }
    }

    /// `response.completed` / `response.incomplete`: usage, then the one `Finish`.
    fn end(&mut self, r: &wire::Response, out: &mut VecDeque<StreamEvent>) -> Result<Step> {
        let tool_calls = !self.calls.is_empty()
            || r.output
                .iter()
                .any(|i| matches!(i, wire::OutputItem::FunctionCall(_)));
        let mut reason = finish(r, tool_calls, self.hook)?;
        if self.refused {
            reason = FinishReason::ContentFilter;
        }
        if let Some(u) = &r.usage {
            out.push_back(StreamEvent::Usage {
                usage: usage(u, self.price.as_ref()),
            });
        }
        let model = Some(r.model.clone())
            .filter(|m| !m.is_empty())
            .or_else(|| self.model.take());
        out.push_back(StreamEvent::Finish { reason, model });
        Ok(Step::Done)
    }
}

impl Decoder for ResponsesDecoder {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<Step> {
        let data = ev.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Step::More);
        }
        let event: wire::StreamEvent = match serde_json::from_str(data) {
            Ok(e) => e,
            Err(e) if ev.event == "error" => {
                // An `error` event whose data is not the documented object: its text is all
                // there is to classify.
                let _ = e;
                return Err(classified(None, None, data, self.hook));
            }
            Err(e) => return Ok(malformed(format!("malformed stream event: {e}"), e)),
        };
        use wire::StreamEvent as E;
        match event {
            E::Created(e) | E::InProgress(e) | E::Queued(e) if !e.response.model.is_empty() => {
                self.model = Some(e.response.model);
            }
            E::OutputItemAdded(e) => {
                if let wire::OutputItem::FunctionCall(f) = &e.item {
                    self.start_call(f, e.output_index, out)?;
                }
            }
            E::OutputItemDone(e) => match &e.item {
                wire::OutputItem::FunctionCall(f) => {
                    let id = f.id.as_deref().unwrap_or("");
                    if self.call(id, e.output_index).is_none() {
                        self.start_call(f, e.output_index, out)?;
                    } else {
                        self.arguments(id, e.output_index, &f.arguments, true, out)?;
                    }
                }
                wire::OutputItem::Message(m) => {
                    for (i, part) in m.content.iter().enumerate() {
                        let i = u32::try_from(i).unwrap_or(u32::MAX);
                        match part {
                            wire::OutputContent::OutputText(t) => {
                                self.text(&m.id, i, &t.text, true, out)
                            }
                            wire::OutputContent::Refusal(r) if !self.refused => {
                                self.refused = true;
                                self.text(&m.id, i, &r.refusal, true, out)
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            },
            E::OutputTextDelta(e) => self.text(&e.item_id, e.content_index, &e.delta, false, out),
            E::OutputTextDone(e) => self.text(&e.item_id, e.content_index, &e.text, true, out),
            E::RefusalDelta(e) => {
                self.refused = true;
                self.text(&e.item_id, e.content_index, &e.delta, false, out);
            }
            E::RefusalDone(e) => {
                self.refused = true;
                self.text(&e.item_id, e.content_index, &e.refusal, true, out);
            }
            E::FunctionCallArgumentsDelta(e) => {
                self.arguments(&e.item_id, e.output_index, &e.delta, false, out)?
            }
            E::FunctionCallArgumentsDone(e) => {
                self.arguments(&e.item_id, e.output_index, &e.arguments, true, out)?
            }
            E::Completed(e) | E::Incomplete(e) => return self.end(&e.response, out),
            E::Failed(e) => return Err(failed(&e.response, self.hook)),
            E::Error(e) => {
                return Err(classified(e.code(), e.error_type(), e.message(), self.hook));
            }
            E::ReasoningSummaryTextDelta(e) => {
                self.summary(&e.item_id, e.summary_index, &e.delta, false, out)
            }
            E::ReasoningSummaryTextDone(e) => {
                self.summary(&e.item_id, e.summary_index, &e.text, true, out)
            }
            // Content part boundaries, built-in tool progress: nothing ripcord's stream carries.
            _ => {}
        }
        Ok(Step::More)
    }

    fn truncated(&self) -> &'static str {
        "stream truncated: the connection closed before `response.completed`"
    }
}

#[cfg(test)]
mod tests {
    use ripcord_core::stream::Collector;

    use super::*;
    use crate::driver::decode_sse;

    fn run(input: &str) -> (Vec<StreamEvent>, Result<Step>) {
        decode_sse(ResponsesDecoder::new(None, None), input)
    }

    fn sse(events: &[serde_json::Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect()
    }

    #[test]
    fn text_calls_usage_and_one_final_finish() {
        use serde_json::json;
        let input = sse(&[
            json!({"type": "response.created", "sequence_number": 0, "response": {"id": "r", "object": "response", "created_at": 1, "status": "in_progress", "model": "gpt-5", "output": []}}),
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "message", "id": "m", "role": "assistant", "status": "in_progress", "content": []}}),
            json!({"type": "response.output_text.delta", "sequence_number": 2, "item_id": "m", "output_index": 0, "content_index": 0, "delta": "Hel"}),
            json!({"type": "response.output_text.delta", "sequence_number": 3, "item_id": "m", "output_index": 0, "content_index": 0, "delta": "lo"}),
            json!({"type": "response.output_text.done", "sequence_number": 4, "item_id": "m", "output_index": 0, "content_index": 0, "text": "Hello"}),
            json!({"type": "response.output_item.added", "sequence_number": 5, "output_index": 1, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "", "status": "in_progress"}}),
            json!({"type": "response.function_call_arguments.delta", "sequence_number": 6, "item_id": "fc_1", "output_index": 1, "delta": "{\"a\":"}),
            json!({"type": "response.function_call_arguments.delta", "sequence_number": 7, "item_id": "fc_1", "output_index": 1, "delta": "1}"}),
            json!({"type": "response.function_call_arguments.done", "sequence_number": 8, "item_id": "fc_1", "output_index": 1, "arguments": "{\"a\":1}"}),
            // Only `.done`: the whole arguments come from it.
            json!({"type": "response.output_item.added", "sequence_number": 9, "output_index": 2, "item": {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "g", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.done", "sequence_number": 10, "item_id": "fc_2", "output_index": 2, "arguments": "{}"}),
            json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 11, "item_id": "rs", "output_index": 3, "summary_index": 0, "delta": "hm"}),
            json!({"type": "response.web_search_call.searching", "sequence_number": 12}),
            json!({"type": "response.completed", "sequence_number": 13, "response": {"id": "r", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5-2025", "output": [],
                   "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 15}}}),
        ]);
        let (events, last) = run(&input);
        assert!(matches!(last, Ok(Step::Done)), "{last:?}");
        let mut c = Collector::new();
        for e in events.iter().cloned() {
            c.push(e);
        }
        let r = c.finish().unwrap();
        assert_eq!(r.text(), "Hello");
        let calls: Vec<_> = r
            .tool_calls
            .iter()
            .map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("call_1", "f", "{\"a\":1}"), ("call_2", "g", "{}")]);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!((r.usage.input_tokens, r.usage.cached_input_tokens), (10, 4));
        assert_eq!(r.model, "gpt-5-2025");
        assert_eq!(
            r.reasoning,
            vec![ripcord_core::ReasoningBlock::thinking("hm")]
        );
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, StreamEvent::Finish { .. }))
                .count(),
            1
        );
        assert!(matches!(events.last(), Some(StreamEvent::Finish { .. })));
    }

    #[test]
    fn summary_parts_stream_as_reasoning_set_off_by_blank_lines() {
        use serde_json::json;
        let input = sse(&[
            json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs", "output_index": 0, "summary_index": 0, "delta": "Plan"}),
            json!({"type": "response.reasoning_summary_text.done", "item_id": "rs", "output_index": 0, "summary_index": 0, "text": "Plan"}),
            // A part sent whole, without deltas.
            json!({"type": "response.reasoning_summary_text.done", "item_id": "rs", "output_index": 0, "summary_index": 1, "text": "Then add."}),
            json!({"type": "response.output_text.delta", "item_id": "m", "output_index": 1, "content_index": 0, "delta": "4"}),
            json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "model": "gpt-5", "output": []}}),
        ]);
        let (events, last) = run(&input);
        assert!(matches!(last, Ok(Step::Done)), "{last:?}");
        let mut c = Collector::new();
        events.into_iter().for_each(|e| c.push(e));
        let r = c.finish().unwrap();
        assert_eq!(r.text(), "4");
        assert_eq!(
            r.reasoning,
            vec![ripcord_core::ReasoningBlock::thinking("Plan\n\nThen add.")]
        );
    }

    #[test]
    fn failures_in_band_are_classified() {
        use serde_json::json;
        for (ev, kind) in [
            (
                json!({"type": "error", "code": "insufficient_quota", "message": "You exceeded your current quota", "param": null, "sequence_number": 1}),
                ErrorKind::QuotaExhausted,
            ),
            (
                json!({"type": "error", "code": "rate_limit_exceeded", "message": "Rate limit reached", "sequence_number": 1}),
                ErrorKind::RateLimited,
            ),
            (
                json!({"type": "error", "sequence_number": 1, "error": {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "too long"}}),
                ErrorKind::ContextLengthExceeded,
            ),
            (
                json!({"type": "response.failed", "sequence_number": 2, "response": {"id": "r", "object": "response", "created_at": 1, "status": "failed", "model": "m", "output": [],
                    "error": {"code": "server_error", "message": "The model failed to generate a response."}}}),
                ErrorKind::ServerError,
            ),
            (
                json!({"type": "response.failed", "sequence_number": 2, "response": {"id": "r", "status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow down"}}}),
                ErrorKind::RateLimited,
            ),
        ] {
            let (_, last) = run(&sse(std::slice::from_ref(&ev)));
            assert_eq!(last.unwrap_err().kind(), kind, "{ev}");
        }
        let (_, last) = run("event: error\ndata: upstream exploded\n\n");
        assert_eq!(last.unwrap_err().kind(), ErrorKind::ServerError);
        // Arguments for a call that never started.
        let (_, last) = run(&sse(&[
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_9", "output_index": 0, "delta": "{}"}),
        ]));
        assert_eq!(last.unwrap_err().kind(), ErrorKind::InvalidResponse);
        // Broken JSON is skippable, not fatal by itself.
        let (_, last) = run("data: {\"type\":\"response.output_text.delta\",\n\n");
        assert!(matches!(last, Ok(Step::Malformed(_))), "{last:?}");
    }

    #[test]
    fn incomplete_ends_with_length_and_refusals_with_content_filter() {
        use serde_json::json;
        let (events, _) = run(&sse(&[
            json!({"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "Once"}),
            json!({"type": "response.incomplete", "response": {"id": "r", "status": "incomplete", "model": "m", "output": [], "incomplete_details": {"reason": "max_output_tokens"}}}),
        ]));
        assert!(
            matches!(
                events.last(),
                Some(StreamEvent::Finish {
                    reason: FinishReason::Length,
                    ..
                })
            ),
            "{events:?}"
        );
        let (events, _) = run(&sse(&[
            json!({"type": "response.refusal.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "No."}),
            json!({"type": "response.refusal.done", "item_id": "m", "output_index": 0, "content_index": 0, "refusal": "No."}),
            json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "model": "m", "output": []}}),
        ]));
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(matches!(
            events.last(),
            Some(StreamEvent::Finish {
                reason: FinishReason::ContentFilter,
                ..
            })
        ));
    }
}
