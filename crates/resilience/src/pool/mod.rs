//! A pool: one link of the chain over several deployments of one model.
//!
//! Teams spread one model over several deployments — a region each, two organisations, several
//! keys — to raise quota and to survive a regional outage. As separate links of a chain they
//! would be tried one after another, each only when the one before it failed: load never
//! spreads, a throttled deployment is retried on itself. A [`Pool`] is *one* link (one entry in
//! the chain's order, one skip, one fallback, provenance naming the deployment that served);
//! inside it a [`Balance`] picks a deployment per attempt.
//!
//! # Rules
//!
//! - **Each deployment is its own model.** Wrap each deployment's adapter in its own breaker
//!   and rate limit: each deployment's quota and health are its own. The pool asks a picked
//!   deployment's [`ChatModel::refusal`] first and passes over one that refuses (open breaker,
//!   limit spent) without a call.
//! - **A cooldown lasts exactly the vendor's wait.** A 429 (or a 503 with a retry-after) cools
//!   its deployment for the `Retry-After` / rate-limit reset the adapter read, never less: no
//!   attempt reaches it before that instant. A 429 naming no wait cools it for
//!   [`PoolPolicyBuilder::default_cooldown`].
//! - **Broken setups wait for a person or a probe.** Quota exhausted, auth refused, permission
//!   denied, region blocked and model not found take the deployment out of service until
//!   [`PoolHandle::reinstate`] (an operator), a passing [`PoolHandle::probe`], or an answer to
//!   the one trial call it gets per [`PoolPolicyBuilder::out_of_service_recheck`] period; they
//!   raise the same `ripcord.alert` the chain raises for a link, named `pool/deployment`.
//! - **A retry goes elsewhere first.** Within one call, an attempt after a failure goes to a
//!   deployment this call has not tried; a deployment already tried is tried again only when
//!   none is left and its failure was worth retrying (after a backoff).
//! - **The link fails only when no deployment can serve in time.** When every deployment is
//!   cooling down, the pool waits for the first one back if that fits the deadline; otherwise
//!   it returns (a local `LocalRateLimited` with the wait when it made no attempt, else the last
//!   vendor error), and the chain moves on.
//! - **Request faults stop at once.** A request too long, too large or refused by content
//!   policy would fare the same on every deployment of the model: it is returned, not shopped
//!   around. So is a failure after which a request marked not retry-safe may not be re-sent.
//! - **Outliers are ejected** by error rate ([`Ejection`]), never below a floor of healthy
//!   deployments.
//!
//! Streams follow the same rules until their first content event; after it the stream is the
//! caller's, and its end (finished or failed) is the deployment's outcome.

mod balance;
mod deployment;
mod handle;
mod observer;
mod policy;
mod store;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::alert::AlertGate;
use ripcord_core::telemetry::event;
use ripcord_core::{
    Attempt, Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Disposition,
    Error, ErrorKind, ModelId, Provenance, Result,
};
use tokio::time::Instant;

pub use deployment::{Deployment, DeploymentSnapshot, DeploymentState};
pub use handle::{PoolHandle, PoolSnapshot};
pub use policy::{Balance, Ejection, PoolPolicy, PoolPolicyBuilder, UnknownBalance};
pub use store::{LocalPoolStore, PoolBlock, PoolStore, SharedBlocks};

use crate::error::ConfigError;
use crate::stream_util::{Observed, bounded_by, open_to_first_content};
use deployment::{Blocked, Health, InFlight, Slot};
use observer::PoolObserver;
use store::Spread;

/// The most deployments one pool holds (the per-call bookkeeping is a 64-bit set).
pub const MAX_DEPLOYMENTS: usize = 64;

/// A link over several deployments of one model, balancing attempts across them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, Error, ErrorKind};
/// use ripcord_resilience::{Deployment, Pool, PoolPolicy, Balance};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let throttled = ScriptedModel::new("azure").fail_with(
///     Error::new(ErrorKind::RateLimited, "429").with_retry_after(Duration::from_secs(20)),
///     Duration::ZERO,
/// );
/// let pool = Pool::new(
///     "azure",
///     vec![
///         Deployment::new("eastus", throttled).region("eastus"),
///         Deployment::new("westeurope", ScriptedModel::new("azure").reply("hi")).region("westeurope"),
///     ],
///     PoolPolicy::builder().strategy(Balance::RoundRobin).build()?,
/// )?;
/// let reply = pool.chat(&ChatRequest::user("hello"), &Context::new()).await?;
/// assert_eq!(reply.provenance.deployment(), Some("westeurope"));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Pool {
    id: ModelId,
    caps: Capabilities,
    shared: Arc<Shared>,
}

/// The pool's state, shared with its handles and open streams.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) link: Arc<str>,
    pub(crate) policy: PoolPolicy,
    pub(crate) slots: Vec<Slot>,
    /// The round-robin / tie-break counter.
    pub(crate) next: AtomicUsize,
    alerts: Arc<AlertGate>,
    /// Where cooldowns, ejections and outages are shared with other replicas.
    pub(crate) store: Arc<dyn PoolStore>,
    /// The deployments' names, in slot order (what the store is asked about).
    pub(crate) names: Vec<Arc<str>>,
}

impl Pool {
    /// A pool named `link` over `deployments` (which serve one model: the first one's id and
    /// capabilities are the pool's).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when there is no deployment, more than [`MAX_DEPLOYMENTS`], or two
    /// share a name.
    pub fn new(
        link: impl Into<Arc<str>>,
        deployments: Vec<Deployment>,
        policy: PoolPolicy,
    ) -> std::result::Result<Pool, ConfigError> {
        let link = link.into();
        let Some(first) = deployments.first() else {
            return Err(ConfigError::new(
                "pool",
                "deployments",
                format!("pool {link:?} needs at least one deployment"),
            ));
        };
        if deployments.len() > MAX_DEPLOYMENTS {
            return Err(ConfigError::new(
                "pool",
                "deployments",
                format!(
                    "pool {link:?} has {} deployments; at most {MAX_DEPLOYMENTS}",
                    deployments.len()
                ),
            ));
        }
        for (i, d) in deployments.iter().enumerate() {
            if deployments[..i].iter().any(|o| o.name == d.name) {
                return Err(ConfigError::new(
                    "pool",
                    "deployments",
                    format!("pool {link:?} names deployment {:?} twice", d.name),
                ));
            }
        }
        let id = ModelId::new(link.clone(), first.model.id().model.clone());
        let caps = first.model.capabilities().clone();
        let now = policy.clock.now();
        let names = deployments.iter().map(|d| d.name.clone()).collect();
        let slots = deployments
            .into_iter()
            .map(|spec| Slot {
                spec,
                in_flight: Default::default(),
                health: std::sync::Mutex::new(Health::new(&policy, now)),
            })
            .collect();
        Ok(Pool {
            id,
            caps,
            shared: Arc::new(Shared {
                link,
                policy,
                slots,
                next: AtomicUsize::new(0),
                alerts: AlertGate::global(),
                store: Arc::new(LocalPoolStore),
                names,
            }),
        })
    }

    /// Reports alerts to this gate instead of the process-wide one.
    pub fn with_alert_gate(mut self, gate: Arc<AlertGate>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.alerts = gate;
        }
        self
    }

    /// Shares cooldowns, ejections and outages through `store` (by default a
    /// [`LocalPoolStore`]: this process only). Call it before the pool is cloned into a handle.
    pub fn with_store(mut self, store: Arc<dyn PoolStore>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.store = store;
        }
        self
    }

    /// A handle for status pages and admin actions.
    pub fn handle(&self) -> PoolHandle {
        PoolHandle::new(Arc::clone(&self.shared))
    }

    /// A point-in-time view of every deployment.
    pub fn snapshot(&self) -> PoolSnapshot {
        self.handle().snapshot()
    }

    /// The policy.
    pub fn policy(&self) -> &PoolPolicy {
        &self.shared.policy
    }
}

/// How a failed attempt leaves the call.
enum After {
    /// Try another deployment (or the same after a backoff).
    Next,
    /// Return this error now.
    Stop,
}

/// A 64-bit set of slot indices.
fn bit(i: usize) -> u64 {
    1u64 << i
}

/// Kinds that say the request itself is at fault: every deployment of the model would answer
/// the same.
fn request_fault(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::ContextLengthExceeded
            | ErrorKind::PayloadTooLarge
            | ErrorKind::InvalidRequest
            | ErrorKind::ContentFiltered
    )
}

/// Kinds that take a deployment out of service: its key, account or region is broken.
fn takes_out(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::QuotaExhausted
            | ErrorKind::Auth
            | ErrorKind::PermissionDenied
            | ErrorKind::RegionBlocked
            | ErrorKind::ModelNotFound
    )
}

/// Kinds that count in the ejection window (the deployment's own health).
fn counts_for_ejection(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ServerError
            | ErrorKind::Overloaded
            | ErrorKind::Timeout
            | ErrorKind::Network
            | ErrorKind::InvalidResponse
    ) && e.counts_against_link()
        && !e.is_deadline_cut()
}

impl Shared {
    fn now(&self) -> Instant {
        self.policy.clock.now()
    }

    /// Deployments taking calls at `now`, minus those in `exclude`, as a set; and those of
    /// them that are out of service and due their trial call.
    fn candidates(&self, now: Instant, exclude: u64) -> (u64, u64) {
        let (mut set, mut trial) = (0, 0);
        for (i, slot) in self.slots.iter().enumerate() {
            if exclude & bit(i) != 0 {
                continue;
            }
            let h = slot.health();
            if h.blocked(now) == Blocked::No {
                set |= bit(i);
                if h.out.is_some() {
                    trial |= bit(i);
                }
            }
        }
        (set, trial)
    }

    /// The earliest instant a deployment not in `exclude` returns by itself, if any does.
    fn earliest_return(&self, now: Instant, exclude: u64) -> Option<Instant> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(i, _)| exclude & bit(*i) == 0)
            .filter_map(|(_, s)| s.health().blocked(now).until())
            .min()
    }

    /// Books an answer on slot `i`, which ended at `now`; returns what the store should hear
    /// of it (it was the trial call of a deployment out of service, or its window ejected it).
    fn on_success(&self, i: usize, now: Instant, latency: Duration, tokens: u64) -> Spread {
        let mut spread = Spread::default();
        let mut h = self.slots[i].health();
        spread.back = h.out.take().is_some();
        if spread.back {
            // Its trial call was answered: it is back.
            h.recheck_at = None;
            h.out_shared = false;
            tracing::info!(ripcord.link = %self.link, ripcord.deployment = %self.slots[i].spec.name, by = "trial", message = event::POOL_REINSTATED);
        }
        h.ewma.observe(latency, now, self.policy.ewma_decay);
        h.successes += 1;
        if self.policy.strategy == Balance::Usage {
            // Only the `usage` strategy reads the minute's counts.
            h.roll_minute(now);
            h.minute.tokens = h.minute.tokens.saturating_add(tokens);
        }
        // A window is judged whenever it fills, on a success too: a deployment failing 40%
        // of its calls may well fill its window with an answer.
        if let Some(ej) = self.policy.ejection
            && h.count(false, now, &ej)
        {
            drop(h);
            if self.maybe_eject(i, now, &ej) {
                spread.eject = Some(ej);
            }
        }
        spread
    }

    /// Books a failed attempt on slot `i` and decides what the call does next.
    fn on_failure(&self, i: usize, e: &Error, latency: Duration, ctx: &Context) -> (After, Spread) {
        let mut spread = Spread::default();
        let kind = e.kind();
        let slot = &self.slots[i];
        let name = &slot.spec.name;
        if matches!(kind, ErrorKind::Cancelled | ErrorKind::DeadlineExceeded)
            || e.is_deadline_cut()
            || request_fault(kind)
            || e.disposition() == Disposition::FailFast
        {
            return (After::Stop, spread);
        }
        let now = self.now();
        if kind.is_local_refusal() {
            // The deployment's own breaker or limiter refused: nothing reached the vendor.
            if let Some(after) = e.retry_after() {
                slot.health().cool_until(now + after);
            }
            return (After::Next, spread);
        }
        let stop = e.forbids_resend(ctx);
        if kind == ErrorKind::RateLimited
            || (kind == ErrorKind::Overloaded && e.retry_after().is_some())
        {
            let wait = e.retry_after().unwrap_or(self.policy.default_cooldown);
            slot.health().cool_until(now + wait);
            spread.cool = Some(wait);
            tracing::info!(ripcord.link = %self.link, ripcord.deployment = %name, cooldown_ms = wait.as_millis() as u64, error.type = kind.as_str(), message = event::POOL_COOLDOWN);
        }
        if takes_out(kind) {
            {
                let mut h = slot.health();
                h.out = Some(kind);
                h.recheck_at = self.policy.out_recheck.map(|d| now + d);
            }
            spread.out = Some(kind);
            tracing::warn!(ripcord.link = %self.link, ripcord.deployment = %name, error.type = kind.as_str(), message = event::POOL_OUT_OF_SERVICE);
            let label = format!("{}/{}", self.link, name);
            self.alerts.observe(&label, kind);
        }
        let counted = counts_for_ejection(e);
        let mut h = slot.health();
        h.failures += 1;
        if counted {
            // A failure that took a while says something about the latency, too.
            h.ewma.observe(latency, now, self.policy.ewma_decay);
        }
        if let Some(ej) = self.policy.ejection
            && h.count(counted, now, &ej)
        {
            drop(h);
            if self.maybe_eject(i, now, &ej) {
                spread.eject = Some(ej);
            }
        }
        (if stop { After::Stop } else { After::Next }, spread)
    }

    /// Ejects slot `i` unless that would leave fewer than the floor of healthy deployments;
    /// true when it did.
    fn maybe_eject(&self, i: usize, now: Instant, ej: &Ejection) -> bool {
        let healthy = self
            .slots
            .iter()
            .filter(|s| {
                let h = s.health();
                h.out.is_none() && h.ejected_until.is_none_or(|t| t <= now)
            })
            .count();
        if healthy <= ej.min_healthy as usize {
            return false;
        }
        let slot = &self.slots[i];
        let mut h = slot.health();
        let rate = f64::from(h.window.failures) / f64::from(h.window.calls.max(1));
        let d = h.eject(now, ej);
        drop(h);
        tracing::warn!(ripcord.link = %self.link, ripcord.deployment = %slot.spec.name, ejection_ms = d.as_millis() as u64, failure_rate = rate, message = event::POOL_EJECTED);
        true
    }

    fn attempt(&self, i: usize, e: Option<&Error>, latency: Duration) -> Attempt {
        let model = self.slots[i].spec.model.id().model.clone();
        let a = match e {
            Some(e) => Attempt::failure(self.link.clone(), model, e, latency),
            None => Attempt::success(self.link.clone(), model, latency),
        };
        a.with_deployment(self.slots[i].spec.name.clone())
    }

    /// Appends a failed attempt's record: the deployment's own (if it kept one) or a new one.
    fn record(&self, attempts: &mut Vec<Attempt>, i: usize, e: &Error, latency: Duration) {
        if e.attempts().is_empty() {
            attempts.push(self.attempt(i, Some(e), latency));
        } else {
            let name = &self.slots[i].spec.name;
            attempts.extend(e.attempts().iter().cloned().map(|a| {
                if a.deployment.is_some() {
                    a
                } else {
                    a.with_deployment(name.clone())
                }
            }));
        }
    }
}

/// What a successful run of attempts yields.
struct Served<T> {
    value: T,
    slot: usize,
    attempts: Vec<Attempt>,
    latency: Duration,
    /// When the attempt ended.
    ended: Instant,
    guard: InFlight,
}

impl Pool {
    /// Runs attempts across the deployments until one succeeds or none can serve in time.
    async fn run<T, F, Fut>(&self, ctx: &Context, mut once: F) -> Result<Served<T>>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let shared = &self.shared;
        let max = shared.policy.attempts_for(shared.slots.len());
        let backoff = shared.policy.backoff;
        let mut previous = backoff.base;
        // Per-call sets of slots: tried, refused by their own breaker or limiter, failed in a
        // way worth retrying, and cooled down by that failure (their wait is the vendor's, so
        // no backoff is added on top).
        let mut tried: u64 = 0;
        let mut refused: u64 = 0;
        let mut retryable: u64 = 0;
        let mut cooled: u64 = 0;
        let mut made: u32 = 0;
        let mut retries: u32 = 0;
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut last: Option<Error> = None;
        let usage = shared.policy.strategy == Balance::Usage;
        loop {
            if let Err(stop) = ctx.check() {
                return Err(self.stop_with(stop, last, attempts));
            }
            if made >= max {
                return Err(self.give_up(last, attempts, None));
            }
            if shared.store.is_shared() {
                shared.refresh().await;
            }
            let now = shared.now();
            let hard = refused | (tried & !retryable);
            let (mut set, mut trial) = shared.candidates(now, tried | refused);
            let mut again = false;
            if set == 0 {
                // Every deployment was tried: one whose failure is worth retrying may take
                // the call again.
                (set, trial) = shared.candidates(now, hard);
                again = set != 0;
            }
            if set == 0 {
                match shared.earliest_return(now, hard) {
                    Some(at) if ctx.deadline().is_none_or(|d| at < d) => {
                        // Wait for the first deployment back: exactly until its cooldown ends.
                        let wait = at.saturating_duration_since(now);
                        if let Err(stop) = ctx.sleep(wait).await {
                            return Err(self.stop_with(stop, last, attempts));
                        }
                        refused = 0;
                        continue;
                    }
                    other => {
                        let wait = other.map(|at| at.saturating_duration_since(now));
                        return Err(self.give_up(last, attempts, wait));
                    }
                }
            }
            let i = balance::pick(shared, set, now);
            let model = &shared.slots[i].spec.model;
            if let Some(e) = model.refusal(ctx) {
                // Its own breaker or limiter refuses: pass over it in this call.
                refused |= bit(i);
                last.get_or_insert(e);
                continue;
            }
            let mut started = now;
            if again && cooled & bit(i) == 0 {
                retries += 1;
                let d = backoff.delay(retries, previous, shared.policy.rng.as_ref());
                previous = d;
                if ctx.remaining().is_some_and(|r| d >= r) {
                    return Err(self.give_up(last, attempts, None));
                }
                if let Err(stop) = ctx.sleep(d).await {
                    return Err(self.stop_with(stop, last, attempts));
                }
                started = shared.now();
            }
            made += 1;
            tried |= bit(i);
            if usage || trial & bit(i) != 0 {
                let mut h = shared.slots[i].health();
                if usage {
                    h.roll_minute(now);
                    h.minute.requests = h.minute.requests.saturating_add(1);
                }
                if h.out.is_some() {
                    // Its trial call: one per period, however many calls arrive meanwhile.
                    h.recheck_at = shared.policy.out_recheck.map(|d| now + d);
                }
            }
            let guard = InFlight::new(Arc::clone(shared), i);
            let outcome = if model.bounds_itself() {
                once(i).await
            } else {
                ctx.run(once(i)).await
            };
            let ended = shared.now();
            let latency = ended.saturating_duration_since(started);
            match outcome {
                Ok(value) => {
                    return Ok(Served {
                        value,
                        slot: i,
                        attempts,
                        latency,
                        ended,
                        guard,
                    });
                }
                Err(e) => {
                    drop(guard);
                    if e.kind().is_local_refusal() {
                        made -= 1;
                        refused |= bit(i);
                    } else {
                        shared.record(&mut attempts, i, &e, latency);
                    }
                    if matches!(e.disposition(), Disposition::Retry { .. }) {
                        retryable |= bit(i);
                    } else {
                        retryable &= !bit(i);
                    }
                    if e.kind() == ErrorKind::RateLimited || e.retry_after().is_some() {
                        cooled |= bit(i);
                    }
                    let (after, spread) = shared.on_failure(i, &e, latency, ctx);
                    if !spread.is_empty() {
                        shared.spread(i, spread).await;
                    }
                    let e = e.with_attempts(Vec::new());
                    if let After::Stop = after {
                        return Err(e.with_attempts(attempts));
                    }
                    last = Some(e);
                }
            }
        }
    }

    /// The error when no deployment can serve: the last one seen (carrying every attempt), or,
    /// when none was called, a local refusal naming the wait until the first returns.
    fn give_up(
        &self,
        last: Option<Error>,
        attempts: Vec<Attempt>,
        wait: Option<Duration>,
    ) -> Error {
        match last {
            Some(e) if !attempts.is_empty() || !e.kind().is_local_refusal() || wait.is_none() => {
                e.with_attempts(attempts)
            }
            _ => self.refusal_error(wait),
        }
    }

    fn stop_with(&self, stop: Error, last: Option<Error>, attempts: Vec<Attempt>) -> Error {
        let out = match last {
            Some(e) if stop.kind() != ErrorKind::Cancelled => e,
            _ => stop,
        };
        out.with_attempts(attempts)
    }

    fn refusal_error(&self, wait: Option<Duration>) -> Error {
        let e = Error::new(
            ErrorKind::LocalRateLimited,
            "every deployment of the pool is cooling down, ejected or out of service",
        )
        .with_provider(self.id.name.clone(), self.id.model.clone());
        match wait {
            Some(w) => e.with_retry_after(w),
            None => e,
        }
    }
}

#[async_trait]
impl ChatModel for Pool {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// True: every wait of the pool (cooldown, backoff) stops at the deadline and on
    /// cancellation, and an attempt at a deployment that does not bound itself is raced
    /// against both.
    fn bounds_itself(&self) -> bool {
        true
    }

    /// A refusal when no deployment can take a call before the deadline: all are out of
    /// service or ejected, or cooling down past it. A pool whose deployment returns in time
    /// waits for it instead, so this is `None` then.
    fn refusal(&self, ctx: &Context) -> Option<Error> {
        let shared = &self.shared;
        let now = shared.now();
        if shared
            .slots
            .iter()
            .any(|s| s.health().blocked(now) == Blocked::No)
        {
            return None;
        }
        match shared.earliest_return(now, 0) {
            Some(at) if ctx.deadline().is_none_or(|d| at < d) => None,
            other => Some(self.refusal_error(other.map(|at| at.saturating_duration_since(now)))),
        }
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let shared = &self.shared;
        let served = self
            .run(ctx, |i| shared.slots[i].spec.model.chat(req, ctx))
            .await?;
        let Served {
            value: mut resp,
            slot,
            mut attempts,
            latency,
            ended,
            guard,
        } = served;
        drop(guard);
        let spread = shared.on_success(slot, ended, latency, resp.usage.total_tokens());
        if !spread.is_empty() {
            shared.spread(slot, spread).await;
        }
        let name = &shared.slots[slot].spec.name;
        if resp.provenance.attempts.is_empty() {
            attempts.push(shared.attempt(slot, None, latency));
        } else {
            attempts.extend(resp.provenance.attempts.drain(..).map(|a| {
                if a.deployment.is_some() {
                    a
                } else {
                    a.with_deployment(name.clone())
                }
            }));
        }
        resp.provenance.attempts = attempts;
        resp.provenance.served_by = Some(shared.link.clone());
        Ok(resp)
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let shared = &self.shared;
        let served = self
            .run(ctx, |i| async move {
                open_to_first_content(shared.slots[i].spec.model.stream(req, ctx).await?).await
            })
            .await?;
        let Served {
            value: stream,
            slot,
            mut attempts,
            latency,
            guard,
            ..
        } = served;
        let stream = if shared.slots[slot].spec.model.bounds_itself() {
            stream
        } else {
            bounded_by(stream, ctx)
        };
        let now = shared.now();
        let observer = PoolObserver {
            guard,
            started: now.checked_sub(latency).unwrap_or(now),
            first: Some(latency),
            tokens: 0,
        };
        let stream = Observed::boxed(stream, observer);
        attempts.push(shared.attempt(slot, None, latency));
        let mut provenance = Provenance::default();
        provenance.served_by = Some(shared.link.clone());
        provenance.attempts = attempts;
        Ok(crate::stream_util::led_by(provenance, stream))
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
