//! Stream plumbing shared by the policies.
//!
//! - [`open_to_first_content`]: an attempt at a stream is not over until its first content
//!   event (or its finish) arrives: errors before it are the attempt's errors, so
//!   retry, hedging and fallback can still act on them.
//! - [`led_by`]: a stream with its provenance ahead of it.
//! - [`Observed`]: a stream adapter that tells an observer how the stream ended — finished,
//!   failed (including a truncated stream, which it turns into an `InvalidResponse` error,
//!   never a short answer) or dropped by the consumer — exactly once. Breakers, limiters, budgets and
//!   health trackers record one outcome per logical call through it.

use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use std::future::Future;
use std::time::Duration;

use futures::{Stream, StreamExt};
use ripcord_core::{
    ChatStream, Error, ErrorKind, Fault, Provenance, Result, StreamEvent, Usage, tokens,
};
use tokio::time::{Instant, Sleep};

/// The error of a stream that ended without its finish event.
pub(crate) fn truncated() -> Error {
    Error::new(
        ErrorKind::InvalidResponse,
        "stream truncated: it ended without its finish event",
    )
}

/// `stream`, told first what served it: one `Provenance` event ahead of its own — how retries,
/// hedges and pools report the attempts behind a stream.
pub(crate) fn led_by(provenance: Provenance, stream: ChatStream) -> ChatStream {
    let head = futures::stream::iter([Ok(StreamEvent::Provenance {
        provenance: Box::new(provenance),
    })]);
    Box::pin(head.chain(stream))
}

/// Pulls events until the first content event or the finish, and returns a stream that replays
/// them and continues with the rest.
///
/// # Errors
///
/// An error event before any content, or `InvalidResponse` when the stream ends first.
pub(crate) async fn open_to_first_content(mut stream: ChatStream) -> Result<ChatStream> {
    let mut buffered = Vec::new();
    loop {
        match stream.next().await {
            Some(Ok(ev)) => {
                let done = ev.is_content() || matches!(ev, StreamEvent::Finish { .. });
                buffered.push(Ok(ev));
                if done {
                    return Ok(Box::pin(futures::stream::iter(buffered).chain(stream)));
                }
            }
            Some(Err(e)) => return Err(e),
            None => return Err(truncated()),
        }
    }
}

/// Bounds each event of `stream` by the context: its deadline until first content, its stream
/// bound after, and its cancellation — for layers that promise to bound themselves around a
/// model that does not.
pub(crate) fn bounded_by(stream: ChatStream, ctx: &ripcord_core::Context) -> ChatStream {
    let cancel = ctx.cancellation().clone();
    let first = ctx.deadline();
    let after = ctx.stream_deadline();
    let state = (stream, false, false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut stream, mut content, done)| {
            let cancel = cancel.clone();
            async move {
                if done {
                    return None;
                }
                let at = if content { after } else { first };
                let next = async {
                    match at {
                        Some(at) => {
                            tokio::time::timeout_at(at, stream.next())
                                .await
                                .map_err(|_| {
                                    if content {
                                        stream_bound_passed()
                                    } else {
                                        Error::deadline_exceeded()
                                    }
                                })
                        }
                        None => Ok(stream.next().await),
                    }
                };
                let item = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Err(Error::cancelled()),
                    r = next => r,
                };
                match item {
                    Ok(Some(Ok(ev))) => {
                        content |= ev.is_content();
                        Some((Ok(ev), (stream, content, false)))
                    }
                    Ok(Some(Err(e))) | Err(e) => Some((Err(e), (stream, content, true))),
                    Ok(None) => None,
                }
            }
        },
    ))
}

/// How an observed stream ended.
#[derive(Debug)]
pub(crate) enum End<'a> {
    /// The finish event arrived and the stream ended.
    Finished,
    /// The stream failed with this error (a truncated stream fails with `InvalidResponse`).
    Failed(&'a Error),
    /// The consumer dropped the stream before it ended.
    Dropped,
}

/// Sees the items of an observed stream and how it ended.
pub(crate) trait StreamObserver: Send + 'static {
    /// Sees each item; may replace it (validation turns a finish into an error).
    fn on_item(&mut self, item: Result<StreamEvent>) -> Result<StreamEvent> {
        item
    }

    /// Called once, at the first content event (text, tool call) — the moment the stream is
    /// committed to this link.
    fn on_content(&mut self) {}

    /// Called exactly once, when the stream ends, fails or is dropped.
    fn on_end(&mut self, end: End<'_>);
}

/// What a stream's failure is judged by ([`Error::fault_in`]): the call's context, the budget
/// it had when it started, and whether content had come. The breaker's and the health
/// tracker's stream observers keep one.
#[derive(Debug)]
pub(crate) struct Blame {
    ctx: ripcord_core::Context,
    budget: Option<Duration>,
    after_content: bool,
}

impl Blame {
    /// A stream of a call under `ctx` that started with `budget` left, before its content.
    pub(crate) fn new(ctx: &ripcord_core::Context, budget: Option<Duration>) -> Self {
        Blame {
            ctx: ctx.clone(),
            budget,
            after_content: false,
        }
    }

    /// Notes that content came: a later failure happened after it.
    pub(crate) fn content_came(&mut self) {
        self.after_content = true;
    }

    /// Whose fault `e`, ending this stream, is.
    pub(crate) fn fault(&self, e: &Error) -> Fault {
        e.fault_in(&self.ctx, self.budget, self.after_content)
    }
}

/// What a stream has told of its cost so far, for the observers that settle a reservation by
/// it (the rate limiter's and the budget's): the usage it reported last, an estimate of the
/// text it generated, and whether content came.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) usage: Option<Usage>,
    /// Estimated tokens of the text generated so far.
    pub(crate) generated: u64,
    pub(crate) content: bool,
}

impl Tally {
    /// Counts one item: a usage event replaces the usage, text adds its estimate.
    fn count(&mut self, item: &Result<StreamEvent>) {
        match item {
            Ok(StreamEvent::Usage { usage }) => self.usage = Some(*usage),
            Ok(StreamEvent::TextDelta { text }) => {
                self.generated += u64::from(tokens::estimate_text(text));
            }
            _ => {}
        }
    }
}

/// Settles a reservation by what a stream told of its cost; [`Tallied`] does the counting.
pub(crate) trait Settle: Send + 'static {
    /// A chain restarted the answer on another link (`Restarted`): what `tally` holds so far
    /// was spent on an answer thrown away. The default counts on.
    fn restarted(&mut self, _tally: &mut Tally) {}

    /// Settles once, when the stream ends, fails or is dropped.
    fn settle(&mut self, tally: &Tally, end: End<'_>);
}

/// The [`StreamObserver`] that keeps a stream's [`Tally`] for a [`Settle`].
pub(crate) struct Tallied<S> {
    tally: Tally,
    settle: S,
}

impl<S: Settle> Tallied<S> {
    /// `stream`, settled by `settle` when it ends.
    pub(crate) fn boxed(stream: ChatStream, settle: S) -> ChatStream {
        Observed::boxed(
            stream,
            Tallied {
                tally: Tally::default(),
                settle,
            },
        )
    }
}

impl<S: Settle> StreamObserver for Tallied<S> {
    fn on_item(&mut self, item: Result<StreamEvent>) -> Result<StreamEvent> {
        self.tally.count(&item);
        if let Ok(StreamEvent::Restarted { .. }) = &item {
            self.settle.restarted(&mut self.tally);
        }
        item
    }

    fn on_content(&mut self) {
        self.tally.content = true;
    }

    fn on_end(&mut self, end: End<'_>) {
        self.settle.settle(&self.tally, end);
    }
}

/// A stream adapter that reports its end to a [`StreamObserver`] once. After an error item it
/// ends; a stream that ends without a finish event yields an `InvalidResponse` error.
pub(crate) struct Observed<O: StreamObserver> {
    inner: ChatStream,
    observer: O,
    finished: bool,
    content: bool,
    done: bool,
}

impl<O: StreamObserver> Observed<O> {
    pub(crate) fn new(inner: ChatStream, observer: O) -> Self {
        Observed {
            inner,
            observer,
            finished: false,
            content: false,
            done: false,
        }
    }

    pub(crate) fn boxed(inner: ChatStream, observer: O) -> ChatStream {
        Box::pin(Observed::new(inner, observer))
    }
}

impl<O: StreamObserver> Unpin for Observed<O> {}

impl<O: StreamObserver> Stream for Observed<O> {
    type Item = Result<StreamEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match this.inner.as_mut().poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(item)) => match this.observer.on_item(item) {
                Ok(ev) => {
                    if !this.content && ev.is_content() {
                        this.content = true;
                        this.observer.on_content();
                    }
                    this.finished |= matches!(ev, StreamEvent::Finish { .. });
                    Poll::Ready(Some(Ok(ev)))
                }
                Err(e) => {
                    this.done = true;
                    this.observer.on_end(End::Failed(&e));
                    Poll::Ready(Some(Err(e)))
                }
            },
            Poll::Ready(None) => {
                this.done = true;
                if this.finished {
                    this.observer.on_end(End::Finished);
                    Poll::Ready(None)
                } else {
                    let e = truncated();
                    this.observer.on_end(End::Failed(&e));
                    Poll::Ready(Some(Err(e)))
                }
            }
        }
    }
}

impl<O: StreamObserver> Drop for Observed<O> {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            self.observer.on_end(End::Dropped);
        }
    }
}

/// Time limits on a stream.
///
/// Before the first content event one bound applies (`first_content`: the earliest of the
/// first-token limit, the attempt limit and the deadline); after it, the stream bound
/// (`stream`, the context's [`stream_deadline`](ripcord_core::Context::stream_deadline)) and
/// the idle gap. When one passes, the stream yields that limit's error and ends.
#[derive(Debug, Default)]
pub(crate) struct Limits {
    /// The first content event must arrive by this instant.
    pub(crate) first_content: Option<(Instant, Error)>,
    /// After the first content event, the whole stream must end by this instant.
    pub(crate) stream: Option<(Instant, Error)>,
    /// After the first content event, at most this long spent waiting for the next event.
    pub(crate) idle: Option<(Duration, Error)>,
}

/// The error of a stream cut by its bound after first content: the caller's budget (or the
/// stream's own total), never the link's failure.
pub(crate) fn stream_bound_passed() -> Error {
    Error::new(
        ErrorKind::DeadlineExceeded,
        "the stream's bound after first content passed",
    )
    .with_fault(Fault::Caller)
}

/// A stream under [`Limits`].
///
/// The limits are checked on every poll — also when the inner stream is always ready, which
/// would otherwise never give a timer the chance to fire. The idle gap counts only the time the
/// consumer spends *waiting* for the vendor (from the first pending poll after an event), so a
/// consumer that reads slowly is never taken for a silent vendor.
pub(crate) struct Guarded {
    inner: ChatStream,
    limits: Limits,
    sleep: Option<Pin<Box<Sleep>>>,
    sleep_at: Option<Instant>,
    /// When the current wait for the vendor started to count (after first content).
    idle_at: Option<Instant>,
    seen_content: bool,
    done: bool,
}

/// Which limit fired.
enum Fired {
    First,
    Stream,
    Idle,
}

impl Guarded {
    pub(crate) fn boxed(inner: ChatStream, limits: Limits) -> ChatStream {
        if limits.stream.is_none() && limits.first_content.is_none() && limits.idle.is_none() {
            return inner;
        }
        Box::pin(Guarded {
            inner,
            limits,
            sleep: None,
            sleep_at: None,
            idle_at: None,
            seen_content: false,
            done: false,
        })
    }

    /// The next instant a limit fires, and which.
    fn next_limit(&self) -> Option<(Instant, Fired)> {
        if !self.seen_content {
            return self
                .limits
                .first_content
                .as_ref()
                .map(|(at, _)| (*at, Fired::First));
        }
        let stream = self
            .limits
            .stream
            .as_ref()
            .map(|(at, _)| (*at, Fired::Stream));
        let idle = self.idle_at.map(|at| (at, Fired::Idle));
        match (stream, idle) {
            (Some(s), Some(i)) => Some(if i.0 < s.0 { i } else { s }),
            (s, i) => s.or(i),
        }
    }

    fn fire(&mut self, which: Fired) -> Poll<Option<Result<StreamEvent>>> {
        self.done = true;
        let e = match which {
            Fired::First => self.limits.first_content.as_ref().map(|(_, e)| e.clone()),
            Fired::Stream => self.limits.stream.as_ref().map(|(_, e)| e.clone()),
            Fired::Idle => self.limits.idle.as_ref().map(|(_, e)| e.clone()),
        };
        Poll::Ready(Some(Err(e.unwrap_or_else(stream_bound_passed))))
    }
}

impl Stream for Guarded {
    type Item = Result<StreamEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Some((at, which)) = this.next_limit()
            && Instant::now() >= at
        {
            return this.fire(which);
        }
        match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(ev))) => {
                this.seen_content |= ev.is_content();
                this.idle_at = None;
                Poll::Ready(Some(Ok(ev)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.done = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => {
                if this.seen_content
                    && this.idle_at.is_none()
                    && let Some((idle, _)) = &this.limits.idle
                {
                    this.idle_at = Some(Instant::now() + *idle);
                }
                let Some((at, which)) = this.next_limit() else {
                    return Poll::Pending;
                };
                if this.sleep_at != Some(at) {
                    match &mut this.sleep {
                        Some(sleep) => sleep.as_mut().reset(at),
                        None => this.sleep = Some(Box::pin(tokio::time::sleep_until(at))),
                    }
                    this.sleep_at = Some(at);
                }
                if let Some(sleep) = &mut this.sleep
                    && sleep.as_mut().poll(cx).is_ready()
                {
                    return this.fire(which);
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use ripcord_core::{FinishReason, StreamEvent};

    use super::*;

    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    impl StreamObserver for Log {
        fn on_end(&mut self, end: End<'_>) {
            let s = match end {
                End::Finished => "finished".to_owned(),
                End::Failed(e) => format!("failed:{}", e.kind()),
                End::Dropped => "dropped".to_owned(),
            };
            self.0.lock().unwrap().push(s);
        }
    }

    fn events(evs: Vec<Result<StreamEvent>>) -> ChatStream {
        Box::pin(futures::stream::iter(evs))
    }

    #[tokio::test]
    async fn observed_reports_each_ending_once() {
        let log = Log::default();
        let ok = events(vec![
            Ok(StreamEvent::text("a")),
            Ok(StreamEvent::finish(FinishReason::Stop)),
        ]);
        let n = Observed::boxed(ok, log.clone()).count().await;
        assert_eq!(n, 2);

        let cut = events(vec![Ok(StreamEvent::text("a"))]);
        let items: Vec<_> = Observed::boxed(cut, log.clone()).collect().await;
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[1].as_ref().unwrap_err().kind(),
            ErrorKind::InvalidResponse
        );

        let mut s = Observed::boxed(events(vec![Ok(StreamEvent::text("a")); 3]), log.clone());
        let _ = s.next().await;
        drop(s);
        assert_eq!(
            *log.0.lock().unwrap(),
            vec!["finished", "failed:invalid_response", "dropped"]
        );
    }

    #[tokio::test]
    async fn errors_before_content_belong_to_the_attempt() {
        let early = events(vec![
            Ok(StreamEvent::Usage {
                usage: Default::default(),
            }),
            Err(Error::new(ErrorKind::RateLimited, "429 as the first event")),
        ]);
        let err = open_to_first_content(early).await.err().unwrap();
        assert_eq!(err.kind(), ErrorKind::RateLimited);

        let good = events(vec![
            Ok(StreamEvent::Usage {
                usage: Default::default(),
            }),
            Ok(StreamEvent::text("hi")),
            Ok(StreamEvent::finish(FinishReason::Stop)),
        ]);
        let replay = open_to_first_content(good).await.unwrap();
        assert_eq!(replay.count().await, 3);
    }
}
