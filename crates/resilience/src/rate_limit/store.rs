//! Where a rate limiter's buckets live: the [`LimitStore`] trait, and the in-process store.
//!
//! The limiter *policy* — what a request reserves (prompt estimate plus `max_tokens`), the
//! first-come-first-served line, how long a call may wait (`max_wait`, the deadline, the least
//! useful attempt), which vendor errors pause the link and for how long, what a call is charged
//! afterwards (reported usage, the estimate, the prompt of a failure the vendor may have
//! processed) and the refusal it returns — is written once, in [`RateLimit`](super::RateLimit).
//! A store does what must be atomic: take a request's tokens and its request cell (or say how
//! long until they fit), settle the difference between what was reserved and what was used,
//! and pause the link. [`LocalLimitStore`] keeps the buckets in this process (the default);
//! `ripcord-redis` supplies a store that shares them across replicas.
//!
//! Taking has a synchronous fast path ([`LimitStore::try_take`]): the in-process store always
//! decides there, and a shared store spending a block leased earlier does too; a store that
//! must ask elsewhere answers [`Taken::Ask`] and the limiter awaits [`LimitStore::take`].

use std::fmt;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use super::RateLimitPolicy;
use crate::clock::GovernorClock;

type Limiter = RateLimiter<NotKeyed, InMemoryState, GovernorClock, NoOpMiddleware<Duration>>;

/// What one try at the buckets asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// Tokens to reserve (0: none, or already taken by an earlier try of this call).
    pub tokens: u32,
    /// Whether to take a request cell too.
    pub request: bool,
}

/// Which limit held a call back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitKind {
    /// A vendor asked the link to pause (a 429).
    Pause,
    /// Tokens per minute.
    Tokens,
    /// Requests per minute.
    Requests,
}

impl LimitKind {
    /// How a refusal names the limit.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Pause => "vendor-requested pause",
            LimitKind::Tokens => "tokens-per-minute",
            LimitKind::Requests => "requests-per-minute",
        }
    }
}

/// What a try at the buckets decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Everything asked for was taken: call.
    All,
    /// Not now: capacity returns after `after`. `tokens_taken`: the tokens were taken (and are
    /// kept for the next try) but the request cell was not.
    Wait {
        /// How long until the blocking limit has room.
        after: Duration,
        /// The limit that blocked.
        limit: LimitKind,
        /// The tokens were taken nonetheless.
        tokens_taken: bool,
    },
    /// The store must ask elsewhere: await [`LimitStore::take`].
    Ask,
}

/// The buckets of one link's limiter: what must be atomic (see the module docs).
///
/// Every method but [`take`](LimitStore::take) is synchronous and must not block on I/O:
/// `settle` is called from a stream's end, and the fast path of every call runs through
/// `try_take`.
#[async_trait]
pub trait LimitStore: Send + Sync + fmt::Debug + 'static {
    /// A try without waiting: a decision, or [`Taken::Ask`].
    fn try_take(&self, take: Take) -> Taken;

    /// A try that may wait on the store (bounded by the store's own timeouts); never
    /// [`Taken::Ask`].
    async fn take(&self, take: Take) -> Taken;

    /// After a call: it used `delta` tokens more than it reserved (negative: fewer; a call
    /// that was not made gives its whole reservation back as a negative delta).
    fn settle(&self, delta: i64);

    /// Pauses the link for `d` (never shortening a longer pause).
    fn pause(&self, d: Duration);

    /// While paused: how long is left.
    fn paused_for(&self) -> Option<Duration>;

    /// The reconciliation balance this store carries: tokens still owed to the buckets
    /// (negative: credit).
    fn balance(&self) -> i64;
}

/// The in-process store: `governor` buckets on the crate's clock, a reconciliation balance
/// (`governor` cannot refund, so a call that used fewer tokens than it reserved leaves a credit
/// that shrinks the next reservations and one that used more a debt that grows them; a charge
/// larger than the burst is clamped to it and the rest stays owed) and the pause.
#[derive(Debug)]
pub struct LocalLimitStore {
    gclock: GovernorClock,
    rpm: Option<Limiter>,
    tpm: Option<Limiter>,
    tpm_burst: u32,
    /// Nanos since the governor clock's epoch until which the link is paused (0: not paused).
    paused_until: AtomicU64,
    /// Tokens: > 0 owed to the bucket, < 0 credit.
    balance: AtomicI64,
}

impl LocalLimitStore {
    /// Fresh buckets with `policy`'s rates and clock.
    pub fn new(policy: &RateLimitPolicy) -> Self {
        let gclock = GovernorClock::new(policy.clock.clone());
        let make = |rate: Option<NonZeroU32>, burst: Option<NonZeroU32>| {
            rate.map(|r| {
                let q = Quota::per_minute(r).allow_burst(burst.unwrap_or(r));
                RateLimiter::direct_with_clock(q, gclock.clone())
            })
        };
        LocalLimitStore {
            rpm: make(policy.rpm, policy.rpm_burst),
            tpm: make(policy.tpm, policy.tpm_burst),
            tpm_burst: policy
                .tpm_burst
                .or(policy.tpm)
                .map_or(u32::MAX, NonZeroU32::get),
            gclock,
            paused_until: AtomicU64::new(0),
            balance: AtomicI64::new(0),
        }
    }

    /// The tokens to charge now for a reservation of `nominal`, applying the balance.
    fn charge(&self, nominal: u32) -> u32 {
        let balance = self.balance.swap(0, Ordering::SeqCst);
        let want = i64::from(nominal) + balance;
        let charge = want.clamp(0, i64::from(self.tpm_burst));
        let rest = want - charge;
        if rest != 0 {
            self.balance.fetch_add(rest, Ordering::SeqCst);
        }
        u32::try_from(charge).unwrap_or(self.tpm_burst)
    }
}

#[async_trait]
impl LimitStore for LocalLimitStore {
    fn try_take(&self, take: Take) -> Taken {
        use governor::clock::Clock as _;
        if let Some(p) = self.paused_for() {
            return Taken::Wait {
                after: p,
                limit: LimitKind::Pause,
                tokens_taken: false,
            };
        }
        let mut tokens_taken = false;
        if take.tokens > 0
            && let Some(tpm) = &self.tpm
        {
            let charge = self.charge(take.tokens);
            match NonZeroU32::new(charge).map(|n| tpm.check_n(n)) {
                // Nothing to charge (credit covered it), or it fit. Charges are clamped to the
                // burst, so `check_n` cannot refuse for size; admit rather than refuse forever.
                None | Some(Ok(Ok(()))) | Some(Err(_)) => tokens_taken = true,
                Some(Ok(Err(not_until))) => {
                    self.balance
                        .fetch_add(i64::from(charge) - i64::from(take.tokens), Ordering::SeqCst);
                    return Taken::Wait {
                        after: not_until.wait_time_from(self.gclock.now()),
                        limit: LimitKind::Tokens,
                        tokens_taken: false,
                    };
                }
            }
        }
        if take.request
            && let Some(Err(not_until)) = self.rpm.as_ref().map(Limiter::check)
        {
            return Taken::Wait {
                after: not_until.wait_time_from(self.gclock.now()),
                limit: LimitKind::Requests,
                tokens_taken,
            };
        }
        Taken::All
    }

    async fn take(&self, take: Take) -> Taken {
        self.try_take(take)
    }

    fn settle(&self, delta: i64) {
        if self.tpm.is_some() {
            self.balance.fetch_add(delta, Ordering::SeqCst);
        }
    }

    fn pause(&self, d: Duration) {
        use governor::clock::Clock as _;
        let until = u64::try_from((self.gclock.now() + d).as_nanos()).unwrap_or(u64::MAX);
        self.paused_until.fetch_max(until, Ordering::SeqCst);
    }

    fn paused_for(&self) -> Option<Duration> {
        use governor::clock::Clock as _;
        let until = Duration::from_nanos(self.paused_until.load(Ordering::SeqCst));
        let now = self.gclock.now();
        (until > now).then(|| until - now)
    }

    fn balance(&self) -> i64 {
        self.balance.load(Ordering::SeqCst)
    }
}
