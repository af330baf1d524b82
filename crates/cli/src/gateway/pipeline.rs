//! The one request flow of every chat front door, written once; each door is a [`Dialect`].
//!
//! A chat call goes: parse the door's wire → find the route its `model` names and check that
//! the caller's key may use it → translate to ripcord's [`ChatRequest`] → prepare the call's
//! [`Context`] (the route's deadline, applied once here; the route and the sub-tenant as typed
//! extensions; the tenant the key names) → take a slot at the route's door (shedding) → call the
//! route's chain → render the answer in the door's shape → hold the slot until the body is done.
//!
//! What a dialect writes is only what differs between wires: how its request parses and
//! translates ([`Dialect::parse`], [`Dialect::translate`]), how a whole answer renders
//! ([`Dialect::render`]) and how a stream's events are written ([`Encoder`]). Everything a
//! client can rely on across doors is decided here, once:
//! - errors are one [`GatewayError`] rendered in the door's [`Shape`];
//! - the `model` of an answer, JSON or stream, follows one rule ([`served_model`]);
//! - a stream's headers go out when the chain commits to a link (its first provenance), so
//!   `x-ripcord-served-by` is true for streams too; a failure after that ends the stream with
//!   the door's in-band error, carrying the call's record; a stream without its finish is an
//!   error, never a short answer; a `Restarted` event cannot be expressed on any of these wires
//!   (a client cannot un-show text), so it ends the stream the same way;
//! - every answer and failed call carries the provenance, route, tenant and requested-model
//!   headers.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, FinishReason,
    Provenance, StreamEvent, Usage,
};
use serde_json::{Value, json};

use super::errors::{GatewayError, Reply, Shape, call_error};
use super::front::{Authed, RequestId};
use super::ledger::CallLog;
use super::notice::NoticeCall;
use super::reply::{attempts_header, hdr, set_provenance_headers, unix_now};
use super::{Caller, GatewayState, shed};
use crate::routing::{Route, SubTenant};

/// One front door's wire: how its requests parse and translate, and how answers render.
pub(super) trait Dialect: Sized + Send + 'static {
    /// The path it serves (named in shed refusals).
    const PATH: &'static str;
    /// Its error shape.
    const SHAPE: Shape;
    /// What the dialect keeps from the request to render the answer.
    type Opts: Send + 'static;
    /// Writes a streamed answer's events.
    type Encoder: Encoder;

    /// Parses a request body; the error names the field at fault by its path.
    fn parse(body: &[u8]) -> Result<Self, GatewayError>;

    /// The `model` the client asked for.
    fn model(&self) -> Option<&str>;

    /// True when the client asked for a stream.
    fn stream(&self) -> bool;

    /// Translates to ripcord's request (a dialect with stored state, such as the Responses
    /// door's `previous_response_id`, reads it here, as the caller it is).
    fn translate(
        self,
        call: &Call<'_>,
    ) -> impl Future<Output = Result<(ChatRequest, Self::Opts), GatewayError>> + Send;

    /// The id of the answer (`n` counts this gateway's answers).
    fn answer_id(n: u64) -> String;

    /// The whole answer as the door's JSON.
    fn render(
        opts: Self::Opts,
        answer: &Answer,
        resp: &ChatResponse,
    ) -> impl Future<Output = Result<Response, GatewayError>> + Send;

    /// The writer of a streamed answer.
    fn encoder(opts: Self::Opts, answer: Answer) -> Self::Encoder;
}

/// Writes one streamed answer's events in a door's wire. The pipeline feeds it the chain's
/// events in order and decides when the stream ends and how.
pub(super) trait Encoder: Send + 'static {
    /// The events that open the stream (before any content).
    fn open(&mut self, out: &mut Vec<Bytes>);
    /// A piece of the answer's text.
    fn text(&mut self, text: &str, out: &mut Vec<Bytes>);
    /// A piece of a tool call.
    fn tool_call(&mut self, piece: ToolPiece<'_>, out: &mut Vec<Bytes>);
    /// A piece of the model's reasoning; each door renders it in its wire's way (or says in
    /// its own docs why its wire has no place for a part of it).
    fn reasoning(&mut self, piece: ReasoningPiece<'_>, out: &mut Vec<Bytes>);
    /// The answer finished with `reason` (and `usage`, when the chain reported it). `record`
    /// is the chain's final word when it is news to the client (a stream continued on another
    /// link, see [`continuation_record`]): the door puts it beside its last event, under
    /// `ripcord`, since the headers went out before the cut.
    fn end(&mut self, end: Ending<'_>, out: &mut Vec<Bytes>);
    /// The call failed after the stream began: the door's in-band error. `error` carries the
    /// call's record ([`record`]).
    fn fail(&mut self, error: &GatewayError, out: &mut Vec<Bytes>);
    /// Runs once after a stream that ended well (the Responses door stores its answer here).
    fn settle(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// A piece of tool call number `index`; its id and name come with the pieces that carry them.
#[derive(Debug, Clone, Copy)]
pub(super) struct ToolPiece<'a> {
    /// Which call (0-based, in the order the model started them).
    pub(super) index: u32,
    /// The call id, on the piece that carries it.
    pub(super) id: Option<&'a str>,
    /// The function name, on the piece that carries it.
    pub(super) name: Option<&'a str>,
    /// A fragment of the JSON arguments.
    pub(super) arguments: &'a str,
}

/// How a streamed answer ended, as [`Encoder::end`] gets it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ending<'a> {
    /// Why the answer finished.
    pub(super) reason: &'a FinishReason,
    /// The answer's usage, when the chain reported it.
    pub(super) usage: Option<&'a Usage>,
    /// The chain's final word, when it is news to the client (see [`Encoder::end`]).
    pub(super) record: Option<&'a Value>,
}

/// A piece of reasoning as the chain streams it (see `ripcord_core::StreamEvent`).
#[derive(Debug, Clone, Copy)]
pub(super) enum ReasoningPiece<'a> {
    /// Reasoning text of the open thinking block.
    Text(&'a str),
    /// The vendor's signature, which closes the open thinking block.
    Signature(&'a str),
    /// A whole redacted (encrypted) block.
    Redacted(&'a str),
}

/// What a dialect's [`Dialect::translate`] may consult: the gateway and the caller.
pub(super) struct Call<'a> {
    /// The gateway.
    pub(super) state: &'a GatewayState,
    /// Whose call it is: the tenant of its key (`""` for anonymous callers), which scopes what
    /// the door stores for it.
    pub(super) owner: Arc<str>,
}

/// What the door's answer says about itself.
#[derive(Debug, Clone)]
pub(super) struct Answer {
    /// The answer's id.
    pub(super) id: String,
    /// Unix seconds.
    pub(super) created: u64,
    /// The model that served ([`served_model`]).
    pub(super) model: String,
    /// The caller's scope (see [`Call::owner`]).
    pub(super) owner: Arc<str>,
}

/// The model an answer names, one rule for JSON and streams on every door: the serving link's
/// model when a chain served (its last successful attempt), `static` for the static reply, else
/// (a bare model without a chain) what the model reported, else what the client asked for.
pub(super) fn served_model(p: Option<&Provenance>, reported: &str, requested: &str) -> String {
    if let Some(p) = p {
        if p.served_by.is_some()
            && let Some(a) = p
                .attempts
                .iter()
                .rev()
                .find(|a| a.succeeded())
                .filter(|a| !a.model.is_empty())
        {
            return a.model.to_string();
        }
        if p.static_reply {
            return "static".to_owned();
        }
    }
    if reported.is_empty() {
        requested.to_owned()
    } else {
        reported.to_owned()
    }
}

/// The handler of a chat front door speaking `D`.
pub(super) async fn door<D: Dialect>(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
    Extension(RequestId(id)): Extension<RequestId>,
    request: Request,
) -> Response {
    let mut reply = state.reply(id);
    reply.cut = request
        .extensions()
        .get::<super::server::StreamCut>()
        .map(|c| c.0.clone());
    reply.peer_fin = request
        .extensions()
        .get::<super::socket::PeerFin>()
        .map(|f| f.0.clone());
    match run::<D>(&state, &authed, &reply, request).await {
        Ok(r) => r,
        Err(e) => e
            .with_request_id(&reply.id)
            .shaped(D::SHAPE)
            .into_response(),
    }
}

/// The route `model` names, refused when unknown or outside the caller's key.
pub(super) fn authorize_route(
    state: &GatewayState,
    caller: &Caller<'_>,
    model: Option<&str>,
) -> Result<Option<usize>, GatewayError> {
    let route = state.route_of(model)?;
    if let Some(i) = route
        && !caller.may_use(i)
        && let Some(r) = state.routes.get(i)
    {
        let requested = model.unwrap_or_default();
        let which = if requested == r.name {
            format!("`{requested}`")
        } else {
            format!("`{requested}` (route `{}`)", r.name)
        };
        return Err(GatewayError::new(
            403,
            "route_not_allowed",
            format!(
                "this gateway key may not use the model {which}; GET /v1/models lists the ones it may use"
            ),
        )
        .with_param("model"));
    }
    Ok(route)
}

async fn run<D: Dialect>(
    state: &Arc<GatewayState>,
    authed: &Authed,
    reply: &Reply,
    request: Request,
) -> Result<Response, GatewayError> {
    // The head is taken apart, not cloned (axum's `HeaderMap` extractor copies every header);
    // the front door has already read the body under its limits, so this is a hand-over.
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|_| GatewayError::invalid("the request body could not be read"))?;
    let caller = state.caller(authed);
    let wire = D::parse(&body)?;
    let requested = wire
        .model()
        .map_or_else(|| state.model.id().model.to_string(), str::to_owned);
    let route = authorize_route(state, &caller, wire.model())?;
    let stream = wire.stream();
    let owner = state.owner(authed);
    let call = Call {
        state,
        owner: Arc::clone(&owner),
    };
    let (req, opts) = wire.translate(&call).await?;
    let prepared = prepare(
        state,
        &caller,
        route,
        stream,
        &parts.headers,
        req.user.as_deref(),
    )?;
    let door = state.at_the_door(
        route,
        prepared.deadline,
        D::PATH,
        prepared.route_header.as_ref(),
        reply,
    );
    let slot = match door.await {
        Ok(slot) => slot,
        Err(shed) => return Ok(shed),
    };
    let answer = Answer {
        id: D::answer_id(state.ids.fetch_add(1, Ordering::Relaxed)),
        created: unix_now(),
        model: String::new(),
        owner,
    };
    let model = prepared.model;
    let notice = NoticeCall::new(&state.notices, route, prepared.ctx.intent());
    let mut log = CallLog::open(
        state.ledger.as_ref(),
        &reply.id,
        caller.key.map(|k| &k.label),
        prepared.tenant.as_ref(),
        prepared.sub_tenant.as_deref(),
        route
            .and_then(|i| state.routes.get(i))
            .map_or(requested.as_str(), |r| r.name.as_str()),
    );
    let resp = if stream {
        match model.stream(&req, &prepared.ctx).await {
            Ok(s) => stream_response::<D>(s, opts, answer, &requested, reply, notice, log).await,
            Err(e) => {
                log.record(e.kind().as_str(), None, Some(&failed_provenance(&e)));
                call_error(&e, reply).shaped(D::SHAPE).into_response()
            }
        }
    } else {
        match model.chat(&req, &prepared.ctx).await {
            Ok(mut r) => {
                log.record("ok", Some(&r.usage), Some(&r.provenance));
                let answer = Answer {
                    model: served_model(Some(&r.provenance), &r.model, &requested),
                    ..answer
                };
                let text = notice.text_for(&r.provenance);
                if let Some(n) = &text {
                    notice.write_into_text(n, &mut r);
                }
                match D::render(opts, &answer, &r).await {
                    Ok(mut out) => {
                        set_provenance_headers(out.headers_mut(), &r.provenance, reply.expose);
                        match &text {
                            Some(n) => super::notice::annotate(out, n).await,
                            None => out,
                        }
                    }
                    Err(e) => e
                        .with_provenance(r.provenance.clone())
                        .exposing(reply.expose)
                        .shaped(D::SHAPE)
                        .into_response(),
                }
            }
            Err(e) => {
                log.record(e.kind().as_str(), None, Some(&failed_provenance(&e)));
                call_error(&e, reply).shaped(D::SHAPE).into_response()
            }
        }
    };
    // The slot is held until the answer's body is done (a stream: until its last event).
    let mut resp = match slot {
        Some(p) => shed::hold(resp, p),
        None => resp,
    };
    let h = resp.headers_mut();
    if let Some(v) = prepared.route_header {
        h.insert(hdr::ROUTE, v);
    }
    if let Some(v) = prepared
        .charged
        .and_then(|t| HeaderValue::from_str(&t).ok())
    {
        h.insert(hdr::TENANT, v);
    }
    // `model` in the answer names who served; the name the client asked for is said here.
    if let Ok(v) = HeaderValue::from_str(&requested) {
        h.insert(hdr::REQUESTED_MODEL, v);
    }
    Ok(resp)
}

/// What a call runs with, from its route and the caller's key.
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
    /// The key's tenant, when it has one.
    pub(super) tenant: Option<Arc<str>>,
    /// The sub-tenant its client named, when the key allows one.
    pub(super) sub_tenant: Option<String>,
}

/// Builds a call's [`Prepared`]; an invalid sub-tenant claim is the client's error.
pub(super) fn prepare<'a>(
    state: &'a GatewayState,
    caller: &Caller<'a>,
    route: Option<usize>,
    stream: bool,
    headers: &HeaderMap,
    user: Option<&str>,
) -> Result<Prepared<'a>, GatewayError> {
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
        ctx = ctx.with_extension(Route(i));
    }
    let default_controls = crate::config::KeyControls::default();
    let allowed = caller.key.map_or(&default_controls, |k| &k.controls);
    ctx = super::controls::apply(ctx, headers, allowed)?;
    let mut model = &state.model;
    let mut charged = None;
    let mut sub_tenant = None;
    if let Some(key) = caller.key {
        if let Some(tenant) = &key.tenant {
            ctx = ctx.with_tenant(Arc::clone(tenant));
            charged = Some(tenant.to_string());
            if key.sub_tenants
                && let Some(sub) = sub_tenant_of(headers, user)?
            {
                charged = Some(format!("{tenant}/{sub}"));
                ctx = ctx.with_extension(SubTenant(Arc::from(sub.as_str())));
                sub_tenant = Some(sub);
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
        tenant: caller.key.and_then(|k| k.tenant.clone()),
        sub_tenant,
    })
}

/// The sub-tenant a `sub_tenants` key's client names: the `x-ripcord-tenant` header, else the
/// request's `user`; none when both are absent or blank. A name over 256 bytes, with a `/` (the
/// separator of `tenant/sub`) or a header that is not text is a 400 naming where it came from.
pub(super) fn sub_tenant_of(
    headers: &HeaderMap,
    user: Option<&str>,
) -> Result<Option<String>, GatewayError> {
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

fn bad_sub_tenant(from: &str, why: &str) -> GatewayError {
    GatewayError::new(
        400,
        "invalid_sub_tenant",
        format!("the sub-tenant in {from} {why}"),
    )
}

/// Reads a stream up to its commit point: the chain's first provenance, or the first content
/// or the end when none comes. Returns the events read before it and the provenance; an error
/// before commit is returned for the caller to answer as an HTTP error.
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

/// The call's record beside an in-band error (clients that only read `error` ignore it): no
/// link served, degraded, and every attempt in the `x-ripcord-attempts` format.
pub(super) fn record(e: &GatewayError) -> Value {
    let attempts = e
        .provenance()
        .and_then(|p| attempts_header(p, e.expose_attempts()))
        .and_then(|v| v.to_str().ok().map(str::to_owned));
    json!({"served_by": null, "degraded": true, "attempts": attempts})
}

/// What a continued stream's last event says about it (`None` for a stream one link served
/// whole): the link that finished it and every continuation (from, by, the byte offset where
/// it began, how the link was asked, what cut the stream).
pub(super) fn continuation_record(p: &Provenance) -> Option<Value> {
    if p.continuations.is_empty() {
        return None;
    }
    let continuations: Vec<Value> = p
        .continuations
        .iter()
        .map(|c| {
            json!({"from": c.from, "by": c.by, "offset": c.offset, "mode": c.mode.as_str(),
                "reason": c.reason.as_str()})
        })
        .collect();
    Some(
        json!({"served_by": p.served_by, "continued_by": p.continued_by, "continuations": continuations}),
    )
}

/// One server-sent event carrying `v` as JSON, written straight into the event's buffer, with
/// an `event:` line when the wire names its events.
pub(super) fn sse_event<T: serde::Serialize>(name: Option<&str>, v: &T) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    if let Some(name) = name {
        buf.extend_from_slice(b"event: ");
        buf.extend_from_slice(name.as_bytes());
        buf.push(b'\n');
    }
    buf.extend_from_slice(b"data: ");
    if let Err(e) = serde_json::to_writer(&mut buf, v) {
        // Not reachable for the gateway's own types (no map has a non-string key); said in
        // the stream rather than sent as a half-written event.
        let w = GatewayError::new(
            500,
            "server_error",
            format!("the gateway could not encode an event: {e}"),
        );
        return sse_event(name, &w.body(Shape::OpenAi));
    }
    buf.extend_from_slice(b"\n\n");
    Bytes::from(buf)
}

/// Resolves once the flag turns `true` (the server's shutdown grace period is over, the
/// client sent a FIN); never when there is no flag or it never turns.
async fn cut_fired(cut: Option<&mut tokio::sync::watch::Receiver<bool>>) {
    let Some(cut) = cut else {
        return std::future::pending().await;
    };
    loop {
        if *cut.borrow_and_update() {
            return;
        }
        if cut.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// What a stream cut at the end of the shutdown grace period ends with: the gateway's own
/// refusal (another replica can serve the retry), never a vendor's failure.
fn shutdown_cut() -> Error {
    Error::new(
        ErrorKind::Overloaded,
        "the gateway is shutting down: this stream was cut at the end of its grace period",
    )
    .with_retry_after(Duration::from_secs(1))
    .with_fault(ripcord_core::Fault::Local)
}

/// The record of a call that failed: every attempt of its error, no link served.
fn failed_provenance(e: &Error) -> Provenance {
    let mut p = Provenance::default();
    p.attempts = e.attempts().to_vec();
    p.degraded = true;
    p
}

async fn stream_response<D: Dialect>(
    mut s: ChatStream,
    opts: D::Opts,
    answer: Answer,
    requested: &str,
    reply: &Reply,
    notice: NoticeCall,
    mut log: CallLog,
) -> Response {
    // Headers go out at the commit point, so they are true.
    let (mut head, provenance) = match read_to_commit(&mut s).await {
        Ok(h) => h,
        Err(e) => {
            log.record(e.kind().as_str(), None, Some(&failed_provenance(&e)));
            return call_error(&e, reply).shaped(D::SHAPE).into_response();
        }
    };
    log.saw(None, provenance.as_ref());
    let notice_at_commit = provenance.as_ref().and_then(|p| notice.text_for(p));
    if let Some(ev) = notice_at_commit
        .as_deref()
        .and_then(|n| notice.opening_event(n))
    {
        head.insert(0, ev);
    }
    // Every event names the model that serves, not the one asked for (that one is in the
    // `x-ripcord-requested-model` header): a client that reads `model` learns who answered.
    let answer = Answer {
        model: served_model(provenance.as_ref(), "", requested),
        ..answer
    };
    let mut enc = D::encoder(opts, answer);
    let expose = reply.expose;
    let reply = reply.clone();
    let committed_notice = notice_at_commit.clone();
    let mut cut = reply.cut.clone();
    let mut fin = reply.peer_fin.clone();
    let body = async_stream::stream! {
        let mut out = Vec::with_capacity(4);
        enc.open(&mut out);
        let mut usage = None;
        let mut finish = None;
        // The chain's last provenance (it sends one more at the end, with any continuation).
        let mut last: Option<Box<Provenance>> = None;
        let mut pending: std::collections::VecDeque<StreamEvent> = head.into();
        loop {
            for b in out.drain(..) {
                yield Ok::<Bytes, std::convert::Infallible>(b);
            }
            let next = match pending.pop_front() {
                Some(ev) => Some(Ok(ev)),
                None => {
                    let got = tokio::select! {
                        biased;
                        () = cut_fired(cut.as_mut()) => Some(Some(Err(shutdown_cut()))),
                        () = cut_fired(fin.as_mut()) => None,
                        n = s.next() => Some(n),
                    };
                    let Some(next) = got else {
                        // The client sent a FIN: a comment it ignores if it still reads, and
                        // answers with a reset if it closed (the connection is then dropped).
                        fin = None;
                        yield Ok(Bytes::from_static(super::socket::PROBE_COMMENT));
                        continue;
                    };
                    next
                }
            };
            let failed = match next {
                Some(Ok(StreamEvent::TextDelta { text })) => {
                    enc.text(&text, &mut out);
                    continue;
                }
                Some(Ok(StreamEvent::ToolCallDelta { index, id, name, arguments })) => {
                    let piece = ToolPiece { index, id: id.as_deref(), name: name.as_deref(), arguments: &arguments };
                    enc.tool_call(piece, &mut out);
                    continue;
                }
                Some(Ok(StreamEvent::ReasoningDelta { text })) => {
                    enc.reasoning(ReasoningPiece::Text(&text), &mut out);
                    continue;
                }
                Some(Ok(StreamEvent::ReasoningSignature { signature })) => {
                    enc.reasoning(ReasoningPiece::Signature(&signature), &mut out);
                    continue;
                }
                Some(Ok(StreamEvent::RedactedReasoning { data })) => {
                    enc.reasoning(ReasoningPiece::Redacted(&data), &mut out);
                    continue;
                }
                Some(Ok(StreamEvent::Usage { usage: u })) => {
                    log.saw(Some(&u), None);
                    usage = Some(u);
                    continue;
                }
                Some(Ok(StreamEvent::Finish { reason, .. })) => {
                    finish = Some(reason);
                    continue;
                }
                Some(Ok(StreamEvent::Restarted { reason, message })) => Error::new(
                    reason,
                    format!("the upstream failed mid-stream and the answer restarted: {message}"),
                ),
                Some(Ok(StreamEvent::Provenance { provenance })) => {
                    log.saw(None, Some(&provenance));
                    last = Some(provenance);
                    continue;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => e,
                None => match finish.take() {
                    Some(reason) => {
                        let record = last.as_deref().and_then(continuation_record);
                        let late = last.as_deref().and_then(|p| notice.text_for(p));
                        let record = super::notice::with_notice(record, committed_notice.as_deref().or(late.as_deref()));
                        enc.end(
                            Ending { reason: &reason, usage: usage.as_ref(), record: record.as_ref() },
                            &mut out,
                        );
                        log.record("ok", None, None);
                        for b in out.drain(..) {
                            yield Ok(b);
                        }
                        enc.settle().await;
                        return;
                    }
                    None => Error::new(ErrorKind::InvalidResponse, "stream ended without a finish event"),
                },
            };
            // The headers went out at commit; the call's record rides with the error event.
            log.record(failed.kind().as_str(), None, None);
            enc.fail(&call_error(&failed, &reply), &mut out);
            for b in out.drain(..) {
                yield Ok(b);
            }
            return;
        }
    };
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(p) = &provenance {
        set_provenance_headers(h, p, expose);
    }
    if let Some(n) = &notice_at_commit {
        super::notice::set_header(h, n);
    }
    resp
}
