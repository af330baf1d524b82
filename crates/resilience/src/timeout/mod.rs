//! Per-attempt time limits, and stream guards for models that do not enforce them.
//!
//! Separate limits, because each has its own remedy: the connection (the provider's business),
//! the first token, the idle gap between events after it, and the whole attempt — plus the
//! call's deadline. A limit that runs out ends the attempt with [`Error::timeout`] of the
//! matching [`TimeoutPhase`]; the call's deadline ends it with `DeadlineExceeded`.
//!
//! A stream is bounded by the attempt limit, the first-token limit and the deadline only until
//! its first content event; after it, by the context's
//! [`stream_deadline`](Context::stream_deadline) and the idle gap, so a long answer is not cut
//! by a deadline meant for getting an answer at all. A cut by the stream bound is the caller's
//! (`DeadlineExceeded`, never charged to the link). Put the timeout *inside* the retry and the
//! breaker, so each attempt gets its own limit and the breaker records a timeout as a failure
//! rather than losing it when an outer timer drops the call.

mod policy;

use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, Result, TimeoutPhase,
};
use tokio::time::Instant;

pub use policy::{TimeoutPolicy, TimeoutPolicyBuilder};

use crate::error::tag;
use crate::stream_util::{Guarded, Limits, stream_bound_passed};

/// A model under per-attempt time limits.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind, TimeoutPhase};
/// use ripcord_resilience::{ChatModelExt, TimeoutPolicy};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let model = ScriptedModel::new("slow").hang()
///     .with_timeout(TimeoutPolicy::builder().attempt(Duration::from_secs(2)).build().unwrap());
/// let err = model.chat(&ChatRequest::user("hi"), &Context::new()).await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Timeout);
/// assert_eq!(err.timeout_phase(), Some(TimeoutPhase::Total));
/// # }
/// ```
#[derive(Debug)]
pub struct Timeout<M> {
    inner: M,
    policy: TimeoutPolicy,
}

impl<M: ChatModel> Timeout<M> {
    /// Wraps `inner` with the limits.
    pub fn new(inner: M, policy: TimeoutPolicy) -> Self {
        Timeout { inner, policy }
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, mutably.
    pub fn get_mut(&mut self) -> &mut M {
        &mut self.inner
    }

    /// Unwraps the model.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// The end of the attempt and why: the attempt limit or the deadline, whichever comes first.
    fn total(&self, start: Instant, ctx: &Context) -> Option<(Instant, Cut)> {
        let own = self.policy.attempt.map(|d| (start + d, Cut::Attempt(d)));
        match (own, ctx.deadline()) {
            (Some((at, cut)), Some(d)) if at < d => Some((at, cut)),
            (_, Some(d)) => Some((d, Cut::Deadline)),
            (own, None) => own,
        }
    }

    fn first_token(&self, start: Instant) -> Option<(Instant, Cut)> {
        self.policy
            .first_token
            .map(|d| (start + d, Cut::FirstToken(d)))
    }
}

/// Which limit cut an attempt; the error is built only when one does.
#[derive(Debug, Clone, Copy)]
enum Cut {
    Attempt(Duration),
    FirstToken(Duration),
    Deadline,
}

impl Cut {
    fn error(self) -> Error {
        match self {
            Cut::Attempt(d) => Error::timeout(
                TimeoutPhase::Total,
                format!("the attempt took longer than {} ms", d.as_millis()),
            ),
            Cut::FirstToken(d) => Error::timeout(
                TimeoutPhase::FirstToken,
                format!("no first token within {} ms", d.as_millis()),
            ),
            Cut::Deadline => Error::deadline_exceeded(),
        }
    }
}

async fn bounded<T>(
    limit: Option<(Instant, Cut)>,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match limit {
        Some((at, cut)) => tokio::time::timeout_at(at, fut)
            .await
            .unwrap_or_else(|_| Err(cut.error())),
        None => fut.await,
    }
}

fn earliest(a: Option<(Instant, Cut)>, b: Option<(Instant, Cut)>) -> Option<(Instant, Cut)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 < x.0 { y } else { x }),
        (x, y) => x.or(y),
    }
}

#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Timeout<M> {
    // `bounds_itself` forwards to this model: it cuts at its own limits and the deadline, but
    // relies on the inner model for cancellation.
    inner_model!(inner: M);

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let start = Instant::now();
        bounded(self.total(start, ctx), self.inner.chat(req, ctx))
            .await
            .map_err(|e| tag(e, self.inner.id()))
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let start = Instant::now();
        let total = self.total(start, ctx);
        let first = self.first_token(start);
        // Opening the stream counts against the first-token limit too.
        let stream = bounded(earliest(total, first), self.inner.stream(req, ctx))
            .await
            .map_err(|e| tag(e, self.inner.id()))?;
        let id = self.inner.id();
        // The attempt limit and the deadline bound the time to first content; after it, the
        // stream bound of the context and the idle gap do.
        let limits = Limits {
            first_content: earliest(total, first).map(|(at, cut)| (at, tag(cut.error(), id))),
            stream: ctx
                .stream_deadline()
                .map(|at| (at, tag(stream_bound_passed(), id))),
            idle: self.policy.idle.map(|d| {
                (
                    d,
                    tag(
                        Error::timeout(
                            TimeoutPhase::StreamIdle,
                            format!("no stream event for {} ms", d.as_millis()),
                        ),
                        id,
                    ),
                )
            }),
        };
        Ok(Guarded::boxed(stream, limits))
    }
}
