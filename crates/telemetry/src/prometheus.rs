//! The Prometheus text exposition of ripcord's metrics (`GET /metrics` of the gateway).
//!
//! Why a reader and not a second set of counters: [`PrometheusExport`] is an OpenTelemetry
//! `MetricReader` added to the same `SdkMeterProvider` that the OTLP export reads, and the
//! [`crate::MetricsLayer`] records into that provider's instruments once. Both exports
//! therefore carry the same series by construction; a scrape collects the cumulative state of
//! every instrument and encodes it with the Prometheus project's own client
//! (`prometheus-client`, text format 0.0.4).
//!
//! Names follow the OpenTelemetry-to-Prometheus rules: every character that is not
//! `[A-Za-z0-9_:]` becomes `_`, a unit of seconds adds `_seconds`, USD adds `_usd`, counters
//! end in `_total`, and annotations such as `{token}` are dropped. So
//! `gen_ai.client.operation.duration` (s) is `gen_ai_client_operation_duration_seconds` and
//! `ripcord.fallbacks` is `ripcord_fallbacks_total`; attribute keys are renamed the same way
//! (`error.type` → `error_type`). The table of every series is in the [`crate::metrics`]
//! module docs and in the repository's `docs/metrics.md`.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{
    AggregatedMetrics, Histogram, Metric, MetricData, ResourceMetrics,
};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, MeterProviderBuilder, Pipeline, SdkMeterProvider, Temporality,
};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::MetricsLayer;

/// The content type of [`PrometheusExport::render`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A pull reader of ripcord's metrics that renders them in the Prometheus text format.
///
/// Add it to the meter provider that the [`crate::MetricsLayer`] records into: with
/// [`crate::TelemetryBuilder::prometheus`] next to the OTLP export, or with
/// [`PrometheusExport::local_layer`] when nothing is exported over OTLP. Clones share one
/// reader.
///
/// # Examples
///
/// (A crate of its own: `tracing` caches per call site whether anyone listens, and other
/// doctests in the same process would decide that for this one.)
///
/// ```standalone_crate
/// use ripcord_telemetry::PrometheusExport;
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let export = PrometheusExport::new();
/// let (layer, _provider) = export.local_layer();
/// let subscriber = tracing_subscriber::registry().with(layer);
/// tracing::subscriber::with_default(subscriber, || {
///     tracing::info!(target: "ripcord", link = "primary", from = "closed", to = "open", "ripcord.breaker_transition");
/// });
/// let text = export.render()?;
/// // The SDK does not promise an order of the labels: look for each of them on the line.
/// let line = text
///     .lines()
///     .find(|l| l.starts_with("ripcord_breaker_transitions_total{"))
///     .expect("a transitions line");
/// for label in ["from=\"closed\"", "ripcord_link=\"primary\"", "to=\"open\""] {
///     assert!(line.contains(label), "{text}");
/// }
/// assert!(line.ends_with(" 1") || line.ends_with(" 1.0"), "{text}");
/// # Ok::<(), std::fmt::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct PrometheusExport {
    reader: Arc<ManualReader>,
    budgets: crate::budget_gauges::BudgetGauges,
}

impl fmt::Debug for PrometheusExport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusExport").finish_non_exhaustive()
    }
}

impl PrometheusExport {
    /// A reader not yet attached to a meter provider (it renders nothing until it is).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds this reader to a meter provider under construction.
    pub fn attach(&self, builder: MeterProviderBuilder) -> MeterProviderBuilder {
        builder.with_reader(SharedReader(Arc::clone(&self.reader)))
    }

    /// A [`MetricsLayer`] over a meter provider of its own that only this reader reads (for a
    /// process that exports nothing over OTLP), with [`Self::budget_gauges`] registered on it.
    /// Keep the provider alive as long as the layer.
    pub fn local_layer(&self) -> (MetricsLayer, SdkMeterProvider) {
        use opentelemetry::metrics::MeterProvider as _;
        let provider = self.attach(SdkMeterProvider::builder()).build();
        let meter = provider.meter("ripcord");
        self.budgets.register(&meter);
        let layer = MetricsLayer::new(&meter);
        (layer, provider)
    }

    /// The tenants' budget gauges read at each collection ([`crate::budget_gauges`]): give
    /// them a source with [`BudgetGauges::set`](crate::budget_gauges::BudgetGauges::set).
    /// They are registered on the meter provider of [`Self::local_layer`], and of
    /// [`crate::TelemetryBuilder::prometheus`] (so the OTLP export carries them too).
    pub fn budget_gauges(&self) -> &crate::budget_gauges::BudgetGauges {
        &self.budgets
    }

    /// Every series in the Prometheus text format (version 0.0.4, [`CONTENT_TYPE`]).
    ///
    /// # Errors
    ///
    /// A formatting error of the encoder (it writes to a `String`, so in practice none).
    pub fn render(&self) -> Result<String, fmt::Error> {
        self.render_scoped(None)
    }

    /// [`Self::render`] as one tenant may read it: a series labelled with a tenant
    /// (`ripcord_tenant`, from the `ripcord.tenant` attribute) is left out unless the tenant
    /// is `tenant` or one of its sub-tenants (`tenant/…`); series without a tenant label are
    /// all shown.
    ///
    /// # Errors
    ///
    /// As [`Self::render`].
    pub fn render_for_tenant(&self, tenant: &str) -> Result<String, fmt::Error> {
        self.render_scoped(Some(tenant))
    }

    fn render_scoped(&self, tenant: Option<&str>) -> Result<String, fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape {
            reader: Arc::clone(&self.reader),
            tenant: tenant.map(str::to_owned),
        }));
        let mut out = String::with_capacity(8 * 1024);
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

/// Installs the global `tracing` subscriber of a process that exports nothing over OTLP: the
/// [`MetricsLayer`] recording into `export` only, and (with `log_to_stderr`) log lines on
/// stderr scrubbed by `redactor`, both filtered by `filter` (`tracing` directives, e.g.
/// `info`). Keep the returned guard as long as the process records.
///
/// # Errors
///
/// An invalid `filter`, or [`crate::TelemetryError::SubscriberAlreadySet`].
pub fn install_local(
    export: &PrometheusExport,
    redactor: crate::SecretScrubber,
    filter: &str,
    log_to_stderr: bool,
) -> Result<LocalGuard, crate::TelemetryError> {
    install_local_with(export, redactor, filter, log_to_stderr, None)
}

/// [`install_local`], with the layer of an alert webhook beside the metrics (see
/// [`crate::alert_webhook`]).
///
/// # Errors
///
/// As [`install_local`].
pub fn install_local_with(
    export: &PrometheusExport,
    redactor: crate::SecretScrubber,
    filter: &str,
    log_to_stderr: bool,
    alerts: Option<&crate::alert_webhook::AlertWebhook>,
) -> Result<LocalGuard, crate::TelemetryError> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let make = || {
        tracing_subscriber::EnvFilter::try_new(format!("{filter},{}", crate::SILENCED))
            .map_err(|e| crate::TelemetryError::config("filter", format!("{filter:?}: {e}")))
    };
    let (metrics, provider) = export.local_layer();
    let logs = log_to_stderr
        .then(|| crate::stderr_log::layer(redactor, filter))
        .transpose()?;
    tracing_subscriber::registry()
        .with(metrics.with_filter(make()?))
        .with(logs)
        .with(alerts.map(crate::alert_webhook::AlertWebhook::layer))
        .try_init()
        .map_err(|_| crate::TelemetryError::SubscriberAlreadySet)?;
    Ok(LocalGuard(provider))
}

/// Keeps the meter provider of [`install_local`] alive.
#[derive(Debug)]
pub struct LocalGuard(SdkMeterProvider);

impl Drop for LocalGuard {
    fn drop(&mut self) {
        // Flushes nothing anywhere (a pull reader), but releases the pipeline cleanly.
        let _ = self.0.shutdown();
        crate::stderr_log::flush();
    }
}

/// One reader shared by the provider (which owns a reader) and the export (which scrapes it).
#[derive(Debug)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

/// The collector run by one scrape: collects the reader and encodes what it got (only one
/// tenant's tenant-labelled series when `tenant` is set).
#[derive(Debug)]
struct Scrape {
    reader: Arc<ManualReader>,
    tenant: Option<String>,
}

/// The attribute that names a series' tenant, as a Prometheus label.
const TENANT_LABEL: &str = "ripcord_tenant";

/// Whether a data point with labels `l` is shown to `tenant` (`None`: to the operator).
fn shown(tenant: Option<&str>, l: &[(String, String)]) -> bool {
    let Some(t) = tenant else { return true };
    l.iter()
        .filter(|(k, _)| k == TENANT_LABEL)
        .all(|(_, v)| v == t || v.strip_prefix(t).is_some_and(|rest| rest.starts_with('/')))
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut rm = ResourceMetrics::default();
        // A reader not attached to a provider yet (or shut down) has nothing to say.
        if self.reader.collect(&mut rm).is_err() {
            return Ok(());
        }
        for scope in rm.scope_metrics() {
            for metric in scope.metrics() {
                encode_metric(&mut encoder, metric, self.tenant.as_deref())?;
            }
        }
        Ok(())
    }
}

/// A Prometheus name: every character outside `[A-Za-z0-9_:]` becomes `_`.
pub fn sanitize(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn unit_of(otel: &str) -> Option<Unit> {
    match otel {
        "s" => Some(Unit::Seconds),
        "USD" => Some(Unit::Other("usd".to_owned())),
        _ => None,
    }
}

fn labels<'a>(attrs: impl Iterator<Item = &'a KeyValue>) -> Vec<(String, String)> {
    attrs
        .map(|kv| (sanitize(kv.key.as_str()), kv.value.as_str().into_owned()))
        .collect()
}

fn encode_metric(
    encoder: &mut DescriptorEncoder<'_>,
    metric: &Metric,
    tenant: Option<&str>,
) -> Result<(), fmt::Error> {
    match metric.data() {
        AggregatedMetrics::U64(d) => encode_data(encoder, metric, d, tenant, |v| *v as f64),
        AggregatedMetrics::I64(d) => encode_data(encoder, metric, d, tenant, |v| *v as f64),
        AggregatedMetrics::F64(d) => encode_data(encoder, metric, d, tenant, |v| *v),
    }
}

fn encode_data<T: Copy>(
    encoder: &mut DescriptorEncoder<'_>,
    metric: &Metric,
    data: &MetricData<T>,
    tenant: Option<&str>,
    as_f64: impl Fn(&T) -> f64,
) -> Result<(), fmt::Error> {
    let name = sanitize(metric.name());
    let unit = unit_of(metric.unit());
    let help = metric.description();
    match data {
        MetricData::Gauge(g) => {
            let mut m = encoder.encode_descriptor(&name, help, unit.as_ref(), MetricType::Gauge)?;
            for p in g.data_points() {
                let l = labels(p.attributes());
                if !shown(tenant, &l) {
                    continue;
                }
                m.encode_family(&l)?.encode_gauge(&as_f64(&p.value()))?;
            }
        }
        MetricData::Sum(s) => {
            let ty = if s.is_monotonic() {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut m = encoder.encode_descriptor(&name, help, unit.as_ref(), ty)?;
            for p in s.data_points() {
                let l = labels(p.attributes());
                if !shown(tenant, &l) {
                    continue;
                }
                let v = as_f64(&p.value());
                let mut fam = m.encode_family(&l)?;
                if s.is_monotonic() {
                    fam.encode_counter::<NoLabelSet, _, f64>(&v, None)?;
                } else {
                    fam.encode_gauge(&v)?;
                }
            }
        }
        MetricData::Histogram(h) => {
            encode_histogram(encoder, &name, help, unit, h, tenant, as_f64)?;
        }
        // ripcord records no exponential histograms; a view that made one is not exposed.
        MetricData::ExponentialHistogram(_) => {}
    }
    Ok(())
}

fn encode_histogram<T: Copy>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    h: &Histogram<T>,
    tenant: Option<&str>,
    as_f64: impl Fn(&T) -> f64,
) -> Result<(), fmt::Error> {
    let mut m = encoder.encode_descriptor(name, help, unit.as_ref(), MetricType::Histogram)?;
    for p in h.data_points() {
        let l = labels(p.attributes());
        if !shown(tenant, &l) {
            continue;
        }
        // OTel buckets: one count per bound plus the overflow bucket (+Inf).
        let buckets: Vec<(f64, u64)> = p
            .bounds()
            .chain(std::iter::once(f64::INFINITY))
            .zip(p.bucket_counts())
            .collect();
        m.encode_family(&l)?.encode_histogram::<NoLabelSet>(
            as_f64(&p.sum()),
            p.count(),
            &buckets,
            None,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(
            sanitize("gen_ai.client.token.usage"),
            "gen_ai_client_token_usage"
        );
        assert_eq!(sanitize("9lives-x"), "_9lives_x");
    }

    #[test]
    fn counters_gauges_and_histograms_render_in_the_text_format() {
        let export = PrometheusExport::new();
        let provider = export.attach(SdkMeterProvider::builder()).build();
        let meter = provider.meter("t");
        meter
            .u64_counter("ripcord.fallbacks")
            .build()
            .add(2, &[KeyValue::new("error.type", "rate_limited")]);
        meter
            .i64_gauge("ripcord.breaker.state")
            .build()
            .record(2, &[KeyValue::new("ripcord.link", "primary")]);
        meter
            .f64_histogram("gen_ai.client.operation.duration")
            .with_unit("s")
            .with_boundaries(vec![0.1, 1.0])
            .build()
            .record(0.5, &[]);
        let text = export.render().unwrap();
        assert!(
            text.contains("ripcord_fallbacks_total{error_type=\"rate_limited\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("ripcord_breaker_state{ripcord_link=\"primary\"} 2"),
            "{text}"
        );
        assert!(text.contains("# TYPE gen_ai_client_operation_duration_seconds histogram"));
        assert!(text.contains("gen_ai_client_operation_duration_seconds_bucket{le=\"0.1\"} 0"));
        assert!(
            text.contains("gen_ai_client_operation_duration_seconds_bucket{le=\"1.0\"} 1")
                || text.contains("gen_ai_client_operation_duration_seconds_bucket{le=\"1\"} 1"),
            "{text}"
        );
        assert!(text.contains("gen_ai_client_operation_duration_seconds_bucket{le=\"+Inf\"} 1"));
        assert!(text.contains("gen_ai_client_operation_duration_seconds_count 1"));
    }

    #[test]
    fn a_tenant_sees_only_its_own_and_its_sub_tenants_tenant_series() {
        let export = PrometheusExport::new();
        let provider = export.attach(SdkMeterProvider::builder()).build();
        let meter = provider.meter("t");
        let tokens = meter.u64_counter("ripcord.tenant_tokens").build();
        for t in ["acme", "acme/user-1", "acme-corp", "globex"] {
            tokens.add(3, &[KeyValue::new("ripcord.tenant", t)]);
        }
        meter.u64_counter("ripcord.fallbacks").build().add(1, &[]);
        let text = export.render_for_tenant("acme").unwrap();
        assert!(text.contains(r#"ripcord_tenant="acme""#), "{text}");
        assert!(text.contains(r#"ripcord_tenant="acme/user-1""#), "{text}");
        assert!(!text.contains("acme-corp"), "{text}");
        assert!(!text.contains("globex"), "{text}");
        assert!(text.contains("ripcord_fallbacks_total 1"), "{text}");
        let all = export.render().unwrap();
        assert!(all.contains("globex") && all.contains("acme-corp"), "{all}");
    }

    #[test]
    fn an_unattached_export_renders_nothing() {
        assert_eq!(PrometheusExport::new().render().unwrap(), "");
    }
}
