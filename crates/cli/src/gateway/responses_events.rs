//! The Responses door's stream: one answer's events in the order the official SDKs' stream
//! helpers accept (see the `responses` module), numbered by `sequence_number`.

use axum::body::Bytes;
use ripcord_core::{ChatResponse, ToolCall};
use ripcord_providers::openai_responses_wire as rw;
use serde_json::{Value, json};

use super::errors::GatewayError;
use super::pipeline::{Answer, Encoder, Ending, ReasoningPiece, ToolPiece, sse_event};
use super::responses::{
    Opts, call_item_id, message_id, reasoning_item, reasoning_item_id, response_object,
};

/// What is open in a streamed response: the text message item, or tool calls.
#[derive(Debug)]
enum Item {
    Reasoning {
        id: String,
        text: String,
    },
    Text {
        id: String,
        text: String,
    },
    Call {
        id: String,
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// A streamed response's events (see the module docs for the order).
pub(super) struct ResponseEvents {
    opts: Opts,
    answer: Answer,
    seq: u64,
    /// Output items in order; the last may still be open.
    items: Vec<Item>,
    /// Whether the last item is still open.
    open: bool,
    /// Tool call index → its item's position in `items`.
    calls: std::collections::HashMap<u32, usize>,
    /// The finished object, kept for storing.
    done: Option<(rw::Response, ChatResponse)>,
}

impl ResponseEvents {
    pub(super) fn new(opts: Opts, answer: Answer) -> Self {
        ResponseEvents {
            opts,
            answer,
            seq: 0,
            items: Vec::new(),
            open: false,
            calls: std::collections::HashMap::new(),
            done: None,
        }
    }

    fn push(&mut self, mut ev: rw::StreamEvent, out: &mut Vec<Bytes>) {
        ev.set_sequence_number(self.seq);
        self.seq += 1;
        out.push(sse_event(Some(ev.event_type()), &ev));
    }

    /// The response object as it stands, with `status`.
    fn snapshot(&self, status: rw::ResponseStatus) -> rw::Response {
        rw::Response {
            id: self.answer.id.clone(),
            created_at: self.answer.created,
            status: Some(status),
            model: self.answer.model.clone(),
            ..self.opts.echo.clone()
        }
    }

    fn output_item(item: &Item, done: bool) -> rw::OutputItem {
        let status = if done {
            rw::ItemStatus::Completed
        } else {
            rw::ItemStatus::InProgress
        };
        match item {
            Item::Reasoning { id, text } => reasoning_item(id.clone(), text, done),
            Item::Text { id, text } => rw::OutputItem::Message(rw::OutputMessage::assistant(
                id.clone(),
                status,
                if done {
                    vec![rw::OutputContent::text(text.clone())]
                } else {
                    Vec::new()
                },
            )),
            Item::Call {
                id,
                call_id,
                name,
                arguments,
            } => rw::OutputItem::FunctionCall(rw::FunctionCall {
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: if done {
                    arguments.clone()
                } else {
                    String::new()
                },
                id: Some(id.clone()),
                status: Some(status),
            }),
        }
    }

    /// Closes the open item, if any: its `.done` events.
    fn close(&mut self, out: &mut Vec<Bytes>) {
        if !self.open {
            return;
        }
        self.open = false;
        let index = self.items.len() - 1;
        let output_index = u32::try_from(index).unwrap_or(u32::MAX);
        let events = match &self.items[index] {
            Item::Reasoning { id, text } => vec![
                rw::StreamEvent::ReasoningSummaryTextDone(rw::ReasoningSummaryTextDoneEvent {
                    item_id: id.clone(),
                    output_index,
                    summary_index: 0,
                    text: text.clone(),
                    sequence_number: 0,
                }),
                rw::StreamEvent::ReasoningSummaryPartDone(rw::ReasoningSummaryPartEvent {
                    item_id: id.clone(),
                    output_index,
                    summary_index: 0,
                    part: rw::SummaryPart::text(text.clone()),
                    sequence_number: 0,
                }),
            ],
            Item::Text { id, text } => vec![
                rw::StreamEvent::OutputTextDone(rw::TextDoneEvent {
                    item_id: id.clone(),
                    output_index,
                    content_index: 0,
                    text: text.clone(),
                    ..Default::default()
                }),
                rw::StreamEvent::ContentPartDone(rw::ContentPartEvent {
                    item_id: id.clone(),
                    output_index,
                    content_index: 0,
                    part: rw::OutputContent::text(text.clone()),
                    sequence_number: 0,
                }),
            ],
            Item::Call {
                id,
                name,
                arguments,
                ..
            } => vec![rw::StreamEvent::FunctionCallArgumentsDone(
                rw::FunctionCallArgumentsDoneEvent {
                    item_id: id.clone(),
                    output_index,
                    name: Some(name.clone()),
                    arguments: arguments.clone(),
                    sequence_number: 0,
                },
            )],
        };
        for ev in events {
            self.push(ev, out);
        }
        let item = Self::output_item(&self.items[index], true);
        self.push(
            rw::StreamEvent::OutputItemDone(rw::OutputItemEvent {
                output_index,
                item,
                sequence_number: 0,
            }),
            out,
        );
    }

    /// Opens `item`: its `.added` events.
    /// Streams `piece` of the answer's text (of its reasoning, when `reasoning`): appends it
    /// to the open item of that kind, first opening one unless the last item is such an open
    /// one, and sends the delta event.
    fn stream_text(&mut self, reasoning: bool, piece: &str, out: &mut Vec<Bytes>) {
        if piece.is_empty() {
            return;
        }
        let same = match self.items.last() {
            Some(Item::Reasoning { .. }) => reasoning,
            Some(Item::Text { .. }) => !reasoning,
            _ => false,
        };
        let index = if same && self.open {
            self.items.len() - 1
        } else {
            let (n, text) = (self.items.len(), String::new());
            let item = if reasoning {
                let id = reasoning_item_id(&self.answer.id, n);
                Item::Reasoning { id, text }
            } else {
                let id = message_id(&self.answer.id, n);
                Item::Text { id, text }
            };
            self.start(item, out)
        };
        let Some(Item::Text { id, text } | Item::Reasoning { id, text }) =
            self.items.get_mut(index)
        else {
            return;
        };
        text.push_str(piece);
        let (item_id, delta) = (id.clone(), piece.to_owned());
        let output_index = u32::try_from(index).unwrap_or(u32::MAX);
        let ev = if reasoning {
            rw::StreamEvent::ReasoningSummaryTextDelta(rw::ReasoningSummaryTextDeltaEvent {
                item_id,
                output_index,
                delta,
                ..Default::default()
            })
        } else {
            rw::StreamEvent::OutputTextDelta(rw::TextDeltaEvent {
                item_id,
                output_index,
                delta,
                ..Default::default()
            })
        };
        self.push(ev, out);
    }

    fn start(&mut self, item: Item, out: &mut Vec<Bytes>) -> usize {
        self.close(out);
        let index = self.items.len();
        let output_index = u32::try_from(index).unwrap_or(u32::MAX);
        let added = Self::output_item(&item, false);
        let text_id = match &item {
            Item::Text { id, .. } => Some(id.clone()),
            Item::Call { .. } => None,
            Item::Reasoning { .. } => None,
        };
        let reasoning_id = match &item {
            Item::Reasoning { id, .. } => Some(id.clone()),
            _ => None,
        };
        self.items.push(item);
        self.open = true;
        self.push(
            rw::StreamEvent::OutputItemAdded(rw::OutputItemEvent {
                output_index,
                item: added,
                sequence_number: 0,
            }),
            out,
        );
        if let Some(item_id) = text_id {
            self.push(
                rw::StreamEvent::ContentPartAdded(rw::ContentPartEvent {
                    item_id,
                    output_index,
                    content_index: 0,
                    part: rw::OutputContent::text(""),
                    sequence_number: 0,
                }),
                out,
            );
        }
        if let Some(item_id) = reasoning_id {
            self.push(
                rw::StreamEvent::ReasoningSummaryPartAdded(rw::ReasoningSummaryPartEvent {
                    item_id,
                    output_index,
                    summary_index: 0,
                    part: rw::SummaryPart::text(""),
                    sequence_number: 0,
                }),
                out,
            );
        }
        index
    }
}

impl Encoder for ResponseEvents {
    fn open(&mut self, out: &mut Vec<Bytes>) {
        let created = self.snapshot(rw::ResponseStatus::InProgress);
        self.push(
            rw::StreamEvent::Created(rw::ResponseEvent {
                response: created.clone(),
                sequence_number: 0,
            }),
            out,
        );
        self.push(
            rw::StreamEvent::InProgress(rw::ResponseEvent {
                response: created,
                sequence_number: 0,
            }),
            out,
        );
    }

    fn text(&mut self, text: &str, out: &mut Vec<Bytes>) {
        self.stream_text(false, text, out);
    }

    fn tool_call(&mut self, p: ToolPiece<'_>, out: &mut Vec<Bytes>) {
        let (call, arguments) = (p.index, p.arguments);
        let index = match self.calls.get(&call) {
            Some(i) => *i,
            None => {
                let item = Item::Call {
                    id: call_item_id(&self.answer.id, self.items.len()),
                    call_id: p
                        .id
                        .map_or_else(|| format!("call_ripcord_{call}"), str::to_owned),
                    name: p.name.unwrap_or_default().to_owned(),
                    arguments: String::new(),
                };
                let i = self.start(item, out);
                self.calls.insert(call, i);
                i
            }
        };
        if arguments.is_empty() {
            return;
        }
        let Some(Item::Call {
            id, arguments: all, ..
        }) = self.items.get_mut(index)
        else {
            return;
        };
        all.push_str(arguments);
        let ev = rw::StreamEvent::FunctionCallArgumentsDelta(rw::FunctionCallArgumentsDeltaEvent {
            item_id: id.clone(),
            output_index: u32::try_from(index).unwrap_or(u32::MAX),
            delta: arguments.to_owned(),
            sequence_number: 0,
        });
        self.push(ev, out);
    }

    fn reasoning(&mut self, piece: ReasoningPiece<'_>, out: &mut Vec<Bytes>) {
        // The text goes out as a `reasoning` item's summary; a signature or a redacted block
        // has no place on this wire and stays behind (the Messages door carries them).
        let ReasoningPiece::Text(text) = piece else {
            return;
        };
        self.stream_text(true, text, out);
    }

    fn end(&mut self, end: Ending<'_>, out: &mut Vec<Bytes>) {
        self.close(out);
        // The whole answer, as the JSON door would have rendered it.
        let mut resp = ChatResponse::new("");
        for item in &self.items {
            match item {
                Item::Reasoning { text, .. } => resp
                    .reasoning
                    .push(ripcord_core::ReasoningBlock::thinking(text.clone())),
                Item::Text { text, .. } => resp.content.push_str(text),
                Item::Call {
                    call_id,
                    name,
                    arguments,
                    ..
                } => resp.tool_calls.push(ToolCall::new(
                    call_id.clone(),
                    name.clone(),
                    arguments.clone(),
                )),
            }
        }
        resp.finish_reason = end.reason.clone();
        resp.usage = end.usage.cloned().unwrap_or_default();
        let mut object = response_object(self.opts.echo.clone(), &self.answer, &resp);
        // The ids the stream already named stay the ids of the final object.
        object.output = self
            .items
            .iter()
            .map(|i| Self::output_item(i, true))
            .collect();
        let ev = rw::ResponseEvent {
            response: object.clone(),
            sequence_number: 0,
        };
        let mut ev = match object.status {
            Some(rw::ResponseStatus::Incomplete) => rw::StreamEvent::Incomplete(ev),
            _ => rw::StreamEvent::Completed(ev),
        };
        match end.record {
            None => self.push(ev, out),
            Some(r) => {
                ev.set_sequence_number(self.seq);
                self.seq += 1;
                let mut v = serde_json::to_value(&ev).unwrap_or(Value::Null);
                v["ripcord"] = r.clone();
                out.push(sse_event(Some(ev.event_type()), &v));
            }
        }
        self.done = Some((object, resp));
    }

    fn fail(&mut self, error: &GatewayError, out: &mut Vec<Bytes>) {
        let detail = error.openai_object();
        let code = detail["code"].as_str().unwrap_or("server_error").to_owned();
        let mut failed = self.snapshot(rw::ResponseStatus::Failed);
        failed.error = Some(rw::ResponseError {
            code: code.clone(),
            message: error.message().to_owned(),
        });
        self.push(
            rw::StreamEvent::Failed(rw::ResponseEvent {
                response: failed,
                sequence_number: 0,
            }),
            out,
        );
        // The `error` event, with the envelope OpenAI's SDKs raise from, and the call's record.
        let ev = json!({
            "type": "error",
            "code": code,
            "message": error.message(),
            "param": detail["param"],
            "sequence_number": self.seq,
            "error": detail,
            "ripcord": super::pipeline::record(error),
        });
        self.seq += 1;
        out.push(sse_event(Some("error"), &ev));
    }

    async fn settle(self) {
        if let (Some(store), Some((object, resp))) = (self.opts.store, self.done) {
            match serde_json::to_value(&object) {
                Ok(value) => {
                    store
                        .save(&object.id, &self.answer.owner, &value, &resp)
                        .await
                }
                Err(e) => tracing::warn!(
                    target: "ripcord::gateway",
                    error = %e,
                    "a streamed response could not be encoded for the store"
                ),
            }
        }
    }
}
