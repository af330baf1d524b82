//! Redaction before cloud calls (opt-in): mask personal data in what a cloud link sees, and
//! put it back in the answer.
//!
//! [`Redact`] wraps one link. When the link's [`Capabilities::locality`](ripcord_core::Capabilities::locality) is
//! [`Locality::Cloud`](ripcord_core::Locality::Cloud), every text part of every message and
//! every tool-call argument of the request is scanned by a [`PiiRedactor`], and each piece of
//! personal data is replaced by a placeholder such as `[EMAIL_1]` or `[PHONE_2]` — the same
//! value always gets the same placeholder within one request, so the model can still tell
//! "the same address" from "another one". A link whose locality is `Local` gets the request
//! untouched: no data leaves the machine, so there is nothing to hide.
//!
//! With restoring on (the default), placeholders the vendor writes back are replaced by the
//! original values in the answer text and tool-call arguments — for [`ChatModel::chat`] and
//! for streams, where a placeholder split across deltas (`"[EMA"`, `"IL_1] is"`) is held back
//! only until it is complete or can no longer be one: at most one placeholder's length of text
//! is ever delayed. Placeholders the vendor invented (not issued for this request) are left as
//! they are.
//!
//! Detected kinds: [`PiiKind`]. Near-misses are not masked: an 18-digit number with a wrong
//! ID check character, a 16-digit number failing Luhn, dates, order numbers, version strings
//! like `1.2.3.4567`, and `999.1.1.1`.
//!
//! The mapping ([`Redaction`]) lives only for the call (or stream) and never appears in logs
//! or `Debug` output; the `ripcord.redacted` debug event carries counts only.
//!
//! Put it innermost, around the vendor model itself (see the crate docs' recommended order),
//! so every retry is masked and every policy above sees the caller's text.

mod detect;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use async_trait::async_trait;
use futures::Stream;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, ContentPart, Context, Result, StreamEvent,
};

pub use detect::{PiiKind, PiiRedactor, PiiRedactorBuilder};

use crate::error::ConfigError;

/// The placeholders issued for one request, and the values they stand for.
///
/// `Debug` shows only how many values were masked, never the values.
#[derive(Clone, Default)]
pub struct Redaction {
    by_value: HashMap<(PiiKind, String), String>,
    by_placeholder: HashMap<String, String>,
    next: HashMap<PiiKind, u32>,
}

impl fmt::Debug for Redaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redaction")
            .field("masked", &self.by_placeholder.len())
            .finish_non_exhaustive()
    }
}

impl Redaction {
    /// An empty mapping.
    pub fn new() -> Self {
        Redaction::default()
    }

    /// The placeholder for `value` of `kind`, issuing the next number on first sight.
    pub fn placeholder(&mut self, kind: &PiiKind, value: &str) -> String {
        let key = (kind.clone(), value.to_owned());
        if let Some(p) = self.by_value.get(&key) {
            return p.clone();
        }
        let n = self.next.entry(kind.clone()).or_insert(0);
        *n += 1;
        let p = format!("[{}_{}]", kind.label(), n);
        self.by_placeholder.insert(p.clone(), value.to_owned());
        self.by_value.insert(key, p.clone());
        p
    }

    /// How many distinct values were masked.
    pub fn len(&self) -> usize {
        self.by_placeholder.len()
    }

    /// True when nothing was masked.
    pub fn is_empty(&self) -> bool {
        self.by_placeholder.is_empty()
    }

    /// How many distinct values of each kind were masked.
    pub fn counts(&self) -> BTreeMap<PiiKind, u32> {
        self.next.iter().map(|(k, n)| (k.clone(), *n)).collect()
    }

    /// The original value behind `placeholder`, if this mapping issued it.
    pub fn value(&self, placeholder: &str) -> Option<&str> {
        self.by_placeholder.get(placeholder).map(String::as_str)
    }

    /// `text` with every placeholder this mapping issued replaced by its value.
    pub fn restore(&self, text: &str) -> String {
        if self.is_empty() || !text.contains('[') {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(open) = rest.find('[') {
            out.push_str(&rest[..open]);
            let tail = &rest[open..];
            let close = tail[1..].find(['[', ']']).map(|i| i + 1);
            match close {
                Some(c) if tail.as_bytes()[c] == b']' => match self.value(&tail[..=c]) {
                    Some(v) => {
                        out.push_str(v);
                        rest = &tail[c + 1..];
                    }
                    None => {
                        out.push('[');
                        rest = &tail[1..];
                    }
                },
                _ => {
                    out.push('[');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// True when `tail` (starting with `[`, no `]`) could still grow into an issued placeholder.
    fn could_complete(&self, tail: &str) -> bool {
        self.by_placeholder
            .keys()
            .any(|p| p.len() > tail.len() && p.starts_with(tail))
    }
}

/// Restores placeholders in text that arrives in pieces (stream deltas).
///
/// Text is released as soon as it cannot be part of a placeholder; a trailing `[…` that could
/// still become an issued placeholder is held until the next piece (or [`Restorer::flush`]).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use ripcord_resilience::{PiiKind, Redaction, Restorer};
/// let mut map = Redaction::new();
/// map.placeholder(&PiiKind::Email, "li.lei@example.cn");
/// let mut r = Restorer::new(Arc::new(map));
/// assert_eq!(r.push("Write to [EMA"), "Write to ");
/// assert_eq!(r.push("IL_1] today"), "li.lei@example.cn today");
/// assert_eq!(r.flush(), "");
/// ```
#[derive(Debug, Clone)]
pub struct Restorer {
    map: Arc<Redaction>,
    pending: String,
}

impl Restorer {
    /// A restorer for the placeholders in `map`.
    pub fn new(map: Arc<Redaction>) -> Self {
        Restorer {
            map,
            pending: String::new(),
        }
    }

    /// Takes the next piece; returns the restored text that can be released now.
    pub fn push(&mut self, piece: &str) -> String {
        self.pending.push_str(piece);
        let hold_from = match self.pending.rfind('[') {
            Some(i)
                if !self.pending[i..].contains(']')
                    && self.map.could_complete(&self.pending[i..]) =>
            {
                i
            }
            _ => self.pending.len(),
        };
        let held = self.pending.split_off(hold_from);
        let ready = std::mem::replace(&mut self.pending, held);
        self.map.restore(&ready)
    }

    /// Releases whatever is held (at the end of the text).
    pub fn flush(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        self.map.restore(&rest)
    }

    /// Drops whatever is held (the answer was restarted).
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

/// Redaction settings, and the constructor of [`Redact`] wrappers.
///
/// # Examples
///
/// ```
/// use ripcord_resilience::{PiiKind, RedactPolicy};
/// let policy = RedactPolicy::builder()
///     .kinds([PiiKind::Email, PiiKind::Phone, PiiKind::CnResidentId])
///     .custom("EMPLOYEE_ID", r"(?-u:\b)EMP-\d{6}(?-u:\b)")
///     .restore(true)
///     .build()?;
/// # let _ = policy;
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RedactPolicy {
    redactor: Arc<PiiRedactor>,
    restore: bool,
}

/// Builds a [`RedactPolicy`]; patterns are compiled in [`RedactPolicyBuilder::build`].
#[derive(Debug, Clone)]
pub struct RedactPolicyBuilder {
    redactor: PiiRedactorBuilder,
    restore: bool,
}

impl RedactPolicy {
    /// A builder: every built-in kind, no custom patterns, restoring on.
    pub fn builder() -> RedactPolicyBuilder {
        RedactPolicyBuilder {
            redactor: PiiRedactor::builder(),
            restore: true,
        }
    }

    /// Wraps a model.
    pub fn wrap<M: ChatModel>(&self, model: M) -> Redact<M> {
        Redact::new(model, self.clone())
    }

    /// The redactor.
    pub fn redactor(&self) -> &PiiRedactor {
        &self.redactor
    }
}

impl RedactPolicyBuilder {
    /// Looks only for these built-in kinds (see [`PiiRedactorBuilder::kinds`]).
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = PiiKind>) -> Self {
        self.redactor = self.redactor.kinds(kinds);
        self
    }

    /// Adds a user pattern (see [`PiiRedactorBuilder::custom`]).
    pub fn custom(mut self, label: impl Into<String>, pattern: impl Into<String>) -> Self {
        self.redactor = self.redactor.custom(label, pattern);
        self
    }

    /// Puts the original values back in answers (default `true`).
    pub fn restore(mut self, yes: bool) -> Self {
        self.restore = yes;
        self
    }

    /// Compiles the patterns.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a bad custom label or pattern, see [`PiiRedactorBuilder::build`].
    pub fn build(self) -> std::result::Result<RedactPolicy, ConfigError> {
        Ok(RedactPolicy {
            redactor: Arc::new(self.redactor.build()?),
            restore: self.restore,
        })
    }
}

/// A model whose cloud requests are redacted, and whose answers are restored.
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_resilience::{ChatModelExt, RedactPolicy};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // The scripted cloud vendor answers with a placeholder it was given.
/// let link = ScriptedModel::new("openai")
///     .reply("I will email [EMAIL_1].")
///     .with_redaction(RedactPolicy::builder().build()?);
/// let req = ChatRequest::user("Email wang.fang@example.com the report.");
/// let reply = link.chat(&req, &Context::new()).await?;
/// assert_eq!(reply.text(), "I will email wang.fang@example.com.");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Redact<M> {
    inner: M,
    policy: RedactPolicy,
}

impl<M: ChatModel> Redact<M> {
    /// Wraps `inner`.
    pub fn new(inner: M, policy: RedactPolicy) -> Self {
        Redact { inner, policy }
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

    /// The request as this link must see it, and the mapping; `None` when nothing is masked
    /// (a local link, or no personal data found).
    fn mask(&self, req: &ChatRequest) -> Option<(ChatRequest, Redaction)> {
        if self.inner.capabilities().locality.is_local() {
            return None;
        }
        let r = &self.policy.redactor;
        let any = req.messages.iter().any(|m| {
            m.content.iter().any(|p| match p {
                ContentPart::Text { text } => !r.find(text).is_empty(),
                _ => false,
            }) || m
                .tool_calls
                .iter()
                .any(|c| !r.find(&c.arguments).is_empty())
        });
        if !any {
            return None;
        }
        let mut map = Redaction::new();
        let mut masked = req.clone();
        for m in &mut masked.messages {
            for p in &mut m.content {
                if let ContentPart::Text { text } = p {
                    *text = r.redact(text, &mut map);
                }
            }
            for c in &mut m.tool_calls {
                c.arguments = r.redact(&c.arguments, &mut map);
            }
        }
        tracing::debug!(
            ripcord.link = %self.inner.id().name,
            masked = map.len(),
            kinds = %map
                .counts()
                .iter()
                .map(|(k, n)| format!("{k}={n}"))
                .collect::<Vec<_>>()
                .join(","),
            message = ripcord_core::telemetry::event::REDACTED
        );
        Some((masked, map))
    }
}

#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Redact<M> {
    // `bounds_itself` forwards to this model: masking adds no wait.
    inner_model!(inner: M);

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let Some((masked, map)) = self.mask(req) else {
            return self.inner.chat(req, ctx).await;
        };
        let mut resp = self.inner.chat(&masked, ctx).await?;
        if self.policy.restore {
            resp.content = map.restore(&resp.content);
            for c in &mut resp.tool_calls {
                c.arguments = map.restore(&c.arguments);
            }
        }
        Ok(resp)
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let Some((masked, map)) = self.mask(req) else {
            return self.inner.stream(req, ctx).await;
        };
        let stream = self.inner.stream(&masked, ctx).await?;
        if !self.policy.restore {
            return Ok(stream);
        }
        let map = Arc::new(map);
        Ok(Box::pin(Restoring {
            inner: stream,
            text: Restorer::new(map.clone()),
            tools: BTreeMap::new(),
            map,
            queue: VecDeque::new(),
            done: false,
        }))
    }
}

/// A stream whose text and tool-call deltas are restored, holding back partial placeholders.
struct Restoring {
    inner: ChatStream,
    map: Arc<Redaction>,
    text: Restorer,
    tools: BTreeMap<u32, Restorer>,
    queue: VecDeque<Result<StreamEvent>>,
    done: bool,
}

impl Restoring {
    /// Queues whatever text and tool arguments are held, before a non-delta event.
    fn flush(&mut self) {
        let text = self.text.flush();
        if !text.is_empty() {
            self.queue.push_back(Ok(StreamEvent::TextDelta { text }));
        }
        for (index, r) in &mut self.tools {
            let arguments = r.flush();
            if !arguments.is_empty() {
                self.queue.push_back(Ok(StreamEvent::ToolCallDelta {
                    index: *index,
                    id: None,
                    name: None,
                    arguments,
                }));
            }
        }
    }

    fn on_event(&mut self, ev: StreamEvent) {
        match ev {
            StreamEvent::TextDelta { text } => {
                let text = self.text.push(&text);
                if !text.is_empty() {
                    self.queue.push_back(Ok(StreamEvent::TextDelta { text }));
                }
            }
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                let text = self.text.flush();
                if !text.is_empty() {
                    self.queue.push_back(Ok(StreamEvent::TextDelta { text }));
                }
                let map = self.map.clone();
                let arguments = self
                    .tools
                    .entry(index)
                    .or_insert_with(|| Restorer::new(map))
                    .push(&arguments);
                if !arguments.is_empty() || id.is_some() || name.is_some() {
                    self.queue.push_back(Ok(StreamEvent::ToolCallDelta {
                        index,
                        id,
                        name,
                        arguments,
                    }));
                }
            }
            StreamEvent::Restarted { reason, message } => {
                self.text.clear();
                self.tools.clear();
                self.queue
                    .push_back(Ok(StreamEvent::Restarted { reason, message }));
            }
            other => {
                self.flush();
                self.queue.push_back(Ok(other));
            }
        }
    }
}

impl Stream for Restoring {
    type Item = Result<StreamEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(item) = this.queue.pop_front() {
                return Poll::Ready(Some(item));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match this.inner.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(ev))) => this.on_event(ev),
                Poll::Ready(Some(Err(e))) => {
                    this.flush();
                    this.queue.push_back(Err(e));
                }
                Poll::Ready(None) => {
                    this.flush();
                    this.done = true;
                }
            }
        }
    }
}
