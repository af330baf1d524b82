//! The one error type of ripcord, and the decision it carries.
//!
//! Every failure — a vendor's HTTP error, a timeout, a breaker refusing a call — becomes an
//! [`Error`] with a small, `Copy` [`ErrorKind`]. Policies never parse strings or re-derive HTTP
//! semantics: they ask [`Error::disposition`], which is one exhaustive `match` on the kind, so a
//! new kind cannot be added without deciding what the chain does with it.
//!
//! Adapters classify *first* (status, headers and body, see the providers crate); everything
//! downstream only reads the kind and the data kept beside it (vendor status, vendor code,
//! retry-after, timeout phase).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::response::{Attempt, Skip};

/// A `Result` whose error is ripcord's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

mod kind;

pub use kind::{Disposition, ErrorKind, StatusCode, TimeoutPhase};

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a vendor stated in a context-length error: the model's real window, and the prompt's
/// size as the vendor counted it when it said so.
///
/// Adapters read it from the error text where vendors state it (OpenAI, DeepSeek and vLLM:
/// "maximum context length is 8192 tokens"; Anthropic: "prompt is too long: 210000 tokens >
/// 200000 maximum"). The chain remembers the window for the link that said it, so later
/// calls are judged by the vendor's number rather than a guess.
///
/// # Examples
///
/// ```
/// use ripcord_core::{ContextLimit, Error, ErrorKind};
/// let e = Error::new(ErrorKind::ContextLengthExceeded, "too long")
///     .with_context_limit(ContextLimit::new(8_192).with_prompt_tokens(9_000));
/// assert_eq!(e.context_limit().map(|l| l.window), Some(8_192));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ContextLimit {
    /// The model's window in tokens, as the vendor stated it.
    pub window: u32,
    /// The prompt's tokens as the vendor counted them, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
}

impl ContextLimit {
    /// A stated window without a prompt count.
    pub const fn new(window: u32) -> Self {
        ContextLimit {
            window,
            prompt_tokens: None,
        }
    }

    /// With the prompt's size as the vendor counted it.
    pub const fn with_prompt_tokens(mut self, tokens: u32) -> Self {
        self.prompt_tokens = Some(tokens);
        self
    }
}

/// ripcord's error: a classified failure with the vendor's facts kept as data.
///
/// Build one with [`Error::new`] and the `with_*` methods; read it with the accessors. The
/// `Display` text describes this layer only; the underlying cause (an I/O error, a JSON error)
/// stays reachable through [`std::error::Error::source`].
///
/// An error never carries API keys: adapters build messages from the vendor's error body and
/// never from request headers or keyed URLs.
///
/// # Examples
///
/// ```
/// use ripcord_core::{Error, ErrorKind, StatusCode};
/// let e = Error::new(ErrorKind::QuotaExhausted, "You exceeded your current quota")
///     .with_provider("openai", "gpt-4o")
///     .with_status(StatusCode(429))
///     .with_vendor_code("insufficient_quota");
/// assert_eq!(e.kind(), ErrorKind::QuotaExhausted);
/// assert_eq!(e.status(), Some(StatusCode(429)));
/// assert_eq!(e.to_string(), "openai/gpt-4o: quota_exhausted (HTTP 429, insufficient_quota): You exceeded your current quota");
/// ```
#[non_exhaustive]
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: ErrorKind,
    /// Static text (most messages) is kept without copying it.
    message: Cow<'static, str>,
    provider: Option<Arc<str>>,
    model: Option<Arc<str>>,
    status: Option<StatusCode>,
    vendor_code: Option<String>,
    retry_after: Option<Duration>,
    timeout_phase: Option<TimeoutPhase>,
    attempts: Vec<Attempt>,
    /// Links a chain passed over without a call before it failed.
    skipped: Vec<Skip>,
    causes: Vec<Error>,
    source: Option<BoxError>,
    fault: Option<crate::fault::Fault>,
    context_limit: Option<ContextLimit>,
    /// Whether the vendor may have processed the request: known yes, known no, or unknown
    /// (`None`: judged from the kind, see [`Error::maybe_processed`]).
    maybe_processed: Option<bool>,
}

impl Error {
    /// A new error of `kind` with a human-readable message for this layer.
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                message: message.into(),
                provider: None,
                model: None,
                status: None,
                vendor_code: None,
                retry_after: None,
                timeout_phase: None,
                attempts: Vec::new(),
                skipped: Vec::new(),
                causes: Vec::new(),
                source: None,
                fault: None,
                context_limit: None,
                maybe_processed: None,
            }),
        }
    }

    /// A timeout of the given phase.
    pub fn timeout(phase: TimeoutPhase, message: impl Into<Cow<'static, str>>) -> Self {
        let mut e = Error::new(ErrorKind::Timeout, message);
        e.inner.timeout_phase = Some(phase);
        e
    }

    /// The call's deadline has passed.
    pub fn deadline_exceeded() -> Self {
        Error::new(
            ErrorKind::DeadlineExceeded,
            "the call's deadline has passed",
        )
    }

    /// The caller cancelled the call.
    pub fn cancelled() -> Self {
        Error::new(ErrorKind::Cancelled, "the call was cancelled")
    }

    /// Every link of a chain failed: one error that keeps every link's error, in order.
    ///
    /// Its kind is the kind of the last error (the one that ended the call); its attempts are
    /// the attempts of all of them, in order.
    pub fn exhausted(errors: Vec<Error>) -> Self {
        let kind = errors
            .last()
            .map(Error::kind)
            .unwrap_or(ErrorKind::InvalidRequest);
        let retry_after = errors.last().and_then(Error::retry_after);
        let timeout_phase = errors.last().and_then(Error::timeout_phase);
        let message = match errors.len() {
            0 => "the chain has no link that could take this request".to_owned(),
            1 => "the only link failed".to_owned(),
            n => format!("all {n} links failed"),
        };
        let attempts = errors
            .iter()
            .flat_map(|e| e.attempts().iter().cloned())
            .collect();
        let mut e = Error::new(kind, message);
        e.inner.retry_after = retry_after;
        e.inner.timeout_phase = timeout_phase;
        e.inner.attempts = attempts;
        e.inner.fault = errors.last().and_then(|l| l.inner.fault);
        e.inner.context_limit = errors.last().and_then(|l| l.inner.context_limit);
        e.inner.maybe_processed = errors.last().and_then(|l| l.inner.maybe_processed);
        e.inner.causes = errors;
        e
    }

    /// Names the link (provider name) and model this error came from.
    pub fn with_provider(
        mut self,
        provider: impl Into<Arc<str>>,
        model: impl Into<Arc<str>>,
    ) -> Self {
        self.inner.provider = Some(provider.into());
        self.inner.model = Some(model.into());
        self
    }

    crate::setters! {
        /// Keeps the vendor's HTTP status.
        with_status(status: StatusCode) => inner.status = Some(status);
        /// Keeps the vendor's own error code or type from the body (e.g. `insufficient_quota`,
        /// `1113`).
        with_vendor_code(code: impl Into<String>) => inner.vendor_code = Some(code.into());
        /// The wait the vendor (or a local limiter) asked for before trying again.
        with_retry_after(after: Duration) => inner.retry_after = Some(after);
        /// Sets which time limit ran out (meaningful for [`ErrorKind::Timeout`]).
        with_timeout_phase(phase: TimeoutPhase) => inner.timeout_phase = Some(phase);
        /// Keeps the underlying cause, reachable through [`std::error::Error::source`].
        with_source(source: impl Into<BoxError>) => inner.source = Some(source.into());
        /// Marks that the request had reached the vendor when this failure happened: the answer
        /// was cut short (a body that stopped before its declared length, a stream that closed
        /// without its terminator, a reset mid-answer), so the vendor may already have processed
        /// — and billed — the request.
        ///
        /// This is a fact about the failure, kept beside the kind (usually
        /// [`ErrorKind::Network`]); it does not change the disposition. Policies that must not
        /// repeat a side effect read it with [`Error::request_delivered`].
        ///
        /// # Examples
        ///
        /// ```
        /// use ripcord_core::{Error, ErrorKind};
        /// let cut = Error::new(ErrorKind::Network, "stream truncated").with_request_delivered();
        /// assert!(cut.request_delivered());
        /// assert!(!Error::new(ErrorKind::Network, "connection refused").request_delivered());
        /// ```
        ///
        /// One notion with [`Error::maybe_processed`]: this sets it to a known yes.
        with_request_delivered() => inner.maybe_processed = Some(true);
        /// Attaches the attempts that led to this error (a retry decorator's failed attempts).
        with_attempts(attempts: Vec<Attempt>) => inner.attempts = attempts;
        /// Attaches the links a chain passed over without a call (see [`Error::skipped`]).
        with_skipped(skipped: Vec<Skip>) => inner.skipped = skipped;
        /// Keeps what the vendor stated about the model's window (a context-length error).
        with_context_limit(limit: ContextLimit) => inner.context_limit = Some(limit);
        /// Charges this failure to `fault`, overriding the kind's default (see [`crate::Fault`]).
        with_fault(fault: crate::fault::Fault) => inner.fault = Some(fault);
        /// Says whether the vendor may have processed the request, overriding the default (see
        /// [`Error::maybe_processed`]).
        with_maybe_processed(maybe: bool) => inner.maybe_processed = Some(maybe);
    }

    pub(crate) fn fault_override(&self) -> Option<crate::fault::Fault> {
        self.inner.fault
    }

    pub(crate) fn processed_override(&self) -> Option<bool> {
        self.inner.maybe_processed
    }

    crate::setters! {
        /// Replaces the message of this layer.
        with_message(message: impl Into<Cow<'static, str>>) => inner.message = message.into();
    }

    /// What failed.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// What to do about it: the kind's disposition, with the retry-after filled in for retries.
    pub fn disposition(&self) -> Disposition {
        match self.inner.kind.disposition() {
            Disposition::Retry { .. } => Disposition::Retry {
                after: self.inner.retry_after,
            },
            other => other,
        }
    }

    /// The message of this layer (without provider, status or causes).
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// The link (provider name) the error came from, if known.
    pub fn provider(&self) -> Option<&str> {
        self.inner.provider.as_deref()
    }

    /// The model the error came from, if known.
    pub fn model(&self) -> Option<&str> {
        self.inner.model.as_deref()
    }

    /// The vendor's HTTP status, if there was one.
    pub fn status(&self) -> Option<StatusCode> {
        self.inner.status
    }

    /// The vendor's own error code from the body, if there was one.
    pub fn vendor_code(&self) -> Option<&str> {
        self.inner.vendor_code.as_deref()
    }

    /// The wait asked for before trying again, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.inner.retry_after
    }

    /// Which time limit ran out, for timeouts.
    pub fn timeout_phase(&self) -> Option<TimeoutPhase> {
        self.inner.timeout_phase
    }

    /// The attempts (with their latencies and kinds) that led to this error.
    pub fn attempts(&self) -> &[Attempt] {
        &self.inner.attempts
    }

    /// Mutable access to the attempts (decorators append or rename them).
    pub fn attempts_mut(&mut self) -> &mut Vec<Attempt> {
        &mut self.inner.attempts
    }

    /// The links a failed chain call passed over without a call (breakers aside, which are
    /// attempts): window, capability, locality and deadline skips, each with its reason and,
    /// for a window skip, both numbers. Empty for errors that did not come from a chain.
    pub fn skipped(&self) -> &[Skip] {
        &self.inner.skipped
    }

    /// What the vendor stated about the model's window, for a context-length error that said
    /// it ([`ContextLimit`]).
    pub fn context_limit(&self) -> Option<ContextLimit> {
        self.inner.context_limit
    }

    /// For an error from [`Error::exhausted`]: every link's error, in order. Empty otherwise.
    pub fn causes(&self) -> &[Error] {
        &self.inner.causes
    }

    /// True when the request is known to have reached the vendor before the failure (see
    /// [`Error::with_request_delivered`]).
    ///
    /// A known fact, where [`Error::maybe_processed`] also answers yes when it cannot tell.
    pub fn request_delivered(&self) -> bool {
        self.inner.maybe_processed == Some(true)
    }

    /// True when this is a timeout.
    pub fn is_timeout(&self) -> bool {
        self.inner.kind == ErrorKind::Timeout
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        if let (Some(p), Some(m)) = (&i.provider, &i.model) {
            write!(f, "{p}/{m}: ")?;
        } else if let Some(p) = &i.provider {
            write!(f, "{p}: ")?;
        }
        f.write_str(i.kind.as_str())?;
        if let Some(phase) = i.timeout_phase {
            write!(f, " ({phase})")?;
        }
        match (i.status, &i.vendor_code) {
            (Some(s), Some(c)) => write!(f, " (HTTP {s}, {c})")?,
            (Some(s), None) => write!(f, " (HTTP {s})")?,
            (None, Some(c)) => write!(f, " ({c})")?,
            (None, None) => {}
        }
        if !i.message.is_empty() {
            write!(f, ": {}", i.message)?;
        }
        if !i.causes.is_empty() {
            f.write_str(" [")?;
            for (n, c) in i.causes.iter().enumerate() {
                if n > 0 {
                    f.write_str("; ")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str("]")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        let mut d = f.debug_struct("Error");
        d.field("kind", &i.kind).field("message", &i.message);
        // The context that is set, in this order.
        fn set<T: fmt::Debug>(v: &Option<T>) -> Option<&dyn fmt::Debug> {
            v.as_ref().map(|v| v as &dyn fmt::Debug)
        }
        for (name, value) in [
            ("provider", set(&i.provider)),
            ("model", set(&i.model)),
            ("status", set(&i.status)),
            ("vendor_code", set(&i.vendor_code)),
            ("retry_after", set(&i.retry_after)),
            ("timeout_phase", set(&i.timeout_phase)),
            ("fault", set(&i.fault)),
            ("context_limit", set(&i.context_limit)),
        ] {
            if let Some(v) = value {
                d.field(name, v);
            }
        }
        if !i.skipped.is_empty() {
            d.field("skipped", &i.skipped);
        }
        match i.maybe_processed {
            Some(true) => {
                d.field("request_delivered", &true);
            }
            Some(false) => {
                d.field("maybe_processed", &false);
            }
            None => {}
        }
        if !i.causes.is_empty() {
            d.field("causes", &i.causes);
        }
        if let Some(s) = &i.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        if let Some(s) = &self.inner.source {
            return Some(s.as_ref());
        }
        self.inner
            .causes
            .last()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl Clone for Error {
    /// Clones everything but the boxed `source`, which is not `Clone`; its text is kept in the
    /// message of the clone so nothing is silently lost.
    fn clone(&self) -> Self {
        let i = &self.inner;
        let message = match &i.source {
            Some(s) => Cow::Owned(format!("{}: {s}", i.message)),
            None => i.message.clone(),
        };
        Error {
            inner: Box::new(Inner {
                kind: i.kind,
                message,
                provider: i.provider.clone(),
                model: i.model.clone(),
                status: i.status,
                vendor_code: i.vendor_code.clone(),
                retry_after: i.retry_after,
                timeout_phase: i.timeout_phase,
                attempts: i.attempts.clone(),
                skipped: i.skipped.clone(),
                causes: i.causes.clone(),
                source: None,
                fault: i.fault,
                context_limit: i.context_limit,
                maybe_processed: i.maybe_processed,
            }),
        }
    }
}

/// A serialisable summary of an error, as the CLI's JSON and the gateway print it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ErrorSummary {
    /// The snake_case kind.
    pub kind: ErrorKind,
    /// The full human-readable message (`Display` of the error).
    pub message: String,
    /// The vendor's HTTP status, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The link the error came from, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

impl From<&Error> for ErrorSummary {
    fn from(e: &Error) -> Self {
        ErrorSummary {
            kind: e.kind(),
            message: e.to_string(),
            status: e.status().map(StatusCode::as_u16),
            provider: e.provider().map(str::to_owned),
        }
    }
}
