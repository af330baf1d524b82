//! # ripcord-telemetry
//!
//! OpenTelemetry traces and metrics for ripcord, exported over OTLP (gRPC or HTTP/protobuf) to
//! Jaeger, an OpenTelemetry Collector or any other OTLP receiver.
//!
//! The library crates only speak `tracing` (see [`ripcord_core::telemetry`] for the span and
//! event names, which follow the OpenTelemetry GenAI semantic conventions). This crate installs
//! a `tracing` subscriber that
//!
//! - bridges the spans to OpenTelemetry with `tracing-opentelemetry` (`otel.name`,
//!   `otel.kind` and `otel.status_code` become the span's name, kind and status; events become
//!   span events);
//! - records metrics from the same spans and events with its own [`MetricsLayer`]
//!   (`gen_ai.client.operation.duration`, `gen_ai.client.token.usage`,
//!   `gen_ai.client.operation.time_to_first_chunk`, and ripcord's calls, errors, retries,
//!   fallbacks, breaker state, static replies and cost);
//! - scrubs everything it exports with a [`SecretScrubber`], so an API key that reached a span by
//!   someone else's mistake still leaves as `[REDACTED]`;
//! - exports from a small runtime of its own, so it works the same under a multi-thread or a
//!   current-thread tokio runtime, or none, and its [`TelemetryGuard`] can flush and shut down
//!   from anywhere — including the last line of an `async fn main` on a current-thread
//!   runtime, where shutting the gRPC exporter down on the application's runtime would stall.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let telemetry = ripcord_telemetry::init()
//!     .service_name("support-bot")
//!     .endpoint("http://localhost:4317")
//!     .protocol(ripcord_telemetry::Protocol::Grpc)
//!     .install()?;
//! // ... run chains ...
//! telemetry.shutdown()?; // or just drop it: both flush
//! # Ok(()) }
//! ```
//!
//! Without code settings the standard variables apply: `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_PROTOCOL` (`grpc` or `http/protobuf`, the default),
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`,
//! `OTEL_METRIC_EXPORT_INTERVAL` and `OTEL_SDK_DISABLED`. Settings made in code win.
//!
//! ## Viewing a run in Jaeger
//!
//! ```text
//! docker run --rm -p 16686:16686 -p 4317:4317 -p 4318:4318 jaegertracing/jaeger:2.5.0
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4317 OTEL_EXPORTER_OTLP_PROTOCOL=grpc your-app
//! ```
//! then open <http://localhost:16686>: each chain call is a `chain {name}` trace with one
//! `chat {model}` span per attempt, and `ripcord.fallback` events where it moved on.
//!
//! ## Privacy
//!
//! Prompt and completion text are not recorded unless [`TelemetryBuilder::record_content`]
//! is turned on. API keys are never recorded by ripcord, and the [`SecretScrubber`] removes anything
//! key-shaped and every secret registered with [`TelemetryBuilder::redact`] from spans,
//! events and the optional log output.
//!
//! ## Feature flags
//!
//! None: both OTLP transports are always built in.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod alert_webhook;
pub mod budget_gauges;
mod config;
mod error;
mod exporters;
mod http_client;
pub mod metrics;
mod processor;
pub mod prometheus;
mod redact;
mod report;
pub mod stderr_log;
#[cfg(test)]
mod test_writer;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{MeterProviderBuilder, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, Sampler, SdkTracerProvider, SpanExporter, SpanProcessor,
};
use secrecy::SecretString;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use exporters::{otlp_metric_exporter, otlp_span_exporter, resource};

pub use config::{
    DEFAULT_METRIC_INTERVAL, DEFAULT_SERVICE_NAME, DEFAULT_TIMEOUT, OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_METRIC_EXPORT_INTERVAL,
    OTEL_SDK_DISABLED, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG, Protocol,
};
pub use error::TelemetryError;
pub use metrics::MetricsLayer;
pub use prometheus::PrometheusExport;
pub use redact::{REDACTED, RedactingLine, RedactingWriter, SecretScrubber};
pub use report::ExportFailure;

use alert_webhook::with_alerts;
use config::{CodeSettings, Resolved, Sampling};

/// The default `tracing` filter of the exported spans and events.
pub const DEFAULT_FILTER: &str = "info";

/// Targets never exported, whatever the filter says: the exporter's own HTTP and gRPC stack
/// (exporting its spans would feed the exporter with its own work).
const SILENCED: &str = "h2=off,hyper=off,hyper_util=off,tonic=off,tower=off,reqwest=off,rustls=off,opentelemetry=off,opentelemetry_sdk=off,opentelemetry_otlp=off,opentelemetry_http=off";

/// The `tracing` layer that exports ripcord's spans, events and metrics, for a
/// `tracing_subscriber::Registry`.
pub type TelemetryLayer = Box<dyn Layer<Registry> + Send + Sync + 'static>;

/// Starts configuring telemetry. See [`TelemetryBuilder`].
///
/// # Examples
///
/// ```
/// let builder = ripcord_telemetry::init().service_name("checkout").sampling_ratio(0.25);
/// # drop(builder);
/// ```
pub fn init() -> TelemetryBuilder {
    TelemetryBuilder::default()
}

type MetricReaderFn =
    Box<dyn FnOnce(MeterProviderBuilder, Duration) -> MeterProviderBuilder + Send>;

/// Configures telemetry: where to export, what to record. Finish with
/// [`TelemetryBuilder::install`] (sets the global `tracing` subscriber) or
/// [`TelemetryBuilder::build`] (hands you the layer to add to your own subscriber).
///
/// Defaults: OTLP over HTTP/protobuf to `http://localhost:4318` (or what the `OTEL_*`
/// variables say), service name `ripcord`, every trace sampled, metrics every 60 s, filter
/// `info`, no prompt or completion text, no log output.
#[derive(Default)]
pub struct TelemetryBuilder {
    code: CodeSettings,
    ignore_env: bool,
    filter: Option<String>,
    record_content: bool,
    secrets: Vec<SecretString>,
    no_metrics: bool,
    log_to_stderr: bool,
    span_processor: Option<Box<dyn SpanProcessor>>,
    metric_reader: Option<MetricReaderFn>,
    prometheus: Option<PrometheusExport>,
    on_failure: Option<report::FailureHook>,
    alerts: Option<alert_webhook::AlertLayer>,
}

impl fmt::Debug for TelemetryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryBuilder")
            .field("code", &self.code)
            .field("ignore_env", &self.ignore_env)
            .field("filter", &self.filter)
            .field("record_content", &self.record_content)
            .field("secrets", &self.secrets.len())
            .field("no_metrics", &self.no_metrics)
            .field("log_to_stderr", &self.log_to_stderr)
            .field("custom_span_exporter", &self.span_processor.is_some())
            .field("custom_metric_exporter", &self.metric_reader.is_some())
            .field("on_export_failure", &self.on_failure.is_some())
            .field("alert_webhook", &self.alerts.is_some())
            .finish()
    }
}

impl TelemetryBuilder {
    ripcord_core::setters! {
        /// Also sends the chain's alert events to a webhook (see [`alert_webhook`]); the layer is
        /// added beside the export's, whatever its filter, and even with `OTEL_SDK_DISABLED`.
        alert_webhook(webhook: &alert_webhook::AlertWebhook) => alerts = Some(webhook.layer());
        /// Also exposes the metrics through `export` (a pull reader of the same instruments the
        /// OTLP export reads; see [`PrometheusExport`]). Ignored with [`Self::without_metrics`].
        prometheus(export: &PrometheusExport) => prometheus = Some(export.clone());
        /// Sets `service.name` (default: `OTEL_SERVICE_NAME`, else `ripcord`).
        service_name(name: impl Into<String>) => code.service_name = Some(name.into());
        /// Sets the collector's base URL, e.g. `http://localhost:4317` for gRPC or
        /// `http://localhost:4318` for HTTP (where `/v1/traces` and `/v1/metrics` are appended).
        endpoint(url: impl Into<String>) => code.endpoint = Some(url.into());
        /// Sets the transport (default: `OTEL_EXPORTER_OTLP_PROTOCOL`, else HTTP/protobuf).
        protocol(protocol: Protocol) => code.protocol = Some(protocol);
    }

    /// Adds a header (HTTP) or metadata entry (gRPC) sent with every export, e.g. a
    /// collector's auth token. Values are kept secret: they never show in `Debug` output.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.code
            .headers
            .push((name.into(), SecretString::from(value.into())));
        self
    }

    ripcord_core::setters! {
        /// Sets the export timeout (default: `OTEL_EXPORTER_OTLP_TIMEOUT`, else 10 s).
        timeout(timeout: Duration) => code.timeout = Some(timeout);
        /// Samples this fraction of new traces (0.0..=1.0), following the parent's decision for
        /// traces that started elsewhere. Default: `OTEL_TRACES_SAMPLER(_ARG)`, else everything.
        /// Metrics always see every call.
        sampling_ratio(ratio: f64) => code.sampling_ratio = Some(ratio);
        /// Sets the interval between metric exports (default: `OTEL_METRIC_EXPORT_INTERVAL`, else
        /// 60 s). Every flush and the shutdown export metrics too.
        metric_interval(interval: Duration) => code.metric_interval = Some(interval);
    }

    /// Adds a resource attribute (e.g. `deployment.environment.name`).
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.code.resource.push((key.into(), value.into()));
        self
    }

    ripcord_core::setters! {
        /// Ignores the `OTEL_*` environment variables: only code settings and defaults apply.
        ignore_environment() => ignore_env = true;
        /// The `tracing` filter of what is exported, in `EnvFilter` syntax (default `info`).
        filter(directives: impl Into<String>) => filter = Some(directives.into());
        /// Records prompt and completion text (`gen_ai.input.messages`,
        /// `gen_ai.output.messages`). Off by default; this switch is process-wide.
        record_content(on: bool) => record_content = on;
    }

    /// Registers a secret (an API key, a token) that must never be exported: it is replaced
    /// by `[REDACTED]` wherever it appears. Key-shaped values are scrubbed without this.
    pub fn redact(mut self, secret: impl Into<String>) -> Self {
        self.secrets.push(SecretString::from(secret.into()));
        self
    }

    ripcord_core::setters! {
        /// Exports traces only.
        without_metrics() => no_metrics = true;
    }

    /// Calls `hook` with the first export that fails (the signal, the endpoint, the protocol
    /// and the exporter's error); later failures of this installation are not repeated.
    /// Without a hook a failed export is silent, as in the OpenTelemetry SDK. The hook runs on
    /// the export thread: keep it short (print a line, bump a counter).
    pub fn on_export_failure(
        mut self,
        hook: impl Fn(&ExportFailure) + Send + Sync + 'static,
    ) -> Self {
        self.on_failure = Some(Arc::new(hook));
        self
    }

    ripcord_core::setters! {
        /// Also writes the filtered events as log lines to stderr (scrubbed by the redactor).
        log_to_stderr(on: bool) => log_to_stderr = on;
    }

    /// Exports spans to `exporter` (batched) instead of OTLP: a custom backend, or an
    /// in-memory exporter in tests.
    pub fn span_exporter<E: SpanExporter + 'static>(mut self, exporter: E) -> Self {
        self.span_processor = Some(Box::new(BatchSpanProcessor::builder(exporter).build()));
        self
    }

    /// Exports metrics to `exporter` (periodically, and at every flush) instead of OTLP.
    pub fn metric_exporter<E: PushMetricExporter>(mut self, exporter: E) -> Self {
        self.metric_reader = Some(Box::new(
            move |b: MeterProviderBuilder, interval: Duration| {
                b.with_reader(
                    PeriodicReader::builder(exporter)
                        .with_interval(interval)
                        .build(),
                )
            },
        ));
        self
    }

    /// Builds the exporters and installs the global `tracing` subscriber (and the global
    /// OpenTelemetry tracer and meter providers).
    ///
    /// # Errors
    ///
    /// An invalid setting, an exporter that cannot be built, or a global subscriber that is
    /// already set ([`TelemetryError::SubscriberAlreadySet`]; use [`TelemetryBuilder::build`]).
    pub fn install(self) -> Result<TelemetryGuard, TelemetryError> {
        self.build()?.install()
    }

    /// Builds the exporters and returns the layer and the guard, for your own subscriber.
    ///
    /// Call it where a tokio runtime may or may not be running: the exporters run on a
    /// runtime of their own.
    ///
    /// # Errors
    ///
    /// An invalid setting (naming the setting or variable), an exporter that cannot be built,
    /// or a failure to start the export runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use opentelemetry_sdk::trace::InMemorySpanExporter;
    /// use tracing_subscriber::layer::SubscriberExt;
    ///
    /// let spans = InMemorySpanExporter::default();
    /// let telemetry = ripcord_telemetry::init().span_exporter(spans.clone()).without_metrics().build()?;
    /// let (layer, guard) = telemetry.into_parts();
    /// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
    ///     tracing::info_span!("work", otel.name = "my work").in_scope(|| {});
    /// });
    /// guard.flush()?;
    /// assert_eq!(spans.get_finished_spans()?[0].name, "my work");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<Telemetry, TelemetryError> {
        let resolved = if self.ignore_env {
            self.code.resolve(&|_| None)?
        } else {
            self.code.resolve(&|k| std::env::var(k).ok())?
        };
        let directives = self.filter.as_deref().unwrap_or(DEFAULT_FILTER);
        let filter = || {
            EnvFilter::try_new(format!("{directives},{SILENCED}"))
                .map_err(|e| TelemetryError::config("filter", format!("{directives:?}: {e}")))
        };
        let otel_filter = filter()?;
        let redactor = SecretScrubber::from_secrets(self.secrets.clone());
        ripcord_core::telemetry::set_content_recording(self.record_content);

        if resolved.disabled {
            return Ok(Telemetry {
                layer: with_alerts(
                    Box::new(tracing_subscriber::layer::Identity::new()),
                    self.alerts,
                ),
                guard: TelemetryGuard { inner: None },
                redactor,
                resolved,
            });
        }

        let needs_runtime =
            self.span_processor.is_none() || (!self.no_metrics && self.metric_reader.is_none());
        let runtime = if needs_runtime {
            Some(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("ripcord-otlp")
                    .enable_all()
                    .build()
                    .map_err(TelemetryError::Runtime)?,
            )
        } else {
            None
        };
        let _entered = runtime.as_ref().map(tokio::runtime::Runtime::enter);

        let resource = resource(&resolved, self.ignore_env);
        let reporter = report::Reporter::new(self.on_failure.clone());
        let target = |signal: &'static str, endpoint: &str| report::Target {
            signal,
            endpoint: endpoint.to_owned(),
            protocol: resolved.protocol,
            reporter: Arc::clone(&reporter),
        };

        let exporting: Box<dyn SpanProcessor> = match self.span_processor {
            Some(p) => p,
            None => Box::new(
                BatchSpanProcessor::builder(report::ReportingSpanExporter {
                    inner: otlp_span_exporter(&resolved, runtime.as_ref())?,
                    target: target("traces", &resolved.traces_endpoint),
                })
                .build(),
            ),
        };
        let sampler = match resolved.sampling {
            Sampling::ParentRatio(r) => {
                Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(r)))
            }
            Sampling::Ratio(r) => Sampler::TraceIdRatioBased(r),
        };
        let tracer_provider = SdkTracerProvider::builder()
            .with_span_processor(processor::RipcordProcessor::new(
                exporting,
                redactor.clone(),
            ))
            .with_sampler(sampler)
            .with_resource(resource.clone())
            .build();
        let tracer = tracer_provider.tracer("ripcord");
        let otel_layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false);

        let meter_provider = if self.no_metrics {
            None
        } else {
            let builder = SdkMeterProvider::builder().with_resource(resource);
            let builder = match &self.prometheus {
                Some(p) => p.attach(builder),
                None => builder,
            };
            let builder = match self.metric_reader {
                Some(add) => add(builder, resolved.metric_interval),
                None => {
                    let exporter = report::ReportingMetricExporter {
                        inner: otlp_metric_exporter(&resolved, runtime.as_ref())?,
                        target: target("metrics", &resolved.metrics_endpoint),
                    };
                    builder.with_reader(
                        PeriodicReader::builder(exporter)
                            .with_interval(resolved.metric_interval)
                            .build(),
                    )
                }
            };
            Some(builder.build())
        };

        let layer: TelemetryLayer = match &meter_provider {
            Some(mp) => {
                let meter = mp.meter("ripcord");
                if let Some(p) = &self.prometheus {
                    p.budget_gauges().register(&meter);
                }
                let metrics = MetricsLayer::new(&meter);
                Box::new(otel_layer.and_then(metrics).with_filter(otel_filter))
            }
            None => Box::new(otel_layer.with_filter(otel_filter)),
        };
        let layer: TelemetryLayer = if self.log_to_stderr {
            let fmt = stderr_log::layer(redactor.clone(), directives)?;
            Box::new(layer.and_then(fmt))
        } else {
            layer
        };
        let layer = with_alerts(layer, self.alerts);
        drop(_entered);

        Ok(Telemetry {
            layer,
            guard: TelemetryGuard {
                inner: Some(GuardInner {
                    tracer_provider,
                    meter_provider,
                    runtime,
                }),
            },
            redactor,
            resolved,
        })
    }
}

/// Built telemetry: the `tracing` layer to install and the guard that flushes.
pub struct Telemetry {
    layer: TelemetryLayer,
    guard: TelemetryGuard,
    redactor: SecretScrubber,
    resolved: Resolved,
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry")
            .field("guard", &self.guard)
            .field("protocol", &self.resolved.protocol)
            .field("traces_endpoint", &self.resolved.traces_endpoint)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// The layer and the guard. Add the layer to a `tracing_subscriber::registry()`; keep the
    /// guard alive until the program ends.
    pub fn into_parts(self) -> (TelemetryLayer, TelemetryGuard) {
        (self.layer, self.guard)
    }

    /// The redactor applied to everything exported (to scrub your own log output the same way,
    /// see [`RedactingWriter`]).
    pub fn redactor(&self) -> &SecretScrubber {
        &self.redactor
    }

    /// The resolved transport.
    pub fn protocol(&self) -> Protocol {
        self.resolved.protocol
    }

    /// The resolved traces endpoint.
    pub fn traces_endpoint(&self) -> &str {
        &self.resolved.traces_endpoint
    }

    /// The resolved service name.
    pub fn service_name(&self) -> &str {
        &self.resolved.service_name
    }

    /// Installs the layer as the global `tracing` subscriber, and the providers as the global
    /// OpenTelemetry ones.
    ///
    /// # Errors
    ///
    /// [`TelemetryError::SubscriberAlreadySet`] when a global subscriber exists.
    pub fn install(self) -> Result<TelemetryGuard, TelemetryError> {
        tracing_subscriber::registry()
            .with(self.layer)
            .try_init()
            .map_err(|_| TelemetryError::SubscriberAlreadySet)?;
        if let Some(inner) = &self.guard.inner {
            opentelemetry::global::set_tracer_provider(inner.tracer_provider.clone());
            if let Some(mp) = &inner.meter_provider {
                opentelemetry::global::set_meter_provider(mp.clone());
            }
        }
        Ok(self.guard)
    }
}

struct GuardInner {
    tracer_provider: SdkTracerProvider,
    meter_provider: Option<SdkMeterProvider>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// Keeps the exporters alive; [`TelemetryGuard::flush`] exports what is pending, and
/// [`TelemetryGuard::shutdown`] (or dropping the guard) exports the rest and stops them, so a
/// short-lived program loses no spans.
///
/// Flushing and shutting down block the calling thread until the export finished or timed
/// out, but never need the caller's tokio runtime: the OTLP clients run on telemetry's own
/// runtime, which is stopped on a separate thread. So both are safe inside `async fn main`
/// on a current-thread runtime.
pub struct TelemetryGuard {
    inner: Option<GuardInner>,
}

impl fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("enabled", &self.inner.is_some())
            .finish()
    }
}

fn sdk_err(action: &'static str, e: impl fmt::Display) -> TelemetryError {
    TelemetryError::Export {
        action,
        message: e.to_string(),
    }
}

impl GuardInner {
    /// Does `action` to the tracer provider, then to the meter provider if any (both even
    /// when the first fails); the first error.
    fn on_providers(
        &self,
        action: &'static str,
        traces: fn(&SdkTracerProvider) -> OTelSdkResult,
        metrics: fn(&SdkMeterProvider) -> OTelSdkResult,
    ) -> Result<(), TelemetryError> {
        let traces = traces(&self.tracer_provider);
        let metrics = self.meter_provider.as_ref().map_or(Ok(()), metrics);
        traces.and(metrics).map_err(|e| sdk_err(action, e))
    }

    fn shutdown(self) -> Result<(), TelemetryError> {
        let done = self.on_providers(
            "shutdown",
            SdkTracerProvider::shutdown,
            SdkMeterProvider::shutdown,
        );
        // Dropping a runtime blocks until its workers stop: fine here, on a plain thread.
        drop(self.runtime);
        done
    }
}

impl TelemetryGuard {
    /// True unless telemetry was disabled (`OTEL_SDK_DISABLED=true`).
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Exports every finished span and the current metrics now.
    ///
    /// # Errors
    ///
    /// [`TelemetryError::Export`] when an export failed (the collector is unreachable, ...).
    pub fn flush(&self) -> Result<(), TelemetryError> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        inner.on_providers(
            "flush",
            SdkTracerProvider::force_flush,
            SdkMeterProvider::force_flush,
        )
    }

    /// Exports what is pending and stops the exporters.
    ///
    /// # Errors
    ///
    /// [`TelemetryError::Export`] when the final export failed.
    pub fn shutdown(mut self) -> Result<(), TelemetryError> {
        self.shutdown_inner()
    }

    fn shutdown_inner(&mut self) -> Result<(), TelemetryError> {
        let Some(inner) = self.inner.take() else {
            return Ok(());
        };
        // A separate thread: dropping the export runtime must not happen on a runtime thread,
        // and the caller's runtime (maybe current-thread, maybe blocked right here) is never
        // needed by the exporters.
        match std::thread::Builder::new()
            .name("ripcord-otlp-shutdown".to_owned())
            .spawn(move || inner.shutdown())
        {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(sdk_err("shutdown", "the shutdown thread panicked"))),
            Err(e) => Err(TelemetryError::Runtime(e)),
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        // Nowhere to report a failed final export from a destructor; `shutdown()` reports it.
        let _ = self.shutdown_inner();
        stderr_log::flush();
    }
}
