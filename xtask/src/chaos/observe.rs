//! Observers hooked into the real chain, and the switch that makes the local tier fail.
//!
//! `ripcord-cli`'s build hooks put them where the checks need eyes:
//!
//! - [`Observed`] at [`Point::Admitted`] wraps each link *just inside its breaker*: it sees
//!   every call a breaker let through (and, with the transitions, in which state it did);
//! - [`Observed`] at [`Point::Wire`] wraps each *adapter*: it sees every attempt that reached a
//!   vendor, retries included;
//! - the [`Recorder`] is the breakers' listener: every transition and refusal.
//!
//! A call's end is recorded when it returns, when its stream ends, or — through a drop guard
//! — when the caller drops it (a deadline cut it, the consumer stopped reading), so a call is
//! never left open in the records because it was cancelled.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;
use ripcord_cli::build::Wrap;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Result,
    StreamEvent,
};
use ripcord_resilience::{BreakerListener, BreakerState, Transition};
use tokio::time::Instant;

use super::record::{
    AttemptRec, CallEnd, CallRec, Outcome, Records, RequestRec, State, TransitionRec,
};
use super::scenario::{Fault, Rng};

/// The context metadata key carrying the request id down to the observers.
pub(crate) const REQUEST_ID: &str = "chaos.request_id";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn state(s: BreakerState) -> State {
    match s {
        BreakerState::Open => State::Open,
        BreakerState::HalfOpen => State::HalfOpen,
        _ => State::Closed,
    }
}

/// Where an [`Observed`] sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// Just inside the breaker: calls the breaker admitted.
    Admitted,
    /// Around the adapter: attempts sent to the vendor.
    Wire,
}

#[derive(Debug, Default)]
struct Log {
    skips: BTreeMap<String, Vec<super::record::SkipRec>>,
    continued: BTreeMap<String, super::record::ContinuedRec>,
    requests: Vec<RequestRec>,
    admissions: Vec<CallRec>,
    wires: Vec<CallRec>,
    transitions: Vec<TransitionRec>,
    rejections: BTreeMap<String, u64>,
}

/// Live counters for the progress line.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub(crate) started: AtomicUsize,
    pub(crate) finished: AtomicUsize,
    pub(crate) by_model: AtomicUsize,
    pub(crate) by_static: AtomicUsize,
    pub(crate) errors: AtomicUsize,
}

/// The scenario's log: requests, observed calls, breaker transitions. One per scenario run.
#[derive(Debug)]
pub(crate) struct Recorder {
    t0: Mutex<Instant>,
    seq: AtomicU64,
    log: Mutex<Log>,
    pub(crate) live: Live,
}

impl Recorder {
    pub(crate) fn new() -> Arc<Recorder> {
        Arc::new(Recorder {
            t0: Mutex::new(Instant::now()),
            seq: AtomicU64::new(0),
            log: Mutex::new(Log::default()),
            live: Live::default(),
        })
    }

    /// Starts the scenario clock (times in the records are measured from here).
    pub(crate) fn start(&self) -> Instant {
        let now = Instant::now();
        *lock(&self.t0) = now;
        now
    }

    /// Time since [`Recorder::start`].
    pub(crate) fn elapsed(&self) -> Duration {
        lock(&self.t0).elapsed()
    }

    fn now_ms(&self) -> f64 {
        self.elapsed().as_secs_f64() * 1000.0
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    /// Logs a request as started; returns its index for [`Recorder::request_finished`].
    pub(crate) fn request_started(
        &self,
        id: String,
        user: usize,
        streamed: bool,
        retry_safe: bool,
        deadline: Duration,
    ) -> usize {
        self.live.started.fetch_add(1, Ordering::Relaxed);
        let start_ms = self.now_ms();
        let mut log = lock(&self.log);
        log.requests.push(RequestRec {
            id,
            user,
            streamed,
            retry_safe,
            start_ms,
            first_content_ms: None,
            end_ms: None,
            deadline_ms: deadline.as_secs_f64() * 1000.0,
            outcome: Outcome::Unfinished,
            attempts: Vec::new(),
            spliced: None,
        });
        log.requests.len() - 1
    }

    /// Logs that one answer of a streamed request carried text from two links.
    pub(crate) fn spliced(&self, idx: usize, links: String) {
        if let Some(r) = lock(&self.log).requests.get_mut(idx) {
            r.spliced.get_or_insert(links);
        }
    }

    /// Logs the links a request's provenance says were skipped.
    pub(crate) fn skipped(&self, idx: usize, skips: Vec<super::record::SkipRec>) {
        if skips.is_empty() {
            return;
        }
        let mut log = lock(&self.log);
        if let Some(id) = log.requests.get(idx).map(|r| r.id.clone()) {
            log.skips.insert(id, skips);
        }
    }

    /// Logs a streamed answer that carried text from more than one link.
    pub(crate) fn continued(&self, idx: usize, c: super::record::ContinuedRec) {
        let mut log = lock(&self.log);
        if let Some(id) = log.requests.get(idx).map(|r| r.id.clone()) {
            log.continued.insert(id, c);
        }
    }

    /// Logs the first content of a streamed request.
    pub(crate) fn first_content(&self, idx: usize) {
        let at = self.now_ms();
        if let Some(r) = lock(&self.log).requests.get_mut(idx) {
            r.first_content_ms.get_or_insert(at);
        }
    }

    /// Logs how a request ended.
    pub(crate) fn request_finished(&self, idx: usize, outcome: Outcome, attempts: Vec<AttemptRec>) {
        let end_ms = self.now_ms();
        let counter = match &outcome {
            Outcome::Answered {
                static_reply: true, ..
            } => &self.live.by_static,
            Outcome::Answered { .. } => &self.live.by_model,
            _ => &self.live.errors,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.live.finished.fetch_add(1, Ordering::Relaxed);
        if let Some(r) = lock(&self.log).requests.get_mut(idx) {
            r.end_ms = Some(end_ms);
            r.outcome = outcome;
            r.attempts = attempts;
        }
    }

    fn begin(self: &Arc<Self>, point: Point, request: Option<String>, link: &str) -> CallGuard {
        let rec = CallRec {
            request,
            link: link.to_owned(),
            start_seq: self.next_seq(),
            start_ms: self.now_ms(),
            end_seq: None,
            end_ms: None,
            end: None,
        };
        let mut log = lock(&self.log);
        let list = match point {
            Point::Admitted => &mut log.admissions,
            Point::Wire => &mut log.wires,
        };
        list.push(rec);
        CallGuard {
            rec: Arc::clone(self),
            point,
            idx: list.len() - 1,
            done: false,
        }
    }

    fn end(&self, point: Point, idx: usize, end: CallEnd) {
        let seq = self.next_seq();
        let ms = self.now_ms();
        let mut log = lock(&self.log);
        let list = match point {
            Point::Admitted => &mut log.admissions,
            Point::Wire => &mut log.wires,
        };
        if let Some(c) = list.get_mut(idx) {
            c.end_seq = Some(seq);
            c.end_ms = Some(ms);
            c.end = Some(end);
        }
    }

    /// Everything logged so far, moved into `out` (links, hits and the rest are the caller's).
    pub(crate) fn take_into(&self, out: &mut Records) {
        let log = std::mem::take(&mut *lock(&self.log));
        out.requests = log.requests;
        out.admissions = log.admissions;
        out.wires = log.wires;
        out.transitions = log.transitions;
        out.rejections = log.rejections;
        out.skips = log.skips;
        out.continued = log.continued;
    }
}

impl BreakerListener for Recorder {
    fn on_transition(&self, t: &Transition) {
        let rec = TransitionRec {
            link: t.link.to_string(),
            from: state(t.from),
            to: state(t.to),
            seq: self.next_seq(),
            at_ms: self.now_ms(),
            open_for_ms: t.open_for_ms,
            cause: t.cause,
        };
        lock(&self.log).transitions.push(rec);
    }

    fn on_rejected(&self, link: &str, _state: BreakerState, _retry_after: Duration) {
        *lock(&self.log)
            .rejections
            .entry(link.to_owned())
            .or_default() += 1;
    }
}

/// Ends a call's record once: explicitly, or as dropped when it goes out of scope.
#[derive(Debug)]
struct CallGuard {
    rec: Arc<Recorder>,
    point: Point,
    idx: usize,
    done: bool,
}

impl CallGuard {
    fn finish(&mut self, end: CallEnd) {
        if !self.done {
            self.done = true;
            self.rec.end(self.point, self.idx, end);
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.finish(CallEnd::Dropped);
    }
}

fn request_id(ctx: &Context) -> Option<String> {
    ctx.metadata().get(REQUEST_ID).cloned()
}

/// A link wrapped by an observer.
#[derive(Debug)]
pub(crate) struct Observed {
    inner: Arc<dyn ChatModel>,
    rec: Arc<Recorder>,
    point: Point,
}

impl Observed {
    pub(crate) fn wrap(
        inner: Arc<dyn ChatModel>,
        rec: &Arc<Recorder>,
        point: Point,
    ) -> Arc<dyn ChatModel> {
        Arc::new(Observed {
            inner,
            rec: Arc::clone(rec),
            point,
        })
    }
}

/// A build hook that wraps the link named `link` with `wrap` and leaves every other link as it
/// is.
pub(crate) fn wrap_only(
    link: &'static str,
    wrap: impl Fn(Arc<dyn ChatModel>) -> Arc<dyn ChatModel> + Send + Sync + 'static,
) -> Wrap {
    Arc::new(
        move |name: &str, model: Arc<dyn ChatModel>| {
            if name == link { wrap(model) } else { model }
        },
    )
}

#[async_trait]
impl ChatModel for Observed {
    model_identity!(inner);

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let mut guard = self
            .rec
            .begin(self.point, request_id(ctx), &self.inner.id().name);
        let result = self.inner.chat(req, ctx).await;
        guard.finish(match &result {
            Ok(_) => CallEnd::Ok,
            Err(e) => CallEnd::Failed(e.kind()),
        });
        result
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let mut guard = self
            .rec
            .begin(self.point, request_id(ctx), &self.inner.id().name);
        match self.inner.stream(req, ctx).await {
            Ok(inner) => Ok(Box::pin(ObservedStream { inner, guard })),
            Err(e) => {
                guard.finish(CallEnd::Failed(e.kind()));
                Err(e)
            }
        }
    }
}

/// A stream whose end (finish event, error, end without finish, or drop) ends its call.
struct ObservedStream {
    inner: ChatStream,
    guard: CallGuard,
}

impl Stream for ObservedStream {
    type Item = Result<StreamEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(StreamEvent::Finish { .. }))) => self.guard.finish(CallEnd::Ok),
            Poll::Ready(Some(Err(e))) => {
                let kind = e.kind();
                self.guard.finish(CallEnd::Failed(kind));
            }
            Poll::Ready(None) => self
                .guard
                .finish(CallEnd::Failed(ErrorKind::InvalidResponse)),
            _ => {}
        }
        polled
    }
}

/// The local tier, made to fail while the scenario says so (`fail` phases of vendor `local`).
#[derive(Debug)]
pub(crate) struct LocalSwitch {
    inner: Arc<dyn ChatModel>,
    rec: Arc<Recorder>,
    /// `(from, fault, p, otherwise)`, sorted by `from`.
    phases: Vec<(Duration, Fault, f64, Fault)>,
    rng: Mutex<Rng>,
}

impl LocalSwitch {
    pub(crate) fn wrap(
        inner: Arc<dyn ChatModel>,
        rec: &Arc<Recorder>,
        phases: Vec<(Duration, Fault, f64, Fault)>,
        seed: u64,
    ) -> Arc<dyn ChatModel> {
        Arc::new(LocalSwitch {
            inner,
            rec: Arc::clone(rec),
            phases,
            rng: Mutex::new(Rng::new(seed)),
        })
    }

    fn check(&self) -> Result<()> {
        let now = self.rec.elapsed();
        let Some((_, fault, p, otherwise)) = self.phases.iter().rev().find(|(at, ..)| *at <= now)
        else {
            return Ok(());
        };
        let fault = if *p >= 1.0 || lock(&self.rng).next_f64() < *p {
            *fault
        } else {
            *otherwise
        };
        if fault == Fault::Fail {
            let id = self.inner.id();
            return Err(Error::new(
                ErrorKind::ModelNotFound,
                "local model unavailable: made to fail by the scenario",
            )
            .with_provider(Arc::clone(&id.name), Arc::clone(&id.model)));
        }
        Ok(())
    }
}

#[async_trait]
impl ChatModel for LocalSwitch {
    model_identity!(inner);

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        self.check()?;
        self.inner.chat(req, ctx).await
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        self.check()?;
        self.inner.stream(req, ctx).await
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use ripcord_core::testing::ScriptedModel;

    use super::*;

    fn ctx(id: &str) -> Context {
        Context::new().with_metadata(REQUEST_ID, id)
    }

    #[tokio::test]
    async fn observed_calls_end_on_return_on_stream_end_and_on_drop() {
        let rec = Recorder::new();
        rec.start();
        let model: Arc<dyn ChatModel> = Arc::new(
            ScriptedModel::new("primary")
                .fail(ErrorKind::Auth)
                .reply("one")
                .reply("two")
                .hang(),
        );
        let m = Observed::wrap(model, &rec, Point::Wire);
        let req = ChatRequest::user("hi");
        assert!(m.chat(&req, &ctx("r1")).await.is_err());
        assert!(m.chat(&req, &ctx("r2")).await.is_ok());
        let mut s = m.stream(&req, &ctx("r3")).await.unwrap();
        while let Some(ev) = s.next().await {
            ev.unwrap();
        }
        drop(s);
        // The hang: cut by a timeout, which drops the call.
        let cut = tokio::time::timeout(Duration::from_millis(20), m.chat(&req, &ctx("r4"))).await;
        assert!(cut.is_err());
        let mut out = Records::default();
        rec.take_into(&mut out);
        let ends: Vec<_> = out
            .wires
            .iter()
            .map(|c| (c.request.as_deref().unwrap(), c.end))
            .collect();
        assert_eq!(
            ends,
            [
                ("r1", Some(CallEnd::Failed(ErrorKind::Auth))),
                ("r2", Some(CallEnd::Ok)),
                ("r3", Some(CallEnd::Ok)),
                ("r4", Some(CallEnd::Dropped)),
            ]
        );
        assert!(out.wires.iter().all(|c| c.end_seq > Some(c.start_seq)));
        assert!(out.admissions.is_empty());
    }

    #[tokio::test]
    async fn local_switch_fails_only_in_fail_phases() {
        let rec = Recorder::new();
        rec.start();
        let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("local").reply("hi"));
        let phases = vec![
            (Duration::ZERO, Fault::Fail, 1.0, Fault::Ok),
            (Duration::from_secs(3600), Fault::Ok, 1.0, Fault::Ok),
        ];
        let m = LocalSwitch::wrap(model, &rec, phases, 1);
        let e = m
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ModelNotFound);
        assert_eq!(e.provider(), Some("local"));
        assert!(e.message().starts_with("local model unavailable:"));
        let healthy = LocalSwitch::wrap(
            Arc::new(ScriptedModel::new("local").reply("hi")),
            &rec,
            vec![(Duration::from_secs(3600), Fault::Fail, 1.0, Fault::Ok)],
            1,
        );
        assert_eq!(
            healthy
                .chat(&ChatRequest::user("hi"), &Context::new())
                .await
                .unwrap()
                .text(),
            "hi"
        );
    }
}
