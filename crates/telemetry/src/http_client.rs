//! The HTTP client of the OTLP/HTTP exporters: async `reqwest` running on telemetry's own
//! runtime.
//!
//! The SDK's batch span processor and periodic metric reader export from their own threads and
//! block on the export future there. An async client polled on such a thread would find no
//! reactor, and one tied to the application's runtime would stall when that runtime is a
//! blocked current-thread runtime (for instance during shutdown). So every request is spawned
//! onto the small runtime that [`crate::TelemetryGuard`] owns, and the exporter thread only
//! waits for the task's result — which needs no runtime at all.

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use tokio::runtime::Handle;

use crate::config::Headers;

/// Sends OTLP/HTTP requests on the telemetry runtime, adding the configured headers last (so
/// headers given in code win over `OTEL_EXPORTER_OTLP_HEADERS`, which the exporter applies).
pub(crate) struct RuntimeHttpClient {
    client: reqwest::Client,
    handle: Handle,
    headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
}

impl fmt::Debug for RuntimeHttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeHttpClient")
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl RuntimeHttpClient {
    pub(crate) fn new(
        handle: Handle,
        timeout: std::time::Duration,
        headers: &Headers,
    ) -> Result<Self, crate::TelemetryError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| crate::TelemetryError::config("http client", e.to_string()))?;
        let mut parsed = Vec::new();
        for (k, v) in headers.iter() {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                crate::TelemetryError::config("header", format!("invalid header name {k:?}"))
            })?;
            let mut value = reqwest::header::HeaderValue::from_str(v).map_err(|_| {
                crate::TelemetryError::config(
                    "header",
                    format!("the value of header {k:?} is not valid"),
                )
            })?;
            value.set_sensitive(true);
            parsed.push((name, value));
        }
        Ok(RuntimeHttpClient {
            client,
            handle,
            headers: parsed,
        })
    }
}

#[async_trait]
impl HttpClient for RuntimeHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let mut request: reqwest::Request = request.try_into()?;
        for (k, v) in &self.headers {
            request.headers_mut().insert(k.clone(), v.clone());
        }
        let client = self.client.clone();
        let task = self.handle.spawn(async move {
            let response = client.execute(request).await?.error_for_status()?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = task.await??;
        let mut out = Response::builder().status(status).body(body)?;
        *out.headers_mut() = headers;
        Ok(out)
    }
}
