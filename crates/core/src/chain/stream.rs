//! Streaming through a chain.
//!
//! An attempt is not over until its first content event (or its finish) has arrived: errors
//! before that — a deferred HTTP status, a 429 sent as the first SSE event, a stream that ends
//! at once — are the attempt's errors and go through the same classification and fallback as
//! `chat`. At the first content event the chain *commits* to the link. After that a failure
//! ends the stream with the error, or, under [`StreamPolicy::Restart`], announces
//! `Restarted` and streams the whole answer again from the next link that commits.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tracing::{Instrument, Span};

use super::call::{Call, Next};
use super::{ChainInner, StreamPolicy};
use crate::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::request::ChatRequest;
use crate::response::{Attempt, ChatResponse, Provenance};
use crate::stream::{ChatStream, StreamEvent};
use crate::telemetry;

struct Committed {
    link: usize,
    /// Messages trimmed from the request this link got.
    trimmed: u32,
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

/// Walks the links until one produces its first content (or finish) event.
async fn commit(inner: &ChainInner, call: &mut Call, req: &ChatRequest, ctx: &Context) -> Commit {
    loop {
        let i = match call.next_link(inner, req, ctx).await {
            Next::Link(i) => i,
            Next::Stop(e) => return Commit::Stop(e),
            Next::Exhausted => return Commit::Exhausted,
        };
        let model = &inner.links[i].model;
        let attempt_ctx = call.attempt_context(inner, i, ctx);
        let actx = attempt_ctx.as_ref().unwrap_or(ctx);
        let trimmed = call.take_trimmed(i);
        let r = trimmed.as_ref().map_or(req, |(t, _)| t);
        let started = Instant::now();
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
        let first = if model.bounds_itself() {
            opening.await
        } else {
            actx.run(opening).await
        };
        let first = match first {
            Ok((stream, buffered, nested, false)) if !inner.stream_holdback.is_zero() => {
                hold_back(inner, call.deadline(), ctx, stream, buffered, nested).await
            }
            Ok((stream, buffered, nested, _)) => Ok((stream, buffered, nested)),
            Err(e) => Err(e),
        };
        match first {
            Ok((stream, buffered, provenance)) => {
                inner.observe_latency(i, started.elapsed());
                return Commit::Ok(Committed {
                    link: i,
                    trimmed: trimmed.map_or(0, |(_, n)| n),
                    stream,
                    buffered,
                    started,
                    provenance,
                });
            }
            Err(e) => call.failed(inner, i, e, started.elapsed(), req, ctx),
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
            if tracing::level_enabled!(tracing::Level::INFO) {
                let span = telemetry::chain_span(
                    &inner.id.name,
                    telemetry::operation::CHAT,
                    inner.links.len(),
                    true,
                );
                if !span.is_disabled() {
                    return Box::pin(open_traced(inner, req, ctx, span)).await;
                }
            }
            Span::none()
        }
    };
    inner.count_call();
    let (deadline, ctx) = inner.call_context(ctx, Instant::now());
    let mut call = Call::new(&inner, req, deadline);
    match commit(&inner, &mut call, req, &ctx).await {
        Commit::Ok(c) => {
            let restart_req = (inner.stream_policy == StreamPolicy::Restart).then(|| req.clone());
            Ok(committed(inner, call, c, ctx, restart_req, span))
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

fn committed(
    inner: Arc<ChainInner>,
    mut call: Call,
    first: Committed,
    ctx: Context,
    restart_req: Option<ChatRequest>,
    span: Span,
) -> ChatStream {
    Box::pin(async_stream::stream! {
        let mut c = first;
        let mut provenance = call.served(&inner, c.link, std::mem::take(&mut c.provenance), c.started.elapsed());
        provenance.trimmed_messages = c.trimmed;
        // After first content the stream is bounded by the stream bound, not the deadline
        // (which only bounded getting an answer at all).
        let stream_deadline = ctx.stream_deadline().unwrap_or_else(|| call.deadline());
        yield Ok(StreamEvent::Provenance { provenance: Box::new(provenance.clone()) });
        // A hold-back may have buffered the whole answer, its finish included.
        let mut buffered_finish = c.buffered.iter().any(|e| matches!(e, StreamEvent::Finish { .. }));
        for ev in std::mem::take(&mut c.buffered) {
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
                        yield Ok(ev);
                    }
                    Ok(Some(Err(e))) => break e,
                    Ok(None) if finished => {
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
            let Some(req) = restart_req.as_ref() else {
                tracing::info!(ripcord.link = %id.name, error.type = failure.kind().as_str(), message = crate::telemetry::event::STREAM_FAILED);
                let failure = with_call_attempts(failure, &provenance, c.started.elapsed());
                telemetry::record_error(&span, &failure);
                inner.count_failure();
                yield Err(failure);
                return;
            };
            let reason = failure.kind();
            let message = failure.to_string();
            call.failed(&inner, c.link, failure, c.started.elapsed(), req, &ctx);
            match commit(&inner, &mut call, req, &ctx).await {
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
