//! Failed exports are reported, not dropped.
//!
//! An OTLP exporter runs in the background: when the collector is down, on the wrong port or
//! speaks another protocol, every batch fails and the SDK keeps the error to itself — the
//! operator sees an empty dashboard and no reason. Each exporter ripcord builds is wrapped so
//! that its first failure is handed to a hook with the signal, the endpoint, the protocol and
//! the error; later failures of the same installation are counted but not repeated, so a dead
//! collector costs one line, not one per batch.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::config::Protocol;

/// One failed export, as handed to [`TelemetryBuilder::on_export_failure`](crate::TelemetryBuilder::on_export_failure).
///
/// # Examples
///
/// ```
/// let hook = |f: &ripcord_telemetry::ExportFailure| {
///     eprintln!("telemetry: {f}");
/// };
/// let builder = ripcord_telemetry::init().on_export_failure(hook);
/// # drop(builder);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportFailure {
    /// `traces` or `metrics`.
    pub signal: &'static str,
    /// Where the export went.
    pub endpoint: String,
    /// Over which protocol.
    pub protocol: Protocol,
    /// What the exporter said.
    pub error: String,
}

impl fmt::Display for ExportFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exporting {} to {} over OTLP/{} failed: {}",
            self.signal, self.endpoint, self.protocol, self.error
        )
    }
}

/// The hook that hears about the first failed export.
pub(crate) type FailureHook = Arc<dyn Fn(&ExportFailure) + Send + Sync>;

/// Shared by the exporters of one installation: the hook, and whether it has been told.
pub(crate) struct Reporter {
    hook: Option<FailureHook>,
    told: AtomicBool,
    failures: AtomicU64,
}

impl fmt::Debug for Reporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reporter")
            .field("hook", &self.hook.is_some())
            .field("failures", &self.failures.load(Ordering::Relaxed))
            .finish()
    }
}

impl Reporter {
    pub(crate) fn new(hook: Option<FailureHook>) -> Arc<Reporter> {
        Arc::new(Reporter {
            hook,
            told: AtomicBool::new(false),
            failures: AtomicU64::new(0),
        })
    }

    /// How many exports have failed so far.
    #[cfg(test)]
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    fn failed(&self, failure: impl FnOnce() -> ExportFailure) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        if self.told.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(hook) = &self.hook {
            hook(&failure());
        }
    }
}

/// Where an exporter sends, for its failure report.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) signal: &'static str,
    pub(crate) endpoint: String,
    pub(crate) protocol: Protocol,
    pub(crate) reporter: Arc<Reporter>,
}

impl Target {
    fn check(&self, result: &OTelSdkResult) {
        if let Err(e) = result {
            self.reporter.failed(|| ExportFailure {
                signal: self.signal,
                endpoint: self.endpoint.clone(),
                protocol: self.protocol,
                error: e.to_string(),
            });
        }
    }
}

/// A span exporter whose failures are reported.
#[derive(Debug)]
pub(crate) struct ReportingSpanExporter<E> {
    pub(crate) inner: E,
    pub(crate) target: Target,
}

impl<E: SpanExporter> SpanExporter for ReportingSpanExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.target.check(&result);
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A metric exporter whose failures are reported.
#[derive(Debug)]
pub(crate) struct ReportingMetricExporter<E> {
    pub(crate) inner: E,
    pub(crate) target: Target,
}

impl<E: PushMetricExporter> PushMetricExporter for ReportingMetricExporter<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        self.target.check(&result);
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use opentelemetry_sdk::error::OTelSdkError;

    use super::*;

    #[test]
    fn only_the_first_failure_reaches_the_hook() {
        let heard: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = Arc::clone(&heard);
        let reporter = Reporter::new(Some(Arc::new(move |f: &ExportFailure| {
            sink.lock().unwrap().push(f.to_string())
        })));
        let target = Target {
            signal: "traces",
            endpoint: "http://127.0.0.1:9".to_owned(),
            protocol: Protocol::Grpc,
            reporter: Arc::clone(&reporter),
        };
        target.check(&Ok(()));
        for _ in 0..3 {
            target.check(&Err(OTelSdkError::InternalFailure(
                "connection refused".into(),
            )));
        }
        assert_eq!(reporter.failures(), 3);
        let heard = heard.lock().unwrap();
        assert_eq!(heard.len(), 1, "{heard:?}");
        assert!(
            heard[0].starts_with("exporting traces to http://127.0.0.1:9 over OTLP/grpc failed: "),
            "{heard:?}"
        );
        assert!(heard[0].contains("connection refused"), "{heard:?}");
    }
}
