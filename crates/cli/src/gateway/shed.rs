//! Load shedding: per route, at most `max_concurrency` chat calls run and at most `max_queue`
//! wait; the next caller is refused at once (503 + `Retry-After`) instead of queueing.
//!
//! Why at the door: a call refused here never reaches the chain, so it touches no breaker,
//! no rate limiter and no budget; an overloaded gateway must not make healthy vendors look
//! broken or charge tenants for answers nobody got. A queued caller waits at most until its
//! deadline, then is refused the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a shed client is told to wait before trying again.
pub(crate) const SHED_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The admission gate of one route.
#[derive(Debug)]
pub(crate) struct Admission {
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_queue: usize,
}

/// Why a call was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shed {
    /// Every slot busy and the queue full.
    QueueFull,
    /// Queued, but no slot came free before the call's deadline.
    Deadline,
}

/// A queued caller; leaving the queue (admitted, timed out or gone) decrements it.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Admission {
    pub(crate) fn new(max_concurrency: usize, max_queue: usize) -> Self {
        Admission {
            slots: Arc::new(Semaphore::new(max_concurrency.max(1))),
            waiting: AtomicUsize::new(0),
            max_queue,
        }
    }

    /// A slot for one call, waiting in the queue at most `wait`.
    ///
    /// # Errors
    ///
    /// [`Shed`] when the call must be refused.
    pub(crate) async fn admit(&self, wait: Duration) -> Result<OwnedSemaphorePermit, Shed> {
        if let Ok(p) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(p);
        }
        // Join the queue only if there is room (checked and taken in one step).
        let joined = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_queue).then_some(n + 1)
            });
        if joined.is_err() {
            return Err(Shed::QueueFull);
        }
        let _queued = Waiting(&self.waiting);
        match tokio::time::timeout(wait, Arc::clone(&self.slots).acquire_owned()).await {
            Ok(Ok(p)) => Ok(p),
            _ => Err(Shed::Deadline),
        }
    }

    /// Calls waiting for a slot now.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// `resp` with its body holding `slot` until the body is finished or dropped (a stream holds
/// its slot until its last event).
pub(crate) fn hold(resp: Response, slot: OwnedSemaphorePermit) -> Response {
    resp.map(|inner| Body::new(Held { inner, _slot: slot }))
}

/// A body that keeps an admission slot.
struct Held {
    inner: Body,
    _slot: OwnedSemaphorePermit,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn beyond_concurrency_and_queue_callers_are_refused_at_once() {
        let gate = Arc::new(Admission::new(2, 2));
        let a = gate.admit(Duration::from_secs(5)).await.unwrap();
        let _b = gate.admit(Duration::from_secs(5)).await.unwrap();
        // Two queue.
        let g1 = Arc::clone(&gate);
        let q1 = tokio::spawn(async move { g1.admit(Duration::from_secs(5)).await.ok() });
        let g2 = Arc::clone(&gate);
        let q2 = tokio::spawn(async move { g2.admit(Duration::from_secs(5)).await.ok() });
        while gate.queued() < 2 {
            tokio::task::yield_now().await;
        }
        // The fifth is refused without waiting (no time passes).
        let before = tokio::time::Instant::now();
        assert_eq!(
            gate.admit(Duration::from_secs(5)).await.unwrap_err(),
            Shed::QueueFull
        );
        assert_eq!(before.elapsed(), Duration::ZERO);
        // A slot frees: one queued caller gets it (and keeps it); the other times out at its
        // deadline.
        drop(a);
        let (r1, r2) = (q1.await.unwrap(), q2.await.unwrap());
        assert!(
            r1.is_some() ^ r2.is_some(),
            "exactly one queued caller is admitted"
        );
        assert_eq!(gate.queued(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_caller_leaves_at_its_deadline() {
        let gate = Admission::new(1, 4);
        let _held = gate.admit(Duration::from_secs(1)).await.unwrap();
        let start = tokio::time::Instant::now();
        assert_eq!(
            gate.admit(Duration::from_millis(300)).await.unwrap_err(),
            Shed::Deadline
        );
        assert_eq!(start.elapsed(), Duration::from_millis(300));
        assert_eq!(gate.queued(), 0);
    }
}
