//! Metrics from ripcord's `tracing` spans and events.
//!
//! The library crates only emit `tracing` spans and events (see
//! [`ripcord_core::telemetry`]). [`MetricsLayer`] is a `tracing_subscriber::Layer` that watches
//! them and records OpenTelemetry instruments:
//!
//! | instrument | kind, unit | from | attributes |
//! | --- | --- | --- | --- |
//! | `gen_ai.client.operation.duration` | histogram, s | attempt span closed | `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model`, `server.address`, `ripcord.link`, `error.type` |
//! | `gen_ai.client.token.usage` | histogram, {token} | attempt span closed | the above plus `gen_ai.token.type` (`input` / `output`) |
//! | `gen_ai.client.operation.time_to_first_chunk` | histogram, s | attempt span closed (streams) | as duration |
//! | `ripcord.requests` | counter | attempt span closed | `gen_ai.provider.name`, `ripcord.link`, `gen_ai.request.model` |
//! | `ripcord.errors` | counter | failed attempt span closed | those plus `error.type` |
//! | `ripcord.cost` | counter, USD | attempt span with a cost closed | `gen_ai.provider.name`, `gen_ai.request.model` |
//! | `ripcord.chain.calls` | counter | chain span closed | `ripcord.chain`, `ripcord.served_by`, `ripcord.degraded`, `error.type` |
//! | `ripcord.chain.duration` | histogram, s | chain span closed | `ripcord.chain`, `error.type` |
//! | `ripcord.retries` | histogram, {retry} | chain span closed: `ripcord.retry_scheduled` events inside it | `ripcord.chain` |
//! | `ripcord.retries.scheduled` | counter | `ripcord.retry_scheduled` | `ripcord.link`, `error.type` |
//! | `ripcord.stream.events_skipped` | counter | `ripcord.stream_event_skipped` | `ripcord.link` |
//! | `ripcord.fallbacks` | counter | `ripcord.fallback` | `ripcord.chain`, `ripcord.fallback.from`, `ripcord.fallback.to`, `error.type` |
//! | `ripcord.stream.continuations` | counter | `ripcord.stream_continued` | `ripcord.chain`, `ripcord.fallback.from`, `ripcord.continued_by`, `ripcord.continuation.mode` (`prefill` / `instruction`), `ripcord.continuation.reason` (`cut` / `stall` / `in_band`) |
//! | `ripcord.links.skipped` | counter | `ripcord.link_skipped` | `ripcord.chain`, `ripcord.link`, `ripcord.skip.reason` |
//! | `ripcord.static_replies` | counter | `ripcord.static_reply` | `ripcord.chain` |
//! | `ripcord.breaker.state` | gauge (0 closed, 1 half-open, 2 open) | `ripcord.breaker_transition` | `ripcord.link` |
//! | `ripcord.breaker.transitions` | counter | `ripcord.breaker_transition` | `ripcord.link`, `from`, `to` |
//! | `ripcord.breaker.open_time` | counter, s | a transition out of `open` | `ripcord.link` |
//! | `ripcord.state.degradations` | counter | `ripcord.state_degraded` (once per outage of shared state) | `ripcord.state.backend` |
//! | `ripcord.state.degraded` | gauge (1 on local state, 0 shared again) | `ripcord.state_degraded` / `ripcord.state_restored` | `ripcord.state.backend` |
//! | `ripcord.tenant.tokens` | counter, {token} | `ripcord.tenant_usage` (a gateway answer) | `ripcord.tenant`, `gen_ai.token.type` |
//! | `ripcord.tenant.cost` | counter, USD | `ripcord.tenant_usage` with a cost | `ripcord.tenant` |
//! | `ripcord.vendor.status` | gauge (0 operational, 1 degraded or maintenance, 2 partial outage, 3 major outage) | `ripcord.vendor_status` (each poll that reads a new status) | `ripcord.link`, `vendor_component` |
//! | `ripcord.vendor.poll_failures` | counter | `ripcord.vendor_poll_failed` | `ripcord.link` |
//! | `ripcord.alerts` | counter | `ripcord.alert` (at most one per link and kind per interval, see [`ripcord_core::alert`]) | `ripcord.link`, `error.type` |
//! | `ripcord.chain.exhausted` | counter | `ripcord.chain_exhausted` (every link failed, no static reply) | `ripcord.chain`, `error.type` |
//! | `ripcord.link.consecutive_failures` | gauge, {attempt} | attempt span closed: +1 on a failure, 0 on a success (`cancelled` counts neither way) | `ripcord.link` |
//!
//! Metrics are independent of trace sampling: the layer sees every span.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use opentelemetry::metrics::Meter;
use opentelemetry::{KeyValue, StringValue};
use ripcord_core::telemetry::{attr, event, span_name};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

mod fields;
mod instruments;

use fields::*;
use instruments::*;

/// Instrument names.
pub mod names {
    /// Duration of one request to a model.
    pub const OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
    /// Tokens used per request, by `gen_ai.token.type`.
    pub const TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    /// Time to the first chunk of a streamed answer.
    pub const TIME_TO_FIRST_CHUNK: &str = "gen_ai.client.operation.time_to_first_chunk";
    /// Requests (attempts) made.
    pub const REQUESTS: &str = "ripcord.requests";
    /// Requests (attempts) that failed, by `error.type`.
    pub const ERRORS: &str = "ripcord.errors";
    /// Estimated cost in USD.
    pub const COST: &str = "ripcord.cost";
    /// Chain calls, by who served and whether degraded.
    pub const CHAIN_CALLS: &str = "ripcord.chain.calls";
    /// Duration of a whole chain call.
    pub const CHAIN_DURATION: &str = "ripcord.chain.duration";
    /// Retries per chain call.
    pub const RETRIES: &str = "ripcord.retries";
    /// Retries scheduled, by link and kind.
    pub const RETRIES_SCHEDULED: &str = "ripcord.retries.scheduled";
    /// Unparseable vendor stream events skipped, by link.
    pub const STREAM_EVENTS_SKIPPED: &str = "ripcord.stream.events_skipped";
    /// Fallbacks from one link to another.
    pub const FALLBACKS: &str = "ripcord.fallbacks";
    /// Streams continued on another link, by from-link, continuing link, mode and reason.
    pub const STREAM_CONTINUATIONS: &str = "ripcord.stream.continuations";
    /// Links skipped without a call.
    pub const LINKS_SKIPPED: &str = "ripcord.links.skipped";
    /// Static replies served.
    pub const STATIC_REPLIES: &str = "ripcord.static_replies";
    /// Breaker state per link (0 closed, 1 half-open, 2 open).
    pub const BREAKER_STATE: &str = "ripcord.breaker.state";
    /// Breaker transitions.
    pub const BREAKER_TRANSITIONS: &str = "ripcord.breaker.transitions";
    /// Seconds breakers spent open.
    pub const BREAKER_OPEN_TIME: &str = "ripcord.breaker.open_time";
    /// Outages of the shared resilience state (each one sends the process to local state).
    pub const STATE_DEGRADATIONS: &str = "ripcord.state.degradations";
    /// 1 while the process runs on local state because the shared state is unreachable.
    pub const STATE_DEGRADED: &str = "ripcord.state.degraded";
    /// Alerts raised: failures an operator must act on, rate-limited per link and kind.
    pub const ALERTS: &str = "ripcord.alerts";
    /// What a vendor's status page declares for a link's component (0 operational … 3 major
    /// outage).
    pub const VENDOR_STATUS: &str = "ripcord.vendor.status";
    /// Polls of a vendor's status page that failed (unreachable, an error status, a body that
    /// does not parse).
    pub const VENDOR_POLL_FAILURES: &str = "ripcord.vendor.poll_failures";
    /// Tokens of gateway answers, by tenant.
    pub const TENANT_TOKENS: &str = "ripcord.tenant.tokens";
    /// Estimated cost of gateway answers in USD, by tenant.
    pub const TENANT_COST: &str = "ripcord.tenant.cost";
    /// Chain calls that ended in an error: every link failed or was skipped, no static reply.
    pub const CHAIN_EXHAUSTED: &str = "ripcord.chain.exhausted";
    /// Failed attempts of a link in a row since its last success.
    pub const LINK_CONSECUTIVE_FAILURES: &str = "ripcord.link.consecutive_failures";
    /// A tenant's token budget per window (read at collection time, see
    /// [`crate::budget_gauges`]).
    pub const BUDGET_LIMIT: &str = "ripcord.budget.limit_tokens";
    /// Tokens a tenant may still use in the current window (read at collection time).
    pub const BUDGET_REMAINING: &str = "ripcord.budget.remaining_tokens";
    /// What is left of a tenant's budget as a share of its limit, 0 to 1 (read at collection
    /// time).
    pub const BUDGET_REMAINING_RATIO: &str = "ripcord.budget.remaining_ratio";
}

/// A clock for the layer's own durations (injectable for tests).
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The `tracing_subscriber::Layer` that turns ripcord's spans and events into OpenTelemetry
/// metrics; see the [module docs](self) for the instruments.
///
/// [`crate::TelemetryBuilder`] installs it; build one yourself with [`MetricsLayer::new`] to
/// add it to your own subscriber.
///
/// # Examples
///
/// ```
/// use opentelemetry::metrics::MeterProvider;
/// use ripcord_telemetry::MetricsLayer;
/// use tracing_subscriber::layer::SubscriberExt;
/// let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder().build();
/// let subscriber = tracing_subscriber::registry().with(MetricsLayer::new(&provider.meter("ripcord")));
/// # drop(subscriber);
/// ```
pub struct MetricsLayer {
    inst: Instruments,
    clock: Clock,
    open_since: Mutex<HashMap<String, Instant>>,
    /// Failed attempts in a row per link (one entry per link name: bounded by the links).
    streaks: Mutex<HashMap<StringValue, u64>>,
}

impl fmt::Debug for MetricsLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsLayer").finish_non_exhaustive()
    }
}

impl MetricsLayer {
    /// A layer recording into instruments of `meter`.
    pub fn new(meter: &Meter) -> Self {
        Self::with_clock(meter, Arc::new(Instant::now))
    }

    /// A layer measuring durations with `clock` (tests pass a fake one).
    pub fn with_clock(meter: &Meter, clock: Clock) -> Self {
        MetricsLayer {
            inst: Instruments::new(meter),
            clock,
            open_since: Mutex::new(HashMap::new()),
            streaks: Mutex::new(HashMap::new()),
        }
    }

    fn breaker_transition(&self, f: &EventFields) {
        let (Some(link), Some(from), Some(to)) = (&f.link, &f.from, &f.to) else {
            return;
        };
        let now = (self.clock)();
        let link_attr = [KeyValue::new(attr::LINK, link.clone())];
        if let Some(v) = breaker_state_value(to) {
            self.inst.breaker_state.record(v, &link_attr);
        }
        self.inst.breaker_transitions.add(
            1,
            &[
                KeyValue::new(attr::LINK, link.clone()),
                KeyValue::new("from", from.clone()),
                KeyValue::new("to", to.clone()),
            ],
        );
        let mut open = match self.open_since.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        if to == "open" {
            // A re-trip while open keeps counting from the first opening.
            open.entry(link.clone()).or_insert(now);
        } else if let Some(since) = open.remove(link) {
            let secs = now.saturating_duration_since(since).as_secs_f64();
            self.inst.breaker_open_time.add(secs, &link_attr);
        }
    }

    fn close_attempt(&self, f: &Facts, elapsed: f64) {
        let attrs = f.genai_attrs();
        self.inst.op_duration.record(elapsed, &attrs);
        if let Some(ttfc) = f.ttfc {
            self.inst.ttfc.record(ttfc, &attrs);
        }
        for (ty, n) in [("input", f.input_tokens), ("output", f.output_tokens)] {
            if let Some(n) = n {
                let mut a = attrs.clone();
                a.push(KeyValue::new(TOKEN_TYPE, ty));
                self.inst.token_usage.record(n, &a);
            }
        }
        let mut base = Vec::with_capacity(4);
        for (k, v) in [
            (attr::PROVIDER_NAME, &f.provider),
            (attr::LINK, &f.link),
            (attr::REQUEST_MODEL, &f.request_model),
        ] {
            if let Some(v) = v {
                base.push(KeyValue::new(k, v.clone()));
            }
        }
        self.inst.requests.add(1, &base);
        self.streak(f);
        if let Some(e) = &f.error_type {
            let mut a = base.clone();
            a.push(KeyValue::new(attr::ERROR_TYPE, e.clone()));
            self.inst.errors.add(1, &a);
        }
        if let Some(cost) = f.cost_usd.filter(|c| c.is_finite() && *c >= 0.0) {
            let mut a = Vec::with_capacity(2);
            for (k, v) in [
                (attr::PROVIDER_NAME, &f.provider),
                (attr::REQUEST_MODEL, &f.request_model),
            ] {
                if let Some(v) = v {
                    a.push(KeyValue::new(k, v.clone()));
                }
            }
            self.inst.cost.add(cost, &a);
        }
    }

    /// Moves the link's run of failed attempts: one more on a failure, back to 0 on a success.
    /// A cancelled attempt (the caller left, a hedge lost) says nothing about the vendor.
    fn streak(&self, f: &Facts) {
        let Some(link) = &f.link else {
            return;
        };
        if f.error_type
            .as_ref()
            .is_some_and(|e| e.as_str() == "cancelled")
        {
            return;
        }
        let mut streaks = match self.streaks.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        let n = streaks.entry(link.clone()).or_insert(0);
        *n = if f.error_type.is_some() { *n + 1 } else { 0 };
        self.inst
            .consecutive_failures
            .record(*n, &[KeyValue::new(attr::LINK, link.clone())]);
    }

    fn close_chain(&self, f: &Facts, elapsed: f64) {
        let chain = KeyValue::new(
            attr::CHAIN,
            f.chain.clone().unwrap_or_else(|| StringValue::from("")),
        );
        let mut a = vec![chain.clone()];
        if let Some(s) = &f.served_by {
            a.push(KeyValue::new(attr::SERVED_BY, s.clone()));
        }
        if let Some(d) = f.degraded {
            a.push(KeyValue::new(attr::DEGRADED, d));
        }
        if let Some(e) = &f.error_type {
            a.push(KeyValue::new(attr::ERROR_TYPE, e.clone()));
        }
        self.inst.chain_calls.add(1, &a);
        let mut d = vec![chain.clone()];
        d.extend(present([(attr::ERROR_TYPE, &f.error_type)]));
        self.inst.chain_duration.record(elapsed, &d);
        self.inst.retries.record(f.retries, &[chain]);
    }
}

fn role_of(meta: &tracing::Metadata<'_>) -> Option<SpanRole> {
    if !meta.target().starts_with("ripcord") {
        return None;
    }
    match meta.name() {
        span_name::ATTEMPT => Some(SpanRole::Attempt),
        span_name::CHAIN => Some(SpanRole::Chain),
        _ => None,
    }
}

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(role) = role_of(attrs.metadata()) else {
            return;
        };
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut facts = Facts::new(role, (self.clock)());
        attrs.record(&mut facts);
        span.extensions_mut().insert(facts);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut ext = span.extensions_mut();
        if let Some(facts) = ext.get_mut::<Facts>() {
            values.record(facts);
        }
    }

    fn on_event(&self, ev: &Event<'_>, ctx: Context<'_, S>) {
        let meta = ev.metadata();
        if !meta.target().starts_with("ripcord") {
            return;
        }
        // Most events (an access line, a probe, a retry's log line) count nothing: find the
        // name first, then read the fields of those that do.
        let mut message = MessageName::default();
        ev.record(&mut message);
        // An event without a message is known by its name (`tracing::info!(name: …)`).
        let name = if message.seen {
            message.name
        } else {
            metric_event(meta.name())
        };
        let Some(name) = name else {
            return;
        };
        let mut f = EventFields::default();
        ev.record(&mut f);
        // The innermost chain span around the event, if any (looked up only when used).
        let chain_span = || {
            ctx.event_scope(ev).and_then(|scope| {
                scope.into_iter().find(|s| {
                    s.extensions()
                        .get::<Facts>()
                        .is_some_and(|f| f.role == SpanRole::Chain)
                })
            })
        };
        let chain_name = || {
            let name = chain_span()
                .and_then(|s| s.extensions().get::<Facts>().and_then(|f| f.chain.clone()));
            KeyValue::new(attr::CHAIN, name.unwrap_or_else(|| StringValue::from("")))
        };
        // The chain's name, then those of the event's fields that are present.
        let in_chain = |pairs: &[(&'static str, &Option<String>)]| {
            let mut a = vec![chain_name()];
            a.extend(present(pairs.iter().copied()));
            a
        };
        match name {
            event::RETRY_SCHEDULED => {
                if let Some(s) = chain_span()
                    && let Some(facts) = s.extensions_mut().get_mut::<Facts>()
                {
                    facts.retries += 1;
                }
                let a: Vec<KeyValue> =
                    present([(attr::LINK, &f.link), (attr::ERROR_TYPE, &f.error_type)]).collect();
                self.inst.retries_scheduled.add(1, &a);
            }
            event::STREAM_EVENT_SKIPPED => {
                let a: Vec<KeyValue> = present([(attr::LINK, &f.link)]).collect();
                self.inst.events_skipped.add(1, &a);
            }
            event::FALLBACK => self.inst.fallbacks.add(
                1,
                &in_chain(&[
                    (attr::FALLBACK_FROM, &f.from),
                    (attr::FALLBACK_TO, &f.to),
                    (attr::ERROR_TYPE, &f.error_type),
                ]),
            ),
            event::STREAM_CONTINUED => self.inst.continuations.add(
                1,
                &in_chain(&[
                    (attr::FALLBACK_FROM, &f.from),
                    (attr::CONTINUED_BY, &f.continued_by),
                    (attr::CONTINUATION_MODE, &f.mode),
                    (attr::CONTINUATION_REASON, &f.continuation_reason),
                ]),
            ),
            event::LINK_SKIPPED => self.inst.skipped.add(
                1,
                &in_chain(&[(attr::LINK, &f.link), (attr::SKIP_REASON, &f.reason)]),
            ),
            event::STATIC_REPLY => self.inst.static_replies.add(1, &[chain_name()]),
            event::CHAIN_EXHAUSTED => self
                .inst
                .chain_exhausted
                .add(1, &in_chain(&[(attr::ERROR_TYPE, &f.error_type)])),
            event::BREAKER_TRANSITION => self.breaker_transition(&f),
            event::TENANT_USAGE => {
                let mut u = TenantUsage::default();
                ev.record(&mut u);
                let tenant = u.tenant.unwrap_or_default();
                for (ty, n) in [("input", u.input), ("output", u.output)] {
                    self.inst.tenant_tokens.add(
                        n,
                        &[
                            KeyValue::new(attr::TENANT, tenant.clone()),
                            KeyValue::new(TOKEN_TYPE, ty),
                        ],
                    );
                }
                if let Some(c) = u.cost.filter(|c| c.is_finite() && *c >= 0.0) {
                    self.inst
                        .tenant_cost
                        .add(c, &[KeyValue::new(attr::TENANT, tenant)]);
                }
            }
            event::ALERT => {
                let a: Vec<KeyValue> =
                    present([(attr::LINK, &f.link), (attr::ERROR_TYPE, &f.error_type)]).collect();
                self.inst.alerts.add(1, &a);
            }
            event::VENDOR_STATUS => {
                if let (Some(link), Some(level)) = (&f.link, f.level) {
                    let a = [
                        KeyValue::new(attr::LINK, link.clone()),
                        KeyValue::new(
                            attr::VENDOR_COMPONENT,
                            f.component.clone().unwrap_or_default(),
                        ),
                    ];
                    self.inst.vendor_status.record(level, &a);
                }
            }
            event::VENDOR_STATUS_POLL_FAILED => {
                let a: Vec<KeyValue> = present([(attr::LINK, &f.link)]).collect();
                self.inst.vendor_poll_failures.add(1, &a);
            }
            event::STATE_DEGRADED | event::STATE_RESTORED => {
                let backend = [KeyValue::new(
                    STATE_BACKEND,
                    f.backend.clone().unwrap_or_default(),
                )];
                if name == event::STATE_DEGRADED {
                    self.inst.state_degradations.add(1, &backend);
                    self.inst.state_degraded.record(1, &backend);
                } else {
                    self.inst.state_degraded.record(0, &backend);
                }
            }
            _ => {}
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(facts) = span.extensions_mut().remove::<Facts>() else {
            return;
        };
        let elapsed = (self.clock)()
            .saturating_duration_since(facts.started)
            .as_secs_f64();
        match facts.role {
            SpanRole::Attempt => self.close_attempt(&facts, elapsed),
            SpanRole::Chain => self.close_chain(&facts, elapsed),
        }
    }
}
