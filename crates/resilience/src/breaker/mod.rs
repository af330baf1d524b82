//! A circuit breaker per link, built on `failsafe`'s state machine.
//!
//! While a link keeps failing, calls to it are refused at once with
//! [`ErrorKind::CircuitOpen`] and a `retry_after` saying when it re-admits calls, so the chain
//! skips the link instead of waiting on it (and, if every link is cooling down, waits for the
//! earliest re-admission). After the open duration a bounded number of probes test the link.
//!
//! # What counts
//!
//! One outcome per *logical* call: put retries inside the breaker, and the breaker sees the
//! call's final result (counting every attempt would trip it three times too early). A
//! stream's outcome is recorded when it ends (its finish event, an error, or truncation) — not
//! per chunk — except a half-open probe's, which is judged at its first content.
//!
//! Only failures charged to the vendor count ([`Error::fault_in`], see [`ripcord_core::Fault`]):
//! never a local refusal (a full bulkhead, a rate-limit wait, a budget), a request the caller
//! got wrong, a cancellation, a deadline cut of an attempt that started with less than the
//! context's [`min_attempt`](Context::min_attempt), or a cut of a stream by its bound after
//! first content. `Auth` and `ModelNotFound` trip at once and for longer; a vendor
//! `RateLimited` does not count (the rate limiter pauses the link instead); see [`KindAction`].
//!
//! Timeouts are failures — the breaker runs the call under the context's deadline
//! itself (and a half-open probe under `probe_timeout` too), so a hanging vendor is recorded
//! as a failure rather than vanishing when an outer timeout drops the future. Cancellation by
//! the caller — the context's token, or dropping the future or the stream — records nothing,
//! and a probe's permit is released when it ends, times out or is dropped, so half-open cannot
//! wedge.
//!
//! # Where `failsafe` is wrapped, and why
//!
//! `failsafe` 1.3 decides the transitions (its failure policies and state machine), but it
//! admits every caller in half-open, closes on the first success, times the open state with
//! `std::time::Instant` in whole seconds, and records only when the wrapped future completes.
//! ripcord adds a probe permit, a success threshold, its own (sub-second, clock-driven,
//! fresh-on-every-trip) open duration, a deadline inside the guarded call, per-kind rules, a
//! listener, a bounded history and a snapshot:
//!
//! - the user's failure policy is wrapped so that `failsafe` opens for *zero* time while the
//!   real open duration is kept here, on the crate's [`Clock`](crate::Clock), as a fresh
//!   open-until on every trip; only once it has passed is `failsafe` asked for permission, and
//!   it moves to half-open;
//! - a semaphore of `max_probes` permits gates half-open; everyone else gets `CircuitOpen`;
//! - a success is reported to `failsafe` (which then closes and resets its policy) only after
//!   `success_threshold` probes succeeded;
//! - an outcome is reported only while the breaker is in the state, and epoch, in which the call
//!   was admitted, so a slow call admitted before a trip cannot close the breaker later.
//!
//! All calls into `failsafe` happen under one `std` mutex that is never held across an await.

mod listener;
mod policy;
mod state;
mod store;
mod trip;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, EmbeddingModel, EmbeddingRequest,
    EmbeddingResponse, Error, ErrorKind, Fault, Liveness, ModelId, Result, TimeoutPhase,
};
use tokio::time::Instant;

pub use listener::{BreakerListener, BreakerSnapshot, BreakerState, Transition};
pub use policy::{
    BreakerPolicy, BreakerPolicyBuilder, DEFAULT_BACKGROUND_PROBE,
    DEFAULT_BACKGROUND_PROBE_TIMEOUT, DEFAULT_OPEN_BASE, DEFAULT_OPEN_MAX,
};
pub use store::{Admission, BreakerStore, LocalStore, Outcome, StoreAdmit, Ticket};
pub use trip::{KindAction, OpenBackoff, OpenBackoffIter};

use crate::error::tag;
use crate::stream_util::{
    Blame, End, Guarded, Limits, Observed, StreamObserver, stream_bound_passed,
};

/// A model guarded by a circuit breaker.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// use ripcord_resilience::{BreakerPolicy, BreakerState, ChatModelExt};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let policy = BreakerPolicy::builder().consecutive_failures(2).open_for(Duration::from_millis(500)).build().unwrap();
/// let model = ScriptedModel::new("primary").fail(ErrorKind::ServerError).with_breaker(policy);
/// let req = ChatRequest::user("hi");
/// for _ in 0..2 {
///     assert_eq!(model.chat(&req, &Context::new()).await.unwrap_err().kind(), ErrorKind::ServerError);
/// }
/// let refused = model.chat(&req, &Context::new()).await.unwrap_err();
/// assert_eq!(refused.kind(), ErrorKind::CircuitOpen);
/// assert_eq!(refused.retry_after(), Some(Duration::from_millis(500)));
/// assert_eq!(model.snapshot().state, BreakerState::Open);
/// # }
/// ```
#[derive(Debug)]
pub struct Breaker<M> {
    inner: M,
    policy: Arc<BreakerPolicy>,
    core: Arc<dyn BreakerStore>,
    watcher: Watcher,
}

/// Starts the background liveness probe when the breaker is open (see [`watch`]).
#[derive(Debug, Clone)]
struct Watcher {
    watch: Arc<watch::Watch>,
    hints: Arc<watch::Hints>,
    check: Option<Arc<dyn Liveness>>,
    every: Option<Duration>,
    timeout: Duration,
}

impl Watcher {
    fn new(policy: &BreakerPolicy, check: Option<Arc<dyn Liveness>>) -> Self {
        Watcher {
            watch: Arc::new(watch::Watch::default()),
            hints: Arc::new(watch::Hints::default()),
            check,
            every: policy.background_probe(),
            timeout: policy.background_probe_timeout(),
        }
    }

    /// After a failure was recorded or a call refused: probes in the background while the
    /// breaker is open (the task itself stops once it is not).
    fn wake(&self, store: &Arc<dyn BreakerStore>) {
        let (Some(check), Some(every)) = (&self.check, self.every) else {
            return;
        };
        // Refused calls while a task checks cost one relaxed load here.
        if self.hints.active() || store.state() != BreakerState::Open {
            return;
        }
        self.watch.ensure(|| watch::Probe {
            store: Arc::clone(store),
            check: Arc::clone(check),
            hints: Arc::clone(&self.hints),
            every: self.hints.interval(every),
            timeout: self.timeout,
        });
    }

    fn record(&self, store: &Arc<dyn BreakerStore>, admission: Admission, outcome: Outcome) {
        let failed = matches!(outcome, Outcome::Failure { .. });
        let succeeded = outcome == Outcome::Success;
        store.record(admission, outcome);
        if self.check.is_none() {
            return;
        }
        if failed {
            if store.state() == BreakerState::Open {
                self.hints.reopened();
            }
            self.wake(store);
        } else if succeeded && !self.hints.is_fresh() && store.state() == BreakerState::Closed {
            // Two relaxed loads on the success path; the lock only after a check re-admitted.
            self.hints.closed();
        }
    }
}

/// A cheap, cloneable handle to a breaker's state, for health endpoints and operators.
#[derive(Debug, Clone)]
pub struct BreakerHandle {
    core: Arc<dyn BreakerStore>,
}

impl BreakerHandle {
    /// The state now (an open breaker whose open duration has passed reads as half-open).
    pub fn state(&self) -> BreakerState {
        self.core.state()
    }

    /// A snapshot: state, counters and recent transitions.
    pub fn snapshot(&self) -> BreakerSnapshot {
        self.core.snapshot()
    }

    /// Closes the breaker by hand (an operator's reset after fixing a key, say).
    pub fn reset(&self) {
        self.core.reset();
    }

    /// Tells the breaker that an out-of-band health probe ([`crate::probe`]) got an answer
    /// from the link. An **open** breaker moves to half-open at once instead of waiting out its
    /// open duration, so the next real call is admitted as a half-open probe (and closes the
    /// breaker on success, or re-opens it on failure, as usual). Closed and half-open breakers
    /// are left alone: a synthetic request never closes a breaker by itself.
    ///
    /// Returns `true` when this call moved the breaker to half-open.
    pub fn probe_succeeded(&self) -> bool {
        self.core.probe_succeeded()
    }

    /// The link's name.
    pub fn link(&self) -> &str {
        self.core.link()
    }
}

impl<M: ChatModel> Breaker<M> {
    /// Wraps `inner` with a fresh breaker.
    pub fn new(inner: M, policy: BreakerPolicy) -> Self {
        let store = policy.local_store(inner.id().name.clone());
        Breaker::with_store(inner, policy, Arc::new(store))
    }

    /// Wraps `inner` with a breaker whose state lives in `store` (a shared store from
    /// `ripcord-redis`, say). The policy's settings still decide what counts, how streams are
    /// judged and how long a probe may take; the store decides admissions and transitions.
    pub fn with_store(inner: M, policy: BreakerPolicy, store: Arc<dyn BreakerStore>) -> Self {
        let check = inner.liveness();
        Breaker::assemble(inner, policy, store, check)
    }
}

impl<M: EmbeddingModel> Breaker<M> {
    /// Wraps an embedding model with a fresh breaker: the same admissions, counting and
    /// half-open probes as a chat link's (an embedding call is judged when it returns).
    pub fn for_embeddings(inner: M, policy: BreakerPolicy) -> Self {
        let store = policy.local_store(inner.embedding_id().name.clone());
        Breaker::assemble(inner, policy, Arc::new(store), None)
    }
}

impl<M> Breaker<M> {
    fn assemble(
        inner: M,
        policy: BreakerPolicy,
        store: Arc<dyn BreakerStore>,
        check: Option<Arc<dyn Liveness>>,
    ) -> Self {
        let watcher = Watcher::new(&policy, check);
        Breaker {
            inner,
            policy: Arc::new(policy),
            core: store,
            watcher,
        }
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, mutably.
    pub fn get_mut(&mut self) -> &mut M {
        &mut self.inner
    }

    /// Unwraps the model (the breaker's state is dropped unless a handle keeps it).
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// A handle to this breaker's state.
    pub fn handle(&self) -> BreakerHandle {
        BreakerHandle {
            core: self.core.clone(),
        }
    }

    /// A snapshot of this breaker.
    pub fn snapshot(&self) -> BreakerSnapshot {
        self.core.snapshot()
    }

    fn refusal_error(&self, id: &ModelId, after: Duration) -> Error {
        self.watcher.wake(&self.core);
        tag(
            // A static message: this is the skip path, paid on every call while the breaker
            // is open. When the link is re-admitted is `retry_after`.
            Error::new(
                ErrorKind::CircuitOpen,
                "circuit breaker open; the link is refused until its cooldown ends (retry_after)",
            )
            .with_retry_after(after),
            id,
        )
    }

    async fn admit(&self, id: &ModelId, ctx: &Context) -> Result<Admission> {
        ctx.check().map_err(|e| tag(e, id))?;
        let admitted = match self.core.try_admit() {
            StoreAdmit::Admitted(a) => Ok(a),
            StoreAdmit::Refused(after) => Err(after),
            StoreAdmit::Ask => self.core.admit().await,
        };
        admitted.map_err(|after| self.refusal_error(id, after))
    }

    /// The instant the guarded call must end by, and why.
    fn limit(&self, admission: &Admission, ctx: &Context) -> Option<(Instant, Cut)> {
        let deadline = ctx.deadline();
        if admission.is_probe() {
            let probe_end = Instant::now() + self.policy.probe_timeout();
            match deadline {
                Some(d) if d <= probe_end => Some((d, Cut::Deadline)),
                _ => Some((probe_end, Cut::ProbeTimeout)),
            }
        } else {
            deadline.map(|d| (d, Cut::Deadline))
        }
    }

    /// `bounds_itself`: the inner model races the context itself.
    async fn guarded<T>(
        &self,
        bounds_itself: bool,
        ctx: &Context,
        limit: Option<(Instant, Cut)>,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        // The deadline and cancellation are the inner model's own when it bounds itself: its
        // timeout still ends the call inside this breaker, which records it. Only
        // a probe's own, shorter limit needs a timer here.
        let limit = match limit {
            Some((_, Cut::Deadline)) if bounds_itself => return fut.await,
            other => other,
        };
        let bounded = async {
            match limit {
                Some((at, cut)) => tokio::time::timeout_at(at, fut)
                    .await
                    .unwrap_or_else(|_| Err(cut.error())),
                None => fut.await,
            }
        };
        tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => Err(Error::cancelled()),
            r = bounded => r,
        }
    }

    /// A call that is over when its future is (a chat or an embedding; not a stream, which is
    /// judged as it is read): admitted, started with `start` only then, bounded by
    /// `guarded`, its outcome recorded and its error tagged with `id`.
    async fn whole_call<T, F>(
        &self,
        id: &ModelId,
        bounds_itself: bool,
        ctx: &Context,
        start: impl FnOnce() -> F,
    ) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let admission = self.admit(id, ctx).await?;
        let budget = ctx.remaining();
        let limit = self.limit(&admission, ctx);
        let result = self.guarded(bounds_itself, ctx, limit, start()).await;
        let outcome = match &result {
            Ok(_) => Outcome::Success,
            Err(e) => classify(&self.policy, e, e.fault_in(ctx, budget, false)),
        };
        self.watcher.record(&self.core, admission, outcome);
        result.map_err(|e| tag(e, id))
    }
}

/// Which limit cut a guarded call; the error is built only when one does.
#[derive(Debug, Clone, Copy)]
enum Cut {
    Deadline,
    ProbeTimeout,
}

impl Cut {
    fn error(self) -> Error {
        match self {
            Cut::Deadline => Error::deadline_exceeded(),
            Cut::ProbeTimeout => Error::timeout(
                TimeoutPhase::Total,
                "the half-open probe outlasted probe_timeout",
            ),
        }
    }
}

/// Classifies a failure for the breaker: only a failure charged to the vendor (`fault`, see
/// [`Error::fault_in`]) counts; a deadline cut of an attempt with a useful budget counts as a
/// timeout of the link.
fn classify(policy: &BreakerPolicy, e: &Error, fault: Fault) -> Outcome {
    if fault != Fault::Vendor {
        return Outcome::Ignore;
    }
    let kind = match e.kind() {
        ErrorKind::DeadlineExceeded => ErrorKind::Timeout,
        k => k,
    };
    match policy.action(kind) {
        KindAction::Ignore => Outcome::Ignore,
        action => Outcome::Failure { kind, action },
    }
}

/// Records a stream's outcome.
///
/// A half-open probe is judged at first content: the success is recorded and the permit
/// released then, so a slow consumer reading a long answer cannot hold the only permit (and
/// keep every other caller refused); a failure before it is recorded as the probe's failure.
/// Other streams are judged when they end.
struct BreakerObserver {
    core: Arc<dyn BreakerStore>,
    watcher: Watcher,
    policy: Arc<BreakerPolicy>,
    admission: Option<Admission>,
    blame: Blame,
}

impl StreamObserver for BreakerObserver {
    fn on_content(&mut self) {
        self.blame.content_came();
        if self.admission.as_ref().is_some_and(Admission::is_probe)
            && let Some(admission) = self.admission.take()
        {
            self.watcher.record(&self.core, admission, Outcome::Success);
        }
    }

    fn on_end(&mut self, end: End<'_>) {
        let Some(admission) = self.admission.take() else {
            return;
        };
        let outcome = match end {
            End::Finished => Outcome::Success,
            End::Failed(e) => classify(&self.policy, e, self.blame.fault(e)),
            End::Dropped => Outcome::Ignore,
        };
        self.watcher.record(&self.core, admission, outcome);
    }
}

#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Breaker<M> {
    // `bounds_itself` forwards to this model: a refusal returns at once.
    inner_model!(inner: M);

    /// While open (or half-open with every probe out): the refusal `chat` would return,
    /// counted and reported to the listener as a rejected call.
    fn decorated_refusal(&self, _ctx: &Context) -> Option<Error> {
        self.core
            .refusal()
            .map(|after| self.refusal_error(self.inner.id(), after))
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let bounds = self.inner.bounds_itself();
        self.whole_call(self.inner.id(), bounds, ctx, || self.inner.chat(req, ctx))
            .await
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let admission = self.admit(self.inner.id(), ctx).await?;
        let budget = ctx.remaining();
        let limit = self.limit(&admission, ctx);
        let bounds = self.inner.bounds_itself();
        let opened = self
            .guarded(bounds, ctx, limit, self.inner.stream(req, ctx))
            .await;
        match opened {
            Err(e) => {
                let outcome = classify(&self.policy, &e, e.fault_in(ctx, budget, false));
                self.watcher.record(&self.core, admission, outcome);
                Err(tag(e, self.inner.id()))
            }
            Ok(stream) => {
                // Until first content the deadline (or a probe's limit) bounds the stream;
                // after it, the context's stream bound does.
                let stream = Guarded::boxed(
                    stream,
                    Limits {
                        first_content: limit.map(|(at, cut)| (at, cut.error())),
                        stream: ctx.stream_deadline().map(|at| (at, stream_bound_passed())),
                        idle: None,
                    },
                );
                Ok(Observed::boxed(
                    stream,
                    BreakerObserver {
                        core: self.core.clone(),
                        watcher: self.watcher.clone(),
                        policy: self.policy.clone(),
                        admission: Some(admission),
                        blame: Blame::new(ctx, budget),
                    },
                ))
            }
        }
    }
}

/// An embedding model behind the breaker ([`Breaker::for_embeddings`]): refused at once while
/// open, each call's outcome counted as a chat call's is.
#[async_trait]
impl<M: EmbeddingModel> EmbeddingModel for Breaker<M> {
    inner_embedding_model!(inner);

    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse> {
        let id = self.inner.embedding_id();
        self.whole_call(id, false, ctx, || self.inner.embed(req, ctx))
            .await
    }
}
