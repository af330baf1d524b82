//! `GET /metrics`: ripcord's metrics in the Prometheus text format.
//!
//! The series are the OpenTelemetry instruments that the OTLP export carries (see
//! `docs/metrics.md` for the table and their Prometheus names): the gateway's process adds a
//! Prometheus pull reader to the same meter provider, so a scrape and an OTLP push report the
//! same numbers. On the gateway's port the endpoint asks for a gateway key when keys are
//! configured (Prometheus sends one with `authorization: {credentials: …}`);
//! `[server] metrics_listen` serves it on an address of its own, without a key, for a scrape
//! network that clients cannot reach. There, a request whose `Host` is a name other than
//! `localhost` (rather than an IP address) is refused with 421: a web page that rebinds its
//! own domain name to the metrics address cannot read them.
//!
//! On the gateway's port a key with a tenant (`[[server.keys]] tenant = …`) is a client's key,
//! not the operator's: it reads the series without a tenant label and only its own tenant's
//! (and its sub-tenants') tenant-labelled series, never another tenant's usage. Keys without a
//! tenant (`api_keys_env`) and `metrics_listen` see every series.

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ripcord_telemetry::PrometheusExport;

use super::GatewayState;
use super::front::Authed;

#[path = "pool_metrics.rs"]
mod pool_metrics;

pub(crate) async fn metrics(
    State(state): State<Arc<GatewayState>>,
    Extension(authed): Extension<Authed>,
) -> Response {
    let tenant = state.caller(&authed).key.and_then(|k| k.tenant.clone());
    let ready = (state.readiness)();
    // The pools' series carry no tenant: every reader sees them.
    render(
        state.metrics.as_ref(),
        tenant.as_deref(),
        ready.get("pools"),
    )
}

/// The scrape, or only `tenant`'s view of it (see the module docs), with the pools' series.
fn render(
    export: Option<&PrometheusExport>,
    tenant: Option<&str>,
    pools: Option<&serde_json::Value>,
) -> Response {
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
    let text = match tenant {
        Some(t) => export.render_for_tenant(t),
        None => export.render(),
    };
    match text {
        Ok(mut text) => {
            if let Some(pools) = pools {
                pool_metrics::append(&mut text, pools);
            }
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

/// A router serving only `GET /metrics` from `export` (for `[server] metrics_listen`), to
/// requests whose `Host` is an IP address or `localhost`.
pub fn metrics_router(export: PrometheusExport) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let export = export.clone();
                async move { render(Some(&export), None, None) }
            }),
        )
        .layer(axum::middleware::from_fn(address_host_only))
}

/// True for a `Host` that is an IP address (with or without a port) or `localhost`: what a
/// scraper sends, and never what a page on a rebound domain name sends.
fn address_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok()
}

async fn address_host_only(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let ok = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .is_some_and(address_host);
    if !ok {
        return super::errors::refusal(
            "/metrics",
            421,
            "host_not_allowed",
            "the metrics address answers only requests whose Host is an IP address or localhost",
            None,
            None,
        );
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::address_host;

    #[test]
    fn only_addresses_and_localhost_are_metrics_hosts() {
        for ok in ["127.0.0.1:9464", "10.0.0.5", "[::1]:9464", "localhost:9464"] {
            assert!(address_host(ok), "{ok}");
        }
        for bad in ["evil.example:9464", "rebind.attacker.test", ""] {
            assert!(!address_host(bad), "{bad}");
        }
    }
}
