//! The OpenAI Responses wire (`POST …/responses`): the Response object and its typed event
//! stream.
//!
//! Shapes follow <https://platform.openai.com/docs/api-reference/responses> and the examples
//! in OpenAI's OpenAPI description: a stream is `response.created`, `response.in_progress`,
//! then per output item `response.output_item.added`, (for a message)
//! `response.content_part.added`, `response.output_text.delta`s, `response.output_text.done`,
//! `response.content_part.done`, (for a function call) `response.function_call_arguments.delta`s
//! and `.done`, `response.output_item.done`, and finally `response.completed` with the whole
//! response and its usage. Every event has `event: <type>` and a `sequence_number`. Failures in
//! the stream are an `error` event (`{type, code, message, param, sequence_number}`) or a
//! `response.failed` event whose response carries `error: {code, message}`.
//!
//! The JSON is written here with `serde_json::json!`, not with ripcord's own wire types, so the
//! fake stays an independent witness of the format.

use serde_json::{Value, json};

use crate::Wire;
use crate::http::Frames;
use crate::openai::Ctx;
use crate::reply::{Reply, split_even};
use crate::vendor_error::VendorError;

/// Request fields the fake needs from a Responses request.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub(crate) struct ResponsesProbe<'a> {
    #[serde(borrow)]
    pub(crate) model: Option<std::borrow::Cow<'a, str>>,
    pub(crate) stream: Option<bool>,
    pub(crate) input: Option<serde::de::IgnoredAny>,
}

fn message_id(ctx: Ctx<'_>) -> String {
    format!("msg_{}", ctx.id.trim_start_matches("resp_"))
}

fn call_item_id(ctx: Ctx<'_>, i: usize) -> String {
    format!("fc_{}_{i}", ctx.id.trim_start_matches("resp_"))
}

fn usage(reply: &Reply) -> Value {
    json!({
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    })
}

fn has_message(reply: &Reply) -> bool {
    !reply.text.is_empty() || reply.tool_calls.is_empty()
}

fn message_item(ctx: Ctx<'_>, text: Option<&str>, status: &str) -> Value {
    let content = match text {
        Some(t) => json!([{"type": "output_text", "text": t, "annotations": [], "logprobs": []}]),
        None => json!([]),
    };
    json!({"type": "message", "id": message_id(ctx), "status": status, "role": "assistant",
           "content": content})
}

fn call_item(ctx: Ctx<'_>, i: usize, call: &(String, String, String), done: bool) -> Value {
    let (call_id, name, arguments) = call;
    json!({"type": "function_call", "id": call_item_id(ctx, i), "call_id": call_id, "name": name,
           "arguments": if done { arguments.as_str() } else { "" },
           "status": if done { "completed" } else { "in_progress" }})
}

/// The whole output of a reply, as the final response carries it.
fn output(ctx: Ctx<'_>, reply: &Reply) -> Vec<Value> {
    let mut out = Vec::with_capacity(1 + reply.tool_calls.len());
    if has_message(reply) {
        out.push(message_item(ctx, Some(&reply.text), "completed"));
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        out.push(call_item(ctx, i, call, true));
    }
    out
}

/// A Response object with this status, output, usage and error.
fn response_object(
    ctx: Ctx<'_>,
    status: &str,
    output: Vec<Value>,
    usage: Value,
    error: Value,
) -> Value {
    json!({
        "id": ctx.id, "object": "response", "created_at": ctx.created, "status": status,
        "error": error, "incomplete_details": null, "instructions": null,
        "max_output_tokens": null, "model": ctx.model, "output": output,
        "parallel_tool_calls": true, "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null}, "store": false, "temperature": 1.0,
        "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
        "truncation": "disabled", "usage": usage, "user": null, "metadata": {},
    })
}

/// The JSON body of a completed response.
pub(crate) fn response(ctx: Ctx<'_>, reply: &Reply) -> Vec<u8> {
    response_object(
        ctx,
        "completed",
        output(ctx, reply),
        usage(reply),
        Value::Null,
    )
    .to_string()
    .into_bytes()
}

/// The `code` and `message` an error carries in the Responses stream: OpenAI's error code,
/// else its type (`server_error`).
fn code_and_message(error: &VendorError, model: &str) -> (String, String, Value) {
    let body: Value =
        serde_json::from_str(&error.json_body(Wire::OpenAi, model, "")).unwrap_or(Value::Null);
    let e = &body["error"];
    let code = e["code"]
        .as_str()
        .or_else(|| e["type"].as_str())
        .unwrap_or("server_error")
        .to_owned();
    let message = e["message"].as_str().unwrap_or("").to_owned();
    (code, message, e["param"].clone())
}

/// The body of a response that failed with this error (a 200, as OpenAI answers a request
/// whose generation failed).
pub(crate) fn failed_response(ctx: Ctx<'_>, error: &VendorError) -> Vec<u8> {
    let (code, message, _) = code_and_message(error, ctx.model);
    response_object(
        ctx,
        "failed",
        Vec::new(),
        Value::Null,
        json!({"code": code, "message": message}),
    )
    .to_string()
    .into_bytes()
}

/// The `error` event for this error, with this sequence number.
pub(crate) fn error_event(error: &VendorError, model: &str, sequence_number: usize) -> Vec<u8> {
    let (code, message, param) = code_and_message(error, model);
    json!({"type": "error", "code": code, "message": message, "param": param,
           "sequence_number": sequence_number})
    .to_string()
    .into_bytes()
}

/// The `response.failed` event for this error, with this sequence number.
pub(crate) fn failed_event(ctx: Ctx<'_>, error: &VendorError, sequence_number: usize) -> Vec<u8> {
    let (code, message, _) = code_and_message(error, ctx.model);
    let response = response_object(
        ctx,
        "failed",
        Vec::new(),
        Value::Null,
        json!({"code": code, "message": message}),
    );
    json!({"type": "response.failed", "sequence_number": sequence_number, "response": response})
        .to_string()
        .into_bytes()
}

/// A broken `data:` payload for [`crate::Behavior::MalformedEvents`].
pub(crate) const BROKEN_EVENT: &[u8] = b"{\"type\":\"response.output_text.delta\",\"delta\":";

/// The SSE events of a streamed response; the sequence number of frame `i` is `i`.
pub(crate) fn stream_frames(ctx: Ctx<'_>, reply: &Reply, broken: bool) -> Frames {
    let mut f = Frames::new(broken);
    let mut seq = 0usize;
    let mut push = |f: &mut Frames, mut v: Value, content: bool| {
        v["sequence_number"] = seq.into();
        seq += 1;
        let name = v["type"].as_str().unwrap_or("").to_owned();
        f.push(Some(&name), &v, content);
    };
    let started = response_object(ctx, "in_progress", Vec::new(), Value::Null, Value::Null);
    push(
        &mut f,
        json!({"type": "response.created", "response": started}),
        false,
    );
    push(
        &mut f,
        json!({"type": "response.in_progress", "response": started}),
        false,
    );
    let mut index = 0usize;
    if has_message(reply) {
        let item_id = message_id(ctx);
        push(
            &mut f,
            json!({"type": "response.output_item.added", "output_index": index,
                   "item": message_item(ctx, None, "in_progress")}),
            false,
        );
        push(
            &mut f,
            json!({"type": "response.content_part.added", "item_id": item_id, "output_index": index,
                   "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
            false,
        );
        for piece in reply.text_pieces() {
            push(
                &mut f,
                json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": index,
                       "content_index": 0, "delta": piece, "logprobs": []}),
                true,
            );
        }
        push(
            &mut f,
            json!({"type": "response.output_text.done", "item_id": item_id, "output_index": index,
                   "content_index": 0, "text": reply.text, "logprobs": []}),
            false,
        );
        push(
            &mut f,
            json!({"type": "response.content_part.done", "item_id": item_id, "output_index": index,
                   "content_index": 0, "part": {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}}),
            false,
        );
        push(
            &mut f,
            json!({"type": "response.output_item.done", "output_index": index,
                   "item": message_item(ctx, Some(&reply.text), "completed")}),
            false,
        );
        index += 1;
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        let item_id = call_item_id(ctx, i);
        push(
            &mut f,
            json!({"type": "response.output_item.added", "output_index": index,
                   "item": call_item(ctx, i, call, false)}),
            true,
        );
        for piece in split_even(&call.2, reply.chunks) {
            push(
                &mut f,
                json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                       "output_index": index, "delta": piece}),
                true,
            );
        }
        push(
            &mut f,
            json!({"type": "response.function_call_arguments.done", "item_id": item_id,
                   "output_index": index, "name": call.1, "arguments": call.2}),
            false,
        );
        push(
            &mut f,
            json!({"type": "response.output_item.done", "output_index": index,
                   "item": call_item(ctx, i, call, true)}),
            false,
        );
        index += 1;
    }
    f.start_tail();
    let done = response_object(
        ctx,
        "completed",
        output(ctx, reply),
        usage(reply),
        Value::Null,
    );
    push(
        &mut f,
        json!({"type": "response.completed", "response": done}),
        false,
    );
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_the_documented_event_sequence() {
        let ctx = Ctx::new("resp_1", "gpt-5", 1);
        let reply = Reply::text_then_tool("call_1");
        let f = stream_frames(ctx, &reply, false);
        let ev = f.sse_data();
        let types: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (i, e) in ev.iter().enumerate() {
            assert_eq!(e["sequence_number"], i, "{e}");
        }
        // Text deltas, the call's head and its argument pieces are the content frames.
        assert_eq!(f.content(), &[4, 5, 9, 10, 11]);
        let last = &ev[14]["response"];
        assert_eq!(last["usage"]["total_tokens"], 13);
        assert_eq!(last["output"][1]["arguments"], "{\"a\":1}");
        let body: Value = serde_json::from_slice(&response(ctx, &reply)).unwrap();
        assert_eq!(body["output"], last["output"]);
    }

    #[test]
    fn errors_carry_openai_codes() {
        let e: Value =
            serde_json::from_slice(&error_event(&VendorError::QuotaExhausted, "m", 3)).unwrap();
        assert_eq!(
            (
                e["type"].as_str(),
                e["code"].as_str(),
                e["sequence_number"].as_u64()
            ),
            (Some("error"), Some("insufficient_quota"), Some(3))
        );
        let ctx = Ctx::new("resp_2", "m", 1);
        let f: Value =
            serde_json::from_slice(&failed_event(ctx, &VendorError::ServerError, 5)).unwrap();
        assert_eq!(f["response"]["status"], "failed");
        assert_eq!(f["response"]["error"]["code"], "server_error");
    }
}
