//! Local rate limits per link, on `governor`: requests per minute and tokens per minute.
//!
//! # Behaviour
//!
//! - Before a call the limiter takes one request cell (RPM) and reserves the request's tokens
//!   (TPM): the prompt estimate ([`ripcord_core::tokens::estimate_request`]) plus `max_tokens`
//!   (or the model's largest output when the request sets none).
//! - When a bucket is empty the call waits for it — if the wait fits both the deadline and
//!   `max_wait`. Otherwise it returns [`ErrorKind::LocalRateLimited`] at once, without calling
//!   the vendor, with `retry_after` set to when capacity returns, so the chain moves on.
//! - A vendor 429 carrying a retry-after pauses the link's limiter for that long: later calls
//!   wait (or are refused) locally instead of hitting the vendor again.
//!
//! # Why the reconciliation counter (PITFALLS 14)
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

mod layer;

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind,
    ModelId, Result, StreamEvent, Usage, tokens,
};
use serde::Serialize;

pub use layer::{RateLimitBuilder, RateLimitLayer};

use crate::clock::{GovernorClock, SharedClock};
use crate::error::tag;
use crate::stream_util::{End, Observed, StreamObserver};
use crate::window::Window;

type Limiter = RateLimiter<NotKeyed, InMemoryState, GovernorClock, NoOpMiddleware<Duration>>;

/// A model behind local RPM / TPM limits.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// use ripcord_resilience::{ChatModelExt, RateLimitLayer};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let model = ScriptedModel::new("primary")
///     .with_rate_limit(RateLimitLayer::builder().rpm(1).build().unwrap());
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
    layer: RateLimitLayer,
    state: std::sync::Arc<LimitState>,
}

#[derive(Debug)]
struct LimitState {
    clock: SharedClock,
    gclock: GovernorClock,
    rpm: Option<Limiter>,
    tpm: Option<Limiter>,
    tpm_burst: u32,
    /// Nanos since the governor clock's epoch until which the link is paused (0: not paused).
    paused_until: AtomicU64,
    /// Reconciliation balance in tokens: > 0 owed to the bucket, < 0 credit.
    balance: AtomicI64,
    refused: AtomicU64,
    used: Mutex<Window>,
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
}

impl LimitState {
    fn new(layer: &RateLimitLayer) -> Self {
        let gclock = GovernorClock::new(layer.clock.clone());
        let make = |rate: Option<NonZeroU32>, burst: Option<NonZeroU32>| {
            rate.map(|r| {
                let q = Quota::per_minute(r).allow_burst(burst.unwrap_or(r));
                RateLimiter::direct_with_clock(q, gclock.clone())
            })
        };
        let now = layer.clock.now();
        LimitState {
            clock: layer.clock.clone(),
            rpm: make(layer.rpm, layer.rpm_burst),
            tpm: make(layer.tpm, layer.tpm_burst),
            tpm_burst: layer
                .tpm_burst
                .or(layer.tpm)
                .map_or(u32::MAX, NonZeroU32::get),
            gclock,
            paused_until: AtomicU64::new(0),
            balance: AtomicI64::new(0),
            refused: AtomicU64::new(0),
            used: Mutex::new(Window::new(now, Duration::from_secs(60), 12)),
        }
    }

    fn paused_for(&self) -> Option<Duration> {
        use governor::clock::Clock as _;
        let until = Duration::from_nanos(self.paused_until.load(Ordering::SeqCst));
        let now = self.gclock.now();
        (until > now).then(|| until - now)
    }

    fn pause(&self, d: Duration) {
        use governor::clock::Clock as _;
        let until = u64::try_from((self.gclock.now() + d).as_nanos()).unwrap_or(u64::MAX);
        self.paused_until.fetch_max(until, Ordering::SeqCst);
    }

    /// The tokens to charge the TPM bucket now for a request of `nominal` tokens, applying the
    /// reconciliation balance.
    fn charge(&self, nominal: u32) -> u32 {
        let balance = self.balance.swap(0, Ordering::SeqCst);
        let want = i64::from(nominal) + balance;
        let charge = want.clamp(0, i64::from(self.tpm_burst));
        // Whatever could not be applied stays in the balance.
        let rest = want - charge;
        if rest != 0 {
            self.balance.fetch_add(rest, Ordering::SeqCst);
        }
        u32::try_from(charge).unwrap_or(self.tpm_burst)
    }

    /// Puts a charge that was not used back into the balance.
    fn uncharge(&self, charge: u32, nominal: u32) {
        self.balance
            .fetch_add(i64::from(charge) - i64::from(nominal), Ordering::SeqCst);
    }

    /// After the call: the vendor's count replaces the reservation.
    fn settle(&self, r: Reservation, used: Option<u64>) {
        let used = i64::try_from(used.unwrap_or(0)).unwrap_or(i64::MAX);
        if self.tpm.is_some() {
            self.balance
                .fetch_add(used - i64::from(r.nominal), Ordering::SeqCst);
        }
        if used > 0
            && let Ok(mut w) = self.used.lock()
        {
            w.add(self.clock.now(), 0, used);
        }
    }
}

impl<M: ChatModel> RateLimit<M> {
    /// Wraps `inner` with fresh buckets.
    pub fn new(inner: M, layer: RateLimitLayer) -> Self {
        let state = std::sync::Arc::new(LimitState::new(&layer));
        RateLimit {
            inner,
            layer,
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
            rpm: self.layer.rpm(),
            tpm: self.layer.tpm(),
            paused_remaining_ms: s.paused_for().map(|d| d.as_secs_f64() * 1000.0),
            tokens_last_minute,
            balance: s.balance.load(Ordering::SeqCst),
            refused: s.refused.load(Ordering::Relaxed),
        }
    }

    fn nominal(&self, req: &ChatRequest) -> u32 {
        if self.state.tpm.is_none() {
            return 0;
        }
        let output = req
            .max_tokens
            .unwrap_or(self.inner.capabilities().max_output_tokens);
        tokens::estimate_request(req).saturating_add(output)
    }

    fn refuse(&self, wait: Duration, why: &str) -> Error {
        self.state.refused.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(link = %self.inner.id().name, wait_ms = wait.as_millis() as u64, why, "ripcord.rate_limited_locally");
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

    /// Takes capacity for one call, waiting when the deadline and `max_wait` allow.
    async fn acquire(&self, req: &ChatRequest, ctx: &Context) -> Result<Reservation> {
        use governor::clock::Clock as _;
        let s = &self.state;
        let nominal = self.nominal(req);
        let mut have_rpm = s.rpm.is_none();
        let mut waited = Duration::ZERO;
        loop {
            let (wait, why) = if let Some(p) = s.paused_for() {
                (p, "vendor-requested pause")
            } else {
                let mut blocked = None;
                if !have_rpm {
                    match s.rpm.as_ref().map(Limiter::check) {
                        Some(Err(not_until)) => {
                            blocked = Some((
                                not_until.wait_time_from(s.gclock.now()),
                                "requests-per-minute",
                            ))
                        }
                        _ => have_rpm = true,
                    }
                }
                if let (None, Some(tpm)) = (blocked, &s.tpm) {
                    let charge = s.charge(nominal);
                    match NonZeroU32::new(charge).map(|n| tpm.check_n(n)) {
                        // Nothing to charge (credit covered it), or it fit.
                        None | Some(Ok(Ok(()))) => return Ok(Reservation { nominal }),
                        Some(Ok(Err(not_until))) => {
                            s.uncharge(charge, nominal);
                            blocked = Some((
                                not_until.wait_time_from(s.gclock.now()),
                                "tokens-per-minute",
                            ));
                        }
                        // Unreachable: charges are clamped to the burst. Admit rather than
                        // refuse forever.
                        Some(Err(_)) => return Ok(Reservation { nominal }),
                    }
                }
                match blocked {
                    Some(b) => b,
                    None => return Ok(Reservation { nominal }),
                }
            };
            let wait = wait.max(Duration::from_micros(1));
            let too_long = waited + wait > self.layer.max_wait;
            // A wait that would leave the call less than its least useful budget is refused
            // now, locally: the vendor never saw the request and must not be blamed.
            let keep = ctx.min_attempt().unwrap_or(Duration::ZERO);
            let past_deadline = ctx.remaining().is_some_and(|rem| wait + keep >= rem);
            if too_long || past_deadline {
                return Err(self.refuse(wait, why));
            }
            ctx.sleep(wait).await.map_err(|e| {
                let e = if e.kind() == ErrorKind::DeadlineExceeded {
                    e.with_fault(ripcord_core::Fault::Local)
                } else {
                    e
                };
                tag(e, self.inner.id())
            })?;
            waited += wait;
        }
    }

    /// After a failure: a vendor 429 with retry-after pauses the link.
    fn on_error(&self, e: &Error) {
        if self.layer.pause_on_429
            && e.kind() == ErrorKind::RateLimited
            && let Some(after) = e.retry_after()
        {
            let d = after.min(self.layer.max_pause);
            tracing::info!(link = %self.inner.id().name, pause_ms = d.as_millis() as u64, "ripcord.rate_limit_paused");
            self.state.pause(d);
        }
    }
}

/// Settles a stream's reservation when it ends.
struct LimitObserver {
    state: std::sync::Arc<LimitState>,
    reservation: Reservation,
    usage: Option<Usage>,
    pause_on_429: bool,
    max_pause: Duration,
}

impl StreamObserver for LimitObserver {
    fn on_item(&mut self, item: Result<StreamEvent>) -> Result<StreamEvent> {
        if let Ok(StreamEvent::Usage { usage }) = &item {
            self.usage = Some(*usage);
        }
        item
    }

    fn on_end(&mut self, end: End<'_>) {
        match end {
            End::Finished => self
                .state
                .settle(self.reservation, self.usage.map(|u| u.total_tokens())),
            End::Failed(e) => {
                if self.pause_on_429
                    && e.kind() == ErrorKind::RateLimited
                    && let Some(after) = e.retry_after()
                {
                    self.state.pause(after.min(self.max_pause));
                }
                self.state
                    .settle(self.reservation, self.usage.map(|u| u.total_tokens()));
            }
            // Abandoned mid-stream: the vendor likely used the reservation; keep it unless
            // usage arrived.
            End::Dropped => {
                if let Some(u) = self.usage {
                    self.state.settle(self.reservation, Some(u.total_tokens()));
                }
            }
        }
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for RateLimit<M> {
    fn id(&self) -> &ModelId {
        self.inner.id()
    }

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    /// As the inner model: its waits for permits end at the deadline or on cancellation.
    fn bounds_itself(&self) -> bool {
        self.inner.bounds_itself()
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let reservation = self.acquire(req, ctx).await?;
        match self.inner.chat(req, ctx).await {
            Ok(resp) => {
                self.state
                    .settle(reservation, Some(resp.usage.total_tokens()));
                Ok(resp)
            }
            Err(e) => {
                self.on_error(&e);
                self.state.settle(reservation, None);
                Err(e)
            }
        }
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let reservation = self.acquire(req, ctx).await?;
        match self.inner.stream(req, ctx).await {
            Ok(stream) => Ok(Observed::boxed(
                stream,
                LimitObserver {
                    state: self.state.clone(),
                    reservation,
                    usage: None,
                    pause_on_429: self.layer.pause_on_429,
                    max_pause: self.layer.max_pause,
                },
            )),
            Err(e) => {
                self.on_error(&e);
                self.state.settle(reservation, None);
                Err(e)
            }
        }
    }
}
