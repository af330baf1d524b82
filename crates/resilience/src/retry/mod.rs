//! Retries on the same link, within the call's deadline.
//!
//! # Rules
//!
//! - Only failures whose [`RetryClass`] is in the policy's [`RetryOn`] are retried; by default
//!   rate limited, server error, timeout, network, invalid response. A *silent* link (a connect
//!   timeout, or no response byte within the first-token limit) is not: it falls to the next
//!   link at once instead of costing a whole limit per attempt. Everything else returns at
//!   once: quota exhausted, auth and the like go to the chain's next link; content filtered
//!   fails the call.
//! - A rate limit without a retry-after waits at least half the base delay (full jitter alone
//!   may pick almost zero).
//! - The vendor's retry-after ([`Error::retry_after`]) replaces the backoff delay. When the wait
//!   — backoff or retry-after — would overrun [`Context::deadline`], the error is returned *at
//!   once*, without sleeping, so the chain falls back while there is still time.
//! - A request marked not retry-safe ([`Context::retry_safe`]) is never re-sent after a failure
//!   the vendor may have processed ([`Error::maybe_processed`]: a timeout after the request was
//!   written, a network error after it was sent, a 502/504, a truncated or invalid answer). A
//!   connection that was refused, or a 429 or 503 the vendor answered at once, is still retried.
//! - Cancellation ([`Context::cancellation`]) stops the loop, including a backoff sleep.
//! - Every attempt lands in provenance: a success carries all attempts in
//!   `provenance.attempts` (failed ones first, the success last); a final failure carries them
//!   through [`Error::attempts`].
//! - A [`RetryBudget`] caps the extra load retries add across all callers of the link.
//!
//! Streams are retried until their first content event: an error before it (a deferred status,
//! a 429 sent as the first event) is the attempt's error. After the first content
//! event the stream is the caller's and is never re-sent.
//!
//! Put the retry *inside* the breaker, so the breaker sees one outcome per logical call
//! (counting every attempt would trip it too early); see the [crate docs](crate) for the whole order.

mod backoff;
mod budget;
mod policy;
mod retry_on;

use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::{
    Attempt, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Disposition,
    EmbeddingModel, EmbeddingRequest, EmbeddingResponse, Error, ErrorKind, ModelId, Provenance,
    Result,
};
use tokio::time::Instant;

pub(crate) use backoff::uniform;
pub use backoff::{Backoff, Jitter, RandomSource, SplitMix64};
use budget::BudgetState;
pub use budget::RetryBudget;
pub use policy::{RetryPolicy, RetryPolicyBuilder};
pub use retry_on::{RetryClass, RetryOn};

use crate::error::tag;
use crate::stream_util::{bounded_by, open_to_first_content};

/// A model whose failed calls are retried by a [`RetryPolicy`] policy.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// use ripcord_resilience::{ChatModelExt, RetryPolicy};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let model = ScriptedModel::new("primary")
///     .fail(ErrorKind::ServerError)
///     .reply("hello")
///     .with_retry(RetryPolicy::default());
/// let resp = model.chat(&ChatRequest::user("hi"), &Context::new()).await.unwrap();
/// assert_eq!(resp.text(), "hello");
/// assert_eq!(resp.provenance.attempts.len(), 2);
/// assert_eq!(resp.provenance.attempts[0].error_kind, Some(ErrorKind::ServerError));
/// # }
/// ```
#[derive(Debug)]
pub struct Retry<M> {
    inner: M,
    policy: RetryPolicy,
    budget: Option<BudgetState>,
}

/// What to do after a failed attempt.
enum Next {
    Stop,
    Wait(Duration),
}

impl<M> Retry<M> {
    /// Wraps `inner` (a [`ChatModel`], an [`EmbeddingModel`], or both) with the retry policy.
    pub fn new(inner: M, policy: RetryPolicy) -> Self {
        let budget = policy.budget_state();
        Retry {
            inner,
            policy,
            budget,
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

    /// Unwraps the model.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Decides, after failed attempt number `n`, whether and how long to wait before the next.
    fn next(
        &self,
        id: &ModelId,
        n: u32,
        e: &Error,
        ctx: &Context,
        previous: &mut Duration,
    ) -> Next {
        if !self.policy.retry_on.retries(e) {
            if e.disposition() != Disposition::Fallback && RetryClass::of(e).is_some() {
                tracing::debug!(ripcord.link = %id.name, error.type = e.kind().as_str(), message = ripcord_core::telemetry::event::RETRY_CLASS_NOT_RETRIED);
            }
            return Next::Stop;
        }
        let after = e.retry_after();
        if n >= self.policy.max_attempts.get() || ctx.is_cancelled() {
            return Next::Stop;
        }
        if e.forbids_resend(ctx) {
            tracing::debug!(ripcord.link = %id.name, error.type = e.kind().as_str(), message = ripcord_core::telemetry::event::RETRY_UNSAFE_SKIPPED);
            return Next::Stop;
        }
        let delay = match after {
            Some(after) if after > self.policy.max_retry_after => {
                tracing::debug!(ripcord.link = %id.name, retry_after_ms = after.as_millis() as u64, message = ripcord_core::telemetry::event::RETRY_AFTER_TOO_LONG);
                return Next::Stop;
            }
            Some(after) => after,
            None => {
                let mut d = self
                    .policy
                    .backoff
                    .delay(n, *previous, self.policy.rng.as_ref());
                if e.kind() == ErrorKind::RateLimited {
                    // A rate limit without a retry-after: full jitter may pick almost zero, and
                    // three attempts inside a fraction of a second meet the same limit. Never
                    // less than half the base delay.
                    let b = self.policy.backoff;
                    d = d.max(b.base / 2).min(b.cap);
                }
                *previous = d;
                d
            }
        };
        if let Some(remaining) = ctx.remaining()
            && delay >= remaining
        {
            tracing::debug!(
                ripcord.link = %id.name,
                delay_ms = delay.as_millis() as u64,
                remaining_ms = remaining.as_millis() as u64,
                message = ripcord_core::telemetry::event::RETRY_BEYOND_DEADLINE
            );
            return Next::Stop;
        }
        if let Some(budget) = &self.budget
            && !budget.withdraw()
        {
            tracing::debug!(ripcord.link = %id.name, message = ripcord_core::telemetry::event::RETRY_BUDGET_EXHAUSTED);
            return Next::Stop;
        }
        tracing::info!(
            ripcord.link = %id.name,
            attempt = n,
            delay_ms = delay.as_millis() as u64,
            error.type = e.kind().as_str(),
            message = ripcord_core::telemetry::event::RETRY_SCHEDULED
        );
        Next::Wait(delay)
    }

    fn record_failure(id: &ModelId, attempts: &mut Vec<Attempt>, e: &Error, latency: Duration) {
        if e.attempts().is_empty() {
            attempts.push(Attempt::failure(
                id.name.clone(),
                id.model.clone(),
                e,
                latency,
            ));
        } else {
            attempts.extend(e.attempts().iter().cloned());
        }
    }

    /// Runs attempts of `once` until one succeeds or the policy stops; returns the value and
    /// the failed attempts before it, or the last error carrying every attempt.
    /// `id` names the inner model in errors and attempts; `bounds_itself` says whether it races
    /// the context itself.
    async fn run<T, F, Fut>(
        &self,
        id: &ModelId,
        bounds_itself: bool,
        ctx: &Context,
        mut once: F,
    ) -> Result<(T, Vec<Attempt>, Duration)>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        if let Some(b) = &self.budget {
            b.deposit();
        }
        let mut attempts = Vec::new();
        let mut previous = self.policy.backoff.base;
        let mut n: u32 = 0;
        let mut last: Option<Error> = None;
        loop {
            n += 1;
            if let Err(stop) = ctx.check() {
                let out = match last {
                    Some(e) if stop.kind() != ErrorKind::Cancelled => e,
                    _ => stop,
                };
                return Err(out.with_attempts(attempts));
            }
            let started = Instant::now();
            // An inner model that bounds itself needs no second timer here.
            let outcome = if bounds_itself {
                once().await
            } else {
                ctx.run(once()).await
            };
            match outcome {
                Ok(v) => return Ok((v, attempts, started.elapsed())),
                Err(e) => {
                    let e = tag(e, id);
                    Self::record_failure(id, &mut attempts, &e, started.elapsed());
                    match self.next(id, n, &e, ctx, &mut previous) {
                        Next::Stop => return Err(e.with_attempts(attempts)),
                        Next::Wait(d) => {
                            if let Err(stop) = ctx.sleep(d).await {
                                let out = if stop.kind() == ErrorKind::Cancelled {
                                    stop
                                } else {
                                    e
                                };
                                return Err(out.with_attempts(attempts));
                            }
                            last = Some(e);
                        }
                    }
                }
            }
        }
    }
}

#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Retry<M> {
    inner_model!(inner: M);

    /// Deliberately `None`: a later attempt may succeed where this one would be refused.
    fn decorated_refusal(&self, _ctx: &Context) -> Option<Error> {
        None
    }

    /// Always: every attempt at an inner model that does not bound itself is raced against
    /// the deadline and cancellation here, backoff sleeps end at both, and so does each event of
    /// the stream it returns. So no outer timer needs to drop a retry mid-way — which would
    /// lose the attempts it made: a `DeadlineExceeded` from a retry carries every attempt of
    /// the link it cut.
    fn decorated_bounds_itself(&self) -> bool {
        true
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let (mut resp, mut attempts, latency) = self
            .run(self.inner.id(), self.inner.bounds_itself(), ctx, || {
                self.inner.chat(req, ctx)
            })
            .await?;
        if resp.provenance.attempts.is_empty() {
            let id = self.inner.id();
            attempts.push(Attempt::success(id.name.clone(), id.model.clone(), latency));
        } else if attempts.is_empty() {
            // Served at the first attempt: the inner record stands as it is.
            return Ok(resp);
        } else {
            attempts.append(&mut resp.provenance.attempts);
        }
        resp.provenance.attempts = attempts;
        Ok(resp)
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let (stream, mut attempts, latency) = self
            .run(self.inner.id(), self.inner.bounds_itself(), ctx, || async {
                open_to_first_content(self.inner.stream(req, ctx).await?).await
            })
            .await?;
        let stream = if self.inner.bounds_itself() {
            stream
        } else {
            bounded_by(stream, ctx)
        };
        if attempts.is_empty() {
            return Ok(stream);
        }
        // Retries happened: tell the consumer (a chain reads it) about every attempt.
        let id = self.inner.id();
        attempts.push(Attempt::success(id.name.clone(), id.model.clone(), latency));
        let mut provenance = Provenance::default();
        provenance.served_by = Some(id.name.clone());
        provenance.attempts = attempts;
        Ok(crate::stream_util::led_by(provenance, stream))
    }
}

/// Retries an embedding model's calls under the same policy, with every attempt in
/// [`EmbeddingResponse::attempts`] (and a failure's in [`Error::attempts`]).
#[async_trait]
impl<M: EmbeddingModel> EmbeddingModel for Retry<M> {
    inner_embedding_model!(inner);

    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse> {
        let id = self.inner.embedding_id();
        let (mut resp, mut attempts, latency) = self
            .run(id, false, ctx, || self.inner.embed(req, ctx))
            .await?;
        if resp.attempts.is_empty() {
            attempts.push(Attempt::success(id.name.clone(), id.model.clone(), latency));
        } else {
            attempts.append(&mut resp.attempts);
        }
        resp.attempts = attempts;
        Ok(resp)
    }
}
