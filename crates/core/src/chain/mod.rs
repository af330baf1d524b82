//! The fallback chain: one `ChatModel` in front of an ordered list of models.
//!
//! # Semantics
//!
//! - Links are tried in order: the configured order, or the one the chain's [`Strategy`]
//!   computes for the call (lowest latency, lowest cost, weighted first pick; see
//!   [`ChainBuilder::strategy`]). A link is **skipped** without a call when it lacks a capability
//!   the request needs (tools, vision, JSON), when the request's locality forbids it, or when
//!   even the low end of the prompt's token estimate (see [`crate::tokens`]) does not fit its
//!   window. Breakers and local rate limits are decorators around a link: they refuse at once
//!   with `CircuitOpen` / `LocalRateLimited`, which the chain records as a refusal and moves on.
//! - After a failure the chain asks the error's [`crate::Disposition`]: `FailFast` kinds
//!   (content filtered, invalid request, cancelled) end the call with that error; everything
//!   else moves on — to the link named by a per-kind route if one is configured
//!   ([`ChainBuilder::route`]) and still untried, else to the first untried link in order —
//!   or, with [`ChainBuilder::prefer_independent_fallbacks`], to the first untried link in a
//!   failure domain (cloud vendor, or local) where nothing failed yet in this call, else in
//!   another domain than the link that just failed, else the first untried one.
//!   Retries happen *inside* a link (a retry decorator), never in the chain.
//! - One deadline covers the whole call: the earlier of the chain's own
//!   ([`ChainBuilder::deadline`]) and the context's. Every attempt runs under it; a link may
//!   reserve part of it for the links after it ([`ChainBuilder::reserve`]), except the last
//!   remaining link, which always gets everything left. When the deadline passes, the chain
//!   goes straight to the static reply, or returns `DeadlineExceeded`. Nothing waits past it.
//! - When every remaining link refused only because it is cooling down (breaker open, limiter
//!   exhausted) and the earliest re-admission falls within the deadline, the chain waits for it
//!   once rather than failing at once.
//! - The static reply is honest: it says the service is unavailable, is marked degraded and
//!   `static_reply`, and is counted ([`Chain::stats`]).
//! - Streaming: fallback is free until a link's first content event. After that a failure ends
//!   the stream with the error, or — with [`StreamPolicy::Restart`] — emits
//!   [`crate::StreamEvent::Restarted`] and streams the whole answer again from the next link.
//!   Two models' halves are never spliced silently. A hold-back ([`ChainBuilder::stream_holdback`])
//!   moves the commit point later: a failure within it still falls over transparently.
//!
//! # Continuation
//!
//! With [`StreamPolicy::Continue`], a committed stream that is cut (no finish event), stalls
//! past its link's idle limit, or fails in-band goes on on the next link: that link is asked to
//! continue from the text already delivered — by assistant prefill where it supports it
//! ([`crate::Capabilities::assistant_prefill`]), by an explicit instruction where it does not or
//! refuses the prefill — and only its continuation reaches the consumer, with a repetition of
//! the delivered text's end dropped. The continuing link gets a fresh budget to its first
//! content (the chain's deadline, within the stream bound). Tool-call streams, requests not
//! marked retry-safe, and cuts by the caller (its budget, its cancellation) are never
//! continued. Every continuation is recorded in the provenance (`continued_by`,
//! `continuations` with the offset), as a `ripcord.stream_continued` event and on the chain
//! span.
//! - A `Chain` is a `ChatModel`, so chains nest.

mod builder;
mod call;
mod clamp;
pub mod continuation;
mod order;
mod stream;
mod trim;

pub use builder::{BuildError, ChainBuilder};
pub use order::{
    DEFAULT_OUTPUT_ESTIMATE, DEMOTION_PROBE_EVERY, Demotion, ERROR_EWMA_ALPHA, LATENCY_EWMA_ALPHA,
    LinkLatency, Strategy,
};
pub use trim::Trim;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tracing::Instrument;

use crate::alert::AlertGate;
use crate::capabilities::Capabilities;
use crate::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::model::{ChatModel, ModelId};
use crate::request::ChatRequest;
use crate::response::{ChatResponse, FinishReason, Provenance, Usage};
use crate::stream::ChatStream;
use crate::telemetry;

use call::{Call, Next};
use order::Plan;

/// The default end-to-end deadline of a chain call: time to a stream's first content, and
/// whole non-streamed calls. It leaves the next link 15 s after a first link's default 30 s
/// limit of a non-streamed call (35 s after a stream's default 10 s first-token limit), so a
/// silent primary still leaves room for a fallback.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(45);

/// The default bound of a stream after its first content ([`ChainBuilder::stream_max`]).
pub const DEFAULT_STREAM_MAX: Duration = Duration::from_secs(600);

/// The default least budget an attempt needs to be useful ([`ChainBuilder::min_attempt`]).
pub const DEFAULT_MIN_ATTEMPT: Duration = Duration::from_secs(1);

/// The most links one chain may hold.
pub const MAX_LINKS: usize = 64;

/// What a streaming chain does when its link fails after content was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamPolicy {
    /// End the stream with the error (the default).
    #[default]
    EndWithError,
    /// Emit `Restarted { reason }` and stream the whole answer again from the next link.
    Restart,
    /// Ask the next link to continue the answer from the text already delivered, and stream
    /// only what it adds: the consumer sees one answer with one finish reason, and the
    /// provenance records the continuation ([`crate::Provenance::continuations`]). Never for
    /// tool-call streams or requests not marked retry-safe (those end with the error). See
    /// the [`continuation`](self#continuation) section.
    Continue,
}

/// The honest last-resort reply, with optional per-intent texts.
///
/// # Examples
///
/// ```
/// use ripcord_core::StaticReply;
/// let s = StaticReply::new("The assistant is unavailable right now.")
///     .with_intent("billing", "Billing help is unavailable; please email billing@example.com.");
/// assert_eq!(s.text_for(Some("billing")), "Billing help is unavailable; please email billing@example.com.");
/// assert_eq!(s.text_for(Some("other")), "The assistant is unavailable right now.");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticReply {
    default: String,
    #[serde(default)]
    by_intent: BTreeMap<String, String>,
}

impl StaticReply {
    /// A static reply with this default text.
    pub fn new(text: impl Into<String>) -> Self {
        StaticReply {
            default: text.into(),
            by_intent: BTreeMap::new(),
        }
    }

    /// Adds a text for one intent (see [`Context::with_intent`]).
    pub fn with_intent(mut self, intent: impl Into<String>, text: impl Into<String>) -> Self {
        self.by_intent.insert(intent.into(), text.into());
        self
    }

    /// The text for an intent, or the default.
    pub fn text_for(&self, intent: Option<&str>) -> &str {
        intent
            .and_then(|i| self.by_intent.get(i))
            .unwrap_or(&self.default)
    }
}

/// Counters of a chain since it was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChainStats {
    /// Calls made (chat and stream).
    pub calls: u64,
    /// Calls served by a link other than the first one in the call's order.
    pub fallbacks: u64,
    /// Calls answered with the static reply.
    pub static_replies: u64,
    /// Calls that ended with an error.
    pub failures: u64,
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    fallbacks: AtomicU64,
    static_replies: AtomicU64,
    failures: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) reserve: Duration,
    /// The link's own first-token limit, when it told the chain (caps its least useful budget).
    pub(crate) first_token: Option<Duration>,
    /// The window the link's vendor stated in a context-length error (0: none yet). One
    /// relaxed load per link considered; written only when a vendor states a new limit.
    pub(crate) learned_window: AtomicU32,
    /// An outside demotion switch (see [`Demotion`]): while set, the link is tried after the
    /// others.
    pub(crate) demotion: Option<Demotion>,
}

impl Link {
    pub(crate) fn new(model: Arc<dyn ChatModel>) -> Self {
        Link {
            model,
            reserve: Duration::ZERO,
            first_token: None,
            learned_window: AtomicU32::new(0),
            demotion: None,
        }
    }

    /// The window the chain judges this link by: what its vendor stated, else its known
    /// window; `None` when the window is unknown (the link is tried, not judged).
    pub(crate) fn judged_window(&self) -> Option<u32> {
        match self.learned_window.load(Ordering::Relaxed) {
            0 => {
                let caps = self.model.capabilities();
                caps.context_window_known.then_some(caps.context_window)
            }
            w => Some(w),
        }
    }

    /// Remembers the window the vendor stated, for this call and later ones.
    pub(crate) fn learn_window(&self, window: u32) {
        if window > 0 && self.learned_window.swap(window, Ordering::Relaxed) != window {
            tracing::info!(
                ripcord.link = %self.model.id().name,
                window,
                message = crate::telemetry::event::WINDOW_LEARNED
            );
        }
    }
}

#[derive(Debug)]
pub(crate) struct ChainInner {
    pub(crate) id: ModelId,
    pub(crate) caps: Capabilities,
    pub(crate) links: Vec<Link>,
    pub(crate) routes: Vec<(ErrorKind, usize)>,
    pub(crate) static_reply: Option<StaticReply>,
    pub(crate) deadline: Duration,
    pub(crate) stream_max: Duration,
    pub(crate) min_attempt: Duration,
    pub(crate) trim: Trim,
    pub(crate) stream_policy: StreamPolicy,
    pub(crate) stream_holdback: Duration,
    pub(crate) wait_for_readmission: bool,
    pub(crate) fallback_notice: Option<String>,
    pub(crate) strategy: Strategy,
    pub(crate) plan: Plan,
    /// Each link's failure domain, when fallbacks prefer a different one.
    pub(crate) domains: Option<Vec<u8>>,
    /// Where links' alert-kind failures are announced (rate-limited).
    pub(crate) alerts: Arc<AlertGate>,
    counters: Counters,
}

/// A fallback chain of chat models. See the [module docs](self) for its semantics.
///
/// # Examples
///
/// ```
/// # use async_trait::async_trait;
/// # use ripcord_core::*;
/// # #[derive(Debug)] struct Down(ModelId, Capabilities);
/// # #[async_trait] impl ChatModel for Down {
/// #   fn id(&self) -> &ModelId { &self.0 } fn capabilities(&self) -> &Capabilities { &self.1 }
/// #   async fn chat(&self, _: &ChatRequest, _: &Context) -> Result<ChatResponse> {
/// #     Err(Error::new(ErrorKind::Overloaded, "overloaded")) } }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<()> {
/// let chain = Chain::builder()
///     .link(Down(ModelId::new("primary", "gpt-4o"), Capabilities::new(128_000, 4096)))
///     .static_reply("The assistant is busy right now; please try again in a few minutes.")
///     .build()?;
/// let reply = chain.chat(&ChatRequest::user("hi"), &Context::new()).await?;
/// assert!(reply.degraded());
/// assert_eq!(reply.served_by(), "static");
/// assert_eq!(reply.provenance.attempts[0].error_kind, Some(ErrorKind::Overloaded));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Chain {
    inner: Arc<ChainInner>,
}

impl Chain {
    /// A builder.
    pub fn builder() -> ChainBuilder {
        ChainBuilder::default()
    }

    /// The links, in configured order.
    pub fn links(&self) -> impl Iterator<Item = &Arc<dyn ChatModel>> {
        self.inner.links.iter().map(|l| &l.model)
    }

    /// The chain's own deadline.
    pub fn deadline(&self) -> Duration {
        self.inner.deadline
    }

    /// The stream hold-back ([`ChainBuilder::stream_holdback`]).
    pub fn stream_holdback(&self) -> Duration {
        self.inner.stream_holdback
    }

    /// The stream policy ([`ChainBuilder::stream_policy`]).
    pub fn stream_policy(&self) -> StreamPolicy {
        self.inner.stream_policy
    }

    /// The static reply, if configured.
    pub fn static_reply(&self) -> Option<&StaticReply> {
        self.inner.static_reply.as_ref()
    }

    /// How the chain orders its links.
    pub fn strategy(&self) -> &Strategy {
        &self.inner.strategy
    }

    /// The latency observed of the link named `link`: kept only under
    /// [`Strategy::LowestLatency`], `None` otherwise or before its first sample.
    pub fn link_latency(&self, link: &str) -> Option<LinkLatency> {
        let i = self
            .inner
            .links
            .iter()
            .position(|l| *l.model.id().name == *link)?;
        self.inner.plan.latency_cell(i)?.snapshot()
    }

    /// Adds a time-to-first-token sample for the link named `link` from outside a call — e.g.
    /// from a health probe, so that a link [`Strategy::LowestLatency`] no longer puts first is
    /// still measured. Returns false (and records nothing) when the chain keeps no latency or
    /// has no such link.
    pub fn record_latency(&self, link: &str, time_to_first_token: Duration) -> bool {
        let cell = self
            .inner
            .links
            .iter()
            .position(|l| *l.model.id().name == *link)
            .and_then(|i| self.inner.plan.latency_cell(i));
        match cell {
            Some(cell) => {
                cell.observe(time_to_first_token);
                true
            }
            None => false,
        }
    }

    /// The window the chain judges the link named `link` by: the one its vendor stated in a
    /// context-length error, else its known window; `None` for an unknown window (or no such
    /// link).
    pub fn link_window(&self, link: &str) -> Option<u32> {
        self.inner
            .links
            .iter()
            .find(|l| *l.model.id().name == *link)?
            .judged_window()
    }

    /// Counters since the chain was built.
    pub fn stats(&self) -> ChainStats {
        let c = &self.inner.counters;
        ChainStats {
            calls: c.calls.load(Ordering::Relaxed),
            fallbacks: c.fallbacks.load(Ordering::Relaxed),
            static_replies: c.static_replies.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
        }
    }
}

impl ChainInner {
    /// The chain span of a call (a stream's when `stream`), or `None` when no subscriber
    /// listens for it: the call then runs as it is, with no span and no wrapper.
    pub(crate) fn live_span(&self, stream: bool) -> Option<tracing::Span> {
        if !tracing::level_enabled!(tracing::Level::INFO) {
            return None;
        }
        let span = telemetry::chain_span(
            &self.id.name,
            telemetry::operation::CHAT,
            self.links.len(),
            stream,
        );
        (!span.is_disabled()).then_some(span)
    }

    /// The effective deadline of a call starting now.
    pub(crate) fn call_deadline(&self, ctx: &Context, now: Instant) -> Instant {
        let own = now + self.deadline;
        match ctx.deadline() {
            Some(d) => d.min(own),
            None => own,
        }
    }

    /// The context of a call starting now: the call's deadline, the stream bound after first
    /// content (the chain's `stream_max`, or the caller's own bound when earlier) and the least
    /// useful attempt budget.
    pub(crate) fn call_context(&self, ctx: &Context, now: Instant) -> (Instant, Context) {
        let deadline = self.call_deadline(ctx, now);
        let own_stream = now + self.stream_max;
        let stream_at = ctx
            .stream_deadline()
            .map_or(own_stream, |d| d.min(own_stream));
        let whole = deadline.saturating_duration_since(now);
        let ctx = ctx
            .clone()
            .with_deadline(deadline)
            .set_stream_deadline(Some(stream_at))
            .with_min_attempt(self.min_attempt.min(whole / 2));
        (deadline, ctx)
    }

    /// The least useful budget of an attempt at link `i`, for a call whose whole budget is
    /// `whole`: the chain's `min_attempt`, capped by the link's first-token limit and by half
    /// the whole budget (so a call with a short deadline still tries its first links).
    pub(crate) fn min_attempt_for(&self, i: usize, whole: Duration) -> Duration {
        let mut m = self.min_attempt.min(whole / 2);
        if let Some(ft) = self.links.get(i).and_then(|l| l.first_token) {
            m = m.min(ft);
        }
        m
    }

    /// Builds the static reply for a failed call, or returns the combined error.
    pub(crate) fn static_or_error(&self, call: Call, ctx: &Context) -> Result<ChatResponse> {
        let (errors, skipped) = call.into_parts();
        match &self.static_reply {
            Some(reply) => {
                self.counters.static_replies.fetch_add(1, Ordering::Relaxed);
                let attempts = errors
                    .iter()
                    .flat_map(|e| e.attempts().iter().cloned())
                    .collect();
                let last_kind = errors.last().map(Error::kind);
                tracing::warn!(
                    ripcord.chain = %self.id.name,
                    error.type = last_kind.map(ErrorKind::as_str),
                    message = crate::telemetry::event::STATIC_REPLY
                );
                Ok(ChatResponse {
                    content: reply.text_for(ctx.intent()).to_owned(),
                    tool_calls: Vec::new(),
                    reasoning: Vec::new(),
                    finish_reason: FinishReason::Stop,
                    usage: Usage::default(),
                    model: "static".to_owned(),
                    provenance: Provenance {
                        served_by: None,
                        attempts,
                        skipped,
                        degraded: true,
                        static_reply: true,
                        notice: None,
                        trimmed_messages: 0,
                        continued_by: None,
                        continuations: Vec::new(),
                    },
                })
            }
            None => {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    ripcord.chain = %self.id.name,
                    error.type = errors.last().map(|e| e.kind().as_str()),
                    message = crate::telemetry::event::CHAIN_EXHAUSTED
                );
                Err(Error::exhausted(errors).with_skipped(skipped))
            }
        }
    }

    pub(crate) fn count_call(&self) {
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_fallback(&self) {
        self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_failure(&self) {
        self.counters.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Records the time to first token of link `i` (only when the strategy keeps it).
    pub(crate) fn observe_latency(&self, i: usize, latency: Duration) {
        if let Some(cell) = self.plan.latency_cell(i) {
            cell.observe(latency);
        }
        // A served call is a success in the passive error rate too.
        self.observe_outcome(i, false);
    }

    /// Records link `i`'s outcome in its error rate (only when the strategy keeps it).
    pub(crate) fn observe_outcome(&self, i: usize, failed: bool) {
        if let Some(cell) = self.plan.error_cell(i) {
            cell.observe(failed);
        }
    }

    /// A traced chat call: the call runs inside `span`, whose outcome is recorded at the end.
    async fn chat_traced(
        &self,
        req: &ChatRequest,
        ctx: &Context,
        span: tracing::Span,
    ) -> Result<ChatResponse> {
        let result = self.chat(req, ctx, true).instrument(span.clone()).await;
        match &result {
            Ok(resp) => telemetry::record_served(&span, &resp.provenance),
            Err(e) => {
                telemetry::record_error(&span, e);
                span.record(
                    telemetry::attr::ATTEMPTS,
                    i64::try_from(e.attempts().len()).unwrap_or(i64::MAX),
                );
            }
        }
        result
    }

    /// Walks the links. Unless `in_span`, the call first opens its chain span when a subscriber
    /// listens; without one it runs as it is, with no span and no wrapper future (the traced
    /// path is boxed so that this one stays as small as it was).
    async fn chat(&self, req: &ChatRequest, ctx: &Context, in_span: bool) -> Result<ChatResponse> {
        if !in_span && let Some(span) = self.live_span(false) {
            return Box::pin(self.chat_traced(req, ctx, span)).await;
        }
        self.count_call();
        let now = Instant::now();
        let (deadline, ctx) = self.call_context(ctx, now);
        let mut call = Call::new(self, req, deadline);
        loop {
            let i = match call.next_link(self, req, &ctx).await {
                Next::Link(i) => i,
                Next::Stop(e) => {
                    self.count_failure();
                    return Err(e);
                }
                Next::Exhausted => return self.static_or_error(call, &ctx),
            };
            let link = &self.links[i];
            let attempt_ctx = call.attempt_context(self, i, &ctx);
            let actx = attempt_ctx.as_ref().unwrap_or(&ctx);
            let trimmed = call.take_trimmed(i);
            let r = trimmed.as_ref().map_or(req, |(t, _)| t);
            let (r, clamped) = clamp::for_link(r, link.model.capabilities());
            let r = &*r;
            let started = Instant::now();
            // A link that bounds itself by the context stops at the deadline with its own,
            // more precise error; any other is raced against the deadline here.
            let result = if link.model.bounds_itself() {
                link.model.chat(r, actx).await
            } else {
                actx.run(link.model.chat(r, actx)).await
            };
            match result {
                Ok(mut resp) => {
                    let latency = started.elapsed();
                    self.observe_latency(i, latency);
                    let link_prov = std::mem::take(&mut resp.provenance);
                    resp.provenance = call.served(self, i, link_prov, latency);
                    resp.provenance.trimmed_messages = trimmed.map_or(0, |(_, n)| n);
                    clamp::record(
                        &mut resp.provenance.attempts,
                        &link.model.id().name,
                        clamped,
                    );
                    return Ok(resp);
                }
                Err(e) => {
                    call.failed(self, i, e, started.elapsed(), req, &ctx);
                    call.mark_clamped(&link.model.id().name, clamped);
                }
            }
        }
    }
}

#[async_trait]
impl ChatModel for Chain {
    fn id(&self) -> &ModelId {
        &self.inner.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.inner.caps
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        self.inner.chat(req, ctx, false).await
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        stream::open(self.inner.clone(), req, ctx, None).await
    }

    /// Every attempt is bounded (by the link itself or by the chain's timer), and the waits
    /// between attempts end at the deadline or on cancellation.
    fn bounds_itself(&self) -> bool {
        true
    }
}
