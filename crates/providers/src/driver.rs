//! Turns a streaming HTTP response into a [`ChatStream`], under the stream's time limits.
//!
//! One driver serves every vendor: it owns the response body, feeds its bytes to the
//! [`SseParser`], hands each event to the vendor's [`Decoder`], and yields the decoder's
//! [`StreamEvent`]s. Nothing is spawned and nothing is buffered beyond one network chunk's
//! events: the stream is pulled by its consumer, and dropping it drops the body, which closes
//! (or, if unfinished, aborts) the upstream connection.
//!
//! Limits: until the first content event (text, tool call, or finish) the first-token limit
//! applies — measured from when the request was sent; after it, the idle limit applies to each
//! gap between network reads, and the context's stream bound
//! ([`Context::stream_deadline`]) replaces its deadline (a cut by it is the caller's, not the
//! vendor's). Cancellation applies throughout. A body
//! that ends before the vendor's terminator (`[DONE]`, `message_stop`) — cleanly, after a few
//! keep-alive lines, or mid-event — is a "stream truncated" error, never a quiet end. Its kind
//! is `Network` (the connection ended early; nothing the vendor sent was malformed) and it is
//! marked as delivered: the vendor had the request and may have processed it, which decides
//! whether a request that is not retry-safe may be sent again.
//!
//! Two tolerances, both narrower than they look: a body that ends cleanly after the vendor's
//! stop reason but before its terminator is complete ([`Decoder::clean_end`]), and an event that
//! cannot be parsed is skipped — logged as `ripcord.stream_event_skipped`, counted — up to
//! [`Timeouts::max_skipped_events`] per stream; the next one fails the stream.
//!
//! A stream whose only answer is a policy stop — a `content_filter` / `refusal` finish with no
//! text and no tool call — is a `ContentFiltered` error, not an empty answer.

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use ripcord_core::{
    ChatStream, Context, Error, ErrorKind, FinishReason, Result, StreamEvent, TimeoutPhase,
};
use tokio::time::Instant;

use crate::http::{self, Auth, Limit, Stage, Timeouts};
use crate::sse::{SseEvent, SseParser};

/// Whether the vendor's stream is over.
#[derive(Debug)]
pub(crate) enum Step {
    /// Keep reading.
    More,
    /// The vendor's terminator arrived; the decoder has queued its final events.
    Done,
    /// The event could not be parsed (this error says why) and nothing of it was queued: the
    /// driver skips it, up to [`Timeouts::max_skipped_events`] per stream, then fails with it.
    Malformed(Error),
}

/// The error of an event that cannot be parsed, for [`Step::Malformed`].
pub(crate) fn malformed(what: String, source: serde_json::Error) -> Step {
    Step::Malformed(Error::new(ErrorKind::InvalidResponse, what).with_source(source))
}

/// How a stream body is cut into frames: SSE events for most vendors ([`SseParser`]), binary
/// event-stream messages for Bedrock. The driver pushes network bytes in and pulls whole frames
/// out; everything else (limits, truncation, skipping) is the same whatever the framing.
pub(crate) trait Framer: Send + 'static {
    /// One whole frame.
    type Frame;

    /// Takes the next network bytes.
    ///
    /// # Errors
    ///
    /// The bytes break the framing beyond repair (an oversized line or frame).
    fn push(&mut self, bytes: &[u8]) -> Result<()>;

    /// The next complete frame, if one is buffered.
    ///
    /// # Errors
    ///
    /// A frame that arrived whole but is corrupt (a checksum that does not match): the stream
    /// cannot be trusted past it.
    fn next_frame(&mut self) -> Option<Result<Self::Frame>>;

    /// Bytes of an unfinished frame are buffered.
    fn has_partial(&self) -> bool;
}

impl Framer for SseParser {
    type Frame = SseEvent;

    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        SseParser::push(self, bytes)
            .map_err(|e| Error::new(ErrorKind::InvalidResponse, e.to_string()).with_source(e))
    }

    fn next_frame(&mut self) -> Option<Result<SseEvent>> {
        self.next_event().map(Ok)
    }

    fn has_partial(&self) -> bool {
        SseParser::has_partial(self)
    }
}

/// A vendor's stream grammar: frames in (SSE events unless said otherwise), ripcord stream
/// events out.
pub(crate) trait Decoder<F = SseEvent>: Send + 'static {
    /// Handles one frame, queueing zero or more events on `out`.
    ///
    /// # Errors
    ///
    /// An in-band vendor error (already classified) or an event that cannot be understood.
    fn event(&mut self, ev: F, out: &mut VecDeque<StreamEvent>) -> Result<Step>;

    /// The message for a body that ended without the terminator.
    fn truncated(&self) -> &'static str;

    /// The body ended cleanly — no transport error, no half-sent event — without the
    /// terminator. A decoder that has seen the vendor's stop reason (`finish_reason`, a
    /// `message_delta` with `stop_reason`) queues its final events (usage, `Finish`) and returns
    /// true: the answer is complete, as every comparable client accepts it. Without a stop
    /// reason it returns false and the stream is truncated.
    fn clean_end(&mut self, _out: &mut VecDeque<StreamEvent>) -> bool {
        false
    }
}

/// Test support: parses `input` as SSE and feeds its events to `d` until a step other than
/// [`Step::More`] (or the input's end); returns the queued events and the last step.
#[cfg(test)]
pub(crate) fn decode_sse<D: Decoder>(
    mut d: D,
    input: &str,
) -> (Vec<StreamEvent>, ripcord_core::Result<Step>) {
    let mut p = SseParser::new();
    p.push(input.as_bytes()).unwrap();
    let mut out = VecDeque::new();
    let mut last = Ok(Step::More);
    while let Some(ev) = p.next_event() {
        last = d.event(ev, &mut out);
        if !matches!(last, Ok(Step::More)) {
            break;
        }
    }
    (out.into_iter().collect(), last)
}

/// Test support: feeds `input`'s SSE events to `d` (each must ask for more), then ends the body
/// cleanly: the collected answer when the decoder accepts the clean end, `None` when it is a
/// truncation.
#[cfg(test)]
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) fn clean_end_answer<D: Decoder>(
    mut d: D,
    input: &str,
) -> Option<ripcord_core::ChatResponse> {
    let mut p = SseParser::new();
    p.push(input.as_bytes()).unwrap();
    let mut out = VecDeque::new();
    while let Some(ev) = p.next_event() {
        assert!(matches!(d.event(ev, &mut out), Ok(Step::More)));
    }
    if !d.clean_end(&mut out) {
        return None;
    }
    let mut c = ripcord_core::stream::Collector::new();
    out.into_iter().for_each(|e| c.push(e));
    Some(c.finish().unwrap())
}

/// The error for an answer that is nothing but a policy stop (a `content_filter` or `refusal`
/// finish without any text or tool call), or `None` for any other event.
pub(crate) fn policy_stop(ev: &StreamEvent) -> Option<Error> {
    match ev {
        StreamEvent::Finish {
            reason: FinishReason::ContentFilter,
            ..
        } => Some(refused_without_content()),
        _ => None,
    }
}

/// A policy stop with nothing delivered: the vendor's content filter refused the request.
pub(crate) fn refused_without_content() -> Error {
    Error::new(
        ErrorKind::ContentFiltered,
        "the vendor's content filter stopped the answer before any content",
    )
}

/// Who the stream belongs to, to label its errors.
#[derive(Clone, Debug)]
pub(crate) struct Labels {
    pub(crate) name: std::sync::Arc<str>,
    pub(crate) model: std::sync::Arc<str>,
    pub(crate) auth: Auth,
}

impl Labels {
    /// Names the link on the error, scrubs the key from vendor text, and records one debug
    /// event (the adapter is the boundary where a vendor failure becomes a ripcord error).
    pub(crate) fn finish(&self, e: Error) -> Error {
        let e = if e.provider().is_none() {
            e.with_provider(self.name.clone(), self.model.clone())
        } else {
            e
        };
        let e = self.auth.scrub(e);
        tracing::debug!(
            gen_ai.provider.name = %self.name,
            gen_ai.request.model = %self.model,
            error.type = e.kind().as_str(),
            http.response.status_code = e.status().map(|s| s.as_u16()),
            vendor_code = e.vendor_code(),
            message = ripcord_core::telemetry::event::VENDOR_ERROR
        );
        e
    }
}

struct Driver<P, D> {
    body: http::BodyStream,
    parser: P,
    decoder: D,
    out: VecDeque<StreamEvent>,
    ctx: Context,
    timeouts: Timeouts,
    first: Limit,
    answered: bool,
    /// A text or tool-call event has been seen.
    content: bool,
    done: bool,
    /// Unparseable events skipped so far.
    skipped: u32,
    labels: Labels,
}

/// Wraps a successful streaming response cut into frames by `parser` (an [`SseParser`] for
/// most vendors). `started` is when the request was sent.
pub(crate) fn drive_framed<P: Framer, D: Decoder<P::Frame>>(
    resp: http::Response,
    parser: P,
    decoder: D,
    ctx: &Context,
    timeouts: Timeouts,
    started: Instant,
    labels: Labels,
) -> ChatStream {
    let driver = Driver {
        body: resp.into_stream(),
        parser,
        decoder,
        out: VecDeque::new(),
        ctx: ctx.clone(),
        timeouts,
        first: Limit::first_token(started, &timeouts, true),
        answered: false,
        content: false,
        done: false,
        skipped: 0,
        labels,
    };
    Box::pin(futures::stream::unfold(driver, |mut d| async move {
        let item = d.next().await?;
        Some((item, d))
    }))
}

impl<P: Framer, D: Decoder<P::Frame>> Driver<P, D> {
    async fn next(&mut self) -> Option<Result<StreamEvent>> {
        loop {
            if let Some(ev) = self.out.pop_front() {
                return Some(Ok(ev));
            }
            if self.done {
                self.release().await;
                return None;
            }
            if let Some(frame) = self.parser.next_frame() {
                let frame = match frame {
                    Ok(f) => f,
                    Err(e) => return Some(Err(self.fail(e))),
                };
                match self.decoder.event(frame, &mut self.out) {
                    Ok(Step::More) => {}
                    Ok(Step::Done) => self.done = true,
                    Ok(Step::Malformed(e)) => {
                        if self.skipped >= self.timeouts.max_skipped_events {
                            let e = Error::new(
                                ErrorKind::InvalidResponse,
                                format!(
                                    "{} unparseable stream events, more than the {} a stream may skip; the last: {}",
                                    self.skipped + 1,
                                    self.timeouts.max_skipped_events,
                                    e.message()
                                ),
                            )
                            .with_source(e);
                            return Some(Err(self.fail(e)));
                        }
                        self.skipped += 1;
                        tracing::warn!(
                            ripcord.link = %self.labels.name,
                            gen_ai.request.model = %self.labels.model,
                            ripcord.skipped_events = self.skipped,
                            error.message = %e.message(),
                            message = ripcord_core::telemetry::event::STREAM_EVENT_SKIPPED
                        );
                    }
                    Err(e) => return Some(Err(self.fail(e))),
                }
                self.content |= self.out.iter().any(StreamEvent::is_content);
                if !self.content
                    && let Some(e) = self.out.iter().find_map(policy_stop)
                {
                    return Some(Err(self.fail(e)));
                }
                if !self.answered
                    && self
                        .out
                        .iter()
                        .any(|e| e.is_content() || matches!(e, StreamEvent::Finish { .. }))
                {
                    self.answered = true;
                }
                continue;
            }
            let limit = if self.answered {
                Limit::idle(&self.timeouts)
            } else {
                self.first
            };
            // Once the vendor is answering, the stream bound replaces the deadline (which only
            // bounded getting an answer), and a cut by it is the caller's, not the vendor's.
            let deadline = if self.answered {
                self.ctx.stream_deadline()
            } else {
                self.ctx.deadline()
            };
            let read = match http::guard_until(&self.ctx, deadline, limit, self.body.next()).await {
                Ok(r) => r,
                Err(e) if self.answered && e.is_deadline_cut() => {
                    let e = e.with_fault(ripcord_core::Fault::Caller);
                    return Some(Err(self.fail(e)));
                }
                Err(e) => return Some(Err(self.fail(e))),
            };
            match read {
                Some(Ok(bytes)) => {
                    if let Err(e) = self.parser.push(&bytes) {
                        return Some(Err(self.fail(e)));
                    }
                }
                Some(Err(e)) => {
                    let e = http::transport_error(e, Stage::Stream);
                    return Some(Err(self.fail(e)));
                }
                None => {
                    if !self.parser.has_partial() && self.decoder.clean_end(&mut self.out) {
                        // The stop reason arrived and the connection closed cleanly: a complete
                        // answer that only lacks the terminator.
                        tracing::debug!(
                            gen_ai.provider.name = %self.labels.name,
                            message = ripcord_core::telemetry::event::STREAM_ENDED_WITHOUT_TERMINATOR
                        );
                        self.done = true;
                        // The body has ended: nothing is left for `release` to read.
                        self.body = Box::pin(futures::stream::empty());
                        continue;
                    }
                    let e = Error::new(ErrorKind::Network, self.decoder.truncated())
                        .with_request_delivered();
                    return Some(Err(self.fail(e)));
                }
            }
        }
    }

    /// After the terminator: read what is left of the body (normally just the chunked
    /// terminator, already in flight) so the connection goes back to the pool instead of being
    /// aborted. A server that keeps the body open past its terminator gets a short grace, then
    /// the connection is dropped.
    async fn release(&mut self) {
        const GRACE: Duration = Duration::from_millis(200);
        let limit = Limit {
            at: Instant::now() + GRACE.min(self.timeouts.stream_idle),
            phase: TimeoutPhase::StreamIdle,
            after: GRACE,
        };
        let body = std::mem::replace(&mut self.body, Box::pin(futures::stream::empty()));
        let _ = http::guard(&self.ctx, limit, body.for_each(|_| async {})).await;
    }

    /// Ends the stream with this error: nothing follows it, and the body is released.
    fn fail(&mut self, e: Error) -> Error {
        self.done = true;
        self.out.clear();
        self.body = Box::pin(futures::stream::empty());
        self.labels.finish(e)
    }
}
