//! The OTLP exporters: the resource, TLS and headers for gRPC and HTTP, and the exporters for
//! spans and metrics over either protocol.

use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;

use crate::config::Resolved;
use crate::{Protocol, TelemetryError, http_client};

pub(crate) fn resource(resolved: &Resolved, ignore_env: bool) -> Resource {
    let builder = if ignore_env {
        Resource::builder_empty()
    } else {
        Resource::builder()
    };
    builder
        .with_service_name(resolved.service_name.clone())
        .with_attributes(
            resolved
                .resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .build()
}

pub(crate) fn grpc_interceptor(
    resolved: &Resolved,
) -> Result<
    impl FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status>
    + Clone
    + Send
    + Sync
    + 'static,
    TelemetryError,
> {
    use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
    let mut entries = Vec::new();
    for (k, v) in resolved.headers.iter() {
        let key = AsciiMetadataKey::from_bytes(k.as_bytes()).map_err(|_| {
            TelemetryError::config("header", format!("invalid gRPC metadata key {k:?}"))
        })?;
        let value = AsciiMetadataValue::try_from(v).map_err(|_| {
            TelemetryError::config("header", format!("the value of header {k:?} is not valid"))
        })?;
        entries.push((key, value));
    }
    Ok(move |mut req: tonic::Request<()>| {
        for (k, v) in &entries {
            req.metadata_mut().insert(k.clone(), v.clone());
        }
        Ok(req)
    })
}

pub(crate) fn tls_config(
    endpoint: &str,
) -> Option<opentelemetry_otlp::tonic_types::transport::ClientTlsConfig> {
    endpoint.starts_with("https://").then(|| {
        opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_webpki_roots()
    })
}

/// Defines `$name`, which builds the OTLP exporter of one signal. The span and metric exporters
/// have separate builder types with the same methods (from `opentelemetry-otlp`'s config
/// traits), so one macro body serves both rather than two copies of it.
macro_rules! otlp_exporter {
    ($(#[$doc:meta])* $name:ident -> $exporter:ty, $signal:literal, $endpoint:ident) => {
        $(#[$doc])*
        pub(crate) fn $name(
            resolved: &Resolved,
            runtime: Option<&tokio::runtime::Runtime>,
        ) -> Result<$exporter, TelemetryError> {
            let endpoint = resolved.$endpoint.clone();
            let wrap = |source| TelemetryError::Exporter {
                signal: $signal,
                endpoint: endpoint.clone(),
                source,
            };
            match resolved.protocol {
                Protocol::Grpc => {
                    let mut b = <$exporter>::builder()
                        .with_tonic()
                        .with_endpoint(endpoint.clone())
                        .with_timeout(resolved.timeout)
                        .with_interceptor(grpc_interceptor(resolved)?);
                    if let Some(tls) = tls_config(&endpoint) {
                        b = b.with_tls_config(tls);
                    }
                    b.build().map_err(wrap)
                }
                Protocol::HttpProtobuf => {
                    let client = http_client(resolved, runtime)?;
                    <$exporter>::builder()
                        .with_http()
                        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                        .with_endpoint(endpoint.clone())
                        .with_timeout(resolved.timeout)
                        .with_http_client(client)
                        .build()
                        .map_err(wrap)
                }
            }
        }
    };
}

otlp_exporter!(
    /// The OTLP exporter of spans, to the resolved traces endpoint.
    otlp_span_exporter -> opentelemetry_otlp::SpanExporter, "traces", traces_endpoint
);
otlp_exporter!(
    /// The OTLP exporter of metrics, to the resolved metrics endpoint.
    otlp_metric_exporter -> opentelemetry_otlp::MetricExporter, "metrics", metrics_endpoint
);

pub(crate) fn http_client(
    resolved: &Resolved,
    runtime: Option<&tokio::runtime::Runtime>,
) -> Result<http_client::RuntimeHttpClient, TelemetryError> {
    let handle = runtime.map(|rt| rt.handle().clone()).ok_or_else(|| {
        TelemetryError::config("runtime", "the OTLP/HTTP exporter needs the export runtime")
    })?;
    http_client::RuntimeHttpClient::new(handle, resolved.timeout, &resolved.headers)
}
