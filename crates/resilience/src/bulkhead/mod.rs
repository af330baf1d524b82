//! A bound on the calls in flight to one link, with a priority queue in front of it.
//!
//! Vendors limit concurrent requests per key, and a link that slows down should not soak up
//! every task of the application. The bulkhead lets `max_in_flight` calls through; the rest
//! wait in a queue of at most `max_queue` entries, served by [`Priority`] class (from
//! [`Context::priority`]) and first-in-first-out within a class. A slot is held until the call
//! returns — for a stream, until the stream ends or is dropped.
//!
//! A queued call waits at most `max_queue_wait` (default 1 s), and never so long that less than
//! the context's [`min_attempt`](Context::min_attempt) would be left of its deadline for the
//! call itself. When that allowance is gone before it starts, or the slots' average hold time
//! says the wait would outlast it, the call is refused at once. Every refusal — a full queue, a
//! wait that would pass the deadline, a wait that ran out — is `BudgetExhausted` with a
//! `retry_after` of the average slot hold time: a local refusal ([`ripcord_core::Fault::Local`])
//! the chain falls past to its next link, and that no breaker or health record counts. A full
//! bulkhead says nothing about the vendor behind it.
//!
//! Per-tenant token budgets live beside it, in [`crate::budget`].

mod policy;
mod queue;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use futures::StreamExt;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Fault, Priority,
    Result,
};
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

pub use policy::{BulkheadPolicy, BulkheadPolicyBuilder, DEFAULT_MAX_QUEUE_WAIT};
use queue::{Entry, Pool, Refused, Slot};

use crate::error::tag;

/// A model behind a bulkhead.
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_resilience::{BulkheadPolicy, ChatModelExt};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let model = ScriptedModel::new("primary")
///     .with_bulkhead(BulkheadPolicy::builder().max_in_flight(8).max_queue(64).build().unwrap());
/// model.chat(&ChatRequest::user("hi"), &Context::new()).await.unwrap();
/// assert_eq!(model.snapshot().in_flight, 0);
/// # }
/// ```
#[derive(Debug)]
pub struct Bulkhead<M> {
    inner: M,
    policy: BulkheadPolicy,
    pool: Arc<Pool>,
}

/// A point-in-time view of a bulkhead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BulkheadSnapshot {
    /// Calls in flight.
    pub in_flight: usize,
    /// Calls waiting.
    pub queued: usize,
    /// The bound on calls in flight.
    pub max_in_flight: usize,
    /// Calls refused because the queue was full or the queue wait ran out.
    pub rejected: u64,
}

impl<M: ChatModel> Bulkhead<M> {
    /// Wraps `inner` with a fresh bulkhead.
    pub fn new(inner: M, policy: BulkheadPolicy) -> Self {
        let pool = Arc::new(Pool::new(policy.max_in_flight, policy.max_queue));
        Bulkhead {
            inner,
            policy,
            pool,
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

    /// A snapshot of the bulkhead.
    pub fn snapshot(&self) -> BulkheadSnapshot {
        BulkheadSnapshot {
            in_flight: self.pool.in_flight(),
            queued: self.pool.queued(),
            max_in_flight: self.policy.max_in_flight,
            rejected: self.pool.rejected.load(Ordering::Relaxed),
        }
    }

    fn refusal(&self, message: &'static str) -> Error {
        let hint = self.pool.retry_hint();
        tag(
            Error::new(ErrorKind::BudgetExhausted, message)
                .with_retry_after(hint)
                .with_fault(Fault::Local),
            self.inner.id(),
        )
    }

    /// Takes a slot, queueing by priority within the deadline.
    async fn enter(&self, ctx: &Context) -> Result<Slot> {
        ctx.check().map_err(|e| tag(e, self.inner.id()))?;
        let priority: Priority = ctx.priority();
        let waiter = match self.pool.try_enter(priority) {
            Ok(Entry::Slot(slot)) => return Ok(slot),
            Ok(Entry::Queued(w)) => w,
            Err(Refused::QueueFull) => {
                return Err(self.refusal("the bulkhead's queue is full"));
            }
        };
        // The wait may use the deadline only down to what the call itself needs.
        let now = Instant::now();
        let by_deadline = ctx.deadline().map(|d| {
            let keep = ctx.min_attempt().unwrap_or(Duration::ZERO);
            d.checked_sub(keep).unwrap_or(now).max(now)
        });
        let max_wait = self.policy.max_queue_wait.map(|d| now + d);
        let limit = match (by_deadline, max_wait) {
            (Some(d), Some(w)) => Some(d.min(w)),
            (d, w) => d.or(w),
        };
        if let Some(at) = limit {
            let allowance = at.saturating_duration_since(now);
            let expected = self.pool.expected_wait(self.policy.max_in_flight);
            if allowance.is_zero() || expected.is_some_and(|w| w > allowance) {
                drop(waiter);
                self.pool.rejected.fetch_add(1, Ordering::Relaxed);
                return Err(self.refusal(
                    "the bulkhead's queue wait would pass the deadline; refused at once",
                ));
            }
        }
        let granted = waiter.granted();
        let timed = async {
            match limit {
                Some(at) => tokio::time::timeout_at(at, granted).await.ok(),
                None => Some(granted.await),
            }
        };
        let outcome = tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => return Err(tag(Error::cancelled(), self.inner.id())),
            s = timed => s,
        };
        match outcome {
            Some(slot) => Ok(slot),
            None => {
                self.pool.rejected.fetch_add(1, Ordering::Relaxed);
                Err(self.refusal("the queue wait in the bulkhead ran out"))
            }
        }
    }
}

#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Bulkhead<M> {
    // `bounds_itself` forwards to this model: its queue wait ends at the deadline or on cancellation.
    inner_model!(inner: M);

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let _slot = self.enter(ctx).await?;
        self.inner.chat(req, ctx).await
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let slot = self.enter(ctx).await?;
        let stream = self.inner.stream(req, ctx).await?;
        // The slot is held until the stream ends or is dropped.
        let mut slot = Some(slot);
        Ok(Box::pin(stream.inspect(move |item| {
            if matches!(item, Err(_) | Ok(ripcord_core::StreamEvent::Finish { .. })) {
                slot.take();
            }
        })))
    }
}
