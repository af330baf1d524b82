//! `GET /metrics`: ripcord's metrics in the Prometheus text format.
//!
//! The series are the OpenTelemetry instruments that the OTLP export carries (see
//! `docs/metrics.md` for the table and their Prometheus names): the gateway's process adds a
//! Prometheus pull reader to the same meter provider, so a scrape and an OTLP push report the
//! same numbers. On the gateway's port the endpoint asks for a gateway key when keys are
//! configured (Prometheus sends one with `authorization: {credentials: …}`);
//! `[server] metrics_listen` serves it on an address of its own, without a key, for a scrape
//! network that clients cannot reach.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ripcord_telemetry::PrometheusExport;

use super::GatewayState;

pub(crate) async fn metrics(State(state): State<Arc<GatewayState>>) -> Response {
    render(state.metrics.as_ref())
}

fn render(export: Option<&PrometheusExport>) -> Response {
    let Some(export) = export else {
        return super::errors::refusal(
            "/metrics",
            404,
            "not_found",
            "metrics are not enabled on this gateway",
            None,
            None,
        );
    };
    match export.render() {
        Ok(text) => {
            let mut resp = text.into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(ripcord_telemetry::prometheus::CONTENT_TYPE),
            );
            resp
        }
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded",
        )
            .into_response(),
    }
}

/// A router serving only `GET /metrics` from `export` (for `[server] metrics_listen`).
pub fn metrics_router(export: PrometheusExport) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let export = export.clone();
            async move { render(Some(&export)) }
        }),
    )
}
