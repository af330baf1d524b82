//! [`RedisBreakerStore`]: a circuit breaker's state in Redis, shared by every replica.
//!
//! This is a *store*, not a breaker: the policy (what counts, streams judged at their end or a
//! probe at first content, the probe's time limit, cancellation recording nothing, the
//! listener, snapshots, operator reset, active probes) is `ripcord_resilience::Breaker`, the
//! same code as the in-process breaker, run over this store with
//! `Breaker::with_store`. See [`shared_breaker`].
//!
//! # Keys
//!
//! All with TTLs: `ripcord:v1:{link}:breaker:fails` (consecutive counted failures of logical
//! calls across replicas), `…:breaker:open` (open-until, Redis server time in ms; it outlives
//! open-until by `state_ttl` so replicas see half-open), `…:breaker:trips` (trip count) and
//! `…:breaker:probe` (the single half-open probe permit across all replicas, taken with
//! `SET NX PX probe_timeout`, so a dead prober's permit expires) and `…:breaker:streak` (trips
//! since the last close, which lengthen the open spell as the in-process breaker's do:
//! [`SharedBreakerConfig::open`]; it expires with the open state it belongs to).
//!
//! # The success path does not wait for Redis
//!
//! Each replica keeps a cached view of the shared state in a `ripcord_resilience::LocalStore`
//! (which also drives the listener, the snapshot and `/readyz`). While that view is *closed*
//! and its **lease** is valid, a call is admitted from it without touching Redis. Outcomes
//! are queued (never awaited) to one reporter task per breaker, which sends everything queued
//! in one script call (so under load reports batch themselves) and reads the shared state back
//! with each reply; that reply renews the lease and moves the cached view (a trip made by
//! another replica, a probe that closed it elsewhere).
//!
//! The lease is `lease_calls` admissions and `lease_ttl` of time, both counted from the moment
//! the last state read was *sent*. When either runs out, the next call waits for one Redis
//! round trip (the admission script) before it is admitted. This is the staleness bound:
//!
//! - after the shared breaker trips (on any replica), a replica admits **at most
//!   `lease_calls` calls** from its cached view, and none later than **`lease_ttl`** after
//!   the trip (defaults 32 calls and 100 ms);
//! - an open view refuses locally while its lease holds and asks Redis again after it, so a
//!   probe that closed the breaker on another replica (or an active prober that moved it to
//!   half-open) reaches this replica within `lease_ttl`;
//! - a replica's own failures reach the shared count asynchronously, so a replica may admit up
//!   to `lease_calls` calls past the failure that tripped the breaker before its reply lands.
//!
//! Half-open is never decided from the cache: the probe permit is taken in Redis, so across
//! all replicas exactly one probe is out at a time.
//!
//! # When Redis fails
//!
//! Every Redis call is bounded by the [`RedisState`] op timeout. When Redis is unreachable the
//! cached view becomes the breaker: the local store counts and trips on this replica's calls
//! alone (the same settings), until Redis answers again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use ripcord_core::{ErrorKind, Result};
use ripcord_resilience::{
    Admission, BreakerPolicy, BreakerSnapshot, BreakerState, BreakerStore, KindAction, LocalStore,
    Outcome, StoreAdmit,
};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::state::{RedisState, key};

mod config;
mod scripts;

pub use config::{SharedBreaker, SharedBreakerConfig, shared_breaker};
use config::{dur, ms};
use scripts::Scripts;

/// What the reporter sends.
#[derive(Debug)]
enum Report {
    /// The outcome of a call admitted while closed (`s`, `f` or `t<ms>,`), with a failure's
    /// kind (the cause a trip is announced with).
    Outcome(Code, Option<ErrorKind>),
    /// A probe's verdict (or `r`: the permit given back).
    Probe {
        token: String,
        code: Code,
    },
    Wake,
    Reset,
    /// Answers once everything queued before it has been sent and applied.
    Sync(oneshot::Sender<bool>),
    /// Reads the shared state back (renews the lease before it runs out).
    Refresh,
}

#[derive(Debug, Clone, Copy)]
enum Code {
    Success,
    Fail,
    TripFor(u64),
    Release,
}

impl Code {
    fn of(outcome: Outcome) -> Option<Code> {
        match outcome {
            Outcome::Success => Some(Code::Success),
            Outcome::Failure {
                action: KindAction::TripFor(d),
                ..
            } => Some(Code::TripFor(ms(d).max(1))),
            Outcome::Failure { .. } => Some(Code::Fail),
            _ => None,
        }
    }

    fn push(self, out: &mut String) {
        match self {
            Code::Success => out.push('s'),
            Code::Fail => out.push('f'),
            Code::TripFor(ms) => {
                out.push('t');
                out.push_str(&ms.to_string());
                out.push(',');
            }
            Code::Release => out.push('r'),
        }
    }
}

/// The lease on the cached view (see the module docs).
#[derive(Debug)]
struct Lease {
    /// Admissions from the cached view so far.
    admitted: AtomicU64,
    /// `admitted` when the last state read was sent.
    base: AtomicU64,
    /// When it was sent (ms since `epoch`); `u64::MAX`: never.
    sent_ms: AtomicU64,
    epoch: std::time::Instant,
}

impl Lease {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A state read is being sent now: the reply renews the lease from here.
    fn mark(&self) -> (u64, u64) {
        (self.admitted.load(Ordering::Acquire), self.now_ms())
    }

    fn renew(&self, (base, sent): (u64, u64)) {
        self.base.fetch_max(base, Ordering::AcqRel);
        let prev = self.sent_ms.load(Ordering::Acquire);
        if prev == u64::MAX || sent > prev {
            self.sent_ms.store(sent, Ordering::Release);
        }
    }

    fn fresh(&self, ttl_ms: u64) -> bool {
        self.fresh_at(self.now_ms(), ttl_ms)
    }

    fn fresh_at(&self, now_ms: u64, ttl_ms: u64) -> bool {
        let sent = self.sent_ms.load(Ordering::Acquire);
        sent != u64::MAX && now_ms.saturating_sub(sent) <= ttl_ms
    }

    /// Takes one admission from the lease, if it still has one: `None` when it has not,
    /// else whether half the lease's calls or time are now spent (time to renew it). Reads
    /// the clock once.
    fn take(&self, calls: u64, ttl_ms: u64) -> Option<bool> {
        let now = self.now_ms();
        if !self.fresh_at(now, ttl_ms) {
            return None;
        }
        // Counted only when admitted: a refused try must not use up the next renewal (the
        // reply to a read sent while callers were being refused would otherwise come back
        // already spent, and under load every caller would end up asking Redis).
        let base = self.base.load(Ordering::Acquire);
        let used = |a: u64| (a + 1).saturating_sub(base);
        let n = self
            .admitted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |a| {
                (used(a) <= calls).then_some(a + 1)
            })
            .ok()?;
        let used = used(n);
        let sent = self.sent_ms.load(Ordering::Acquire);
        Some(used * 2 >= calls || now.saturating_sub(sent) * 2 >= ttl_ms)
    }
}

/// What the store and its reporter share.
#[derive(Debug)]
struct Inner {
    view: LocalStore,
    state: RedisState,
    scripts: Scripts,
    keys: [String; 5],
    threshold: String,
    open_ms: String,
    open_max_ms: String,
    ttl_ms: String,
    probe_ms: String,
    lease_calls: u64,
    lease_ttl_ms: u64,
    half_open_hint: Duration,
    lease: Lease,
    /// Reports that could not be queued (the queue was full): counted on the view only.
    unqueued: AtomicU64,
    /// The shared failure count at the last read; with `queued_fails` (failures queued and
    /// not yet sent) it says whether a success would change anything in Redis. While both are
    /// zero a success is not sent.
    fails: AtomicU64,
    queued_fails: AtomicU64,
    /// A refresh is queued or running.
    refreshing: AtomicBool,
    /// An admission script is in flight: other callers that find the lease spent wait for
    /// its reply instead of each sending their own.
    asking: AtomicBool,
    /// Wakes them when it lands (or its caller gave up).
    asked: Notify,
}

/// Held by the caller whose admission script is in flight; dropped (reply or cancellation),
/// it lets the waiting callers look at the view again.
struct Leading<'a>(&'a Inner);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.0.asking.store(false, Ordering::Release);
        self.0.asked.notify_waiters();
    }
}

impl Inner {
    async fn eval(&self, script: &Script, token: &str, payload: &str) -> Option<(i64, i64)> {
        let keys = [
            self.keys[0].as_str(),
            &self.keys[1],
            &self.keys[2],
            &self.keys[3],
            &self.keys[4],
        ];
        let args = [
            self.threshold.as_str(),
            &self.open_ms,
            &self.ttl_ms,
            &self.probe_ms,
            token,
            payload,
            &self.open_max_ms,
        ];
        self.state.eval(script, &keys, &args).await
    }

    /// Moves the cached view to the shared state a script read back.
    fn apply(&self, (code, value): (i64, i64), cause: Option<ErrorKind>) {
        match code {
            0 => {
                self.fails
                    .store(u64::try_from(value).unwrap_or(0), Ordering::Release);
                self.view.mirror_closed();
            }
            1 => {
                let open_for = dur(value);
                // Moved only when it differs: a re-read of the same trip is not a new one.
                let stale = match self.view.open_remaining() {
                    Some(left) => left.abs_diff(open_for) > Duration::from_millis(20),
                    None => true,
                };
                if stale {
                    self.view.mirror_open(open_for, cause);
                }
            }
            _ => self.view.mirror_half_open(),
        }
    }
}

/// A probe permit taken in Redis; dropped without a verdict, it is given back.
#[derive(Debug)]
struct ProbeTicket {
    token: String,
    settled: AtomicBool,
    tx: mpsc::Sender<Report>,
}

impl Drop for ProbeTicket {
    fn drop(&mut self) {
        if !self.settled.load(Ordering::Acquire) {
            let _ = self.tx.try_send(Report::Probe {
                token: std::mem::take(&mut self.token),
                code: Code::Release,
            });
        }
    }
}

/// A breaker's state in Redis (see the module docs). Build the breaker with
/// [`shared_breaker`], or `Breaker::with_store` with [`RedisBreakerStore::new`].
#[derive(Debug)]
pub struct RedisBreakerStore {
    inner: Arc<Inner>,
    tx: mpsc::Sender<Report>,
    rx: Mutex<Option<mpsc::Receiver<Report>>>,
}

/// Outcomes queued per breaker before new ones are counted on the cached view only.
const QUEUE: usize = 4096;

impl RedisBreakerStore {
    /// A store for `link` on `state`, with `config`'s lease and `policy`'s settings (the cached
    /// view is `layer.local_store(link)`).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn new(
        link: &str,
        state: RedisState,
        config: &SharedBreakerConfig,
        policy: &BreakerPolicy,
    ) -> Result<Arc<Self>> {
        config.validate()?;
        let (first, longest) = config.spells();
        let (tx, rx) = mpsc::channel(QUEUE);
        Ok(Arc::new(RedisBreakerStore {
            inner: Arc::new(Inner {
                view: policy.local_store(link),
                state,
                scripts: Scripts::new(),
                keys: [
                    key(link, "breaker:fails"),
                    key(link, "breaker:open"),
                    key(link, "breaker:trips"),
                    key(link, "breaker:probe"),
                    key(link, "breaker:streak"),
                ],
                threshold: config.consecutive_failures.to_string(),
                open_ms: ms(first).to_string(),
                open_max_ms: ms(longest).to_string(),
                ttl_ms: ms(config.state_ttl).to_string(),
                probe_ms: ms(config.probe_timeout).to_string(),
                lease_calls: config.lease_calls,
                lease_ttl_ms: ms(config.lease_ttl),
                half_open_hint: config.half_open_retry_hint,
                lease: Lease {
                    admitted: AtomicU64::new(0),
                    base: AtomicU64::new(0),
                    sent_ms: AtomicU64::new(u64::MAX),
                    epoch: std::time::Instant::now(),
                },
                unqueued: AtomicU64::new(0),
                fails: AtomicU64::new(0),
                queued_fails: AtomicU64::new(0),
                refreshing: AtomicBool::new(false),
                asking: AtomicBool::new(false),
                asked: Notify::new(),
            }),
            tx,
            rx: Mutex::new(Some(rx)),
        }))
    }

    /// Waits until every outcome queued so far has reached Redis and the cached view holds
    /// the shared state read back now (a refresh, even with nothing queued); `false` when
    /// Redis did not answer.
    pub async fn sync(&self) -> bool {
        let (tx, rx) = oneshot::channel();
        if !self.send(Report::Sync(tx)) {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Reports that found the queue full and were counted on this replica's view only.
    pub fn unqueued(&self) -> u64 {
        self.inner.unqueued.load(Ordering::Relaxed)
    }

    /// Queues a report, starting the reporter on first use.
    fn send(&self, report: Report) -> bool {
        self.start();
        match self.tx.try_send(report) {
            Ok(()) => true,
            Err(_) => {
                if self.inner.unqueued.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        ripcord.link = %self.inner.view.link(),
                        message = ripcord_core::telemetry::event::STATE_REPORT_QUEUE_FULL
                    );
                }
                false
            }
        }
    }

    fn start(&self) {
        let rx = match self.rx.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        let Some(rx) = rx else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(report_loop(Arc::clone(&self.inner), rx));
            }
            Err(_) => {
                // No runtime yet: keep the queue for the first caller inside one.
                if let Ok(mut g) = self.rx.lock() {
                    *g = Some(rx);
                }
            }
        }
    }

    fn degraded(&self) -> bool {
        self.inner.state.is_degraded()
    }
}

/// The reporter: sends everything queued as one script call per kind, in order, and moves the
/// cached view to the state each reply reads back.
async fn report_loop(inner: Arc<Inner>, mut rx: mpsc::Receiver<Report>) {
    let mut batch = String::new();
    let mut cause = None;
    let mut waiting: Vec<oneshot::Sender<bool>> = Vec::new();
    let mut pending = Vec::with_capacity(256);
    let mut batch_fails = 0u64;
    while rx.recv_many(&mut pending, 256).await > 0 {
        let mut ok = true;
        for report in pending.drain(..) {
            match report {
                Report::Outcome(code, kind) => {
                    if kind.is_some() {
                        cause = kind;
                        batch_fails += 1;
                    }
                    code.push(&mut batch);
                }
                other => {
                    ok &= flush(&inner, &mut batch, &mut cause, false, &mut batch_fails).await;
                    match other {
                        Report::Probe { token, code } => {
                            let mut payload = String::new();
                            code.push(&mut payload);
                            let mark = inner.lease.mark();
                            match inner
                                .eval(&inner.scripts.probe_done, &token, &payload)
                                .await
                            {
                                Some(r) => {
                                    inner.lease.renew(mark);
                                    inner.apply(r, None);
                                }
                                None => ok = false,
                            }
                        }
                        Report::Wake | Report::Reset => {
                            let script = match other {
                                Report::Wake => &inner.scripts.wake,
                                _ => &inner.scripts.reset,
                            };
                            let mark = inner.lease.mark();
                            match inner.eval(script, "", "").await {
                                Some(r) => {
                                    inner.lease.renew(mark);
                                    inner.apply(r, None);
                                }
                                None => ok = false,
                            }
                        }
                        Report::Refresh => {
                            ok &=
                                flush(&inner, &mut batch, &mut cause, true, &mut batch_fails).await;
                            inner.refreshing.store(false, Ordering::Release);
                        }
                        Report::Sync(tx) => {
                            // A sync also reads the shared state back, with or without
                            // outcomes to send.
                            ok &=
                                flush(&inner, &mut batch, &mut cause, true, &mut batch_fails).await;
                            waiting.push(tx);
                        }
                        Report::Outcome(..) => {}
                    }
                }
            }
        }
        ok &= flush(&inner, &mut batch, &mut cause, false, &mut batch_fails).await;
        for tx in waiting.drain(..) {
            let _ = tx.send(ok);
        }
    }
}

/// Sends the queued closed-state outcomes, if any.
async fn flush(
    inner: &Inner,
    batch: &mut String,
    cause: &mut Option<ErrorKind>,
    read: bool,
    batch_fails: &mut u64,
) -> bool {
    if batch.is_empty() && !read {
        return true;
    }
    let mark = inner.lease.mark();
    let reply = inner.eval(&inner.scripts.report, "", batch).await;
    batch.clear();
    let ok = match reply {
        Some(r) => {
            inner.lease.renew(mark);
            inner.apply(r, cause.take());
            true
        }
        None => false,
    };
    // Sent (read back above), or lost with Redis (the view takes over): no longer queued.
    inner
        .queued_fails
        .fetch_sub(std::mem::take(batch_fails), Ordering::AcqRel);
    ok
}

#[async_trait]
impl BreakerStore for RedisBreakerStore {
    fn link(&self) -> &Arc<str> {
        self.inner.view.link()
    }

    fn try_admit(&self) -> StoreAdmit {
        let inner = &self.inner;
        if self.degraded() {
            return StoreAdmit::Ask;
        }
        if inner.view.is_closed() {
            if let Some(half_spent) = inner.lease.take(inner.lease_calls, inner.lease_ttl_ms) {
                // Past half the lease: renew it in the background, so a steady stream of
                // calls never runs into its end.
                if half_spent
                    && !inner.refreshing.swap(true, Ordering::AcqRel)
                    && !self.send(Report::Refresh)
                {
                    inner.refreshing.store(false, Ordering::Release);
                }
                return inner.view.try_admit();
            }
            return StoreAdmit::Ask;
        }
        // Open (or half-open): refuse from the view while it is fresh and says open.
        if inner.lease.fresh(inner.lease_ttl_ms)
            && let Some(left) = inner.view.open_remaining()
            && !left.is_zero()
        {
            return StoreAdmit::Refused(inner.view.rejected(left, BreakerState::Open));
        }
        StoreAdmit::Ask
    }

    async fn admit(&self) -> std::result::Result<Admission, Duration> {
        let inner = &self.inner;
        // One admission script in flight per store. Without this, every call that finds the
        // lease spent at once (a burst, or many callers in flight) sends its own script and
        // waits for its own round trip; instead they wait for the one in flight and take
        // their admission from the view its reply renewed.
        loop {
            let done = inner.asked.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !inner.asking.swap(true, Ordering::AcqRel) {
                break;
            }
            done.await;
            match self.try_admit() {
                StoreAdmit::Admitted(a) => return Ok(a),
                StoreAdmit::Refused(after) => return Err(after),
                StoreAdmit::Ask => {}
            }
            if !self.degraded() && inner.view.state() == BreakerState::HalfOpen {
                // The reply just read was half-open: its caller holds the one probe permit
                // or another replica does, so this call would be refused by Redis too.
                let after = inner.half_open_hint.max(Duration::from_millis(1));
                return Err(inner.view.rejected(after, BreakerState::HalfOpen));
            }
        }
        let _leading = Leading(inner);
        let token = format!("{:016x}", rand::random::<u64>());
        let mark = inner.lease.mark();
        let Some((code, value)) = inner.eval(&inner.scripts.admit, &token, "").await else {
            // Redis is unreachable: this replica's view is the breaker until it is back.
            inner.state.note_local_call();
            return inner.view.admit().await;
        };
        inner.lease.renew(mark);
        match code {
            0 => {
                inner.view.mirror_closed();
                inner.lease.admitted.fetch_add(1, Ordering::AcqRel);
                match inner.view.try_admit() {
                    StoreAdmit::Admitted(a) => Ok(a),
                    StoreAdmit::Refused(after) => Err(after),
                    StoreAdmit::Ask => inner.view.admit().await,
                }
            }
            1 => {
                inner.apply((code, value), None);
                let after = dur(value).max(Duration::from_millis(1));
                Err(inner.view.rejected(after, BreakerState::Open))
            }
            2 => {
                inner.view.mirror_half_open();
                self.start();
                Ok(Admission::probe(Box::new(ProbeTicket {
                    token,
                    settled: AtomicBool::new(false),
                    tx: self.tx.clone(),
                })))
            }
            _ => {
                inner.view.mirror_half_open();
                let after = dur(value)
                    .min(inner.half_open_hint)
                    .max(Duration::from_millis(1));
                Err(inner.view.rejected(after, BreakerState::HalfOpen))
            }
        }
    }

    fn record(&self, mut admission: Admission, outcome: Outcome) {
        let inner = &self.inner;
        if admission.is_probe()
            && let Some(ticket) = admission.take_ticket()
        {
            let any: &dyn std::any::Any = &*ticket;
            if let Some(t) = any.downcast_ref::<ProbeTicket>() {
                inner.view.count(outcome);
                let code = Code::of(outcome).unwrap_or(Code::Release);
                t.settled.store(true, Ordering::Release);
                self.send(Report::Probe {
                    token: t.token.clone(),
                    code,
                });
                return;
            }
        }
        if self.degraded() {
            // Admitted (or recorded) while Redis is down: this replica's view decides.
            inner.view.record(admission, outcome);
            return;
        }
        inner.view.count(outcome);
        if outcome == Outcome::Success
            && inner.queued_fails.load(Ordering::Acquire) == 0
            && inner.fails.load(Ordering::Acquire) == 0
        {
            // Nothing to reset in Redis.
            return;
        }
        if matches!(outcome, Outcome::Failure { .. }) {
            inner.queued_fails.fetch_add(1, Ordering::AcqRel);
        }
        let kind = match outcome {
            Outcome::Failure { kind, .. } => Some(kind),
            _ => None,
        };
        if let Some(code) = Code::of(outcome)
            && !self.send(Report::Outcome(code, kind))
            && matches!(code, Code::Fail | Code::TripFor(_))
        {
            // Not lost: a failure that cannot reach Redis counts on this replica.
            inner.view.record(admission, outcome);
        }
    }

    fn refusal(&self) -> Option<Duration> {
        let inner = &self.inner;
        if inner.view.is_closed() || self.degraded() {
            return inner.view.refusal();
        }
        match inner.view.open_remaining() {
            Some(left) if !left.is_zero() && inner.lease.fresh(inner.lease_ttl_ms) => {
                Some(inner.view.rejected(left, BreakerState::Open))
            }
            _ => None,
        }
    }

    fn state(&self) -> BreakerState {
        self.inner.view.state()
    }

    fn snapshot(&self) -> BreakerSnapshot {
        self.inner.view.snapshot()
    }

    fn reset(&self) {
        self.inner.view.reset();
        self.send(Report::Reset);
    }

    fn probe_succeeded(&self) -> bool {
        let moved = self.inner.view.probe_succeeded();
        self.send(Report::Wake);
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused_naming_the_setting() {
        let base = SharedBreakerConfig::default;
        for (config, setting) in [
            (
                base().consecutive_failures(0),
                "shared_breaker.consecutive_failures",
            ),
            (base().probe_timeout(Duration::ZERO), "probe_timeout"),
            (base().lease_calls(0), "lease_calls"),
        ] {
            let e = config.validate().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidRequest, "{setting}");
            assert!(e.message().contains(setting), "{setting}: {e}");
        }
        assert!(SharedBreakerConfig::default().validate().is_ok());
    }

    #[test]
    fn the_layer_carries_the_kind_actions() {
        let c = SharedBreakerConfig::default().kind(ErrorKind::RateLimited, KindAction::Ignore);
        let policy = c.policy().unwrap();
        assert_eq!(policy.action(ErrorKind::RateLimited), KindAction::Ignore);
        assert_eq!(policy.action(ErrorKind::ServerError), KindAction::Count);
        assert_eq!(policy.action(ErrorKind::InvalidRequest), KindAction::Ignore);
    }

    #[test]
    fn a_refused_try_does_not_use_up_the_next_renewal() {
        let lease = Lease {
            admitted: AtomicU64::new(0),
            base: AtomicU64::new(0),
            sent_ms: AtomicU64::new(u64::MAX),
            epoch: std::time::Instant::now(),
        };
        assert_eq!(lease.take(4, 100), None, "never read: no lease");
        lease.renew(lease.mark());
        let taken: Vec<_> = (0..4).map(|_| lease.take(4, 100)).collect();
        assert_eq!(taken, [Some(false), Some(true), Some(true), Some(true)]);
        // Spent: many callers are refused while a read is in flight.
        let mark = lease.mark();
        for _ in 0..100 {
            assert_eq!(lease.take(4, 100), None);
        }
        // Its reply grants the whole lease again, not what the refusals left of it.
        lease.renew(mark);
        assert_eq!((0..10).filter_map(|_| lease.take(4, 100)).count(), 4);
    }

    #[test]
    fn outcomes_encode_in_order() {
        let mut b = String::new();
        Code::Success.push(&mut b);
        Code::Fail.push(&mut b);
        Code::TripFor(300).push(&mut b);
        assert_eq!(b, "sft300,");
    }
}
