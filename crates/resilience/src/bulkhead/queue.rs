//! The bulkhead's slots and its priority queue.
//!
//! A released slot is handed directly to the best waiter — the highest priority class, the
//! earliest arrival within it — under the lock, so no newcomer can overtake the queue. A waiter
//! that gives up (deadline, cancellation, drop) removes itself; if a slot was handed to it in
//! the meantime, it passes the slot on.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ripcord_core::Priority;
use tokio::sync::oneshot;
use tokio::time::Instant;

type Key = (Reverse<Priority>, u64);

#[derive(Debug, Default)]
struct Slots {
    in_flight: usize,
    seq: u64,
    waiters: BTreeMap<Key, oneshot::Sender<()>>,
}

/// The shared state of one bulkhead.
#[derive(Debug)]
pub(crate) struct Pool {
    max_in_flight: usize,
    max_queue: usize,
    slots: Mutex<Slots>,
    /// EWMA of how long a slot is held, in nanos (0: no data yet).
    hold_ewma: AtomicU64,
    pub(crate) rejected: AtomicU64,
}

/// Why a slot was not granted.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The queue is full.
    QueueFull,
}

impl Pool {
    pub(crate) fn new(max_in_flight: usize, max_queue: usize) -> Self {
        Pool {
            max_in_flight,
            max_queue,
            slots: Mutex::new(Slots::default()),
            hold_ewma: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        match self.slots.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// A slot now, or a place in the queue.
    pub(crate) fn try_enter(self: &Arc<Self>, priority: Priority) -> Result<Entry, Refused> {
        let mut s = self.lock();
        if s.in_flight < self.max_in_flight && s.waiters.is_empty() {
            s.in_flight += 1;
            return Ok(Entry::Slot(Slot::new(self.clone())));
        }
        if s.waiters.len() >= self.max_queue {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::QueueFull);
        }
        s.seq += 1;
        let key = (Reverse(priority), s.seq);
        let (tx, rx) = oneshot::channel();
        s.waiters.insert(key, tx);
        Ok(Entry::Queued(Waiter {
            pool: self.clone(),
            key,
            rx: Some(rx),
        }))
    }

    /// Hands a freed slot to the best live waiter, or frees it.
    fn release(&self) {
        let mut s = self.lock();
        while let Some((_, tx)) = s.waiters.pop_first() {
            if tx.send(()).is_ok() {
                return;
            }
        }
        s.in_flight = s.in_flight.saturating_sub(1);
    }

    fn observe_hold(&self, held: Duration) {
        let x = u64::try_from(held.as_nanos()).unwrap_or(u64::MAX);
        let old = self.hold_ewma.load(Ordering::Relaxed);
        let new = if old == 0 { x } else { old - old / 5 + x / 5 };
        self.hold_ewma.store(new.max(1), Ordering::Relaxed);
    }

    /// A guess at when a slot frees up: the average hold time (100 ms before any data).
    pub(crate) fn retry_hint(&self) -> Duration {
        match self.hold_ewma.load(Ordering::Relaxed) {
            0 => Duration::from_millis(100),
            n => Duration::from_nanos(n).max(Duration::from_millis(1)),
        }
    }

    /// A guess at how long a newcomer at the back of the queue waits: the average hold time
    /// for each full round of `max_in_flight` callers ahead of it. `None` before any data.
    pub(crate) fn expected_wait(&self, max_in_flight: usize) -> Option<Duration> {
        let hold = match self.hold_ewma.load(Ordering::Relaxed) {
            0 => return None,
            n => Duration::from_nanos(n),
        };
        let ahead = self.queued().saturating_sub(1);
        let rounds = u32::try_from(ahead / max_in_flight.max(1) + 1).unwrap_or(u32::MAX);
        Some(hold.saturating_mul(rounds))
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    pub(crate) fn queued(&self) -> usize {
        self.lock().waiters.len()
    }
}

/// The result of asking for a slot.
#[derive(Debug)]
pub(crate) enum Entry {
    Slot(Slot),
    Queued(Waiter),
}

/// A held slot; released (handed on) when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    pool: Arc<Pool>,
    since: Instant,
}

impl Slot {
    fn new(pool: Arc<Pool>) -> Self {
        Slot {
            pool,
            since: Instant::now(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.pool.observe_hold(self.since.elapsed());
        self.pool.release();
    }
}

/// A place in the queue.
#[derive(Debug)]
pub(crate) struct Waiter {
    pool: Arc<Pool>,
    key: Key,
    rx: Option<oneshot::Receiver<()>>,
}

impl Waiter {
    /// Waits for the slot to be handed over.
    pub(crate) async fn granted(mut self) -> Slot {
        if let Some(rx) = self.rx.as_mut()
            && rx.await.is_ok()
        {
            self.rx = None;
            return Slot::new(self.pool.clone());
        }
        // The sender is gone without a slot (cannot happen: senders live in the queue until
        // they send). Wait forever rather than take a slot we were not given; the caller's
        // deadline ends the wait.
        std::future::pending::<Slot>().await
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        let removed = self.pool.lock().waiters.remove(&self.key).is_some();
        if !removed && rx.try_recv().is_ok() {
            // A slot was handed to us as we gave up: pass it on.
            self.pool.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn released_slots_go_to_the_best_waiter_and_abandoned_ones_pass_on() {
        let pool = Arc::new(Pool::new(1, 10));
        let Entry::Slot(first) = pool.try_enter(Priority::Normal).unwrap() else {
            panic!()
        };
        let Entry::Queued(low) = pool.try_enter(Priority::Low).unwrap() else {
            panic!()
        };
        let Entry::Queued(high) = pool.try_enter(Priority::High).unwrap() else {
            panic!()
        };
        assert_eq!(pool.queued(), 2);
        drop(first);
        // High was handed the slot; it gives up without taking it: the slot passes to Low.
        drop(high);
        let low_slot = low.granted().await;
        assert_eq!(pool.in_flight(), 1);
        drop(low_slot);
        assert_eq!(pool.in_flight(), 0);
        assert_eq!(pool.queued(), 0);
    }

    #[test]
    fn a_full_queue_refuses() {
        let pool = Arc::new(Pool::new(1, 1));
        let _a = pool.try_enter(Priority::Normal).unwrap();
        let _b = pool.try_enter(Priority::Normal).unwrap();
        assert!(matches!(
            pool.try_enter(Priority::Critical),
            Err(Refused::QueueFull)
        ));
        assert_eq!(pool.rejected.load(Ordering::Relaxed), 1);
    }
}
