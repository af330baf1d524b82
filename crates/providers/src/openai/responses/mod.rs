//! The Responses upstream: OpenAI and Azure OpenAI links that call `POST /v1/responses`
//! instead of `/v1/chat/completions` ([`OpenAiWire::Responses`](crate::OpenAiWire)), for models
//! offered only there.
//!
//! API reference: <https://platform.openai.com/docs/api-reference/responses/create>,
//! streaming: <https://platform.openai.com/docs/api-reference/responses-streaming>. The wire
//! types are [`crate::openai_responses_wire`], shared with the gateway's `/v1/responses` door.
//! Errors use the chat adapter's table: HTTP errors have the same envelope
//! (`{"error": {message, type, param, code}}`), and `response.failed` / `error` events are
//! classified by the same codes.

mod request;
mod response;
mod stream;

pub(crate) use request::body;
pub(crate) use response::parse;
pub(crate) use stream::ResponsesDecoder;
