//! The span processor in front of the exporter: redaction, array attributes, attempt numbers.
//!
//! Every finished span passes through [`RipcordProcessor::on_end`] before the batch processor
//! queues it, so the exporter — OTLP or an in-memory one in tests — only ever sees:
//!
//! - text scrubbed by the [`SecretScrubber`] (span name, string attributes, event names and
//!   attributes, status message);
//! - `gen_ai.response.finish_reasons` as the string array the conventions ask for (`tracing`
//!   can only carry it as comma-separated text);
//! - `ripcord.attempt` on each attempt span: its position among the attempt spans of the same
//!   parent (the chain call), in the order they finished. Attempts run one after another (a
//!   hedged call is the exception), and a child always ends before its parent, so the count is
//!   complete when the parent ends and its entry is dropped then.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use opentelemetry::trace::SpanId;
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};
use ripcord_core::telemetry::attr;

use crate::redact::SecretScrubber;

/// Wraps the span processor that exports (batch or simple).
#[derive(Debug)]
pub(crate) struct RipcordProcessor {
    inner: Box<dyn SpanProcessor>,
    redactor: SecretScrubber,
    /// Attempt spans finished so far, per parent span.
    attempts: Mutex<HashMap<SpanId, i64>>,
}

impl RipcordProcessor {
    pub(crate) fn new(inner: Box<dyn SpanProcessor>, redactor: SecretScrubber) -> Self {
        RipcordProcessor {
            inner,
            redactor,
            attempts: Mutex::new(HashMap::new()),
        }
    }

    fn scrub_value(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                if let std::borrow::Cow::Owned(clean) = self.redactor.scrub(s.as_str()) {
                    *s = StringValue::from(clean);
                }
            }
            Value::Array(Array::String(items)) => {
                for s in items.iter_mut() {
                    if let std::borrow::Cow::Owned(clean) = self.redactor.scrub(s.as_str()) {
                        *s = StringValue::from(clean);
                    }
                }
            }
            _ => {}
        }
    }

    fn scrub_attrs(&self, attrs: &mut [KeyValue]) {
        for kv in attrs {
            self.scrub_value(&mut kv.value);
        }
    }

    /// Numbers an attempt span among its siblings; forgets a parent when it ends.
    fn number(&self, span: &mut SpanData) {
        let is_attempt = span
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == attr::PROVIDER_NAME);
        let mut map = match self.attempts.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.remove(&span.span_context.span_id());
        if is_attempt && span.parent_span_id != SpanId::INVALID {
            let n = map.entry(span.parent_span_id).or_insert(0);
            *n += 1;
            let n = *n;
            drop(map);
            if !span
                .attributes
                .iter()
                .any(|kv| kv.key.as_str() == attr::ATTEMPT)
            {
                span.attributes.push(KeyValue::new(attr::ATTEMPT, n));
            }
        }
    }

    /// The pipeline applied to every finished span (public to the crate for the tests).
    pub(crate) fn prepare(&self, span: &mut SpanData) {
        if let std::borrow::Cow::Owned(clean) = self.redactor.scrub(&span.name) {
            span.name = clean.into();
        }
        for kv in &mut span.attributes {
            if kv.key.as_str() == attr::RESPONSE_FINISH_REASONS
                && let Value::String(s) = &kv.value
            {
                let items: Vec<StringValue> = s
                    .as_str()
                    .split(',')
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(|r| StringValue::from(r.to_owned()))
                    .collect();
                kv.value = Value::Array(Array::String(items));
            }
        }
        self.scrub_attrs(&mut span.attributes);
        for ev in span.events.events.iter_mut() {
            if let std::borrow::Cow::Owned(clean) = self.redactor.scrub(&ev.name) {
                ev.name = clean.into();
            }
            self.scrub_attrs(&mut ev.attributes);
        }
        if let opentelemetry::trace::Status::Error { description } = &mut span.status
            && let std::borrow::Cow::Owned(clean) = self.redactor.scrub(description)
        {
            *description = clean.into();
        }
        self.number(span);
    }
}

impl SpanProcessor for RipcordProcessor {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, mut span: SpanData) {
        self.prepare(&mut span);
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
