//! `POST /v1/chat/completions`: OpenAI's Chat Completions wire as a [`Dialect`] of the one
//! pipeline, JSON and SSE.
//!
//! A serving model's reasoning goes out as `reasoning_content` on the message and in stream
//! deltas (DeepSeek's convention, which vLLM shares and openai-python exposes as an extra
//! attribute). The wire has no place for a thinking block's signature or a redacted block:
//! those are left behind here on purpose (the Messages door carries them).

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use ripcord_core::{ChatRequest, ChatResponse};
use serde_json::Value;

use super::errors::{GatewayError, Shape};
use super::pipeline::{
    Answer, Call, Dialect, Encoder, Ending, ReasoningPiece, ToolPiece, record, sse_event,
};
use super::reply::parse_body;
use super::wire::{self, ChunkWriter, WireRequest, delta};
use ripcord_providers::openai_chat_wire as oa;

/// The Chat Completions door.
pub(super) struct ChatCompletions(WireRequest);

impl Dialect for ChatCompletions {
    const PATH: &'static str = "/v1/chat/completions";
    const SHAPE: Shape = Shape::OpenAi;
    /// Whether the client asked for the usage chunk.
    type Opts = bool;
    type Encoder = Chunks;

    fn parse(body: &[u8]) -> Result<Self, GatewayError> {
        parse_body(body).map(ChatCompletions)
    }

    fn model(&self) -> Option<&str> {
        self.0.model.as_deref()
    }

    fn stream(&self) -> bool {
        self.0.stream
    }

    async fn translate(self, _call: &Call<'_>) -> Result<(ChatRequest, bool), GatewayError> {
        let include_usage = wire::include_usage(&self.0);
        Ok((wire::into_chat_request(self.0)?, include_usage))
    }

    fn answer_id(n: u64) -> String {
        format!("chatcmpl-ripcord-{n}")
    }

    async fn render(
        _opts: bool,
        answer: &Answer,
        resp: &ChatResponse,
    ) -> Result<Response, GatewayError> {
        let body = wire::completion(&answer.id, answer.created, &answer.model, resp);
        Ok(axum::Json(body).into_response())
    }

    fn encoder(include_usage: bool, answer: Answer) -> Chunks {
        Chunks {
            writer: ChunkWriter {
                id: answer.id,
                created: answer.created,
                model: answer.model,
            },
            include_usage,
        }
    }
}

/// A chunk with the chain's final record beside it (a continued stream's last chunk).
#[derive(serde::Serialize)]
struct Recorded<'a> {
    #[serde(flatten)]
    chunk: oa::ChatCompletionChunk<'a>,
    ripcord: &'a Value,
}

/// A streamed completion: `chat.completion.chunk` events, then `[DONE]`.
pub(super) struct Chunks {
    writer: ChunkWriter,
    include_usage: bool,
}

impl Encoder for Chunks {
    fn open(&mut self, out: &mut Vec<Bytes>) {
        out.push(sse_event(None, &self.writer.chunk(delta::opening(), None)));
    }

    fn text(&mut self, text: &str, out: &mut Vec<Bytes>) {
        out.push(sse_event(None, &self.writer.chunk(delta::text(text), None)));
    }

    fn tool_call(&mut self, p: ToolPiece<'_>, out: &mut Vec<Bytes>) {
        let piece = delta::tool_call(p.index, p.id, p.name, p.arguments);
        out.push(sse_event(None, &self.writer.chunk(piece, None)));
    }

    fn reasoning(&mut self, piece: ReasoningPiece<'_>, out: &mut Vec<Bytes>) {
        // Signatures and redacted blocks have no field on this wire (see the module docs).
        if let ReasoningPiece::Text(text) = piece
            && !text.is_empty()
        {
            out.push(sse_event(
                None,
                &self.writer.chunk(delta::reasoning(text), None),
            ));
        }
    }

    fn end(&mut self, end: Ending<'_>, out: &mut Vec<Bytes>) {
        let finish = self
            .writer
            .chunk(oa::Delta::default(), Some(end.reason.as_str()));
        match end.record {
            None => out.push(sse_event(None, &finish)),
            Some(r) => out.push(sse_event(
                None,
                &Recorded {
                    chunk: finish,
                    ripcord: r,
                },
            )),
        }
        if let Some(u) = end.usage.filter(|_| self.include_usage) {
            out.push(sse_event(None, &self.writer.usage(u)));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }

    fn fail(&mut self, error: &GatewayError, out: &mut Vec<Bytes>) {
        // OpenAI's in-band `{"error": {…}}`: the envelope of an HTTP error, so SDKs show the
        // message; the call's record beside it.
        let mut event = error.body(Shape::OpenAi);
        event["ripcord"] = record(error);
        out.push(sse_event(None, &event));
    }
}
