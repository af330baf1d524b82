//! The breaker's state: `failsafe`'s state machine, and what ripcord wraps around it.
//!
//! # Who decides what
//!
//! `failsafe::StateMachine` decides the transitions: its failure policy (consecutive failures,
//! or our window policy through its `FailurePolicy` trait, or both with its `or_else`) says when
//! closed becomes open and for how long; it moves open → half-open, half-open → open on a failed
//! probe and half-open → closed (calling the policy's `revived`, which resets counts and the
//! open-duration sequence). We observe its transitions through its `Instrument` hook.
//!
//! ripcord wraps it where it cannot be driven the way we need:
//!
//! - **Time.** `failsafe` times the open state with `std::time::Instant` and its backoffs in
//!   whole seconds; tokio's paused clock cannot move it. The failure policy is
//!   wrapped so that `failsafe` opens for *zero* time while the real open duration (sub-second
//!   allowed) is kept here, on the crate's [`Clock`](crate::Clock), as a fresh open-until on
//!   every trip. Only once that has passed do we ask `failsafe` for permission,
//!   which then moves to half-open.
//! - **Probes.** `failsafe` admits every caller in half-open. A semaphore of
//!   `max_probes` permits gates half-open here; everyone else is refused with `CircuitOpen`.
//! - **Closing.** `failsafe` closes on the first success; we report a success to it only after
//!   `success_threshold` probes succeeded.
//! - **Per-kind policy.** Kinds that say nothing about the link are never reported; kinds that
//!   must trip at once (auth) make the wrapped policy report "dead" on that failure.
//! - **Late results.** An outcome is reported only if the breaker is still in the state (and
//!   epoch) in which the call was admitted: a slow call admitted before a trip cannot close
//!   the breaker from half-open.
//!
//! All calls into the state machine happen under one `std` mutex, never held across an await.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use failsafe::{FailurePolicy, Instrument, StateMachine};
use ripcord_core::ErrorKind;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::listener::{BreakerListener, BreakerSnapshot, BreakerState, Transition};
use super::store::Outcome;
use super::trip::KindAction;
use crate::clock::SharedClock;

const ON_OPEN: u8 = 0b001;
const ON_HALF_OPEN: u8 = 0b010;
const ON_CLOSED: u8 = 0b100;
const NONE: u64 = u64::MAX;

/// Signals between our wrapper and the policy / instrument living inside `failsafe`.
#[derive(Debug)]
struct Signals {
    events: AtomicU8,
    /// The real open duration the policy asked for at the last trip (nanos, NONE if none).
    delay: AtomicU64,
    /// A forced trip for at least this long on the next failure (nanos, NONE if none).
    force: AtomicU64,
}

fn to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(NONE - 1)
}

fn take(a: &AtomicU64) -> Option<Duration> {
    match a.swap(NONE, Ordering::SeqCst) {
        NONE => None,
        n => Some(Duration::from_nanos(n)),
    }
}

/// The user's failure policy, wrapped so that `failsafe` opens for zero time while the real
/// duration is handed to us.
struct Recording {
    inner: Box<dyn FailurePolicy + Send>,
    signals: Arc<Signals>,
}

impl FailurePolicy for Recording {
    fn record_success(&mut self) {
        self.inner.record_success();
    }

    fn mark_dead_on_failure(&mut self) -> Option<Duration> {
        let from_policy = self.inner.mark_dead_on_failure();
        let forced = take(&self.signals.force);
        let real = match (from_policy, forced) {
            (Some(p), Some(f)) => Some(p.max(f)),
            (p, f) => p.or(f),
        };
        let d = real?;
        self.signals.delay.store(to_nanos(d), Ordering::SeqCst);
        Some(Duration::ZERO)
    }

    fn revived(&mut self) {
        self.inner.revived();
    }
}

/// `failsafe`'s instrument hook: records which transitions happened.
struct Observer(Arc<Signals>);

impl Instrument for Observer {
    fn on_call_rejected(&self) {}
    fn on_open(&self) {
        self.0.events.fetch_or(ON_OPEN, Ordering::SeqCst);
    }
    fn on_half_open(&self) {
        self.0.events.fetch_or(ON_HALF_OPEN, Ordering::SeqCst);
    }
    fn on_closed(&self) {
        self.0.events.fetch_or(ON_CLOSED, Ordering::SeqCst);
    }
}

#[derive(Debug, Clone, Copy)]
enum Mirror {
    Closed,
    Open { until: Instant },
    HalfOpen { successes: u32 },
}

impl Mirror {
    fn state(self) -> BreakerState {
        match self {
            Mirror::Closed => BreakerState::Closed,
            Mirror::Open { .. } => BreakerState::Open,
            Mirror::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }
}

struct Locked {
    sm: StateMachine<Recording, Observer>,
    mirror: Mirror,
    epoch: u64,
    last_delay: Duration,
    last_failure: Option<ErrorKind>,
    history: VecDeque<Transition>,
}

/// Settings the core needs at run time.
#[derive(Debug, Clone)]
pub(crate) struct CoreSettings {
    pub(crate) success_threshold: u32,
    pub(crate) max_probes: usize,
    pub(crate) half_open_retry_hint: Duration,
    pub(crate) history: usize,
    pub(crate) first_delay: Duration,
}

/// A permission to call, tied to the state it was given in.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Admitted while closed.
    Closed { epoch: u64 },
    /// A half-open probe; the permit is released when the admission is dropped.
    Probe {
        epoch: u64,
        _permit: OwnedSemaphorePermit,
    },
}

impl Admission {
    pub(crate) fn is_probe(&self) -> bool {
        matches!(self, Admission::Probe { .. })
    }
}

/// The shared state of one breaker.
pub(crate) struct Core {
    link: Arc<str>,
    clock: SharedClock,
    settings: CoreSettings,
    listener: Arc<dyn BreakerListener>,
    probes: Arc<Semaphore>,
    signals: Arc<Signals>,
    created: Instant,
    locked: Mutex<Locked>,
    /// Whether the breaker was closed at its last transition: lets a caller learn that a
    /// closed breaker would admit without taking the lock. Written under the lock.
    closed: AtomicBool,
    trips: AtomicU64,
    rejected: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    ignored: AtomicU64,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("link", &self.link)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Core {
    pub(crate) fn new(
        link: Arc<str>,
        policy: Box<dyn FailurePolicy + Send>,
        settings: CoreSettings,
        clock: SharedClock,
        listener: Arc<dyn BreakerListener>,
    ) -> Self {
        let signals = Arc::new(Signals {
            events: AtomicU8::new(0),
            delay: AtomicU64::new(NONE),
            force: AtomicU64::new(NONE),
        });
        let sm = StateMachine::new(
            Recording {
                inner: policy,
                signals: signals.clone(),
            },
            Observer(signals.clone()),
        );
        signals.events.store(0, Ordering::SeqCst);
        let created = clock.now();
        Core {
            link,
            probes: Arc::new(Semaphore::new(settings.max_probes)),
            settings: settings.clone(),
            clock,
            listener,
            signals,
            created,
            locked: Mutex::new(Locked {
                sm,
                mirror: Mirror::Closed,
                epoch: 0,
                last_delay: settings.first_delay,
                last_failure: None,
                history: VecDeque::new(),
            }),
            closed: AtomicBool::new(true),
            trips: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            successes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            ignored: AtomicU64::new(0),
        }
    }

    pub(crate) fn link(&self) -> &Arc<str> {
        &self.link
    }

    fn lock(&self) -> MutexGuard<'_, Locked> {
        match self.locked.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn events(&self) -> u8 {
        self.signals.events.swap(0, Ordering::SeqCst)
    }

    /// Moves to half-open with no probe succeeded yet: a transition without an open time or
    /// a cause.
    fn enter_half_open(&self, l: &mut Locked, now: Instant) -> Transition {
        self.transition(l, Mirror::HalfOpen { successes: 0 }, now, None, None)
    }

    fn transition(
        &self,
        l: &mut Locked,
        to: Mirror,
        now: Instant,
        open_for: Option<Duration>,
        cause: Option<ErrorKind>,
    ) -> Transition {
        let from = l.mirror.state();
        l.mirror = to;
        self.closed
            .store(matches!(to, Mirror::Closed), Ordering::Release);
        l.epoch += 1;
        let t = Transition {
            link: self.link.clone(),
            from,
            to: to.state(),
            at: now,
            at_ms: now.saturating_duration_since(self.created).as_secs_f64() * 1000.0,
            open_for_ms: open_for.map(|d| d.as_secs_f64() * 1000.0),
            cause,
        };
        if l.history.len() >= self.settings.history.max(1) {
            l.history.pop_front();
        }
        l.history.push_back(t.clone());
        t
    }

    fn trip(&self, l: &mut Locked, now: Instant, cause: Option<ErrorKind>) -> Transition {
        let delay = take(&self.signals.delay).unwrap_or(l.last_delay);
        l.last_delay = delay;
        self.trips.fetch_add(1, Ordering::Relaxed);
        // A fresh open-until on every trip.
        self.transition(
            l,
            Mirror::Open { until: now + delay },
            now,
            Some(delay),
            cause,
        )
    }

    fn announce(&self, t: Option<Transition>) {
        if let Some(t) = t {
            tracing::info!(
                ripcord.link = %t.link,
                from = t.from.as_str(),
                to = t.to.as_str(),
                open_for_ms = t.open_for_ms,
                cause = t.cause.map(ErrorKind::as_str),
                message = ripcord_core::telemetry::event::BREAKER_TRANSITION
            );
            self.listener.on_transition(&t);
        }
    }

    /// Asks to call. `Err(retry_after)` when refused.
    pub(crate) fn admit(&self) -> Result<Admission, Duration> {
        let mut announced = None;
        let result = {
            let mut l = self.lock();
            match l.mirror {
                // The clock is read only when the state depends on it.
                Mirror::Closed => Ok(Admission::Closed { epoch: l.epoch }),
                Mirror::Open { until } => {
                    let now = self.clock.now();
                    if now < until {
                        Err((until - now, BreakerState::Open))
                    } else if l.sm.is_call_permitted() && self.events() & ON_HALF_OPEN != 0 {
                        announced = Some(self.enter_half_open(&mut l, now));
                        self.probe(&l)
                    } else {
                        // failsafe's std clock has not moved past its (zero-length) open state.
                        Err((Duration::from_millis(1), BreakerState::Open))
                    }
                }
                Mirror::HalfOpen { .. } => self.probe(&l),
            }
        };
        self.announce(announced);
        result.map_err(|(after, state)| self.rejected(after, state))
    }

    /// Counts an outcome without moving the state.
    pub(crate) fn count(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Success => &self.successes,
            Outcome::Failure { .. } => &self.failures,
            Outcome::Ignore => &self.ignored,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Outcome::Failure { kind, .. } = outcome {
            self.lock().last_failure = Some(kind);
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn open_remaining(&self) -> Option<Duration> {
        if self.is_closed() {
            return None;
        }
        match self.lock().mirror {
            Mirror::Open { until } => Some(until.saturating_duration_since(self.clock.now())),
            _ => None,
        }
    }

    /// Opens for `open_for` because the state moved elsewhere (a shared store). `failsafe` is
    /// driven to open too (a forced trip, as for `KindAction::TripFor`), so the local state
    /// machine stays consistent for when the store degrades to it.
    pub(crate) fn mirror_open(&self, open_for: Duration, cause: Option<ErrorKind>) {
        let now = self.clock.now();
        let announced = {
            let mut l = self.lock();
            match l.mirror {
                Mirror::Open { .. } => {
                    // A fresh open-until, as a re-trip; already announced as open.
                    l.mirror = Mirror::Open {
                        until: now + open_for,
                    };
                    None
                }
                Mirror::Closed | Mirror::HalfOpen { .. } => {
                    self.signals.force.store(
                        to_nanos(open_for.max(Duration::from_nanos(1))),
                        Ordering::SeqCst,
                    );
                    l.sm.on_error();
                    self.signals.force.store(NONE, Ordering::SeqCst);
                    let _ = self.events();
                    let _ = take(&self.signals.delay);
                    self.trips.fetch_add(1, Ordering::Relaxed);
                    Some(self.transition(
                        &mut l,
                        Mirror::Open {
                            until: now + open_for,
                        },
                        now,
                        Some(open_for),
                        cause,
                    ))
                }
            }
        };
        self.announce(announced);
    }

    /// Moves to half-open because the state moved elsewhere.
    pub(crate) fn mirror_half_open(&self) {
        if self.is_closed() {
            self.mirror_open(Duration::ZERO, None);
        }
        let now = self.clock.now();
        let announced = {
            let mut l = self.lock();
            match l.mirror {
                Mirror::Open { .. } => {
                    let _ = l.sm.is_call_permitted();
                    let _ = self.events();
                    Some(self.enter_half_open(&mut l, now))
                }
                Mirror::Closed | Mirror::HalfOpen { .. } => None,
            }
        };
        self.announce(announced);
    }

    /// Closes because the state moved elsewhere.
    pub(crate) fn mirror_closed(&self) {
        if !self.is_closed() {
            self.reset();
        }
    }

    pub(crate) fn book_rejected(&self, after: Duration, state: BreakerState) -> Duration {
        self.rejected(after, state)
    }

    /// Books a refusal.
    fn rejected(&self, after: Duration, state: BreakerState) -> Duration {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        self.listener.on_rejected(&self.link, state, after);
        after
    }

    /// The refusal an admission would meet now, booked as one: `Some(retry_after)` while open
    /// or while every half-open probe permit is out. `None` when an admission would be
    /// granted or would move the breaker to half-open — that is the call's to do, since only a
    /// call may use a probe permit. A closed breaker answers without taking the lock.
    pub(crate) fn refusal(&self) -> Option<Duration> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let refused = {
            let l = self.lock();
            match l.mirror {
                Mirror::Closed => None,
                Mirror::Open { until } => {
                    let now = self.clock.now();
                    (now < until).then(|| (until - now, BreakerState::Open))
                }
                Mirror::HalfOpen { .. } => (self.probes.available_permits() == 0)
                    .then_some((self.settings.half_open_retry_hint, BreakerState::HalfOpen)),
            }
        };
        refused.map(|(after, state)| self.rejected(after, state))
    }

    fn probe(&self, l: &Locked) -> Result<Admission, (Duration, BreakerState)> {
        match self.probes.clone().try_acquire_owned() {
            Ok(permit) => Ok(Admission::Probe {
                epoch: l.epoch,
                _permit: permit,
            }),
            Err(_) => Err((self.settings.half_open_retry_hint, BreakerState::HalfOpen)),
        }
    }

    /// Records the outcome of an admitted call (once per logical call).
    pub(crate) fn record(&self, admission: &Admission, outcome: Outcome) {
        let mut announced = None;
        {
            let mut l = self.lock();
            let current = match (admission, l.mirror) {
                (Admission::Closed { epoch }, Mirror::Closed) => *epoch == l.epoch,
                (Admission::Probe { epoch, .. }, Mirror::HalfOpen { .. }) => *epoch == l.epoch,
                _ => false,
            };
            match outcome {
                Outcome::Ignore => {
                    self.ignored.fetch_add(1, Ordering::Relaxed);
                }
                _ if !current => {
                    self.ignored.fetch_add(1, Ordering::Relaxed);
                }
                Outcome::Success => {
                    self.successes.fetch_add(1, Ordering::Relaxed);
                    match l.mirror {
                        Mirror::HalfOpen { successes } => {
                            let successes = successes + 1;
                            if successes >= self.settings.success_threshold {
                                l.sm.on_success();
                                if self.events() & ON_CLOSED != 0 {
                                    announced = Some(self.transition(
                                        &mut l,
                                        Mirror::Closed,
                                        self.clock.now(),
                                        None,
                                        None,
                                    ));
                                }
                            } else {
                                l.mirror = Mirror::HalfOpen { successes };
                            }
                        }
                        _ => l.sm.on_success(),
                    }
                }
                Outcome::Failure { kind, action } => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                    l.last_failure = Some(kind);
                    if let KindAction::TripFor(d) = action {
                        self.signals.force.store(to_nanos(d), Ordering::SeqCst);
                    }
                    l.sm.on_error();
                    self.signals.force.store(NONE, Ordering::SeqCst);
                    if self.events() & ON_OPEN != 0 {
                        let now = self.clock.now();
                        announced = Some(self.trip(&mut l, now, Some(kind)));
                    }
                }
            }
        }
        self.announce(announced);
    }

    /// An active health probe reached the link while the breaker was open: moves it to
    /// half-open before its open duration ends, through `failsafe` like a timed re-admission.
    /// Returns whether the breaker is now half-open because of this call.
    pub(crate) fn probe_succeeded(&self) -> bool {
        let now = self.clock.now();
        let announced = {
            let mut l = self.lock();
            match l.mirror {
                Mirror::Open { .. } => {
                    // failsafe opened for zero time (see `Recording`), so asking it for
                    // permission moves it to half-open, exactly as when the open time passes.
                    if l.sm.is_call_permitted() && self.events() & ON_HALF_OPEN != 0 {
                        Some(self.enter_half_open(&mut l, now))
                    } else {
                        None
                    }
                }
                Mirror::Closed | Mirror::HalfOpen { .. } => None,
            }
        };
        let moved = announced.is_some();
        self.announce(announced);
        moved
    }

    /// Closes the breaker (an operator's reset).
    pub(crate) fn reset(&self) {
        let now = self.clock.now();
        let announced = {
            let mut l = self.lock();
            l.sm.reset();
            let _ = self.events();
            match l.mirror {
                Mirror::Closed => None,
                _ => Some(self.transition(&mut l, Mirror::Closed, now, None, None)),
            }
        };
        self.announce(announced);
    }

    pub(crate) fn state(&self) -> BreakerState {
        let l = self.lock();
        match l.mirror {
            Mirror::Open { until } if self.clock.now() >= until => BreakerState::HalfOpen,
            m => m.state(),
        }
    }

    pub(crate) fn snapshot(&self) -> BreakerSnapshot {
        let now = self.clock.now();
        let l = self.lock();
        let (state, open_remaining_ms) = match l.mirror {
            Mirror::Open { until } if now < until => (
                BreakerState::Open,
                Some(until.saturating_duration_since(now).as_secs_f64() * 1000.0),
            ),
            Mirror::Open { .. } => (BreakerState::HalfOpen, None),
            m => (m.state(), None),
        };
        BreakerSnapshot {
            link: self.link.clone(),
            state,
            open_remaining_ms,
            probes_in_flight: self.settings.max_probes - self.probes.available_permits(),
            trips: self.trips.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            successes: self.successes.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            ignored: self.ignored.load(Ordering::Relaxed),
            last_failure: l.last_failure,
            history: l.history.iter().cloned().collect(),
        }
    }
}
