//! Per-call context: deadline, cancellation, retry safety, tenant, locality, metadata and typed
//! extensions.
//!
//! A [`Context`] travels with every call through every layer. The deadline is a
//! `tokio::time::Instant`, so tests drive it with `tokio::time::pause`; every layer that sleeps or
//! waits must stop at [`Context::deadline`] and when [`Context::cancellation`] fires.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::capabilities::Locality;
use crate::error::{Error, Result};

/// Where a request's data may be sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LocalityRequirement {
    /// Anywhere.
    #[default]
    Any,
    /// Only models on this machine (e.g. for sensitive data).
    LocalOnly,
    /// Local models, or cloud models whose region is one of these.
    Regions(Vec<String>),
}

impl LocalityRequirement {
    /// True when a model at `locality` may receive the request.
    pub fn allows(&self, locality: &Locality) -> bool {
        match (self, locality) {
            (LocalityRequirement::Any, _) | (_, Locality::Local) => true,
            (LocalityRequirement::LocalOnly, Locality::Cloud { .. }) => false,
            (LocalityRequirement::Regions(allowed), Locality::Cloud { region, .. }) => region
                .as_ref()
                .is_some_and(|r| allowed.iter().any(|a| a.eq_ignore_ascii_case(r))),
        }
    }
}

/// Priority class of a call, for bulkhead queues (higher runs first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[non_exhaustive]
pub enum Priority {
    /// Background work.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Interactive, user-facing work.
    High,
    /// Must go first.
    Critical,
}

/// The context of one call.
///
/// Cheap to create; cloning shares the cancellation token.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::{Context, LocalityRequirement};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let ctx = Context::new()
///     .with_timeout(Duration::from_secs(10))
///     .with_tenant("acme")
///     .with_locality(LocalityRequirement::LocalOnly);
/// assert!(ctx.remaining().unwrap() <= Duration::from_secs(10));
/// assert_eq!(ctx.tenant(), Some("acme"));
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Context {
    deadline: Option<Instant>,
    stream_deadline: Option<Instant>,
    min_attempt: Option<Duration>,
    cancel: CancellationToken,
    not_retry_safe: bool,
    tenant: Option<Arc<str>>,
    intent: Option<Arc<str>>,
    idempotency_key: Option<Arc<str>>,
    locality: LocalityRequirement,
    priority: Priority,
    metadata: BTreeMap<String, String>,
    extensions: Extensions,
}

/// Typed values a caller hands to the layers below it (a gateway's route index, a sub-tenant),
/// one per type, as `http::Extensions` carries them on a request: a layer that needs one asks
/// for its type and gets it back typed, instead of parsing a string out of the metadata.
///
/// Cloning shares the values (each is behind an `Arc`), so a context stays cheap to clone.
#[derive(Clone, Default)]
struct Extensions(Option<Arc<ExtensionList>>);

type ExtensionList = Vec<(TypeId, Arc<dyn Any + Send + Sync>)>;

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.as_ref().map_or(0, |l| l.len());
        write!(f, "Extensions({n} typed values)")
    }
}

impl Context {
    /// A context with no deadline, not cancelled, retry-safe, any locality.
    pub fn new() -> Self {
        Context::default()
    }

    /// Sets the deadline to `now + timeout` (tokio's clock).
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let at = Instant::now().checked_add(timeout);
        match at {
            Some(at) => self.with_deadline(at),
            None => self,
        }
    }

    /// Sets an absolute deadline; an earlier existing deadline is kept.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
        self
    }

    crate::setters! {
        /// Replaces the deadline (see [`Context::with_deadline`], which keeps an earlier one);
        /// `None` removes it. The chain uses it to give the link that continues a cut stream a
        /// fresh budget to its first content, within the stream's bound.
        set_deadline(at: Option<Instant>) => deadline = at;
    }

    /// Sets the bound of a stream *after* its first content; an earlier existing one is kept.
    ///
    /// [`Context::deadline`] bounds the time to a stream's first content (and whole non-streamed
    /// calls); once a stream delivers, it is bounded by this instead (plus the link's idle
    /// limit), so a long answer is not cut by a deadline meant for getting an answer at all.
    /// Without one, the deadline bounds the whole stream.
    pub fn with_stream_deadline(mut self, at: Instant) -> Self {
        self.stream_deadline = Some(self.stream_deadline.map_or(at, |d| d.min(at)));
        self
    }

    crate::setters! {
        /// Replaces the stream bound (see [`Context::with_stream_deadline`]); `None` removes it.
        set_stream_deadline(at: Option<Instant>) => stream_deadline = at;
        /// Sets the least budget an attempt needs to be useful: a link reached with less is
        /// skipped, and a deadline cut of an attempt that started with less is not charged to the
        /// vendor.
        with_min_attempt(d: Duration) => min_attempt = Some(d);
        /// Uses this cancellation token (cancel it to stop the call).
        with_cancellation(token: CancellationToken) => cancel = token;
        /// Marks whether the request may be sent again after a failure the vendor may have
        /// processed ([`Error::maybe_processed`]: a timeout or a reset after the request left, a
        /// 502/504, a truncated answer). When false, neither a retry, nor a fallback to the next
        /// link of a chain, nor a stream restart sends it again after such a failure. Default:
        /// true.
        with_retry_safe(safe: bool) => not_retry_safe = !safe;
        /// Sets the tenant (for per-tenant budgets).
        with_tenant(tenant: impl Into<Arc<str>>) => tenant = Some(tenant.into());
        /// Sets the intent (selects a per-intent static reply).
        with_intent(intent: impl Into<Arc<str>>) => intent = Some(intent.into());
        /// Sets an idempotency key for the caller's own layers (a custom model, a gateway hook,
        /// logs).
        ///
        /// ripcord's adapters do not send it: neither OpenAI's chat completions nor Anthropic's
        /// messages API documents an idempotency header, so a key sent to them would promise a
        /// de-duplication nobody performs. What keeps a request that is not retry-safe from being
        /// done twice is [`Context::with_retry_safe`], which every retry, fallback and restart
        /// obeys.
        with_idempotency_key(key: impl Into<Arc<str>>) => idempotency_key = Some(key.into());
        /// Sets the locality requirement.
        with_locality(req: LocalityRequirement) => locality = req;
        /// Sets the priority class.
        with_priority(priority: Priority) => priority = priority;
    }

    /// Adds a free-form metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Attaches a typed value for the layers below (one per type: a second value of the same
    /// type replaces the first).
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_core::Context;
    /// #[derive(Debug, PartialEq)]
    /// struct Route(usize);
    /// let ctx = Context::new().with_extension(Route(2));
    /// assert_eq!(ctx.extension::<Route>(), Some(&Route(2)));
    /// assert_eq!(Context::new().extension::<Route>(), None);
    /// ```
    pub fn with_extension<T: Any + Send + Sync>(mut self, value: T) -> Self {
        let id = TypeId::of::<T>();
        let value: Arc<dyn Any + Send + Sync> = Arc::new(value);
        let list = Arc::make_mut(self.extensions.0.get_or_insert_with(Default::default));
        match list.iter_mut().find(|(t, _)| *t == id) {
            Some(slot) => slot.1 = value,
            None => list.push((id, value)),
        }
        self
    }

    /// The typed value of type `T` a layer above attached, if any.
    pub fn extension<T: Any + Send + Sync>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.extensions
            .0
            .as_deref()?
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The bound of a stream after its first content: the stream deadline if set, else the
    /// deadline.
    pub fn stream_deadline(&self) -> Option<Instant> {
        self.stream_deadline.or(self.deadline)
    }

    /// The least useful budget of an attempt, if set (see [`Context::with_min_attempt`]).
    pub fn min_attempt(&self) -> Option<Duration> {
        self.min_attempt
    }

    /// Time left until the deadline (zero when passed); `None` without a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// True when the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The cancellation token.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// True when the caller cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// `Err(Cancelled)` or `Err(DeadlineExceeded)` when the call must stop now.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::cancelled())
        } else if self.is_expired() {
            Err(Error::deadline_exceeded())
        } else {
            Ok(())
        }
    }

    /// Whether the request may be re-sent after an ambiguous failure.
    pub fn retry_safe(&self) -> bool {
        !self.not_retry_safe
    }

    /// The tenant, if set.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The intent, if set.
    pub fn intent(&self) -> Option<&str> {
        self.intent.as_deref()
    }

    /// The idempotency key, if set.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref()
    }

    /// The locality requirement.
    pub fn locality(&self) -> &LocalityRequirement {
        &self.locality
    }

    /// The priority class.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The metadata.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// Runs `fut` until it finishes, the deadline passes (`DeadlineExceeded`) or the caller
    /// cancels (`Cancelled`), whichever comes first.
    ///
    /// # Cancellation
    ///
    /// When the deadline or the cancellation wins, `fut` is dropped.
    pub async fn run<T>(&self, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        let cancelled = self.cancel.cancelled();
        match self.deadline {
            Some(deadline) => tokio::select! {
                biased;
                () = cancelled => Err(Error::cancelled()),
                r = tokio::time::timeout_at(deadline, fut) => r.unwrap_or_else(|_| Err(Error::deadline_exceeded())),
            },
            None => tokio::select! {
                biased;
                () = cancelled => Err(Error::cancelled()),
                r = fut => r,
            },
        }
    }

    /// Sleeps for `d`, but stops early with `DeadlineExceeded` when the deadline would pass
    /// first (without waiting for it) or `Cancelled` when the caller cancels.
    ///
    /// A sleep that would overrun the deadline returns at once: nothing waits for nothing.
    pub async fn sleep(&self, d: Duration) -> Result<()> {
        if self.remaining().is_some_and(|rem| d > rem) {
            return Err(Error::deadline_exceeded());
        }
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(Error::cancelled()),
            () = tokio::time::sleep(d) => Ok(()),
        }
    }
}
