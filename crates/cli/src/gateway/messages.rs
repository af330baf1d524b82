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
//!   `content_block_delta` with `text_delta` / `input_json_delta`, `content_block_stop`,
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
use std::sync::atomic::Ordering;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use ripcord_core::{ChatModel, ChatStream, Error, ErrorKind, Provenance, StreamEvent};
use serde_json::{Value, json};

use super::chat::{Prepared, prepare, read_to_commit};
use super::errors::{Reply, call_error, set_retry_after};
use super::front::{Authed, RequestId};
use super::messages_wire::{self, AnthropicError, OutUsage, event};
use super::reply::hdr;
use super::reply::{attempts_header, failed_provenance, set_provenance_headers};
use super::{Caller, GatewayState, shed};

fn error_response(e: &AnthropicError, provenance: Option<&Provenance>) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut resp = (status, axum::Json(e.body())).into_response();
    if let Some(p) = provenance {
        set_provenance_headers(resp.headers_mut(), p);
    }
    if let Some(after) = e.retry_after {
        set_retry_after(resp.headers_mut(), after);
    }
    if e.no_retry {
        resp.headers_mut()
            .insert(hdr::SHOULD_RETRY, HeaderValue::from_static("false"));
    }
    resp
}

/// A failed chain in Anthropic's shape: the type and status by its kind, the words chosen
/// by [`call_error`] (general terms and the request id unless `expose_errors` is on; the detail
/// goes to the server log there).
fn chain_error(e: &Error, reply: &Reply) -> AnthropicError {
    let told = call_error(e, reply);
    let mut a = AnthropicError::from_error(e);
    a.message = told.message().to_owned();
    a.no_retry = told.no_retry;
    a
}

/// The route the request's `model` names, refused in Anthropic's shape when unknown or not
/// allowed for this key.
fn route_for(
    state: &GatewayState,
    caller: &Caller<'_>,
    model: Option<&str>,
) -> Result<Option<usize>, AnthropicError> {
    let route = state
        .route_of(model)
        .map_err(|w| AnthropicError::from_status(w.status, w.message()))?;
    if let Some(i) = route
        && !caller.may_use(i)
        && let Some(r) = state.routes.get(i)
    {
        return Err(AnthropicError::new(
            403,
            "permission_error",
            format!(
                "this gateway key may not use the model `{}` (route `{}`); GET /v1/models lists the ones it may use",
                model.unwrap_or_default(),
                r.name
            ),
        ));
    }
    Ok(route)
}

/// The model that served an answer: the vendor's own name when it gave one, else the serving
/// link's configured model, else (a static reply) what the client asked for.
fn served_model<'a>(reported: Option<&'a str>, p: &'a Provenance, requested: &'a str) -> &'a str {
    if let Some(m) = reported.filter(|m| !m.is_empty()) {
        return m;
    }
    p.served_by
        .as_deref()
        .and_then(|by| {
            p.attempts
                .iter()
                .rev()
                .find(|a| a.error_kind.is_none() && &*a.provider == by)
        })
        .map_or(requested, |a| &*a.model)
}

/// `POST /v1/messages`.
pub(super) async fn messages(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = state.caller(authed);
    let reply = Reply {
        id: request_id,
        expose: state.server.expose_errors,
    };
    let wire = match messages_wire::parse_request(&body) {
        Ok(w) => w,
        Err(e) => return error_response(&e, None),
    };
    let route = match route_for(&state, &caller, wire.model.as_deref()) {
        Ok(r) => r,
        Err(e) => return error_response(&e, None),
    };
    let stream = wire.stream;
    let requested = wire.model.clone().unwrap_or_default();
    let requested_name = requested.clone();
    let req = match wire.into_chat_request(true) {
        Ok(r) => r,
        Err(e) => return error_response(&e, None),
    };
    let Prepared {
        ctx,
        model,
        deadline,
        charged,
        route_header,
    } = match prepare(
        &state,
        &caller,
        route,
        stream,
        &headers,
        req.user.as_deref(),
    ) {
        Ok(p) => p,
        Err(w) => {
            return error_response(&AnthropicError::from_status(w.status, w.message()), None);
        }
    };
    let door = state.at_the_door(
        route,
        deadline,
        "/v1/messages",
        route_header.as_ref(),
        &reply,
    );
    let slot = match door.await {
        Ok(slot) => slot,
        Err(shed) => return shed,
    };
    let id = format!("msg_ripcord_{}", state.ids.fetch_add(1, Ordering::Relaxed));
    let resp = if stream {
        match model.stream(&req, &ctx).await {
            Ok(s) => sse(s, id, requested, reply.clone()).await,
            Err(e) => error_response(&chain_error(&e, &reply), Some(&failed_provenance(&e))),
        }
    } else {
        match model.chat(&req, &ctx).await {
            Ok(r) => {
                let served = served_model(Some(&r.model), &r.provenance, &requested);
                match messages_wire::message(&id, served, &r) {
                    Ok(m) => {
                        let mut out = axum::Json(m).into_response();
                        set_provenance_headers(out.headers_mut(), &r.provenance);
                        out
                    }
                    Err(e) => error_response(&e, Some(&r.provenance)),
                }
            }
            Err(e) => error_response(&chain_error(&e, &reply), Some(&failed_provenance(&e))),
        }
    };
    // The slot is held until the answer's body is done (a stream: until its last event).
    let mut resp = match slot {
        Some(p) => shed::hold(resp, p),
        None => resp,
    };
    if let Some(v) = route_header {
        resp.headers_mut().insert(hdr::ROUTE, v);
    }
    if let Some(v) = charged.and_then(|t| HeaderValue::from_str(&t).ok()) {
        resp.headers_mut().insert(hdr::TENANT, v);
    }
    // `model` in the answer names who served; the name the client asked for is said here.
    if let Ok(v) = HeaderValue::from_str(&requested_name) {
        resp.headers_mut().insert(hdr::REQUESTED_MODEL, v);
    }
    resp
}

/// `POST /v1/messages/count_tokens`: ripcord's own estimate of the prompt's tokens.
pub(super) async fn count_tokens(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    body: Bytes,
) -> Response {
    let caller = state.caller(authed);
    let wire = match messages_wire::parse_request(&body) {
        Ok(w) => w,
        Err(e) => return error_response(&e, None),
    };
    if let Err(e) = route_for(&state, &caller, wire.model.as_deref()) {
        return error_response(&e, None);
    }
    let req = match wire.into_chat_request(false) {
        Ok(r) => r,
        Err(e) => return error_response(&e, None),
    };
    let n = ripcord_core::tokens::estimate_request(&req);
    let mut resp = axum::Json(json!({"input_tokens": n})).into_response();
    resp.headers_mut()
        .insert(hdr::TOKEN_COUNT, HeaderValue::from_static("estimate"));
    resp
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

    fn tool(
        &mut self,
        call: u32,
        id: Option<String>,
        name: Option<String>,
        arguments: &str,
        out: &mut Vec<Bytes>,
    ) {
        let index = match self.tools.get(&call) {
            Some(i) => *i,
            None => {
                let id = id.unwrap_or_else(|| format!("toolu_ripcord_{call}"));
                let block = json!({"type": "tool_use", "id": id, "name": name.unwrap_or_default(), "input": {}});
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

/// The `event: error` that ends a stream after commit, with the call's record beside it.
fn error_event(e: &Error, reply: &Reply) -> Bytes {
    let mut body = chain_error(e, reply).body();
    let attempts =
        attempts_header(&failed_provenance(e)).and_then(|v| v.to_str().ok().map(str::to_owned));
    body["ripcord"] = json!({"served_by": null, "degraded": true, "attempts": attempts});
    event("error", &body)
}

async fn sse(mut s: ChatStream, id: String, requested: String, reply: Reply) -> Response {
    // Headers go out at the commit point, so they are true.
    let (head, provenance) = match read_to_commit(&mut s).await {
        Ok(h) => h,
        Err(e) => return error_response(&chain_error(&e, &reply), Some(&failed_provenance(&e))),
    };
    let model = provenance.as_ref().map_or(requested.clone(), |p| {
        served_model(None, p, &requested).to_owned()
    });
    let body = async_stream::stream! {
        let start = json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }});
        yield Ok::<Bytes, std::convert::Infallible>(event("message_start", &start));
        yield Ok(event("ping", &json!({"type": "ping"})));
        let mut blocks = Blocks::default();
        let mut usage = None;
        let mut finish = None;
        let mut pending: std::collections::VecDeque<Result<StreamEvent, Error>> =
            head.into_iter().map(Ok).collect();
        loop {
            let next = match pending.pop_front() {
                Some(ev) => Some(ev),
                None => s.next().await,
            };
            let mut out = Vec::new();
            match next {
                Some(Ok(StreamEvent::TextDelta { text })) => blocks.text(&text, &mut out),
                Some(Ok(StreamEvent::ToolCallDelta { index, id, name, arguments })) => {
                    blocks.tool(index, id, name, &arguments, &mut out);
                }
                Some(Ok(StreamEvent::Usage { usage: u })) => usage = Some(u),
                Some(Ok(StreamEvent::Finish { reason, .. })) => finish = Some(reason),
                Some(Ok(StreamEvent::Restarted { reason, message })) => {
                    let e = Error::new(reason, format!("the upstream failed mid-stream and the answer restarted: {message}"));
                    yield Ok(error_event(&e, &reply));
                    return;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    yield Ok(error_event(&e, &reply));
                    return;
                }
                None => break,
            }
            for b in out {
                yield Ok(b);
            }
        }
        let Some(reason) = finish else {
            let e = Error::new(ErrorKind::InvalidResponse, "stream ended without a finish event");
            yield Ok(error_event(&e, &reply));
            return;
        };
        let mut out = Vec::new();
        blocks.close(&mut out);
        for b in out {
            yield Ok(b);
        }
        let usage = OutUsage::of(&usage.unwrap_or_default());
        let delta = json!({"type": "message_delta",
            "delta": {"stop_reason": ripcord_providers::anthropic_wire::stop_reason(&reason), "stop_sequence": null},
            "usage": usage});
        yield Ok(event("message_delta", &delta));
        yield Ok(event("message_stop", &json!({"type": "message_stop"})));
    };
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(p) = &provenance {
        set_provenance_headers(h, p);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

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
        b.tool(0, Some("call_a".into()), Some("f".into()), "", &mut out);
        b.tool(1, Some("call_b".into()), Some("g".into()), "{}", &mut out);
        // A late piece of the first call still names its own block.
        b.tool(0, None, None, "{\"x\":1}", &mut out);
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
}
