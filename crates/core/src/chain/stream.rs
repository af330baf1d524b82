//! Streaming through a chain.
//!
//! An attempt is not over until its first content event (or its finish) has arrived: errors
//! before that — a deferred HTTP status, a 429 sent as the first SSE event, a stream that ends
//! at once — are the attempt's errors and go through the same classification and fallback as
//! `chat`. At the first content event the chain *commits* to the link. After that a failure
//! ends the stream with the error, or, under [`StreamPolicy::Restart`], announces
//! `Restarted` and streams the whole answer again from the next link that commits, or, under
//! [`StreamPolicy::Continue`], asks the next link to continue from the delivered text and
//! streams only what it adds (see [`super::continuation`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tracing::{Instrument, Span};

use super::call::{Call, Next};
use super::clamp;
use super::continuation::{self, Overlap};
use super::{ChainInner, StreamPolicy};
use crate::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::fault::Fault;
use crate::model::ChatModel;
use crate::request::ChatRequest;
use crate::response::{Attempt, ChatResponse, Continuation, ContinuationMode, Provenance};
use crate::stream::{ChatStream, StreamEvent};
use crate::telemetry;

struct Committed {
    link: usize,
    /// Messages trimmed from the request this link got.
    trimmed: u32,
    /// How the link was asked to continue, when it continues a cut stream.
    mode: Option<ContinuationMode>,
    stream: ChatStream,
    buffered: Vec<StreamEvent>,
    started: Instant,
    provenance: Provenance,
}

enum Commit {
    Ok(Committed),
    Stop(Error),
    Exhausted,
}

fn truncated() -> Error {
    Error::new(
        ErrorKind::InvalidResponse,
        "stream truncated: it ended without its finish event",
    )
}

type Opened = (ChatStream, Vec<StreamEvent>, Provenance, bool);

/// Opens a stream on `model` and reads it up to its first content (or finish) event.
async fn open_link(model: &dyn ChatModel, r: &ChatRequest, actx: &Context) -> Result<Opened> {
    let opening = async {
        let mut stream = model.stream(r, actx).await?;
        let mut buffered = Vec::new();
        let mut nested = Provenance::default();
        loop {
            match stream.next().await {
                Some(Ok(StreamEvent::Provenance { provenance })) => nested = *provenance,
                Some(Ok(ev)) => {
                    let finished = matches!(ev, StreamEvent::Finish { .. });
                    let done = ev.is_content() || finished;
                    buffered.push(ev);
                    if done {
                        return Ok((stream, buffered, nested, finished));
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Err(truncated()),
            }
        }
    };
    // A link that bounds itself stops at the deadline with its own error; any other is
    // raced against the deadline here.
    if model.bounds_itself() {
        opening.await
    } else {
        actx.run(opening).await
    }
}

/// Walks the links until one produces its first content (or finish) event. With `delivered`,
/// each link is asked to continue that text instead ([`StreamPolicy::Continue`]): by prefill
/// where it supports it, and by instruction where it does not or refuses the prefill.
async fn commit(
    inner: &ChainInner,
    call: &mut Call,
    req: &ChatRequest,
    ctx: &Context,
    delivered: Option<&str>,
) -> Commit {
    loop {
        let i = match call.next_link(inner, req, ctx).await {
            Next::Link(i) => i,
            Next::Stop(e) => return Commit::Stop(e),
            Next::Exhausted => return Commit::Exhausted,
        };
        let model = &*inner.links[i].model;
        let attempt_ctx = call.attempt_context(inner, i, ctx);
        let actx = attempt_ctx.as_ref().unwrap_or(ctx);
        let trimmed = call.take_trimmed(i);
        let base = trimmed.as_ref().map_or(req, |(t, _)| t);
        let (base, clamped) = clamp::for_link(base, model.capabilities());
        let base = &*base;
        let started = Instant::now();
        let mut mode = delivered.map(|_| {
            if model.capabilities().assistant_prefill {
                ContinuationMode::Prefill
            } else {
                ContinuationMode::Instruction
            }
        });
        let first = loop {
            let asked = match (delivered, mode) {
                (Some(d), Some(m)) => Some(continuation::request(base, d, m)),
                _ => None,
            };
            let opened = open_link(model, asked.as_ref().unwrap_or(base), actx).await;
            match opened {
                // The vendor refused the prefill (a final assistant message): ask again with
                // the instruction, on the same link.
                Err(e)
                    if mode == Some(ContinuationMode::Prefill)
                        && e.kind() == ErrorKind::InvalidRequest =>
                {
                    mode = Some(ContinuationMode::Instruction);
                }
                other => break other,
            }
        };
        let first = match first {
            Ok((stream, buffered, nested, false)) if !inner.stream_holdback.is_zero() => {
                hold_back(inner, call.deadline(), ctx, stream, buffered, nested).await
            }
            Ok((stream, buffered, nested, _)) => Ok((stream, buffered, nested)),
            Err(e) => Err(e),
        };
        match first {
            Ok((stream, buffered, mut provenance)) => {
                inner.observe_latency(i, started.elapsed());
                if clamped.is_some() {
                    // The link's own record when it kept one, else the attempt the chain
                    // would write for it, marked with what it was sent.
                    let id = model.id();
                    if provenance.attempts.is_empty() {
                        provenance.attempts.push(Attempt::success(
                            id.name.clone(),
                            id.model.clone(),
                            started.elapsed(),
                        ));
                    }
                    clamp::record(&mut provenance.attempts, &id.name, clamped);
                }
                return Commit::Ok(Committed {
                    link: i,
                    trimmed: trimmed.map_or(0, |(_, n)| n),
                    mode,
                    stream,
                    buffered,
                    started,
                    provenance,
                });
            }
            Err(e) => {
                call.failed(inner, i, e, started.elapsed(), req, ctx);
                call.mark_clamped(&model.id().name, clamped);
            }
        }
    }
}

/// Reads on past the first content for up to the chain's hold-back, keeping what arrives: a
/// failure in that time is the attempt's (the caller has seen nothing of it yet), so the chain
/// may still fall over without splicing. Ends early at the answer's finish, and at the call's
/// deadline — an answer under way is committed then rather than dropped (after first content
/// the link's own stream runs under the stream bound, not the deadline).
async fn hold_back(
    inner: &ChainInner,
    deadline: Instant,
    ctx: &Context,
    mut stream: ChatStream,
    mut buffered: Vec<StreamEvent>,
    mut nested: Provenance,
) -> Result<(ChatStream, Vec<StreamEvent>, Provenance)> {
    let until = (Instant::now() + inner.stream_holdback).min(deadline);
    loop {
        let next = tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => return Err(Error::cancelled()),
            r = tokio::time::timeout_at(until, stream.next()) => r,
        };
        match next {
            // The hold-back is over: commit what arrived.
            Err(_) => return Ok((stream, buffered, nested)),
            Ok(Some(Ok(StreamEvent::Provenance { provenance }))) => nested = *provenance,
            Ok(Some(Ok(ev))) => {
                let finished = matches!(ev, StreamEvent::Finish { .. });
                buffered.push(ev);
                if finished {
                    return Ok((stream, buffered, nested));
                }
            }
            Ok(Some(Err(e))) => {
                tracing::info!(error.type = e.kind().as_str(), message = crate::telemetry::event::STREAM_FAILED_IN_HOLDBACK);
                return Err(e);
            }
            Ok(None) => return Err(truncated()),
        }
    }
}

/// The error that ends a committed stream, carrying the call's whole record: the attempts that
/// failed before the commit, then the committed attempt itself — recorded as a failure of this
/// error's kind, since the answer it started never finished. A stream that fails after its
/// first content thus tells the same story as a `chat` that fails.
fn with_call_attempts(failure: Error, provenance: &Provenance, elapsed: Duration) -> Error {
    let mut attempts = provenance.attempts.clone();
    let committed = attempts.iter().rposition(Attempt::succeeded);
    let (provider, model) = match committed.map(|i| attempts.remove(i)) {
        Some(a) => (a.provider, a.model),
        None => (
            Arc::from(failure.provider().unwrap_or("unknown")),
            Arc::from(failure.model().unwrap_or("unknown")),
        ),
    };
    let record = Attempt::failure(provider, model, &failure, elapsed);
    match committed {
        Some(i) => attempts.insert(i, record),
        None => attempts.push(record),
    }
    failure.with_attempts(attempts)
}

/// The cut of a committed stream by its bound: the caller's budget, never the link's failure.
pub(crate) fn stream_bound_passed() -> Error {
    Error::new(
        ErrorKind::DeadlineExceeded,
        "the stream's bound after first content passed",
    )
    .with_fault(crate::fault::Fault::Caller)
}

fn static_events(resp: ChatResponse) -> Vec<StreamEvent> {
    let provenance = Box::new(resp.provenance);
    vec![
        StreamEvent::Provenance {
            provenance: provenance.clone(),
        },
        StreamEvent::TextDelta { text: resp.content },
        StreamEvent::Usage { usage: resp.usage },
        StreamEvent::Finish {
            reason: resp.finish_reason,
            model: Some(resp.model),
        },
        StreamEvent::Provenance { provenance },
    ]
}

/// Opens a chain stream. Unless `traced` carries the call's span already, the call first opens
/// its chain span when a subscriber listens; without one it runs as it is, with no span and no
/// wrapper (the traced path is boxed so that this one stays as small as it was).
pub(super) async fn open(
    inner: Arc<ChainInner>,
    req: &ChatRequest,
    ctx: &Context,
    traced: Option<Span>,
) -> Result<ChatStream> {
    let span = match traced {
        Some(span) => span,
        None => {
            if let Some(span) = inner.live_span(true) {
                return Box::pin(open_traced(inner, req, ctx, span)).await;
            }
            Span::none()
        }
    };
    inner.count_call();
    let (deadline, ctx) = inner.call_context(ctx, Instant::now());
    let mut call = Call::new(&inner, req, deadline);
    match commit(&inner, &mut call, req, &ctx, None).await {
        Commit::Ok(c) => {
            let after = match inner.stream_policy {
                StreamPolicy::Restart => After::Restart(req.clone()),
                StreamPolicy::Continue => After::Continue(req.clone()),
                _ => After::End,
            };
            Ok(committed(inner, call, c, ctx, after, span))
        }
        Commit::Stop(e) => {
            inner.count_failure();
            Err(e)
        }
        Commit::Exhausted => {
            let resp = inner.static_or_error(call, &ctx)?;
            telemetry::record_served(&span, &resp.provenance);
            Ok(Box::pin(futures::stream::iter(
                static_events(resp).into_iter().map(Ok),
            )))
        }
    }
}

/// Opens the stream inside `span`, and keeps the stream polled inside it until it ends.
async fn open_traced(
    inner: Arc<ChainInner>,
    req: &ChatRequest,
    ctx: &Context,
    span: Span,
) -> Result<ChatStream> {
    match open(inner, req, ctx, Some(span.clone()))
        .instrument(span.clone())
        .await
    {
        Ok(stream) => Ok(telemetry::in_span(stream, span)),
        Err(e) => {
            telemetry::record_error(&span, &e);
            Err(e)
        }
    }
}

/// What a committed stream does when its link fails (the chain's [`StreamPolicy`], with the
/// request it needs).
enum After {
    End,
    Restart(ChatRequest),
    Continue(ChatRequest),
}

/// Why a failed committed stream is not continued, if it is not.
fn continue_refusal(failure: &Error, ctx: &Context, tool_calls: bool) -> Option<&'static str> {
    if tool_calls {
        // A half-sent tool call cannot be finished by another model.
        Some("tool_calls")
    } else if !ctx.retry_safe() {
        // The first link may have acted on the request already.
        Some("not_retry_safe")
    } else if matches!(
        failure.kind(),
        ErrorKind::Cancelled | ErrorKind::DeadlineExceeded
    ) || failure.fault_override() == Some(Fault::Caller)
    {
        // The caller's budget or cancellation ended it: nothing to continue for.
        Some("caller")
    } else {
        None
    }
}

/// What the consumer has been shown of the answer, when the chain may continue it.
#[derive(Default)]
struct Shown {
    text: String,
    tool_calls: bool,
}

impl Shown {
    fn see(&mut self, ev: &StreamEvent) {
        match ev {
            StreamEvent::TextDelta { text } => self.text.push_str(text),
            StreamEvent::ToolCallDelta { .. } => self.tool_calls = true,
            _ => {}
        }
    }
}

/// Passes a continuation's events through the overlap check: text may be held back (and a
/// repetition of the delivered text's end dropped); anything else first releases what is held.
fn through_overlap(overlap: &mut Option<Overlap>, ev: StreamEvent) -> Vec<StreamEvent> {
    let Some(o) = overlap.as_mut() else {
        return vec![ev];
    };
    match ev {
        StreamEvent::TextDelta { text } => {
            o.push(text).map(StreamEvent::text).into_iter().collect()
        }
        other => {
            let mut out: Vec<StreamEvent> = o.flush().map(StreamEvent::text).into_iter().collect();
            out.push(other);
            out
        }
    }
}

fn committed(
    inner: Arc<ChainInner>,
    mut call: Call,
    first: Committed,
    ctx: Context,
    after: After,
    span: Span,
) -> ChatStream {
    Box::pin(async_stream::stream! {
        let mut c = first;
        let mut provenance = call.served(&inner, c.link, std::mem::take(&mut c.provenance), c.started.elapsed());
        provenance.trimmed_messages = c.trimmed;
        // After first content the stream is bounded by the stream bound, not the deadline
        // (which only bounded getting an answer at all).
        let stream_deadline = ctx.stream_deadline().unwrap_or_else(|| call.deadline());
        // Only a stream that may be continued keeps what it showed.
        let mut shown = matches!(after, After::Continue(_)).then(Shown::default);
        // While a continuation's start may repeat the delivered text.
        let mut overlap: Option<Overlap> = None;
        yield Ok(StreamEvent::Provenance { provenance: Box::new(provenance.clone()) });
        // A hold-back may have buffered the whole answer, its finish included.
        let mut buffered_finish = c.buffered.iter().any(|e| matches!(e, StreamEvent::Finish { .. }));
        for ev in std::mem::take(&mut c.buffered) {
            if let Some(s) = shown.as_mut() {
                s.see(&ev);
            }
            yield Ok(ev);
        }
        loop {
            let mut finished = std::mem::take(&mut buffered_finish);
            // Each event of a link that bounds itself arrives (or fails) by the deadline on its
            // own: no timer and no cancellation waiter per event here.
            let bounded = inner.links[c.link].model.bounds_itself();
            let failure = loop {
                let next = if bounded {
                    Ok(c.stream.next().await)
                } else {
                    tokio::select! {
                        biased;
                        () = ctx.cancellation().cancelled() => break Error::cancelled(),
                        r = tokio::time::timeout_at(stream_deadline, c.stream.next()) => r,
                    }
                };
                match next {
                    Ok(Some(Ok(StreamEvent::Provenance { provenance: nested }))) => {
                        // A nested chain's view; ours is emitted at the end.
                        provenance.degraded |= nested.degraded;
                        provenance.static_reply |= nested.static_reply;
                    }
                    Ok(Some(Ok(ev))) => {
                        finished |= matches!(ev, StreamEvent::Finish { .. });
                        for ev in through_overlap(&mut overlap, ev) {
                            if let Some(s) = shown.as_mut() {
                                s.see(&ev);
                            }
                            yield Ok(ev);
                        }
                    }
                    Ok(Some(Err(e))) => break e,
                    Ok(None) if finished => {
                        if let (Some(o), Some(last)) = (overlap.as_ref(), provenance.continuations.last_mut()) {
                            last.overlap_trimmed = o.trimmed;
                        }
                        telemetry::record_served(&span, &provenance);
                        yield Ok(StreamEvent::Provenance { provenance: Box::new(provenance) });
                        return;
                    }
                    Ok(None) => break truncated(),
                    Err(_) => break stream_bound_passed(),
                }
            };
            let id = inner.links[c.link].model.id();
            let failure = if failure.provider().is_none() {
                failure.with_provider(id.name.clone(), id.model.clone())
            } else {
                failure
            };
            // What a continuation held back was never shown: it is the delivered text now.
            if let Some(text) = overlap.as_mut().and_then(Overlap::flush) {
                let ev = StreamEvent::text(text);
                if let Some(s) = shown.as_mut() {
                    s.see(&ev);
                }
                yield Ok(ev);
            }
            if let (Some(o), Some(last)) = (overlap.as_ref(), provenance.continuations.last_mut()) {
                last.overlap_trimmed = o.trimmed;
            }
            let end = |failure: Error, provenance: &Provenance, elapsed: Duration| {
                tracing::info!(ripcord.link = %id.name, error.type = failure.kind().as_str(), message = crate::telemetry::event::STREAM_FAILED);
                let failure = with_call_attempts(failure, provenance, elapsed);
                telemetry::record_error(&span, &failure);
                inner.count_failure();
                failure
            };
            let req = match &after {
                After::End => {
                    yield Err(end(failure, &provenance, c.started.elapsed()));
                    return;
                }
                After::Restart(req) => req,
                After::Continue(req) => {
                    let delivered = shown.as_ref().map_or("", |s| s.text.as_str());
                    let tool_calls = shown.as_ref().is_some_and(|s| s.tool_calls);
                    if let Some(why) = continue_refusal(&failure, &ctx, tool_calls) {
                        tracing::info!(ripcord.link = %id.name, reason = why, error.type = failure.kind().as_str(), message = crate::telemetry::event::STREAM_CONTINUE_REFUSED);
                        yield Err(end(failure, &provenance, c.started.elapsed()));
                        return;
                    }
                    let reason = failure.kind();
                    let original = failure.clone();
                    let elapsed = c.started.elapsed();
                    call.failed(&inner, c.link, failure, elapsed, req, &ctx);
                    // The continuing link gets a fresh budget to its first content (the chain's
                    // deadline), within the stream's bound.
                    let fresh = (Instant::now() + inner.deadline).min(stream_deadline);
                    call.extend_deadline(fresh);
                    let cctx = ctx.clone().set_deadline(Some(fresh));
                    let offset = delivered.len() as u64;
                    match commit(&inner, &mut call, req, &cctx, Some(delivered)).await {
                        Commit::Ok(mut next) => {
                            let by = inner.links[next.link].model.id().name.clone();
                            let mode = next.mode.unwrap_or(ContinuationMode::Instruction);
                            tracing::info!(
                                ripcord.fallback.from = %id.name,
                                ripcord.continued_by = %by,
                                ripcord.continuation.offset = offset,
                                ripcord.continuation.mode = mode.as_str(),
                                ripcord.continuation.reason = continuation::reason_label(reason),
                                error.type = reason.as_str(),
                                message = crate::telemetry::event::STREAM_CONTINUED
                            );
                            let served_by = provenance.served_by.clone();
                            let mut continuations = std::mem::take(&mut provenance.continuations);
                            continuations.push(Continuation {
                                from: id.name.clone(),
                                by: Arc::clone(&by),
                                offset,
                                mode,
                                reason,
                                overlap_trimmed: 0,
                            });
                            provenance = call.served(&inner, next.link, std::mem::take(&mut next.provenance), next.started.elapsed());
                            // The answer is still the first link's, continued by this one.
                            provenance.served_by = served_by;
                            provenance.degraded = true;
                            provenance.trimmed_messages = provenance.trimmed_messages.max(next.trimmed);
                            provenance.continued_by = Some(by);
                            provenance.continuations = continuations;
                            yield Ok(StreamEvent::Provenance { provenance: Box::new(provenance.clone()) });
                            overlap = Some(Overlap::new(delivered));
                            buffered_finish = next.buffered.iter().any(|e| matches!(e, StreamEvent::Finish { .. }));
                            for ev in std::mem::take(&mut next.buffered) {
                                for ev in through_overlap(&mut overlap, ev) {
                                    if let Some(s) = shown.as_mut() {
                                        s.see(&ev);
                                    }
                                    yield Ok(ev);
                                }
                            }
                            c = next;
                            continue;
                        }
                        // Nothing can continue it: the stream ends with its own failure (a
                        // static reply after half an answer would be two answers).
                        Commit::Stop(_) | Commit::Exhausted => {
                            tracing::info!(ripcord.link = %id.name, reason = "no_link", error.type = reason.as_str(), message = crate::telemetry::event::STREAM_CONTINUE_REFUSED);
                            yield Err(end(original, &provenance, elapsed));
                            return;
                        }
                    }
                }
            };
            let reason = failure.kind();
            let message = failure.to_string();
            call.failed(&inner, c.link, failure, c.started.elapsed(), req, &ctx);
            match commit(&inner, &mut call, req, &ctx, None).await {
                Commit::Ok(mut next) => {
                    tracing::info!(
                        ripcord.fallback.from = %id.name,
                        ripcord.fallback.to = %inner.links[next.link].model.id().name,
                        error.type = reason.as_str(),
                        message = crate::telemetry::event::STREAM_RESTARTED
                    );
                    yield Ok(StreamEvent::Restarted { reason, message });
                    provenance = call.served(&inner, next.link, std::mem::take(&mut next.provenance), next.started.elapsed());
                    provenance.trimmed_messages = next.trimmed;
                    yield Ok(StreamEvent::Provenance { provenance: Box::new(provenance.clone()) });
                    buffered_finish = next.buffered.iter().any(|e| matches!(e, StreamEvent::Finish { .. }));
                    for ev in std::mem::take(&mut next.buffered) {
                        yield Ok(ev);
                    }
                    c = next;
                }
                Commit::Stop(e) => {
                    telemetry::record_error(&span, &e);
                    inner.count_failure();
                    yield Err(e);
                    return;
                }
                Commit::Exhausted => {
                    match inner.static_or_error(call, &ctx) {
                        Ok(resp) => {
                            telemetry::record_served(&span, &resp.provenance);
                            yield Ok(StreamEvent::Restarted { reason, message });
                            for ev in static_events(resp) {
                                yield Ok(ev);
                            }
                        }
                        Err(e) => {
                            telemetry::record_error(&span, &e);
                            yield Err(e);
                        }
                    }
                    return;
                }
            }
        }
    })
}
