//! `POST /v1/chat/completions`: OpenAI's chat wire in front of the model, JSON and SSE.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use ripcord_core::{ChatModel, ChatStream, Context, Error, ErrorKind, Provenance, StreamEvent};
use serde_json::json;

use super::errors::{Reply, call_error};
use super::front::{Authed, RequestId};
use super::reply::hdr;
use super::reply::{
    attempts_header, error_response, failed_provenance, parse_body, set_provenance_headers,
    unix_now,
};
use super::wire::{self, ChunkWriter, Delta, WireError, WireRequest};
use super::{Caller, GatewayRoute, GatewayState, shed};
use crate::routing;

fn route_not_allowed(requested: &str, route: &GatewayRoute) -> Response {
    let which = if requested == route.name {
        format!("`{requested}`")
    } else {
        format!("`{requested}` (route `{}`)", route.name)
    };
    error_response(
        WireError::new(
            403,
            "invalid_request_error",
            "route_not_allowed",
            format!(
                "this gateway key may not use the model {which}; GET /v1/models lists the ones it may use"
            ),
        )
        .with_param("model"),
        None,
    )
}

pub(super) async fn chat_completions(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Extension(RequestId(id)): Extension<RequestId>,
    request: axum::extract::Request,
) -> Response {
    // The head is taken apart, not cloned (axum's `HeaderMap` extractor copies every header);
    // the front door has already read the body under its limits, so this is a hand-over.
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(
                WireError::new(
                    400,
                    "invalid_request_error",
                    "invalid_request",
                    "the request body could not be read",
                ),
                None,
            );
        }
    };
    let caller = state.caller(authed);
    let reply = Reply {
        id,
        expose: state.server.expose_errors,
    };
    let wire: WireRequest = match parse_body(&body) {
        Ok(x) => x,
        Err(e) => return error_response(e, None),
    };
    let route = match state.route_of(wire.model.as_deref()) {
        Ok(r) => r,
        Err(e) => return error_response(e, None),
    };
    if let Some(i) = route
        && !caller.may_use(i)
        && let Some(r) = state.routes.get(i)
    {
        return route_not_allowed(wire.model.as_deref().unwrap_or_default(), r);
    }
    let stream = wire.stream;
    let include_usage = wire.include_usage();
    let requested_model = wire
        .model
        .clone()
        .unwrap_or_else(|| state.model.id().model.to_string());
    let req = match wire.into_chat_request() {
        Ok(r) => r,
        // The client's own mistake, named in full.
        Err(e) => return error_response(WireError::from_error(&e), None),
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
        Err(e) => return error_response(e, None),
    };
    let tenant_header = charged.and_then(|t| HeaderValue::from_str(&t).ok());
    let door = state.at_the_door(
        route,
        deadline,
        "/v1/chat/completions",
        route_header.as_ref(),
        &reply,
    );
    let slot = match door.await {
        Ok(slot) => slot,
        Err(shed) => return shed,
    };
    let requested_header = HeaderValue::from_str(&requested_model).ok();
    let id = state.next_id();
    let created = unix_now();
    let resp = if !stream {
        match model.chat(&req, &ctx).await {
            Ok(resp) => {
                // The body names who served (the vendor's own name, else the serving link's
                // model); the requested name goes in a header.
                let fallback = served_model(&resp.provenance).unwrap_or(&requested_model);
                let body = wire::completion(&id, created, fallback, &resp);
                let mut r = axum::Json(body).into_response();
                set_provenance_headers(r.headers_mut(), &resp.provenance);
                r
            }
            Err(e) => error_response(call_error(&e, &reply), Some(&failed_provenance(&e))),
        }
    } else {
        match model.stream(&req, &ctx).await {
            Ok(s) => {
                sse_response(
                    s,
                    ChunkWriter {
                        id,
                        created,
                        model: requested_model,
                    },
                    include_usage,
                    &reply,
                )
                .await
            }
            Err(e) => error_response(call_error(&e, &reply), Some(&failed_provenance(&e))),
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
    if let Some(v) = tenant_header {
        resp.headers_mut().insert(hdr::TENANT, v);
    }
    if let Some(v) = requested_header {
        resp.headers_mut().insert(hdr::REQUESTED_MODEL, v);
    }
    resp
}

/// What both front doors run a call with, from its route and the caller's key.
pub(super) struct Prepared<'a> {
    /// The request deadline (and, for a stream, the stream deadline), the route and the tenant.
    pub(super) ctx: Context,
    /// The model to call: the key's own rate-limited chain when it has one.
    pub(super) model: &'a Arc<dyn ChatModel>,
    /// The request deadline, which also bounds the wait for admission.
    pub(super) deadline: Duration,
    /// Who pays (`tenant` or `tenant/sub`), said back to the client (`x-ripcord-tenant`) so a
    /// claim the key may not make is visibly not what counted.
    pub(super) charged: Option<String>,
    /// The route's name for `x-ripcord-route`.
    pub(super) route_header: Option<HeaderValue>,
}

/// Builds a call's [`Prepared`]; an invalid sub-tenant claim is the client's error.
pub(super) fn prepare<'a>(
    state: &'a GatewayState,
    caller: &Caller<'a>,
    route: Option<usize>,
    stream: bool,
    headers: &HeaderMap,
    user: Option<&str>,
) -> Result<Prepared<'a>, WireError> {
    let route_cfg = route.and_then(|i| state.routes.get(i));
    let (deadline, stream_max) = route_cfg.map_or((state.deadline, state.stream_max), |r| {
        (r.deadline, r.stream_max)
    });
    let mut ctx = Context::new().with_timeout(deadline);
    if stream && let Some(at) = tokio::time::Instant::now().checked_add(stream_max) {
        // The request deadline bounds getting an answer; a long answer then streams on.
        ctx = ctx.with_stream_deadline(at);
    }
    if let Some(i) = route {
        ctx = ctx.with_metadata(routing::ROUTE, i.to_string());
    }
    let mut model = &state.model;
    let mut charged = None;
    if let Some(key) = caller.key {
        if let Some(tenant) = &key.tenant {
            ctx = ctx.with_tenant(Arc::clone(tenant));
            charged = Some(tenant.to_string());
            if key.sub_tenants
                && let Some(sub) = sub_tenant_of(headers, user)?
            {
                charged = Some(format!("{tenant}/{sub}"));
                ctx = ctx.with_metadata(routing::SUB_TENANT, sub);
            }
        }
        if let Some(limited) = &key.limited {
            model = limited;
        }
    }
    let route_header = route_cfg.and_then(|r| HeaderValue::from_str(&r.name).ok());
    Ok(Prepared {
        ctx,
        model,
        deadline,
        charged,
        route_header,
    })
}

/// The sub-tenant a `sub_tenants` key's client names: the `x-ripcord-tenant` header, else the
/// request's `user`; none when both are absent or blank. A name over 256 bytes, with a `/` (the
/// separator of `tenant/sub`) or a header that is not text is a 400 naming where it came from.
pub(super) fn sub_tenant_of(
    headers: &HeaderMap,
    user: Option<&str>,
) -> Result<Option<String>, WireError> {
    let (raw, from) = match headers.get(hdr::TENANT) {
        Some(v) => match v.to_str() {
            Ok(t) => (Some(t), "the x-ripcord-tenant header"),
            Err(_) => return Err(bad_sub_tenant("the x-ripcord-tenant header", "is not text")),
        },
        None => (user, "the request's `user`"),
    };
    let Some(t) = raw.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if t.len() > 256 {
        return Err(bad_sub_tenant(from, "is longer than 256 bytes"));
    }
    if t.contains('/') {
        return Err(bad_sub_tenant(from, "contains `/`"));
    }
    Ok(Some(t.to_owned()))
}

fn bad_sub_tenant(from: &str, why: &str) -> WireError {
    WireError::new(
        400,
        "invalid_request_error",
        "invalid_sub_tenant",
        format!("the sub-tenant in {from} {why}"),
    )
}

/// One server-sent event carrying `v` as JSON, written straight into the event's buffer.
fn sse_data<T: serde::Serialize>(v: &T) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"data: ");
    if let Err(e) = serde_json::to_writer(&mut buf, v) {
        // Not reachable for the gateway's own types (no map has a non-string key); said in
        // the stream rather than sent as a half-written event.
        let w = WireError::new(
            500,
            "server_error",
            "server_error",
            format!("the gateway could not encode an event: {e}"),
        );
        return sse_data(&w.event_json());
    }
    buf.extend_from_slice(b"\n\n");
    Bytes::from(buf)
}

/// The model that served an answer, as the serving link names it: the last successful
/// attempt's model (`None` for a static reply or when no link served).
pub(super) fn served_model(p: &Provenance) -> Option<&str> {
    p.served_by.as_ref()?;
    p.attempts
        .iter()
        .rev()
        .find(|a| a.succeeded())
        .map(|a| &*a.model)
        .filter(|m| !m.is_empty())
}

/// Reads a stream up to its commit point: the chain's first provenance, or the first content
/// or the end when none comes. Returns the events read before it and the provenance; an error
/// before commit is returned for the caller to answer in its own wire's shape.
pub(super) async fn read_to_commit(
    s: &mut ChatStream,
) -> Result<(Vec<StreamEvent>, Option<Provenance>), Error> {
    let mut head = Vec::new();
    while let Some(item) = s.next().await {
        match item? {
            StreamEvent::Provenance { provenance } => return Ok((head, Some(*provenance))),
            ev => {
                let content = ev.is_content();
                head.push(ev);
                if content {
                    break;
                }
            }
        }
    }
    Ok((head, None))
}

async fn sse_response(
    mut s: ChatStream,
    mut writer: ChunkWriter,
    include_usage: bool,
    reply: &Reply,
) -> Response {
    // Headers go out at the commit point, so they are true.
    let (head, provenance) = match read_to_commit(&mut s).await {
        Ok(h) => h,
        Err(e) => return error_response(call_error(&e, reply), Some(&failed_provenance(&e))),
    };
    // Every chunk names the model that serves, not the one asked for (that one is in the
    // `x-ripcord-requested-model` header): a client that reads `model` learns who answered.
    if let Some(m) = provenance.as_ref().and_then(served_model) {
        writer.model = m.to_owned();
    }
    let reply = reply.clone();
    let body = async_stream::stream! {
        yield Ok::<Bytes, std::convert::Infallible>(sse_data(&writer.chunk(Delta::opening(), None)));
        let mut usage = None;
        let mut finished = false;
        let mut pending: std::collections::VecDeque<Result<StreamEvent, Error>> = head.into_iter().map(Ok).collect();
        loop {
            let next = match pending.pop_front() {
                Some(ev) => Some(ev),
                None => s.next().await,
            };
            match next {
                Some(Ok(StreamEvent::TextDelta { text })) => {
                    yield Ok(sse_data(&writer.chunk(Delta::text(&text), None)));
                }
                Some(Ok(StreamEvent::ToolCallDelta { index, id, name, arguments })) => {
                    let delta = Delta::tool_call(index, id.as_deref(), name.as_deref(), &arguments);
                    yield Ok(sse_data(&writer.chunk(delta, None)));
                }
                Some(Ok(StreamEvent::Usage { usage: u })) => usage = Some(u),
                Some(Ok(StreamEvent::Finish { reason, .. })) => {
                    finished = true;
                    yield Ok(sse_data(&writer.chunk(Delta::default(), Some(reason.as_str()))));
                }
                Some(Ok(StreamEvent::Restarted { reason, message })) => {
                    let e = Error::new(reason, format!("the upstream failed mid-stream and the answer restarted: {message}"));
                    yield Ok(sse_data(&WireError::from_error(&e).event_json()));
                    return;
                }
                Some(Ok(StreamEvent::Provenance { .. })) => {}
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    // The headers went out at commit; the call's final record rides with the
                    // error event (clients that only read `error` ignore it).
                    let attempts = attempts_header(&failed_provenance(&e))
                        .and_then(|v| v.to_str().ok().map(str::to_owned));
                    let mut event = call_error(&e, &reply).event_json();
                    event["ripcord"] = json!({"served_by": null, "degraded": true, "attempts": attempts});
                    yield Ok(sse_data(&event));
                    return;
                }
                None => break,
            }
        }
        if !finished {
            let e = Error::new(ErrorKind::InvalidResponse, "stream ended without a finish event");
            yield Ok(sse_data(&WireError::from_error(&e).event_json()));
            return;
        }
        if let Some(u) = usage.filter(|_| include_usage) {
            yield Ok(sse_data(&writer.usage(&u)));
        }
        yield Ok(Bytes::from_static(b"data: [DONE]\n\n"));
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
