//! Rate limits per link: requests per minute and tokens per minute.
//!
//! # One policy, two stores
//!
//! [`RateLimit`] is the only limiter policy in the workspace. Its buckets live in a
//! [`LimitStore`] ([`store`](LimitStore) module docs): [`LocalLimitStore`] (on `governor`, the
//! default) keeps them in this process; `ripcord-redis` supplies a store that shares them
//! across replicas ([`RateLimit::with_store`]), so waiting, refusals, pauses and charging are
//! the same code whichever store holds the buckets.
//!
//! # Behaviour
//!
//! - Before a call the limiter reserves the request's tokens (TPM): the prompt estimate
//!   ([`ripcord_core::tokens::estimate_request`]) plus `max_tokens` (or the model's largest
//!   output when the request sets none); only once they fit does it take the request cell
//!   (RPM), which cannot be given back — so a call refused for tokens never burns a request.
//! - When a bucket is empty the call waits for it — if the wait fits `max_wait` and leaves the
//!   call its least useful budget ([`Context::min_attempt`]) before the deadline. Otherwise it
//!   returns [`ErrorKind::LocalRateLimited`] at once, without calling the vendor, with
//!   `retry_after` set to when capacity returns, so the chain moves on. A local refusal never
//!   counts against the link's breaker or health.
//! - Callers that must wait are served first come, first served: a large request at the head
//!   of the line is not starved by small ones that would each fit sooner.
//! - A vendor 429 pauses the link's limiter for its retry-after, or for `default_pause` when it
//!   names none: later calls wait (or are refused) locally instead of hitting the vendor again.
//!
//! # What a call is charged
//!
//! What the vendor charges: a successful call its reported usage, or — when the vendor reports
//! none — the estimate (prompt plus what was generated); a stream that ends, fails or is dropped
//! after content the same; a failed call one request, plus the prompt estimate when the vendor
//! may have processed it ([`Error::maybe_processed`]); a call refused locally nothing.
//!
//! # Why the reconciliation counter
//!
//! `governor` cannot refund cells, but the real token count is only known after the call. So
//! the reservation is reconciled through a separate balance: a call that used fewer tokens than
//! it reserved leaves a credit that shrinks the next reservations, one that used more leaves a
//! debt that grows them. Over a window the bucket is charged what the vendor reported. A failed
//! call is assumed to have used no tokens (vendors do not bill refused requests). The bucket's
//! burst defaults to the full TPM, so any single request fits; a reservation larger than the
//! burst is clamped to it (the remainder becomes debt), never refused forever.
//!
//! Time comes from the crate's [`Clock`](crate::Clock), adapted to `governor`'s clock trait;
//! waits are tokio sleeps. Neither `governor`'s own clock nor its `futures-timer` sleeps are used,
//! so paused-time tests drive the limiter.

mod policy;
mod store;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, ModelId, Result,
    Usage, tokens,
};
use serde::Serialize;

pub use policy::{DEFAULT_429_PAUSE, RateLimitPolicy, RateLimitPolicyBuilder};
pub use store::{LimitKind, LimitStore, LocalLimitStore, Take, Taken};

use crate::clock::SharedClock;
use crate::error::tag;
use crate::stream_util::{End, Settle, Tallied, Tally};
use crate::window::Window;

/// A model behind local RPM / TPM limits.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// use ripcord_resilience::{ChatModelExt, RateLimitPolicy};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let model = ScriptedModel::new("primary")
///     .with_rate_limit(RateLimitPolicy::builder().rpm(1).build().unwrap());
/// let req = ChatRequest::user("hi");
/// model.chat(&req, &Context::new()).await.unwrap();
/// // The next cell comes in 60 s; a 5 s deadline cannot wait for it.
/// let err = model.chat(&req, &Context::new().with_timeout(Duration::from_secs(5))).await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::LocalRateLimited);
/// assert_eq!(err.retry_after(), Some(Duration::from_secs(60)));
/// # }
/// ```
#[derive(Debug)]
pub struct RateLimit<M> {
    inner: M,
    policy: RateLimitPolicy,
    state: Arc<LimitState>,
}

/// The policy's own state; the buckets are in the store.
#[derive(Debug)]
struct LimitState {
    clock: SharedClock,
    store: Arc<dyn LimitStore>,
    /// Whether the TPM is limited (a request reserves tokens only then).
    tpm: bool,
    refused: AtomicU64,
    used: Mutex<Window>,
    /// The line of callers waiting for capacity (tokio's mutex serves waiters in order).
    line: tokio::sync::Mutex<()>,
}

/// A point-in-time view of a link's limiter.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RateLimitSnapshot {
    /// Requests per minute, if limited.
    pub rpm: Option<u32>,
    /// Tokens per minute, if limited.
    pub tpm: Option<u32>,
    /// While paused by a vendor 429: milliseconds left.
    pub paused_remaining_ms: Option<f64>,
    /// Tokens the vendor reported over the last minute.
    pub tokens_last_minute: i64,
    /// The reconciliation balance: positive tokens still owed to the bucket, negative credit.
    pub balance: i64,
    /// Calls refused with `LocalRateLimited`.
    pub refused: u64,
}

/// A reservation taken before a call.
#[derive(Debug, Clone, Copy)]
struct Reservation {
    /// The request's nominal tokens (estimate + max_tokens).
    nominal: u32,
    /// The prompt estimate alone.
    prompt: u32,
}

impl Reservation {
    /// What a successful call (or a stream that generated `text_tokens`) is charged: the
    /// vendor's count, or the estimate when it reported none.
    fn used(&self, usage: Option<&Usage>, text_tokens: u32) -> u64 {
        match usage.map(Usage::total_tokens) {
            Some(n) if n > 0 => n,
            _ => u64::from(self.prompt) + u64::from(text_tokens),
        }
    }

    /// What a call that failed before any content is charged: the prompt, when the vendor may
    /// have processed it; nothing when it cannot have.
    fn failed(&self, e: &Error) -> u64 {
        if e.maybe_processed() {
            u64::from(self.prompt)
        } else {
            0
        }
    }
}

impl LimitState {
    /// After the call: the vendor's count replaces the reservation.
    fn settle(&self, r: Reservation, used: u64) {
        let used = i64::try_from(used).unwrap_or(i64::MAX);
        if self.tpm {
            self.store.settle(used - i64::from(r.nominal));
        }
        if used > 0
            && let Ok(mut w) = self.used.lock()
        {
            w.add(self.clock.now(), 0, used);
        }
    }
}

impl<M: ChatModel> RateLimit<M> {
    /// Wraps `inner` with fresh buckets in this process.
    pub fn new(inner: M, policy: RateLimitPolicy) -> Self {
        let store = Arc::new(LocalLimitStore::new(&policy));
        RateLimit::with_store(inner, policy, store)
    }

    /// Wraps `inner` with a limiter whose buckets live in `store` (a shared store from
    /// `ripcord-redis`, say). `policy` decides the policy: what a call reserves, how long it may
    /// wait, what pauses the link and what a call is charged.
    pub fn with_store(inner: M, policy: RateLimitPolicy, store: Arc<dyn LimitStore>) -> Self {
        let state = Arc::new(LimitState {
            clock: policy.clock.clone(),
            store,
            tpm: policy.tpm.is_some(),
            refused: AtomicU64::new(0),
            used: Mutex::new(Window::new(policy.clock.now(), Duration::from_secs(60), 12)),
            line: tokio::sync::Mutex::new(()),
        });
        RateLimit {
            inner,
            policy,
            state,
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

    /// A snapshot of the limiter.
    pub fn snapshot(&self) -> RateLimitSnapshot {
        let s = &self.state;
        let tokens_last_minute = s.used.lock().map(|w| w.sum(s.clock.now(), 0)).unwrap_or(0);
        RateLimitSnapshot {
            rpm: self.policy.rpm(),
            tpm: self.policy.tpm(),
            paused_remaining_ms: s.store.paused_for().map(|d| d.as_secs_f64() * 1000.0),
            tokens_last_minute,
            balance: s.store.balance(),
            refused: s.refused.load(Ordering::Relaxed),
        }
    }

    fn reservation(&self, req: &ChatRequest) -> Reservation {
        if !self.state.tpm {
            return Reservation {
                nominal: 0,
                prompt: 0,
            };
        }
        let output = req
            .max_tokens
            .unwrap_or(self.inner.capabilities().max_output_tokens);
        let prompt = tokens::estimate_request(req);
        Reservation {
            nominal: prompt.saturating_add(output),
            prompt,
        }
    }

    fn refuse(&self, wait: Duration, why: &str) -> Error {
        self.state.refused.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(ripcord.link = %self.inner.id().name, wait_ms = wait.as_millis() as u64, why, message = ripcord_core::telemetry::event::RATE_LIMITED_LOCALLY);
        tag(
            Error::new(
                ErrorKind::LocalRateLimited,
                format!(
                    "local {why} limit reached; capacity returns in {} ms",
                    wait.as_millis()
                ),
            )
            .with_retry_after(wait),
            self.inner.id(),
        )
    }

    /// The instant a wait for capacity must end by: `max_wait` from `start`, and early enough to
    /// leave the call its least useful budget before the deadline.
    fn wait_limit(&self, ctx: &Context, start: tokio::time::Instant) -> tokio::time::Instant {
        let own = start + self.policy.max_wait;
        match ctx.deadline() {
            Some(d) => {
                let keep = ctx.min_attempt().unwrap_or(Duration::ZERO);
                own.min(d.checked_sub(keep).unwrap_or(start))
            }
            None => own,
        }
    }

    /// Takes capacity for one call, waiting (first come, first served) when the deadline and
    /// `max_wait` allow.
    async fn acquire(&self, req: &ChatRequest, ctx: &Context) -> Result<Reservation> {
        let s = &self.state;
        let reservation = self.reservation(req);
        let start = tokio::time::Instant::now();
        let limit_at = self.wait_limit(ctx, start);
        // The uncontended path takes its turn at once; a caller that finds others waiting
        // queues behind them, within its wait limit.
        let _turn = match s.line.try_lock() {
            Ok(turn) => turn,
            Err(_) => {
                let queued = async {
                    tokio::select! {
                        biased;
                        () = ctx.cancellation().cancelled() => None,
                        t = s.line.lock() => Some(t),
                    }
                };
                match tokio::time::timeout_at(limit_at, queued).await {
                    Ok(Some(turn)) => turn,
                    Ok(None) => return Err(tag(Error::cancelled(), self.inner.id())),
                    Err(_) => {
                        let wait = limit_at
                            .saturating_duration_since(start)
                            .max(Duration::from_millis(1));
                        return Err(self.refuse(wait, "queued behind earlier callers"));
                    }
                }
            }
        };
        let mut tpm_taken = !s.tpm || reservation.nominal == 0;
        loop {
            let take = Take {
                tokens: if tpm_taken { 0 } else { reservation.nominal },
                request: true,
            };
            let taken = match s.store.try_take(take) {
                Taken::Ask => s.store.take(take).await,
                t => t,
            };
            let (wait, limit) = match taken {
                Taken::All | Taken::Ask => return Ok(reservation),
                Taken::Wait {
                    after,
                    limit,
                    tokens_taken,
                } => {
                    tpm_taken |= tokens_taken;
                    (after, limit)
                }
            };
            let wait = wait.max(Duration::from_micros(1));
            if tokio::time::Instant::now() + wait > limit_at {
                if tpm_taken && s.tpm {
                    // The tokens were taken but the call will not be made: credit them back.
                    s.settle(reservation, 0);
                }
                return Err(self.refuse(wait, limit.as_str()));
            }
            ctx.sleep(wait).await.map_err(|e| {
                if tpm_taken && s.tpm {
                    s.settle(reservation, 0);
                }
                let e = if e.kind() == ErrorKind::DeadlineExceeded {
                    e.with_fault(ripcord_core::Fault::Local)
                } else {
                    e
                };
                tag(e, self.inner.id())
            })?;
        }
    }

    /// After a failure: a vendor 429 pauses the link.
    fn on_error(&self, e: &Error) {
        pause_after(&self.state, &self.policy, self.inner.id(), e);
    }
}

/// A vendor 429 pauses the link: for its retry-after, or the default pause when it names none.
fn pause_after(state: &LimitState, policy: &RateLimitPolicy, id: &ModelId, e: &Error) {
    if policy.pause_on_429 && e.kind() == ErrorKind::RateLimited {
        let d = e
            .retry_after()
            .unwrap_or(policy.default_pause)
            .min(policy.max_pause);
        tracing::info!(ripcord.link = %id.name, pause_ms = d.as_millis() as u64, message = ripcord_core::telemetry::event::RATE_LIMIT_PAUSED);
        state.store.pause(d);
    }
}

/// The tally's estimate of generated tokens, in the limiter's `u32` (saturating).
fn generated(t: &Tally) -> u32 {
    u32::try_from(t.generated).unwrap_or(u32::MAX)
}

/// Settles a stream's reservation when it ends.
struct LimitSettlement {
    state: Arc<LimitState>,
    policy: RateLimitPolicy,
    id: ModelId,
    reservation: Reservation,
}

impl Settle for LimitSettlement {
    fn settle(&mut self, t: &Tally, end: End<'_>) {
        let r = self.reservation;
        let used = match end {
            End::Failed(e) => {
                pause_after(&self.state, &self.policy, &self.id, e);
                if t.content || t.usage.is_some() {
                    r.used(t.usage.as_ref(), generated(t))
                } else {
                    r.failed(e)
                }
            }
            // Finished, or abandoned mid-stream (the vendor generated up to the drop): what
            // it reported, else the estimate of what it generated.
            End::Finished | End::Dropped => r.used(t.usage.as_ref(), generated(t)),
        };
        self.state.settle(r, used);
    }
}

// `bounds_itself` forwards (the default): the waits for permits end at the deadline or on
// cancellation. `refusal` is a documented exception of `Decorator`: a wait for capacity could
// outlast an inner breaker's open spell, so the inner refusal may not be this call's outcome.
#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for RateLimit<M> {
    inner_model!(inner: M);

    fn decorated_refusal(&self, _ctx: &Context) -> Option<Error> {
        None
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let reservation = self.acquire(req, ctx).await?;
        match self.inner.chat(req, ctx).await {
            Ok(resp) => {
                let text = tokens::estimate_text(&resp.content);
                self.state
                    .settle(reservation, reservation.used(Some(&resp.usage), text));
                Ok(resp)
            }
            Err(e) => {
                self.on_error(&e);
                self.state.settle(reservation, reservation.failed(&e));
                Err(e)
            }
        }
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let reservation = self.acquire(req, ctx).await?;
        match self.inner.stream(req, ctx).await {
            Ok(stream) => Ok(Tallied::boxed(
                stream,
                LimitSettlement {
                    state: self.state.clone(),
                    policy: self.policy.clone(),
                    id: self.inner.id().clone(),
                    reservation,
                },
            )),
            Err(e) => {
                self.on_error(&e);
                self.state.settle(reservation, reservation.failed(&e));
                Err(e)
            }
        }
    }
}
