//! Shared helpers: telemetry wired to the SDK's in-memory exporters, and readers of what they
//! captured.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

use std::collections::BTreeMap;

use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{
    InMemoryMetricExporter, InMemoryMetricExporterBuilder, Temporality,
};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SpanData};
use ripcord_telemetry::{TelemetryBuilder, TelemetryGuard};
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::layer::SubscriberExt;

/// Telemetry exporting to memory, installed as this thread's default subscriber.
pub(crate) struct Captured {
    pub(crate) spans: InMemorySpanExporter,
    pub(crate) metrics: InMemoryMetricExporter,
    pub(crate) guard: TelemetryGuard,
    _default: DefaultGuard,
}

pub(crate) fn capture(configure: impl FnOnce(TelemetryBuilder) -> TelemetryBuilder) -> Captured {
    let spans = InMemorySpanExporter::default();
    let metrics = InMemoryMetricExporterBuilder::new()
        .with_temporality(Temporality::Cumulative)
        .build();
    let builder = ripcord_telemetry::init()
        .ignore_environment()
        .service_name("ripcord-test")
        .span_exporter(spans.clone())
        .metric_exporter(metrics.clone());
    let telemetry = configure(builder).build().expect("telemetry builds");
    let (layer, guard) = telemetry.into_parts();
    let default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    Captured {
        spans,
        metrics,
        guard,
        _default: default,
    }
}

impl Captured {
    /// Flushes and returns every finished span.
    pub(crate) fn spans(&self) -> Vec<SpanData> {
        self.guard.flush().expect("flush");
        self.spans.get_finished_spans().expect("spans")
    }

    /// Flushes and returns the latest (cumulative) metrics.
    pub(crate) fn metrics(&self) -> ResourceMetrics {
        self.guard.flush().expect("flush");
        let mut all = self.metrics.get_finished_metrics().expect("metrics");
        all.pop().expect("at least one metrics export")
    }
}

pub(crate) fn value_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.as_str().to_owned(),
        other => other.to_string(),
    }
}

pub(crate) fn attrs_of(kvs: &[KeyValue]) -> BTreeMap<String, Value> {
    kvs.iter()
        .map(|kv| (kv.key.as_str().to_owned(), kv.value.clone()))
        .collect()
}

pub(crate) fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

pub(crate) fn attr_str(span: &SpanData, key: &str) -> Option<String> {
    attr(span, key).map(value_str)
}

/// Asserts each `(key, value)` of `want` is an attribute of `span` (compared as text), naming the
/// key that differs.
pub(crate) fn assert_attrs(span: &SpanData, want: &[(&str, &str)]) {
    for (key, value) in want {
        assert_eq!(
            attr_str(span, key).as_deref(),
            Some(*value),
            "attribute {key} of span {}",
            span.name
        );
    }
}

/// Asserts each `(key, value)` of `want` is `span`'s attribute, typed (`None`: absent), naming the
/// key that differs.
pub(crate) fn assert_values(span: &SpanData, want: &[(&str, Option<Value>)]) {
    for (key, value) in want {
        assert_eq!(
            attr(span, key),
            value.as_ref(),
            "attribute {key} of span {}",
            span.name
        );
    }
}

pub(crate) fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// The spans called `name`, asserting there are `n` of them (listing every span's name if not).
pub(crate) fn named_n<'a>(spans: &'a [SpanData], name: &str, n: usize) -> Vec<&'a SpanData> {
    let found = named(spans, name);
    assert_eq!(
        found.len(),
        n,
        "{n} spans called {name:?} expected in {:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found
}

pub(crate) fn event_attrs(span: &SpanData, event: &str) -> Vec<BTreeMap<String, String>> {
    span.events
        .iter()
        .filter(|e| e.name == event)
        .map(|e| {
            e.attributes
                .iter()
                .map(|kv| (kv.key.as_str().to_owned(), value_str(&kv.value)))
                .collect()
        })
        .collect()
}

/// One data point of a metric: its attributes (as strings) and its value (sum, gauge value or
/// histogram count) and, for histograms, the sum.
#[derive(Debug, Clone)]
pub(crate) struct Point {
    pub(crate) attrs: BTreeMap<String, String>,
    pub(crate) value: f64,
    pub(crate) sum: f64,
}

/// The points of one metric's data, its values read as `f64` by `num` (counts of u64 and i64
/// instruments in tests are far below 2^53, so the conversion is exact).
fn points_of<T: Copy>(data: &MetricData<T>, num: impl Fn(T) -> f64) -> Vec<Point> {
    let point = |it: &mut dyn Iterator<Item = &KeyValue>, value: f64, sum: f64| Point {
        attrs: it
            .map(|kv| (kv.key.as_str().to_owned(), value_str(&kv.value)))
            .collect(),
        value,
        sum,
    };
    match data {
        MetricData::Sum(s) => s
            .data_points()
            .map(|p| point(&mut p.attributes(), num(p.value()), num(p.value())))
            .collect(),
        MetricData::Gauge(g) => g
            .data_points()
            .map(|p| point(&mut p.attributes(), num(p.value()), num(p.value())))
            .collect(),
        MetricData::Histogram(h) => h
            .data_points()
            .map(|p| point(&mut p.attributes(), p.count() as f64, num(p.sum())))
            .collect(),
        MetricData::ExponentialHistogram(_) => Vec::new(),
    }
}

/// The data points of the metric `name`, with its unit.
pub(crate) fn points(metrics: &ResourceMetrics, name: &str) -> Vec<Point> {
    for scope in metrics.scope_metrics() {
        for m in scope.metrics() {
            if m.name() == name {
                return match m.data() {
                    AggregatedMetrics::F64(d) => points_of(d, |v| v),
                    AggregatedMetrics::U64(d) => points_of(d, |v| v as f64),
                    AggregatedMetrics::I64(d) => points_of(d, |v| v as f64),
                };
            }
        }
    }
    Vec::new()
}

pub(crate) fn unit(metrics: &ResourceMetrics, name: &str) -> Option<String> {
    metrics
        .scope_metrics()
        .flat_map(|s| s.metrics())
        .find(|m| m.name() == name)
        .map(|m| m.unit().to_owned())
}

/// The point whose attributes include every `(key, value)` of `want`.
pub(crate) fn point_with<'a>(points: &'a [Point], want: &[(&str, &str)]) -> Option<&'a Point> {
    points.iter().find(|p| {
        want.iter()
            .all(|(k, v)| p.attrs.get(*k).map(String::as_str) == Some(*v))
    })
}
