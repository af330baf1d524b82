//! Where a breaker's state lives: the [`BreakerStore`] trait, and the in-process store.
//!
//! The breaker *policy* — what counts as a failure, how a stream is judged (at its end, or a
//! half-open probe at its first content), the deadline and probe limit inside the guarded call,
//! cancellation recording nothing — is written once, in [`Breaker`](super::Breaker). What a
//! store does is the part that must be atomic: admit a call (closed, a half-open probe under a
//! permit, or a refusal with a wait hint), record one outcome per admitted call against the
//! state (and epoch) it was admitted in, and move between states. [`LocalStore`] keeps that
//! state in this process (the default); `ripcord-redis` supplies a store that shares it
//! across replicas, so the same policy code, listener, snapshot, operator reset and active
//! probe work on a shared breaker by construction.
//!
//! Admission has a synchronous fast path ([`BreakerStore::try_admit`]) so that the in-process
//! store, and a shared store while its cached view is fresh, admit without a future or an
//! allocation; a store that must ask elsewhere answers [`StoreAdmit::Ask`] and the breaker
//! awaits [`BreakerStore::admit`].

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::ErrorKind;

use super::listener::{BreakerSnapshot, BreakerState};
use super::state::{self, Core};
use super::trip::KindAction;

/// The outcome of one logical call, as the breaker policy judged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The call succeeded (a stream: it finished; a half-open probe: its first content came).
    Success,
    /// A failure charged to the link.
    Failure {
        /// The kind (a deadline cut of a useful attempt reads as `Timeout`).
        kind: ErrorKind,
        /// What the breaker's settings say a failure of this kind does.
        action: KindAction,
    },
    /// Nothing the link is to blame for (a caller error, a cancellation, a local refusal).
    Ignore,
}

/// Something a store keeps with an admission (a shared probe permit's token, say); dropped
/// when the admission is recorded or dropped without an outcome.
pub trait Ticket: Any + Send + Sync + fmt::Debug {}

impl<T: Any + Send + Sync + fmt::Debug> Ticket for T {}

/// A permission to call, tied to the state it was given in. Dropping it without recording
/// gives a probe permit back.
#[derive(Debug)]
pub struct Admission {
    pub(crate) local: Option<state::Admission>,
    probe: bool,
    ticket: Option<Box<dyn Ticket>>,
}

impl Admission {
    /// A half-open probe admitted by another store, holding `ticket` (its permit).
    pub fn probe(ticket: Box<dyn Ticket>) -> Self {
        Admission {
            local: None,
            probe: true,
            ticket: Some(ticket),
        }
    }

    /// Whether this call is a half-open probe (judged at first content, bounded by
    /// `probe_timeout`).
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// The ticket a store attached, if any.
    pub fn ticket(&self) -> Option<&dyn Ticket> {
        self.ticket.as_deref()
    }

    /// Takes the ticket out (a store settling a probe).
    pub fn take_ticket(&mut self) -> Option<Box<dyn Ticket>> {
        self.ticket.take()
    }

    pub(crate) fn local(a: state::Admission) -> Self {
        Admission {
            probe: a.is_probe(),
            local: Some(a),
            ticket: None,
        }
    }
}

/// What the fast path of admission decided.
#[derive(Debug)]
pub enum StoreAdmit {
    /// Call.
    Admitted(Admission),
    /// Refused; re-admission is expected after this long.
    Refused(Duration),
    /// The store must ask elsewhere: await [`BreakerStore::admit`].
    Ask,
}

/// The state of one breaker: what must be atomic (see the module docs).
///
/// Every method but [`admit`](BreakerStore::admit) is synchronous and must not block on I/O:
/// `record` is called from a stream's end, and the fast path of every call runs through
/// `try_admit`.
#[async_trait]
pub trait BreakerStore: Send + Sync + fmt::Debug + 'static {
    /// The link's name.
    fn link(&self) -> &Arc<str>;

    /// Admission without waiting: a decision, or [`StoreAdmit::Ask`].
    fn try_admit(&self) -> StoreAdmit;

    /// Admission that may wait on the store (bounded by the store's own timeouts).
    /// `Err(retry_after)` when refused.
    async fn admit(&self) -> Result<Admission, Duration>;

    /// Records the outcome of an admitted call (once per logical call).
    fn record(&self, admission: Admission, outcome: Outcome);

    /// The refusal an admission would meet now, booked as one (see
    /// [`ChatModel::refusal`](ripcord_core::ChatModel::refusal)); `None` when a call might be
    /// admitted.
    fn refusal(&self) -> Option<Duration>;

    /// The state now.
    fn state(&self) -> BreakerState;

    /// State, counters and recent transitions.
    fn snapshot(&self) -> BreakerSnapshot;

    /// Closes the breaker (an operator's reset).
    fn reset(&self);

    /// An out-of-band health probe reached the link: an open breaker moves to half-open now.
    /// Returns whether this call moved it.
    fn probe_succeeded(&self) -> bool;
}

/// The in-process store: `failsafe`'s state machine wrapped with a probe permit, a fresh
/// open-until on every trip, a listener and a history (see the `state` module docs).
///
/// Cloning it shares the state. A shared store uses one as its cached view and as the local
/// state it degrades to; the `mirror_*` methods move it to a state decided elsewhere.
#[derive(Debug, Clone)]
pub struct LocalStore {
    core: Arc<Core>,
}

impl LocalStore {
    pub(crate) fn new(core: Core) -> Self {
        LocalStore {
            core: Arc::new(core),
        }
    }

    /// Counts an outcome in the snapshot's counters without moving the state (a shared store
    /// whose state moved elsewhere).
    pub fn count(&self, outcome: Outcome) {
        self.core.count(outcome);
    }

    /// Moves to open for `open_for` (a trip decided elsewhere), announcing the transition
    /// unless already open until about then.
    pub fn mirror_open(&self, open_for: Duration, cause: Option<ErrorKind>) {
        self.core.mirror_open(open_for, cause);
    }

    /// Moves to half-open (decided elsewhere), announcing it unless already there.
    pub fn mirror_half_open(&self) {
        self.core.mirror_half_open();
    }

    /// Moves to closed (decided elsewhere), announcing it unless already closed.
    pub fn mirror_closed(&self) {
        self.core.mirror_closed();
    }

    /// Whether the state is closed (read without the lock).
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    /// While open: how long until open-until (zero once it has passed); `None` otherwise.
    pub fn open_remaining(&self) -> Option<Duration> {
        self.core.open_remaining()
    }

    /// Books a refusal decided elsewhere (counted, and reported to the listener).
    pub fn rejected(&self, after: Duration, state: BreakerState) -> Duration {
        self.core.book_rejected(after, state)
    }
}

#[async_trait]
impl BreakerStore for LocalStore {
    fn link(&self) -> &Arc<str> {
        self.core.link()
    }

    fn try_admit(&self) -> StoreAdmit {
        match self.core.admit() {
            Ok(a) => StoreAdmit::Admitted(Admission::local(a)),
            Err(after) => StoreAdmit::Refused(after),
        }
    }

    async fn admit(&self) -> Result<Admission, Duration> {
        self.core.admit().map(Admission::local)
    }

    fn record(&self, admission: Admission, outcome: Outcome) {
        match &admission.local {
            Some(a) => self.core.record(a, outcome),
            // An admission another store gave: its state is not ours to move.
            None => self.core.count(outcome),
        }
    }

    fn refusal(&self) -> Option<Duration> {
        self.core.refusal()
    }

    fn state(&self) -> BreakerState {
        self.core.state()
    }

    fn snapshot(&self) -> BreakerSnapshot {
        self.core.snapshot()
    }

    fn reset(&self) {
        self.core.reset();
    }

    fn probe_succeeded(&self) -> bool {
        self.core.probe_succeeded()
    }
}
