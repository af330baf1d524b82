//! The vendor-neutral chat response, usage and cost, and provenance.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, StatusCode};
use crate::reasoning::ReasoningBlock;
use crate::request::ToolCall;

/// Why the model stopped.
///
/// Vendor values map to a neutral variant; anything else is kept raw in `Other`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural stop or a stop sequence.
    #[default]
    Stop,
    /// `max_tokens` was reached.
    Length,
    /// The model called tools.
    ToolCalls,
    /// The vendor's content filter cut the answer.
    ContentFilter,
    /// Any other vendor value, kept as it was.
    Other(String),
}

impl FinishReason {
    /// The neutral snake_case name (`stop`, `length`, `tool_calls`, `content_filter`) or the raw value.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(s) => s,
        }
    }
}

/// Price of a model in USD per million tokens.
///
/// # Examples
///
/// ```
/// use ripcord_core::{Price, Usage};
/// let price = Price::per_million(2.5, 10.0);
/// let usage = Usage::new(1_000, 500);
/// assert!((price.cost(&usage) - 0.0075).abs() < 1e-12);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Price {
    /// USD per million input (prompt) tokens.
    pub input_per_mtok: f64,
    /// USD per million output (completion) tokens.
    pub output_per_mtok: f64,
    /// USD per million cached input tokens; `None` means cached tokens cost the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
}

impl Price {
    /// A price with no cache discount.
    pub const fn per_million(input: f64, output: f64) -> Self {
        Price {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: None,
        }
    }

    /// Sets the cached-input price.
    pub const fn with_cached_input(mut self, cached: f64) -> Self {
        self.cached_input_per_mtok = Some(cached);
        self
    }

    /// Free (local models).
    pub const FREE: Price = Price::per_million(0.0, 0.0);

    /// The cost in USD of `usage` at this price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        let cached_price = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        (fresh as f64 * self.input_per_mtok
            + cached as f64 * cached_price
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }

    /// The cost in USD of an estimated number of input and output tokens.
    pub fn estimate(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        self.cost(&Usage::new(input_tokens, output_tokens))
    }
}

/// Token counts of one response, and its cost estimate.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from the vendor's cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Estimated cost in USD from the model's price table, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Usage with these counts and no cost.
    pub const fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            cached_input_tokens: 0,
            cost_usd: None,
        }
    }

    /// Sets the cached input tokens.
    pub const fn with_cached_input(mut self, cached: u64) -> Self {
        self.cached_input_tokens = cached;
        self
    }

    /// Fills in the cost from a price.
    pub fn priced(mut self, price: Option<&Price>) -> Self {
        self.cost_usd = price.map(|p| p.cost(&self));
        self
    }

    /// Input plus output tokens.
    pub const fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// One try at one link: what it was, how it ended, how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Attempt {
    /// The link's name (provider).
    pub provider: Arc<str>,
    /// The model asked.
    pub model: Arc<str>,
    /// `None` on success, else what failed.
    pub error_kind: Option<ErrorKind>,
    /// The vendor's HTTP status, if the attempt got one.
    #[serde(default)]
    pub status: Option<u16>,
    /// Wall time of the attempt.
    #[serde(rename = "latency_ms", with = "millis")]
    pub latency: Duration,
    /// The `max_tokens` this attempt was sent when the chain lowered the request's to the
    /// link's known output cap (a client's 64000 to a model that writes at most 16384); `None`
    /// when the request's went as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamped_max_tokens: Option<u32>,
    /// The deployment of a pooled link the attempt went to (a region, a key, an account);
    /// `None` for a link that is not a pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<Arc<str>>,
}

impl Attempt {
    /// A successful attempt.
    pub fn success(provider: Arc<str>, model: Arc<str>, latency: Duration) -> Self {
        Attempt {
            provider,
            model,
            error_kind: None,
            status: None,
            latency,
            clamped_max_tokens: None,
            deployment: None,
        }
    }

    /// A failed attempt, from its error.
    pub fn failure(provider: Arc<str>, model: Arc<str>, error: &Error, latency: Duration) -> Self {
        Attempt {
            provider,
            model,
            error_kind: Some(error.kind()),
            status: error.status().map(StatusCode::as_u16),
            latency,
            clamped_max_tokens: None,
            deployment: None,
        }
    }

    crate::setters! {
        /// The same attempt, naming the deployment of a pooled link it went to.
        with_deployment(deployment: Arc<str>) => deployment = Some(deployment);
    }

    /// True when the attempt succeeded.
    pub fn succeeded(&self) -> bool {
        self.error_kind.is_none()
    }
}

/// Why a link was passed over without a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// The request uses tools and the model has none.
    NoTools,
    /// The request has images and the model has no vision.
    NoVision,
    /// The request wants JSON and the model has no JSON mode.
    NoJson,
    /// The request streams and the model cannot.
    NoStreaming,
    /// The estimated prompt plus `max_tokens` does not fit the model's window.
    ContextWindow,
    /// The request's locality requirement forbids this model.
    Locality,
    /// The link was already tried in this call (a route led back to it).
    AlreadyTried,
    /// Too little of the deadline was left for an attempt at this link to be useful.
    Deadline,
}

impl SkipReason {
    /// The stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipReason::NoTools => "no_tools",
            SkipReason::NoVision => "no_vision",
            SkipReason::NoJson => "no_json",
            SkipReason::NoStreaming => "no_streaming",
            SkipReason::ContextWindow => "context_window",
            SkipReason::Locality => "locality",
            SkipReason::AlreadyTried => "already_tried",
            SkipReason::Deadline => "deadline",
        }
    }
}

/// A link passed over without a call.
///
/// # Examples
///
/// ```
/// use ripcord_core::{Skip, SkipReason};
/// let s = Skip::window("small".into(), 9_000, 500, 8_192);
/// assert_eq!(s.reason, SkipReason::ContextWindow);
/// assert_eq!((s.prompt_tokens, s.window), (Some(9_000), Some(8_192)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Skip {
    /// The link's name.
    pub provider: Arc<str>,
    /// Why.
    pub reason: SkipReason,
    /// For a window skip: the prompt's estimated tokens (the larger of ripcord's estimate and
    /// a count a vendor stated during this call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    /// For a window skip: the output tokens the request reserves (its `max_tokens`, capped by
    /// the link's output limit); the prompt plus this must fit the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    /// For a window skip: the window the link was judged by (its known or stated window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
}

impl Skip {
    /// A skip for `reason`, without numbers.
    pub fn new(provider: Arc<str>, reason: SkipReason) -> Self {
        Skip {
            provider,
            reason,
            prompt_tokens: None,
            output_tokens: None,
            window: None,
        }
    }

    /// A window skip: `prompt_tokens` plus `output_tokens` did not fit `window`.
    pub fn window(provider: Arc<str>, prompt_tokens: u32, output_tokens: u32, window: u32) -> Self {
        Skip {
            provider,
            reason: SkipReason::ContextWindow,
            prompt_tokens: Some(prompt_tokens),
            output_tokens: Some(output_tokens),
            window: Some(window),
        }
    }
}

/// Where an answer came from and what it took to get it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Provenance {
    /// The link that served the answer (`None` when no link did, e.g. a static reply).
    pub served_by: Option<Arc<str>>,
    /// Every attempt, in order, the successful one last.
    pub attempts: Vec<Attempt>,
    /// Links passed over without a call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skip>,
    /// True when the answer is not the primary's full-quality answer: a fallback served it, or
    /// it is the static last-resort reply.
    pub degraded: bool,
    /// True when this is the static last-resort reply.
    #[serde(default)]
    pub static_reply: bool,
    /// A notice for the end user, e.g. "answered by a smaller backup model".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// Messages the chain dropped from the front of the conversation to fit the serving
    /// link's window ([`crate::chain::Trim::Oldest`]); 0 when the link saw all of it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed_messages: u32,
    /// The link that continued this streamed answer after its stream was cut (the last one,
    /// when there were several); `None` when no continuation happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_by: Option<Arc<str>>,
    /// Every continuation of this streamed answer, in order, with where each began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub continuations: Vec<Continuation>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How a continuing link was asked to go on from the delivered text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContinuationMode {
    /// The delivered text as the start of the assistant's own message (assistant prefill).
    Prefill,
    /// The delivered text as an assistant message, then an instruction to continue it.
    Instruction,
}

impl ContinuationMode {
    /// `prefill` or `instruction`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ContinuationMode::Prefill => "prefill",
            ContinuationMode::Instruction => "instruction",
        }
    }
}

/// One continuation of a cut stream ([`crate::StreamPolicy::Continue`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Continuation {
    /// The link whose stream was cut.
    pub from: Arc<str>,
    /// The link that continued it.
    pub by: Arc<str>,
    /// Bytes (UTF-8) of answer text delivered before the cut: where the continuation begins.
    pub offset: u64,
    /// How the continuing link was asked.
    pub mode: ContinuationMode,
    /// What cut the stream.
    pub reason: ErrorKind,
    /// Bytes the continuing link repeated from the end of the delivered text and the chain
    /// dropped.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub overlap_trimmed: u64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl Provenance {
    /// The link that served the answer, `"static"` for the static reply, or `""` when nothing
    /// did — the same name [`ChatResponse::served_by`] gives, for a stream's provenance too.
    pub fn served_by(&self) -> &str {
        match &self.served_by {
            Some(s) => s,
            None if self.static_reply => "static",
            None => "",
        }
    }

    /// Provenance of an answer served by `provider` in one attempt.
    pub fn served(provider: Arc<str>, model: Arc<str>, latency: Duration) -> Self {
        Provenance {
            served_by: Some(provider.clone()),
            attempts: vec![Attempt::success(provider, model, latency)],
            ..Provenance::default()
        }
    }

    /// The deployment that served the answer when the serving link is a pool of deployments
    /// of one model (a region, a key, an account): the one named by the successful last
    /// attempt; `None` for a link that is not a pool, or when no link served.
    pub fn deployment(&self) -> Option<&str> {
        self.attempts
            .last()
            .filter(|a| a.succeeded())
            .and_then(|a| a.deployment.as_deref())
    }

    /// The number of retries and fallbacks it took (attempts minus one, at least zero).
    pub fn extra_attempts(&self) -> usize {
        self.attempts.len().saturating_sub(1)
    }
}

/// A chat answer.
///
/// # Examples
///
/// ```
/// use ripcord_core::{ChatResponse, Usage};
/// let r = ChatResponse::new("Hello!").with_usage(Usage::new(3, 2));
/// assert_eq!(r.text(), "Hello!");
/// assert_eq!(r.usage.total_tokens(), 5);
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatResponse {
    /// The answer text (empty when the model only called tools).
    pub content: String,
    /// Tool calls the model made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The model's reasoning, in the order it came (empty when the model showed none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<ReasoningBlock>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Token counts and cost.
    pub usage: Usage,
    /// The model that answered, as the vendor named it.
    #[serde(default)]
    pub model: String,
    /// Where the answer came from.
    #[serde(default)]
    pub provenance: Provenance,
}

impl ChatResponse {
    /// A plain text answer that stopped normally.
    pub fn new(content: impl Into<String>) -> Self {
        ChatResponse {
            content: content.into(),
            ..ChatResponse::default()
        }
    }

    crate::setters! {
        /// Sets the usage.
        with_usage(usage: Usage) => usage = usage;
        /// Sets the responding model.
        with_model(model: impl Into<String>) => model = model.into();
        /// Sets the finish reason.
        with_finish_reason(reason: FinishReason) => finish_reason = reason;
        /// Sets the tool calls.
        with_tool_calls(calls: Vec<ToolCall>) => tool_calls = calls;
        /// Sets the reasoning blocks.
        with_reasoning(reasoning: Vec<ReasoningBlock>) => reasoning = reasoning;
    }

    /// The answer text.
    pub fn text(&self) -> &str {
        &self.content
    }

    /// The link that served the answer, or `"static"` for the static reply, or `""`.
    pub fn served_by(&self) -> &str {
        self.provenance.served_by()
    }

    /// True when the answer is degraded (a fallback or the static reply).
    pub fn degraded(&self) -> bool {
        self.provenance.degraded
    }
}

/// Serialises a `Duration` as fractional milliseconds.
pub(crate) mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        if !ms.is_finite() || ms < 0.0 {
            return Err(serde::de::Error::custom(format!(
                "latency_ms must be a finite non-negative number, got {ms}"
            )));
        }
        Ok(Duration::from_secs_f64(ms / 1000.0))
    }
}
