//! Why telemetry could not be set up or flushed.

/// Why telemetry could not be set up, flushed or shut down.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// A setting (from code or an `OTEL_*` variable) is invalid.
    #[error("telemetry setting {what}: {message}")]
    Config {
        /// The builder method or environment variable at fault.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// The OTLP exporter could not be built.
    #[error("could not build the OTLP {signal} exporter for {endpoint}")]
    Exporter {
        /// `traces` or `metrics`.
        signal: &'static str,
        /// The endpoint.
        endpoint: String,
        /// The exporter's error.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// The background runtime or thread for the exporters could not be started.
    #[error("could not start the telemetry export runtime")]
    Runtime(#[source] std::io::Error),
    /// A global `tracing` subscriber is already installed.
    #[error(
        "a global tracing subscriber is already set; use TelemetryBuilder::build and add the layer to yours"
    )]
    SubscriberAlreadySet,
    /// Flushing or shutting down an exporter failed (for instance the collector is unreachable).
    #[error("telemetry {action} failed: {message}")]
    Export {
        /// `flush` or `shutdown`.
        action: &'static str,
        /// The SDK's description.
        message: String,
    },
}

impl TelemetryError {
    pub(crate) fn config(what: impl Into<String>, message: impl Into<String>) -> Self {
        TelemetryError::Config {
            what: what.into(),
            message: message.into(),
        }
    }
}
