//! What the layer reads from spans and events: the `tracing` visitors.

use std::fmt;
use std::time::Instant;

use std::sync::Arc;

use opentelemetry::{KeyValue, StringValue};
use ripcord_core::telemetry::{attr, event};
use tracing::field::{Field, Visit};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SpanRole {
    Attempt,
    Chain,
}

/// What the layer learns about one attempt or chain span.
#[derive(Debug)]
pub(super) struct Facts {
    pub(super) role: SpanRole,
    pub(super) started: Instant,
    pub(super) operation: Option<StringValue>,
    pub(super) provider: Option<StringValue>,
    pub(super) request_model: Option<StringValue>,
    pub(super) response_model: Option<StringValue>,
    pub(super) server_address: Option<StringValue>,
    pub(super) link: Option<StringValue>,
    pub(super) error_type: Option<StringValue>,
    pub(super) input_tokens: Option<u64>,
    pub(super) output_tokens: Option<u64>,
    pub(super) cost_usd: Option<f64>,
    pub(super) ttfc: Option<f64>,
    pub(super) chain: Option<StringValue>,
    pub(super) served_by: Option<StringValue>,
    pub(super) degraded: Option<bool>,
    pub(super) retries: u64,
}

impl Facts {
    pub(super) fn new(role: SpanRole, started: Instant) -> Self {
        Facts {
            role,
            started,
            operation: None,
            provider: None,
            request_model: None,
            response_model: None,
            server_address: None,
            link: None,
            error_type: None,
            input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            ttfc: None,
            chain: None,
            served_by: None,
            degraded: None,
            retries: 0,
        }
    }

    /// Keeps a string field. The value is stored reference-counted, so handing it to each
    /// instrument's attribute set when the span closes copies no text.
    pub(super) fn set_str(&mut self, name: &str, value: &str) {
        let slot = match name {
            attr::OPERATION_NAME => &mut self.operation,
            attr::PROVIDER_NAME => &mut self.provider,
            attr::REQUEST_MODEL => &mut self.request_model,
            attr::RESPONSE_MODEL => &mut self.response_model,
            attr::SERVER_ADDRESS => &mut self.server_address,
            attr::LINK => &mut self.link,
            attr::ERROR_TYPE => &mut self.error_type,
            attr::CHAIN => &mut self.chain,
            attr::SERVED_BY => &mut self.served_by,
            attr::USAGE_INPUT_TOKENS | attr::USAGE_OUTPUT_TOKENS => {
                if let Ok(n) = value.parse::<u64>() {
                    self.set_u64(name, n);
                }
                return;
            }
            _ => return,
        };
        *slot = Some(StringValue::from(Arc::<str>::from(value)));
    }

    pub(super) fn set_u64(&mut self, name: &str, value: u64) {
        match name {
            attr::USAGE_INPUT_TOKENS => self.input_tokens = Some(value),
            attr::USAGE_OUTPUT_TOKENS => self.output_tokens = Some(value),
            _ => {}
        }
    }

    pub(super) fn set_f64(&mut self, name: &str, value: f64) {
        match name {
            attr::COST_USD => self.cost_usd = Some(value),
            attr::RESPONSE_TIME_TO_FIRST_CHUNK => self.ttfc = Some(value),
            _ => {}
        }
    }

    /// The attributes of `gen_ai.client.*` instruments.
    pub(super) fn genai_attrs(&self) -> Vec<KeyValue> {
        let mut v = Vec::with_capacity(8);
        v.extend(present([
            (attr::OPERATION_NAME, &self.operation),
            (attr::PROVIDER_NAME, &self.provider),
            (attr::REQUEST_MODEL, &self.request_model),
            (attr::RESPONSE_MODEL, &self.response_model),
            (attr::SERVER_ADDRESS, &self.server_address),
            (attr::LINK, &self.link),
            (attr::ERROR_TYPE, &self.error_type),
        ]));
        v
    }
}

impl Visit for Facts {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set_str(field.name(), value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if name.starts_with("otel.")
            || name.starts_with("gen_ai.input")
            || name.starts_with("gen_ai.output")
        {
            return;
        }
        self.set_str(name, &format!("{value:?}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(v) = u64::try_from(value) {
            self.set_u64(field.name(), v);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set_u64(field.name(), value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set_f64(field.name(), value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == attr::DEGRADED {
            self.degraded = Some(value);
        }
    }
}

/// The events the metrics count; every other event is passed over before any of its other
/// fields is read.
pub(super) const METRIC_EVENTS: [&str; 14] = [
    event::RETRY_SCHEDULED,
    event::STREAM_CONTINUED,
    event::STREAM_EVENT_SKIPPED,
    event::FALLBACK,
    event::LINK_SKIPPED,
    event::STATIC_REPLY,
    event::CHAIN_EXHAUSTED,
    event::BREAKER_TRANSITION,
    event::TENANT_USAGE,
    event::ALERT,
    event::STATE_DEGRADED,
    event::STATE_RESTORED,
    event::VENDOR_STATUS,
    event::VENDOR_STATUS_POLL_FAILED,
];

/// The metric event `text` names, if any.
pub(super) fn metric_event(text: &str) -> Option<&'static str> {
    METRIC_EVENTS.into_iter().find(|n| *n == text)
}

// A name longer than `ShortText` would never be found when written as format arguments.
const _: () = {
    let mut i = 0;
    while i < METRIC_EVENTS.len() {
        assert!(METRIC_EVENTS[i].len() <= 32);
        i += 1;
    }
};

/// Finds an event's message among [`METRIC_EVENTS`] without allocating: a message given as a
/// string is compared as it is, one given as format arguments is written into a small buffer
/// first (a longer one is no metric event).
#[derive(Debug, Default)]
pub(super) struct MessageName {
    /// The event has a message.
    pub(super) seen: bool,
    /// The metric event it names.
    pub(super) name: Option<&'static str>,
}

impl Visit for MessageName {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.seen = true;
            self.name = metric_event(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() != "message" {
            return;
        }
        self.seen = true;
        let mut buf = ShortText::default();
        self.name = fmt::write(&mut buf, format_args!("{value:?}"))
            .ok()
            .and_then(|()| metric_event(buf.as_str()));
    }
}

/// A fixed buffer at least as long as the longest metric event name; writing more fails.
#[derive(Default)]
struct ShortText {
    buf: [u8; 32],
    len: usize,
}

impl ShortText {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for ShortText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let slot = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The fields of a ripcord metric event that the metrics read.
#[derive(Debug, Default)]
pub(super) struct EventFields {
    pub(super) link: Option<String>,
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) error_type: Option<String>,
    pub(super) reason: Option<String>,
    pub(super) backend: Option<String>,
    /// `ripcord.continued_by`.
    pub(super) continued_by: Option<String>,
    /// `ripcord.continuation.mode`.
    pub(super) mode: Option<String>,
    /// `ripcord.continuation.reason`.
    pub(super) continuation_reason: Option<String>,
    /// `vendor_component`.
    pub(super) component: Option<String>,
    /// `ripcord.vendor_status.level`.
    pub(super) level: Option<i64>,
}

impl EventFields {
    pub(super) fn set(&mut self, name: &str, value: String) {
        let slot = match name {
            "link" | attr::LINK => &mut self.link,
            "from" | attr::FALLBACK_FROM => &mut self.from,
            "to" | attr::FALLBACK_TO => &mut self.to,
            attr::ERROR_TYPE => &mut self.error_type,
            attr::SKIP_REASON | "reason" => &mut self.reason,
            "backend" => &mut self.backend,
            attr::CONTINUED_BY => &mut self.continued_by,
            attr::CONTINUATION_MODE => &mut self.mode,
            attr::CONTINUATION_REASON => &mut self.continuation_reason,
            attr::VENDOR_COMPONENT => &mut self.component,
            _ => return,
        };
        *slot = Some(value);
    }
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if matches!(
            name,
            "link"
                | "from"
                | "to"
                | "reason"
                | "backend"
                | attr::LINK
                | attr::FALLBACK_FROM
                | attr::FALLBACK_TO
                | attr::ERROR_TYPE
                | attr::SKIP_REASON
                | attr::CONTINUED_BY
                | attr::CONTINUATION_MODE
                | attr::CONTINUATION_REASON
                | attr::VENDOR_COMPONENT
        ) {
            self.set(name, format!("{value:?}"));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == attr::VENDOR_STATUS_LEVEL {
            self.level = Some(value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == attr::VENDOR_STATUS_LEVEL {
            self.level = i64::try_from(value).ok();
        }
    }
}

/// The fields of a `ripcord.tenant_usage` event.
#[derive(Debug, Default)]
pub(super) struct TenantUsage {
    pub(super) tenant: Option<String>,
    pub(super) input: u64,
    pub(super) output: u64,
    pub(super) cost: Option<f64>,
}

impl Visit for TenantUsage {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == attr::TENANT {
            self.tenant = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == attr::TENANT {
            self.tenant = Some(format!("{value:?}"));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            attr::USAGE_INPUT_TOKENS => self.input = value,
            attr::USAGE_OUTPUT_TOKENS => self.output = value,
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(v) = u64::try_from(value) {
            self.record_u64(field, v);
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == attr::COST_USD {
            self.cost = Some(value);
        }
    }
}

pub(super) fn breaker_state_value(state: &str) -> Option<i64> {
    match state {
        "closed" => Some(0),
        "half_open" => Some(1),
        "open" => Some(2),
        _ => None,
    }
}

/// `key = value` for each pair whose value is set: the optional attributes of a data point.
pub(super) fn present<'a, V>(
    pairs: impl IntoIterator<Item = (&'static str, &'a Option<V>)>,
) -> impl Iterator<Item = KeyValue>
where
    V: Clone + Into<opentelemetry::Value> + 'a,
{
    pairs
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| KeyValue::new(k, v)))
}
