//! The Anthropic front door: `POST /v1/messages` and `POST /v1/messages/count_tokens`.
//!
//! Claude clients (the `anthropic` SDKs, coding agents) reach the same routes, keys, tenants and
//! chains as OpenAI clients: the request's `model` picks the route, the key arrives as
//! `x-api-key` or `Authorization: Bearer`, and `anthropic-version` / `anthropic-beta` are
//! accepted and ignored. So a Claude client falls back to GPT-4o, DeepSeek or the local model
//! like any other.
//!
//! What the client reads:
//! - the answer is a `message` whose `model` names the model that *served* it (after a
//!   fallback, the backup's), with `x-ripcord-served-by`, `x-ripcord-degraded`,
//!   `x-ripcord-attempts` headers as on the OpenAI endpoint;
//! - a stream is Anthropic's event sequence (`message_start`, `ping`, `content_block_start`,
//!   `content_block_delta` with `text_delta` / `input_json_delta` (and `thinking_delta` /
//!   `signature_delta` in `thinking` blocks, `redacted_thinking` blocks whole, when the serving
//!   model reasons), `content_block_stop`,
//!   `message_delta` with the stop reason and usage, `message_stop`); its headers go out when
//!   the chain commits to a link, so they are true for streams too;
//! - a failure after commit ends the stream with Anthropic's `event: error`
//!   (`{"type":"error","error":{…}}`, with the call's record under `ripcord`), never a silent
//!   close; a `Restarted` answer cannot be expressed (a client cannot un-show text), so it ends
//!   the same way;
//! - errors are Anthropic's envelope and statuses (`overloaded_error` 529, `rate_limit_error`
//!   429 with `Retry-After`, `invalid_request_error` 400 naming the field, …).
//!
//! `count_tokens` answers from ripcord's own estimator (`ripcord_core::tokens`), which is an
//! estimate (within about 0.75×–1.35× of OpenAI's tokenizer), not Claude's tokenizer; the
//! answer says so in `x-ripcord-token-count: estimate`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use ripcord_core::{ChatRequest, ChatResponse};
use serde_json::{Value, json};

use super::GatewayState;
use super::errors::{GatewayError, Shape};
use super::front::{Authed, RequestId};
use super::messages_wire::{self, MessagesRequest, OutUsage, event};
use super::pipeline::{
    Answer, Call, Dialect, Encoder, Ending, ReasoningPiece, ToolPiece, authorize_route, record,
};
use super::reply::hdr;

/// The Messages door.
pub(super) struct Messages(MessagesRequest);

impl Dialect for Messages {
    const PATH: &'static str = "/v1/messages";
    const SHAPE: Shape = Shape::Anthropic;
    type Opts = ();
    type Encoder = MessageEvents;

    fn parse(body: &[u8]) -> Result<Self, GatewayError> {
        messages_wire::parse_request(body).map(Messages)
    }

    fn model(&self) -> Option<&str> {
        self.0.model.as_deref()
    }

    fn stream(&self) -> bool {
        self.0.stream
    }

    async fn translate(self, _call: &Call<'_>) -> Result<(ChatRequest, ()), GatewayError> {
        Ok((self.0.into_chat_request(true)?, ()))
    }

    fn answer_id(n: u64) -> String {
        format!("msg_ripcord_{n}")
    }

    async fn render(
        _opts: (),
        answer: &Answer,
        resp: &ChatResponse,
    ) -> Result<Response, GatewayError> {
        let m = messages_wire::message(&answer.id, &answer.model, resp)?;
        Ok(axum::Json(m).into_response())
    }

    fn encoder(_opts: (), answer: Answer) -> MessageEvents {
        MessageEvents {
            answer,
            blocks: Blocks::default(),
        }
    }
}

/// `POST /v1/messages/count_tokens`: ripcord's own estimate of the prompt's tokens.
pub(super) async fn count_tokens(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Extension(RequestId(id)): Extension<RequestId>,
    body: Bytes,
) -> Response {
    let counted = || -> Result<u32, GatewayError> {
        let caller = state.caller(&authed);
        let wire = messages_wire::parse_request(&body)?;
        authorize_route(&state, &caller, wire.model.as_deref())?;
        let req = wire.into_chat_request(false)?;
        Ok(ripcord_core::tokens::estimate_request(&req))
    };
    match counted() {
        Ok(n) => {
            let mut resp = axum::Json(json!({"input_tokens": n})).into_response();
            resp.headers_mut()
                .insert(hdr::TOKEN_COUNT, HeaderValue::from_static("estimate"));
            resp
        }
        Err(e) => e
            .with_request_id(&id)
            .shaped(Shape::Anthropic)
            .into_response(),
    }
}

/// Turns ripcord's stream events into Anthropic's content blocks: text and each tool call get
/// a block of their own, numbered in the order they start; a block is stopped when the next
/// one starts or the message ends. A late piece of an earlier tool call (a vendor that
/// interleaves parallel calls) is still sent under that call's own index, which is how
/// Anthropic's SDKs assemble blocks.
#[derive(Debug, Default)]
struct Blocks {
    next: usize,
    open: Option<(usize, Open)>,
    tools: HashMap<u32, usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Tool,
    Thinking,
}

impl Blocks {
    fn close(&mut self, out: &mut Vec<Bytes>) {
        if let Some((index, _)) = self.open.take() {
            out.push(event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
    }

    fn start(&mut self, block: Value, kind: Open, out: &mut Vec<Bytes>) -> usize {
        self.close(out);
        let index = self.next;
        self.next += 1;
        self.open = Some((index, kind));
        out.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        index
    }

    fn text(&mut self, text: &str, out: &mut Vec<Bytes>) {
        if text.is_empty() {
            return;
        }
        let index = match self.open {
            Some((i, Open::Text)) => i,
            _ => self.start(json!({"type": "text", "text": ""}), Open::Text, out),
        };
        out.push(event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
        ));
    }

    /// Reasoning as Anthropic streams it: a `thinking` block of `thinking_delta`s closed by
    /// one `signature_delta`, and `redacted_thinking` blocks sent whole.
    fn reasoning(&mut self, piece: ReasoningPiece<'_>, out: &mut Vec<Bytes>) {
        let thinking = |blocks: &mut Blocks, out: &mut Vec<Bytes>| match blocks.open {
            Some((i, Open::Thinking)) => i,
            _ => blocks.start(
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                Open::Thinking,
                out,
            ),
        };
        match piece {
            ReasoningPiece::Text("") => {}
            ReasoningPiece::Text(text) => {
                let index = thinking(self, out);
                out.push(event(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": text}}),
                ));
            }
            ReasoningPiece::Signature(signature) => {
                let index = thinking(self, out);
                out.push(event(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": signature}}),
                ));
                // A signature ends its block: more reasoning starts a new one.
                self.close(out);
            }
            ReasoningPiece::Redacted(data) => {
                self.start(
                    json!({"type": "redacted_thinking", "data": data}),
                    Open::Thinking,
                    out,
                );
                self.close(out);
            }
        }
    }

    fn tool(&mut self, p: ToolPiece<'_>, out: &mut Vec<Bytes>) {
        let (call, arguments) = (p.index, p.arguments);
        let index = match self.tools.get(&call) {
            Some(i) => *i,
            None => {
                let id =
                    p.id.map_or_else(|| format!("toolu_ripcord_{call}"), str::to_owned);
                let block = json!({"type": "tool_use", "id": id, "name": p.name.unwrap_or_default(), "input": {}});
                let i = self.start(block, Open::Tool, out);
                self.tools.insert(call, i);
                i
            }
        };
        if !arguments.is_empty() {
            out.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": arguments}}),
            ));
        }
    }
}

/// A streamed message: `message_start`, `ping`, the content blocks, `message_delta` with the
/// stop reason and usage, `message_stop`.
pub(super) struct MessageEvents {
    answer: Answer,
    blocks: Blocks,
}

impl Encoder for MessageEvents {
    fn open(&mut self, out: &mut Vec<Bytes>) {
        let start = json!({"type": "message_start", "message": {
            "id": self.answer.id, "type": "message", "role": "assistant", "model": self.answer.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }});
        out.push(event("message_start", &start));
        out.push(event("ping", &json!({"type": "ping"})));
    }

    fn text(&mut self, text: &str, out: &mut Vec<Bytes>) {
        self.blocks.text(text, out);
    }

    fn tool_call(&mut self, p: ToolPiece<'_>, out: &mut Vec<Bytes>) {
        self.blocks.tool(p, out);
    }

    fn reasoning(&mut self, piece: ReasoningPiece<'_>, out: &mut Vec<Bytes>) {
        self.blocks.reasoning(piece, out);
    }

    fn end(&mut self, end: Ending<'_>, out: &mut Vec<Bytes>) {
        self.blocks.close(out);
        let usage = OutUsage::of(&end.usage.cloned().unwrap_or_default());
        let mut delta = json!({"type": "message_delta",
            "delta": {"stop_reason": ripcord_providers::anthropic_wire::stop_reason(end.reason), "stop_sequence": null},
            "usage": usage});
        if let Some(r) = end.record {
            delta["ripcord"] = r.clone();
        }
        out.push(event("message_delta", &delta));
        out.push(event("message_stop", &json!({"type": "message_stop"})));
    }

    fn fail(&mut self, error: &GatewayError, out: &mut Vec<Bytes>) {
        // Anthropic's `event: error` (`{"type":"error","error":{…}}`), the call's record beside it.
        let mut body = error.body(Shape::Anthropic);
        body["ripcord"] = record(error);
        out.push(event("error", &body));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece<'a>(
        index: u32,
        id: Option<&'a str>,
        name: Option<&'a str>,
        arguments: &'a str,
    ) -> ToolPiece<'a> {
        ToolPiece {
            index,
            id,
            name,
            arguments,
        }
    }

    fn decode(out: &[Bytes]) -> Vec<Value> {
        out.iter()
            .map(|b| {
                let s = std::str::from_utf8(b).unwrap();
                let data = s.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                serde_json::from_str(data).unwrap()
            })
            .collect()
    }

    #[test]
    fn blocks_are_numbered_in_start_order_and_each_is_stopped_once() {
        let mut b = Blocks::default();
        let mut out = Vec::new();
        b.text("", &mut out);
        assert!(out.is_empty(), "an empty delta opens no block");
        b.text("Checking.", &mut out);
        b.tool(piece(0, Some("call_a"), Some("f"), ""), &mut out);
        b.tool(piece(1, Some("call_b"), Some("g"), "{}"), &mut out);
        // A late piece of the first call still names its own block.
        b.tool(piece(0, None, None, "{\"x\":1}"), &mut out);
        b.text("Done.", &mut out);
        b.close(&mut out);
        b.close(&mut out);
        let v = decode(&out);
        let summary: Vec<(String, u64)> = v
            .iter()
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_owned(),
                    e["index"].as_u64().unwrap(),
                )
            })
            .collect();
        let expect = [
            ("content_block_start", 0),
            ("content_block_delta", 0),
            ("content_block_stop", 0),
            ("content_block_start", 1),
            ("content_block_stop", 1),
            ("content_block_start", 2),
            ("content_block_delta", 2),
            ("content_block_delta", 1),
            ("content_block_stop", 2),
            ("content_block_start", 3),
            ("content_block_delta", 3),
            ("content_block_stop", 3),
        ];
        let expect: Vec<(String, u64)> =
            expect.iter().map(|(n, i)| ((*n).to_owned(), *i)).collect();
        assert_eq!(summary, expect);
        assert_eq!(v[3]["content_block"]["id"], "call_a");
        assert_eq!(v[7]["delta"]["partial_json"], "{\"x\":1}");
    }

    #[test]
    fn reasoning_streams_as_signed_thinking_blocks_before_the_text() {
        let mut b = Blocks::default();
        let mut out = Vec::new();
        b.reasoning(ReasoningPiece::Text("Two "), &mut out);
        b.reasoning(ReasoningPiece::Text("and two."), &mut out);
        b.reasoning(ReasoningPiece::Signature("sig"), &mut out);
        b.reasoning(ReasoningPiece::Redacted("opaque"), &mut out);
        b.reasoning(ReasoningPiece::Text("unsigned"), &mut out);
        b.text("4", &mut out);
        b.close(&mut out);
        let v = decode(&out);
        assert_eq!(
            v[0]["content_block"],
            json!({"type": "thinking", "thinking": "", "signature": ""})
        );
        assert_eq!(
            v[1]["delta"],
            json!({"type": "thinking_delta", "thinking": "Two "})
        );
        assert_eq!(
            v[3]["delta"],
            json!({"type": "signature_delta", "signature": "sig"})
        );
        assert_eq!(v[4], json!({"type": "content_block_stop", "index": 0}));
        assert_eq!(
            v[5]["content_block"],
            json!({"type": "redacted_thinking", "data": "opaque"})
        );
        assert_eq!(v[6], json!({"type": "content_block_stop", "index": 1}));
        assert_eq!(v[7]["index"], 2, "unsigned reasoning opens its own block");
        assert_eq!(v[8]["delta"]["thinking"], "unsigned");
        assert_eq!(v[9], json!({"type": "content_block_stop", "index": 2}));
        assert_eq!(v[10]["content_block"]["type"], "text");
        assert_eq!(v[10]["index"], 3);
    }
}
