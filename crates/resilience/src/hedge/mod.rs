//! Hedged calls: when the primary is slow, race a second model; the first success wins.
//!
//! After the hedge delay (fixed, or the primary's observed p95) the hedge model is called too.
//! The first *success* wins and the other call is cancelled (its future is dropped, which
//! aborts its HTTP request). A failure of one side waits for the other; if both fail, the
//! primary's error is returned carrying both attempts. A primary that finishes — or fails —
//! before the delay is returned as it is (the chain handles its failure).
//!
//! Requests that are not retry-safe ([`Context::retry_safe`]) are never hedged: a hedge sends
//! the request twice. Streams race to their first content event; the loser is dropped.
//!
//! Provenance records both calls: the loser as a `cancelled` (or failed) attempt, the winner
//! last; an answer won by a hedge of a different model is marked degraded.
//!
//! # The p95 sees slow calls too
//!
//! When the hedge wins, the primary's call is cancelled, so its latency is never seen — only
//! that it was at least as long as the race. Keeping only the primary's completed calls would
//! make its p95 look better the more often it is slow (survivorship), and the hedge would
//! start ever earlier. So a hedge win records a *censored* sample for the primary: the time
//! it had run when it was cancelled, a lower bound of its latency.
//!
//! # Budget
//!
//! Hedges spend extra calls; at most [`HedgePolicyBuilder::max_extra_percent`](crate::HedgePolicyBuilder::max_extra_percent)
//! of the primary's calls (10% by default). Past the budget a slow primary runs alone.

mod policy;

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::{
    Attempt, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ModelId, Provenance,
    Result,
};
use tokio::time::Instant;

pub use policy::{HedgeDelay, HedgePolicy, HedgePolicyBuilder};

use crate::error::tag;
use crate::stream_util::open_to_first_content;

const SAMPLES: usize = 128;

/// A primary model raced, when slow, by a hedge model.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_resilience::{ChatModelExt, HedgeDelay, HedgePolicy};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let slow = ScriptedModel::new("primary").reply_after("slow", Duration::from_secs(5));
/// let fast = ScriptedModel::new("backup").reply_after("fast", Duration::from_millis(100));
/// let policy = HedgePolicy::builder().delay(HedgeDelay::Fixed(Duration::from_millis(500))).build().unwrap();
/// let hedged = slow.with_hedge(fast, policy);
/// let resp = hedged.chat(&ChatRequest::user("hi"), &Context::new()).await.unwrap();
/// assert_eq!(resp.text(), "fast");
/// assert_eq!(resp.served_by(), "backup");
/// # }
/// ```
#[derive(Debug)]
pub struct Hedge<P, H> {
    primary: P,
    hedge: H,
    policy: HedgePolicy,
    samples: Mutex<VecDeque<Duration>>,
    calls: AtomicU64,
    started: AtomicU64,
    won: AtomicU64,
}

/// Which side finished.
enum Won<T> {
    Primary(T),
    Hedge(T),
}

impl<P: ChatModel, H: ChatModel> Hedge<P, H> {
    /// Races `hedge` against `primary` by the policy's rules.
    pub fn new(primary: P, hedge: H, policy: HedgePolicy) -> Self {
        Hedge {
            primary,
            hedge,
            policy,
            samples: Mutex::new(VecDeque::with_capacity(SAMPLES)),
            calls: AtomicU64::new(0),
            started: AtomicU64::new(0),
            won: AtomicU64::new(0),
        }
    }

    /// The primary model.
    pub fn get_ref(&self) -> &P {
        &self.primary
    }

    /// The primary model, mutably.
    pub fn get_mut(&mut self) -> &mut P {
        &mut self.primary
    }

    /// The hedge model.
    pub fn hedge_ref(&self) -> &H {
        &self.hedge
    }

    /// Unwraps both models.
    pub fn into_inner(self) -> (P, H) {
        (self.primary, self.hedge)
    }

    /// Hedges started so far.
    pub fn hedges_started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// Calls the hedge won.
    pub fn hedges_won(&self) -> u64 {
        self.won.load(Ordering::Relaxed)
    }

    /// The current hedge delay.
    pub fn current_delay(&self) -> Duration {
        match self.policy.delay {
            HedgeDelay::Fixed(d) => d,
            HedgeDelay::P95 {
                initial,
                min_samples,
            } => {
                let Ok(samples) = self.samples.lock() else {
                    return initial;
                };
                if samples.len() < min_samples.max(1) {
                    return initial;
                }
                let mut sorted: Vec<Duration> = samples.iter().copied().collect();
                sorted.sort_unstable();
                let rank = (sorted.len() * 95).div_ceil(100).saturating_sub(1);
                sorted.get(rank).copied().unwrap_or(initial)
            }
        }
    }

    fn observe(&self, latency: Duration) {
        if let Ok(mut s) = self.samples.lock() {
            if s.len() == SAMPLES {
                s.pop_front();
            }
            s.push_back(latency);
        }
    }

    /// Runs the race. `P`'s and `H`'s futures produce a `T`; `Err`s wait for the other side.
    async fn race<T, F, G>(
        &self,
        ctx: &Context,
        primary: F,
        hedge: impl FnOnce() -> G,
    ) -> (Result<Won<T>>, Vec<Attempt>)
    where
        F: std::future::Future<Output = Result<T>>,
        G: std::future::Future<Output = Result<T>>,
    {
        let start = Instant::now();
        tokio::pin!(primary);
        if !ctx.retry_safe() {
            let r = primary.await;
            if r.is_ok() {
                self.observe(start.elapsed());
            }
            return (r.map(Won::Primary), Vec::new());
        }
        let calls = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let delay = self.current_delay();
        tokio::select! {
            r = &mut primary => {
                if r.is_ok() {
                    self.observe(start.elapsed());
                }
                return (r.map(Won::Primary), Vec::new());
            }
            () = tokio::time::sleep(delay) => {}
        }
        // The budget: hedges started (this one included) stay within the allowed share.
        let allowed = 1 + calls.saturating_mul(u64::from(self.policy.max_extra_percent)) / 100;
        if self.started.load(Ordering::Relaxed) >= allowed {
            tracing::debug!(ripcord.link = %self.primary.id().name, message = ripcord_core::telemetry::event::HEDGE_BUDGET_SPENT);
            let r = primary.await;
            if r.is_ok() {
                self.observe(start.elapsed());
            }
            return (r.map(Won::Primary), Vec::new());
        }
        self.started.fetch_add(1, Ordering::Relaxed);
        let (p, h) = (self.primary.id(), self.hedge.id());
        tracing::info!(ripcord.link = %p.name, hedge = %h.name, delay_ms = delay.as_millis() as u64, message = ripcord_core::telemetry::event::HEDGE_STARTED);
        let hedge_start = Instant::now();
        let hedge = hedge();
        tokio::pin!(hedge);
        let mut primary_err: Option<Error> = None;
        let mut hedge_err: Option<Error> = None;
        let cancelled = Error::cancelled();
        let attempt = |id: &ModelId, e: &Error, since: Instant| {
            Attempt::failure(id.name.clone(), id.model.clone(), e, since.elapsed())
        };
        loop {
            tokio::select! {
                r = &mut primary, if primary_err.is_none() => match r {
                    Ok(v) => {
                        self.observe(start.elapsed());
                        let loser = attempt(h, hedge_err.as_ref().unwrap_or(&cancelled), hedge_start);
                        return (Ok(Won::Primary(v)), vec![loser]);
                    }
                    Err(e) => {
                        let e = tag(e, p);
                        if let Some(he) = hedge_err.take() {
                            return (Err(e), vec![attempt(h, &he, hedge_start)]);
                        }
                        primary_err = Some(e);
                    }
                },
                r = &mut hedge, if hedge_err.is_none() => match r {
                    Ok(v) => {
                        self.won.fetch_add(1, Ordering::Relaxed);
                        // A censored sample: the primary took at least this long.
                        if primary_err.is_none() {
                            self.observe(start.elapsed());
                        }
                        tracing::info!(ripcord.link = %p.name, hedge = %h.name, message = ripcord_core::telemetry::event::HEDGE_WON);
                        let loser = attempt(p, primary_err.as_ref().unwrap_or(&cancelled), start);
                        return (Ok(Won::Hedge(v)), vec![loser]);
                    }
                    Err(e) => {
                        let e = tag(e, h);
                        if let Some(pe) = primary_err.take() {
                            return (Err(pe), vec![attempt(h, &e, hedge_start)]);
                        }
                        hedge_err = Some(e);
                    }
                },
                else => {
                    let e = primary_err.take().or(hedge_err.take()).unwrap_or(cancelled);
                    return (Err(e), Vec::new());
                }
            }
        }
    }

    /// Provenance of the winner: the loser's attempt first, the winner's last.
    fn provenance(
        &self,
        mut prov: Provenance,
        hedge_won: bool,
        others: Vec<Attempt>,
        latency: Duration,
    ) -> Provenance {
        let id = if hedge_won {
            self.hedge.id()
        } else {
            self.primary.id()
        };
        if prov.attempts.is_empty() {
            prov.attempts
                .push(Attempt::success(id.name.clone(), id.model.clone(), latency));
        }
        if !others.is_empty() {
            let mut attempts = others;
            attempts.append(&mut prov.attempts);
            prov.attempts = attempts;
        }
        if hedge_won {
            prov.served_by.get_or_insert_with(|| id.name.clone());
            prov.degraded |= self.hedge.id().model != self.primary.id().model;
        }
        prov
    }
}

fn with_attempts(e: Error, mut before: Vec<Attempt>, id: &ModelId, latency: Duration) -> Error {
    if before.is_empty() {
        return e;
    }
    let mut own: Vec<Attempt> = e.attempts().to_vec();
    if own.is_empty() {
        own.push(Attempt::failure(
            id.name.clone(),
            id.model.clone(),
            &e,
            latency,
        ));
    }
    own.append(&mut before);
    e.with_attempts(own)
}

#[async_trait]
impl<P: ChatModel, H: ChatModel> ripcord_core::Decorator for Hedge<P, H> {
    inner_model!(primary: P);

    /// Deliberately `None`: the hedge model may serve while the primary refuses.
    fn decorated_refusal(&self, _ctx: &Context) -> Option<Error> {
        None
    }

    /// When both sides do: the race adds only the hedge delay, which ends with the primary.
    fn decorated_bounds_itself(&self) -> bool {
        self.primary.bounds_itself() && self.hedge.bounds_itself()
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let start = Instant::now();
        let (won, others) = self
            .race(ctx, self.primary.chat(req, ctx), || {
                self.hedge.chat(req, ctx)
            })
            .await;
        match won {
            Ok(Won::Primary(mut r)) => {
                r.provenance = self.provenance(
                    std::mem::take(&mut r.provenance),
                    false,
                    others,
                    start.elapsed(),
                );
                Ok(r)
            }
            Ok(Won::Hedge(mut r)) => {
                r.provenance = self.provenance(
                    std::mem::take(&mut r.provenance),
                    true,
                    others,
                    start.elapsed(),
                );
                Ok(r)
            }
            Err(e) => Err(with_attempts(e, others, self.primary.id(), start.elapsed())),
        }
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let start = Instant::now();
        let primary = async { open_to_first_content(self.primary.stream(req, ctx).await?).await };
        let (won, others) = self
            .race(ctx, primary, || async {
                open_to_first_content(self.hedge.stream(req, ctx).await?).await
            })
            .await;
        let (stream, hedge_won) = match won {
            Ok(Won::Primary(s)) => (s, false),
            Ok(Won::Hedge(s)) => (s, true),
            Err(e) => return Err(with_attempts(e, others, self.primary.id(), start.elapsed())),
        };
        if !hedge_won && others.is_empty() {
            return Ok(stream);
        }
        let prov = self.provenance(Provenance::default(), hedge_won, others, start.elapsed());
        Ok(crate::stream_util::led_by(prov, stream))
    }
}
