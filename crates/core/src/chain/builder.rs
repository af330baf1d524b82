//! [`ChainBuilder`]: a chain's settings, validated in [`ChainBuilder::build`].

use std::sync::Arc;
use std::time::Duration;

use super::order::{self, Plan};
use super::{
    Chain, ChainInner, Counters, DEFAULT_DEADLINE, DEFAULT_MIN_ATTEMPT, DEFAULT_STREAM_MAX, Link,
    MAX_LINKS, StaticReply, Strategy, StreamPolicy, Trim,
};
use crate::alert::AlertGate;
use crate::capabilities::Capabilities;
use crate::error::{Error, ErrorKind};
use crate::model::{ChatModel, ModelId};

/// Builds a [`Chain`]. Validation happens in [`ChainBuilder::build`].
#[derive(Debug, Default)]
pub struct ChainBuilder {
    name: Option<String>,
    links: Vec<Link>,
    routes: Vec<(ErrorKind, String)>,
    static_reply: Option<StaticReply>,
    deadline: Option<Duration>,
    stream_max: Option<Duration>,
    min_attempt: Option<Duration>,
    trim: Trim,
    stream_policy: StreamPolicy,
    stream_holdback: Duration,
    no_readmission_wait: bool,
    fallback_notice: Option<String>,
    strategy: Strategy,
    independent_fallbacks: bool,
    seed: Option<u64>,
    alerts: Option<Arc<AlertGate>>,
}

/// Why a chain could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The chain has no link (a static reply alone is not a chain).
    NoLinks,
    /// More than [`MAX_LINKS`] links.
    TooManyLinks(usize),
    /// Two links share a name.
    DuplicateLink(String),
    /// A route names a link that is not in the chain.
    UnknownRouteTarget {
        /// The error kind routed.
        kind: ErrorKind,
        /// The unknown link name.
        target: String,
    },
    /// The deadline (or the stream bound) is zero.
    ZeroDeadline,
    /// A link reserves at least the whole deadline for later links.
    ReserveTooLarge(String),
    /// A [`Strategy::Weighted`] share names a link that is not in the chain.
    UnknownWeightTarget(String),
    /// Every [`Strategy::Weighted`] share is zero.
    ZeroWeights,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::NoLinks => f.write_str("a chain needs at least one link"),
            BuildError::TooManyLinks(n) => {
                write!(f, "a chain holds at most {MAX_LINKS} links, got {n}")
            }
            BuildError::DuplicateLink(n) => {
                write!(f, "two links are named {n:?}; link names must be unique")
            }
            BuildError::UnknownRouteTarget { kind, target } => {
                write!(
                    f,
                    "the route for {kind} names link {target:?}, which is not in the chain"
                )
            }
            BuildError::ZeroDeadline => {
                f.write_str("the chain's deadline and stream bound must be greater than zero")
            }
            BuildError::ReserveTooLarge(n) => {
                write!(f, "link {n:?} reserves the whole deadline for later links")
            }
            BuildError::UnknownWeightTarget(n) => {
                write!(
                    f,
                    "the weighted strategy gives a share to link {n:?}, which is not in the chain"
                )
            }
            BuildError::ZeroWeights => f.write_str(
                "the weighted strategy needs a share greater than zero for at least one link",
            ),
        }
    }
}

impl std::error::Error for BuildError {}

impl From<BuildError> for Error {
    fn from(e: BuildError) -> Self {
        Error::new(ErrorKind::InvalidRequest, format!("invalid chain: {e}"))
    }
}

impl ChainBuilder {
    crate::setters! {
        /// Names the chain (its [`ChatModel::id`]); default `"chain"`.
        name(name: impl Into<String>) => name = Some(name.into());
    }

    /// Appends a link.
    pub fn link(self, model: impl ChatModel + 'static) -> Self {
        self.link_arc(Arc::new(model))
    }

    /// Appends a shared link.
    pub fn link_arc(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.links.push(Link::new(model));
        self
    }

    /// Gives the link added last an outside demotion switch: while `demotion` is set, every
    /// call tries that link after the chain's other links (before the static reply), whatever
    /// the strategy, keeping the order among demoted links. What sets it is the caller's (the
    /// gateway sets it while the vendor's status page declares a major outage).
    pub fn demotion(mut self, demotion: super::Demotion) -> Self {
        if let Some(l) = self.links.last_mut() {
            l.demotion = Some(demotion);
        }
        self
    }

    /// Reserves `d` of the deadline for the links after the link added last: its attempts get
    /// at most the time left minus `d` (unless it is the last link still untried).
    pub fn reserve(mut self, d: Duration) -> Self {
        if let Some(l) = self.links.last_mut() {
            l.reserve = d;
        }
        self
    }

    /// Tells the chain the first-token limit of the link added last: a link is not worth
    /// calling with less time left than the smaller of this and [`ChainBuilder::min_attempt`].
    pub fn first_token_limit(mut self, d: Duration) -> Self {
        if let Some(l) = self.links.last_mut() {
            l.first_token = Some(d);
        }
        self
    }

    /// Routes failures of `kind` to the link named `target` (when it is still untried).
    pub fn route(mut self, kind: ErrorKind, target: impl Into<String>) -> Self {
        self.routes.push((kind, target.into()));
        self
    }

    /// Sets the static last-resort reply text.
    pub fn static_reply(mut self, text: impl Into<String>) -> Self {
        self.static_reply = Some(match self.static_reply.take() {
            Some(s) => StaticReply {
                default: text.into(),
                by_intent: s.by_intent,
            },
            None => StaticReply::new(text),
        });
        self
    }

    /// Sets a static reply text for one intent. Without a default set by
    /// [`ChainBuilder::static_reply`], the default text is a generic "unavailable" message.
    pub fn intent_reply(mut self, intent: impl Into<String>, text: impl Into<String>) -> Self {
        let s = self.static_reply.take().unwrap_or_else(|| {
            StaticReply::new(
                "The AI service is unavailable right now; please try again in a few minutes.",
            )
        });
        self.static_reply = Some(s.with_intent(intent, text));
        self
    }

    crate::setters! {
        /// Sets a whole [`StaticReply`].
        static_replies(reply: StaticReply) => static_reply = Some(reply);
        /// The end-to-end deadline of a call (default [`DEFAULT_DEADLINE`]); a context deadline
        /// that comes earlier wins.
        deadline(d: Duration) => deadline = Some(d);
        /// The bound of a stream after its first content (default [`DEFAULT_STREAM_MAX`], ten
        /// minutes). The deadline ([`ChainBuilder::deadline`]) bounds the time to first content and
        /// whole non-streamed calls; once a stream delivers, only this bound, the link's idle limit
        /// and the caller's own deadline (from the context) apply. A cut by this bound or by the
        /// caller's deadline after first content is never charged to the link.
        stream_max(d: Duration) => stream_max = Some(d);
        /// The least budget an attempt needs to be useful (default [`DEFAULT_MIN_ATTEMPT`], 1 s):
        /// a link reached with less time left than the smaller of this, the link's
        /// [`ChainBuilder::first_token_limit`] and half the call's whole budget is skipped with
        /// reason `deadline` instead of being attempted and failed; and a deadline cut of an
        /// attempt that started with less is not charged to the link's breaker or health.
        min_attempt(d: Duration) => min_attempt = Some(d);
        /// What to do with a prompt too large for a link's window (default [`Trim::None`]: skip
        /// the link). [`Trim::Oldest`] sends that link the conversation without its oldest
        /// non-system turns instead, and says so in the answer's provenance.
        trim(trim: Trim) => trim = trim;
        /// What a stream does when its link fails after content was shown.
        stream_policy(p: StreamPolicy) => stream_policy = p;
        /// Holds the first part of a stream for up to `d` after its first content before committing
        /// it to the caller (default zero: commit at the first content event).
        ///
        /// Within the hold-back a cut, a stall (the link's idle limit) or an in-band error is still
        /// the attempt's failure: the chain falls over to the next link and the caller sees only
        /// that link's answer, nothing of the first — unlike [`StreamPolicy::Restart`], which needs
        /// a consumer that can discard what it showed. The hold-back ends early when the answer
        /// finishes, and at the call's deadline (an answer under way is committed, not dropped).
        /// After it, the stream policy applies as without one. The price is `d` more time to first
        /// token for every stream.
        stream_holdback(d: Duration) => stream_holdback = d;
        /// Don't wait for a cooling-down link's re-admission; fail over at once.
        no_readmission_wait() => no_readmission_wait = true;
        /// The gate that rate-limits this chain's `ripcord.alert` events (default: the
        /// process-wide [`AlertGate::global`], so a link shared by several chains alerts once per
        /// interval). See [`crate::alert`].
        alert_gate(gate: Arc<AlertGate>) => alerts = Some(gate);
        /// A notice for end users attached to answers served by a fallback link.
        fallback_notice(text: impl Into<String>) => fallback_notice = Some(text.into());
        /// How each call orders the links (default [`Strategy::Ordered`]).
        strategy(strategy: Strategy) => strategy = strategy;
        /// After a link fails, prefer a next link in another failure domain: each cloud vendor
        /// (from [`crate::Locality::Cloud`], compared case-insensitively) is one domain, local
        /// models form one more. The next link is the first untried one (in the call's order) in a
        /// domain where no link failed yet during this call; else the first one outside the domain
        /// of the link that just failed; else the first untried one as usual. A per-kind route
        /// ([`ChainBuilder::route`]) still wins. Off by default.
        prefer_independent_fallbacks(yes: bool) => independent_fallbacks = yes;
        /// Seeds the generator of [`Strategy::Weighted`] (default: from the clock), for
        /// reproducible tests.
        seed(seed: u64) => seed = Some(seed);
    }

    /// Validates and builds the chain.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for no links, duplicate link names, unknown route targets, a zero deadline,
    /// a reserve as large as the deadline, or weighted shares that name an unknown link or are
    /// all zero.
    pub fn build(self) -> std::result::Result<Chain, BuildError> {
        if self.links.is_empty() {
            return Err(BuildError::NoLinks);
        }
        if self.links.len() > MAX_LINKS {
            return Err(BuildError::TooManyLinks(self.links.len()));
        }
        let deadline = self.deadline.unwrap_or(DEFAULT_DEADLINE);
        if deadline.is_zero() {
            return Err(BuildError::ZeroDeadline);
        }
        let stream_max = self.stream_max.unwrap_or(DEFAULT_STREAM_MAX);
        if stream_max.is_zero() {
            return Err(BuildError::ZeroDeadline);
        }
        let min_attempt = self.min_attempt.unwrap_or(DEFAULT_MIN_ATTEMPT);
        for (i, l) in self.links.iter().enumerate() {
            let name = &l.model.id().name;
            if self.links[..i].iter().any(|o| &o.model.id().name == name) {
                return Err(BuildError::DuplicateLink(name.to_string()));
            }
            if l.reserve >= deadline {
                return Err(BuildError::ReserveTooLarge(name.to_string()));
            }
        }
        let mut routes = Vec::with_capacity(self.routes.len());
        for (kind, target) in self.routes {
            let idx = self
                .links
                .iter()
                .position(|l| *l.model.id().name == *target)
                .ok_or(BuildError::UnknownRouteTarget { kind, target })?;
            routes.push((kind, idx));
        }
        let plan = Plan::new(
            &self.strategy,
            &self.links,
            self.seed.unwrap_or_else(order::default_seed),
        )?;
        let domains = self
            .independent_fallbacks
            .then(|| order::failure_domains(&self.links));
        let caps = Capabilities::union(self.links.iter().map(|l| l.model.capabilities()))
            .ok_or(BuildError::NoLinks)?;
        let name = self.name.unwrap_or_else(|| "chain".to_owned());
        let first_model = self.links[0].model.id().model.clone();
        Ok(Chain {
            inner: Arc::new(ChainInner {
                id: ModelId::new(name, first_model),
                caps,
                links: self.links,
                routes,
                static_reply: self.static_reply,
                deadline,
                stream_max,
                min_attempt,
                trim: self.trim,
                stream_policy: self.stream_policy,
                stream_holdback: self.stream_holdback,
                wait_for_readmission: !self.no_readmission_wait,
                fallback_notice: self.fallback_notice,
                strategy: self.strategy,
                plan,
                domains,
                alerts: self.alerts.unwrap_or_else(AlertGate::global),
                counters: Counters::default(),
            }),
        })
    }
}
