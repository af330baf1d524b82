//! The open breaker's background liveness probe.
//!
//! A breaker that waits for user traffic to test a recovered vendor re-admits it only when a
//! request happens to arrive after the open spell: with long spells, recovery depends on luck.
//! While a breaker is open, the [`Watch`] runs the link's cheap liveness check
//! ([`ChatModel::liveness`](ripcord_core::ChatModel::liveness): listing models, which spends no
//! tokens) every `background_probe` and, on an answer, moves the breaker to half-open at once
//! ([`BreakerStore::probe_succeeded`]). The next real call is then the half-open probe, under
//! its permit as always: a synthetic check never closes a breaker by itself, because a vendor
//! whose model list answers may still fail chat calls.
//!
//! A model list that answers while chat calls keep failing would re-admit the link every
//! interval, and each re-admission costs one failed call and a re-trip. So a re-admission that
//! ends straight back in open counts as a miss, and each miss doubles the wait before the next
//! check (up to 16 times the interval); the first close resets it.
//!
//! # Lifetime
//!
//! The task is started when the breaker opens (the first failure the breaker records while it
//! is open, from inside a call, so a runtime is there), ends when the breaker is no longer open
//! (its spell ran out, a check answered, or a call closed it), and is aborted when the breaker
//! is dropped: the [`Watch`] owns its handle. One task per breaker at most.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ripcord_core::{Context, ErrorKind, Liveness};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::listener::BreakerState;
use super::store::BreakerStore;

/// The owner of an open breaker's liveness task.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    task: Mutex<Option<JoinHandle<()>>>,
}

/// The most the wait between checks grows after misses (a factor of 2^4).
const MAX_MISSES: u32 = 4;

/// What the checks learned, shared by the breaker and its task.
#[derive(Debug, Default)]
pub(crate) struct Hints {
    /// Consecutive re-admissions by a check that ended straight back in open.
    misses: AtomicU32,
    /// The last re-admission came from a check and has not been judged yet.
    armed: AtomicBool,
    /// A task is checking: refusals need not look at the state to start one.
    active: AtomicBool,
}

impl Hints {
    /// The wait before the next check.
    pub(crate) fn interval(&self, every: Duration) -> Duration {
        let misses = self.misses.load(Ordering::Relaxed).min(MAX_MISSES);
        every.saturating_mul(1 << misses)
    }

    /// The breaker re-opened: a re-admission by a check that led here was a miss.
    pub(crate) fn reopened(&self) {
        if self.armed.swap(false, Ordering::Relaxed) {
            let m = self.misses.load(Ordering::Relaxed);
            self.misses
                .store((m + 1).min(MAX_MISSES), Ordering::Relaxed);
        }
    }

    /// Whether a task is checking now (one relaxed load: the refusal path asks it).
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Nothing learned yet (the usual case): a success has nothing to reset.
    pub(crate) fn is_fresh(&self) -> bool {
        !self.armed.load(Ordering::Relaxed) && self.misses.load(Ordering::Relaxed) == 0
    }

    /// The breaker closed: the checks start afresh.
    pub(crate) fn closed(&self) {
        self.armed.store(false, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
    }
}

/// What the task needs, all owned.
pub(crate) struct Probe {
    pub(crate) store: Arc<dyn BreakerStore>,
    pub(crate) check: Arc<dyn Liveness>,
    pub(crate) hints: Arc<Hints>,
    pub(crate) every: Duration,
    pub(crate) timeout: Duration,
}

impl Watch {
    /// Starts the task unless one is running; a no-op outside a tokio runtime.
    pub(crate) fn ensure(&self, probe: impl FnOnce() -> Probe) {
        let mut task = match self.task.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let probe = probe();
        probe.hints.active.store(true, Ordering::Relaxed);
        // Moved into the future now, so it clears the flag even if the task never runs.
        let active = Active(Arc::clone(&probe.hints));
        *task = Some(runtime.spawn(run(probe, active)));
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let task = match self.task.get_mut() {
            Ok(t) => t.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(t) = task {
            t.abort();
        }
    }
}

/// Clears the active flag however the task ends (returned or aborted).
struct Active(Arc<Hints>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.store(false, Ordering::Relaxed);
    }
}

async fn run(p: Probe, _active: Active) {
    loop {
        tokio::time::sleep(p.every).await;
        // Half-open (the spell ran out) or closed: real calls test the link from here.
        if p.store.state() != BreakerState::Open {
            return;
        }
        let started = Instant::now();
        let ctx = Context::new()
            .with_deadline(started + p.timeout)
            .with_intent("ripcord.breaker_probe");
        let result = match tokio::time::timeout(p.timeout, p.check.check(&ctx)).await {
            Ok(r) => r.map_err(|e| e.kind()),
            Err(_) => Err(ErrorKind::Timeout),
        };
        let up = result.is_ok();
        tracing::info!(
            ripcord.link = %p.store.link(),
            outcome = if up { "ok" } else { "error" },
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            error.type = result.err().map(ErrorKind::as_str),
            message = ripcord_core::telemetry::event::BREAKER_PROBE
        );
        if up {
            if p.store.probe_succeeded() {
                p.hints.armed.store(true, Ordering::Relaxed);
            }
            return;
        }
    }
}
