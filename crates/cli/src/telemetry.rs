//! `--otlp <endpoint>`: exports the run's traces and metrics over OTLP.
//!
//! The protocol follows the port: `:4317` is OTLP/gRPC, anything else OTLP/HTTP (protobuf);
//! `OTEL_EXPORTER_OTLP_PROTOCOL` overrides. The vendor keys of the config are registered with
//! the exporter's redactor, so even a key a vendor echoes back never leaves the process.

use ripcord_telemetry::{Protocol, TelemetryGuard};
use secrecy::ExposeSecret;

use crate::config::Config;

/// Installs telemetry for the process; returns the guard that flushes on drop. Failures are
/// reported on stderr and the run continues without export.
pub fn init(endpoint: &str, config: Option<&Config>) -> Option<TelemetryGuard> {
    let protocol = if endpoint.trim_end_matches('/').ends_with(":4317") {
        Protocol::Grpc
    } else {
        Protocol::HttpProtobuf
    };
    let mut b = ripcord_telemetry::init()
        .service_name("ripcord")
        .endpoint(endpoint)
        .protocol(protocol);
    if let Some(c) = config {
        for p in &c.chain {
            if let Some(k) = p.api_key.as_ref().filter(|k| !k.expose_secret().is_empty()) {
                b = b.redact(k.expose_secret().to_owned());
            }
        }
    }
    match b.install() {
        Ok(guard) => Some(guard),
        Err(e) => {
            tracing::warn!(error = %e, "telemetry export disabled");
            #[allow(clippy::print_stderr)]
            {
                eprintln!("ripcord: telemetry export disabled: {e}");
            }
            None
        }
    }
}
