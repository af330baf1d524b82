//! `--otlp <endpoint>`: exports the run's traces and metrics over OTLP.
//!
//! The protocol: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`
//! (`grpc` or `http/protobuf`), else a guess from the port — `:4317` is OTLP/gRPC, anything
//! else OTLP/HTTP (protobuf). The variables win over the guess, so a gRPC collector on another
//! port is reached by setting `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`. A value that is neither
//! protocol disables export with a message naming the variable.
//!
//! Export runs in the background; the first export that fails (collector down, wrong port,
//! wrong protocol) is reported once on stderr with the endpoint and the protocol, instead of
//! being dropped silently. The vendor keys of the config are registered with the exporter's
//! redactor, so even a key a vendor echoes back never leaves the process.

use ripcord_telemetry::alert_webhook::AlertWebhook;
use ripcord_telemetry::budget_gauges::BudgetSource;
use ripcord_telemetry::{ExportFailure, Protocol, TelemetryGuard};
use secrecy::ExposeSecret;

use crate::config::Config;

/// The variables that name the traces protocol, most specific first.
const PROTOCOL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ripcord_telemetry::OTEL_EXPORTER_OTLP_PROTOCOL,
];

/// The protocol for `endpoint`: the environment's choice (`get` looks a variable up), else the
/// port's guess.
///
/// # Errors
///
/// A variable set to something that is not a protocol, naming the variable and the value.
///
/// # Examples
///
/// ```
/// use ripcord_cli::otlp::protocol_for;
/// use ripcord_telemetry::Protocol;
/// assert_eq!(protocol_for("http://127.0.0.1:4317", |_| None), Ok(Protocol::Grpc));
/// assert_eq!(protocol_for("http://127.0.0.1:4318", |_| None), Ok(Protocol::HttpProtobuf));
/// let grpc = |v: &str| (v == "OTEL_EXPORTER_OTLP_PROTOCOL").then(|| "grpc".to_owned());
/// assert_eq!(protocol_for("http://127.0.0.1:55680", grpc), Ok(Protocol::Grpc));
/// ```
pub fn protocol_for(
    endpoint: &str,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Protocol, String> {
    for var in PROTOCOL_VARS {
        if let Some(v) = get(var).filter(|v| !v.trim().is_empty()) {
            return v.parse::<Protocol>().map_err(|_| {
                format!("{var}={v:?} is not an OTLP protocol; use \"grpc\" or \"http/protobuf\"")
            });
        }
    }
    Ok(if endpoint.trim_end_matches('/').ends_with(":4317") {
        Protocol::Grpc
    } else {
        Protocol::HttpProtobuf
    })
}

/// What `ripcord serve` keeps alive for its telemetry.
#[derive(Debug)]
pub enum ServeTelemetry {
    /// OTLP export (metrics also readable at `/metrics`).
    Otlp(TelemetryGuard),
    /// Metrics for `/metrics` only.
    Local(ripcord_telemetry::prometheus::LocalGuard),
    /// Nothing could be installed (said on stderr).
    None,
}

/// Telemetry for `ripcord serve`: the metrics always feed `export` (the gateway's
/// `/metrics`), over the same instruments as the OTLP export when `endpoint` is given; the
/// server log (access lines, failures in full, retries and fallbacks) goes to stderr, scrubbed
/// of the configured keys. The layer of `alerts` is always installed; with `[alerts]` the
/// chain's alert events go to its webhook (from a task on the current runtime; see
/// `ripcord_telemetry::alert_webhook`), and a reload can add, change or remove the webhook
/// ([`follow_reload`]).
#[expect(clippy::print_stderr, reason = "the CLI's own diagnostics")]
pub fn init_serve(
    endpoint: Option<&str>,
    config: Option<&Config>,
    export: &ripcord_telemetry::PrometheusExport,
    alerts: &AlertWebhook,
) -> ServeTelemetry {
    let secrets: Vec<String> = config
        .map(|c| {
            c.chain
                .iter()
                .filter_map(|p| p.api_key.as_ref())
                .chain(c.gateway_keys.iter().map(|k| &k.secret))
                .chain(c.alerts.as_ref().map(|a| &a.settings().url))
                .map(|k| k.expose_secret().to_owned())
                .filter(|k| !k.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if let Some(a) = config.and_then(|c| c.alerts.as_ref()) {
        match alerts.retarget(Some(a.webhook())) {
            Ok(_) => eprintln!(
                "ripcord: alerts go to the webhook at {} ({})",
                a.settings().host(),
                a.settings().format.as_str()
            ),
            Err(e) => eprintln!("ripcord: alert webhook disabled: {e}"),
        }
    }
    if let Some(endpoint) = endpoint {
        return match init_with(endpoint, config, |b| {
            b.prometheus(export)
                .log_to_stderr(true)
                .alert_webhook(alerts)
        }) {
            Some(g) => ServeTelemetry::Otlp(g),
            None => ServeTelemetry::None,
        };
    }
    match ripcord_telemetry::prometheus::install_local_with(
        export,
        ripcord_telemetry::SecretScrubber::new(secrets),
        ripcord_telemetry::DEFAULT_FILTER,
        true,
        Some(alerts),
    ) {
        Ok(g) => ServeTelemetry::Local(g),
        Err(e) => {
            eprintln!("ripcord: metrics disabled: {e}");
            ServeTelemetry::None
        }
    }
}

/// What a reload changes in the serve's telemetry, once the new gateway is built: the alert
/// webhook follows the new `[alerts]` (added, changed or removed; what was queued for an old
/// webhook is still delivered to it), and the budget gauges of `/metrics` read the new build's
/// accounts. Returns the words for the reload's summary, which name the webhook's host only.
///
/// # Errors
///
/// A webhook that cannot be started (the old one then keeps its target, and the reload is
/// refused).
pub fn follow_reload(
    alerts: &AlertWebhook,
    export: &ripcord_telemetry::PrometheusExport,
    config: &Config,
    built: &crate::build::Built,
) -> Result<String, String> {
    let said = alerts
        .retarget(config.alerts.as_ref().map(|a| a.webhook()))
        .map_err(|e| format!("[alerts]: {e}"))?;
    set_budget_gauges(export, built);
    Ok(said.to_string())
}

/// Points the budget gauges of `export` at `built`'s accounts (none without `[budget]`).
pub fn set_budget_gauges(
    export: &ripcord_telemetry::PrometheusExport,
    built: &crate::build::Built,
) {
    export.budget_gauges().set(
        built
            .budget_accounts
            .clone()
            .map(|a| a as std::sync::Arc<dyn BudgetSource>),
    );
}

/// Installs telemetry for the process; returns the guard that flushes on drop. Failures are
/// reported on stderr and the run continues without export.
pub fn init(endpoint: &str, config: Option<&Config>) -> Option<TelemetryGuard> {
    init_with(endpoint, config, |b| b)
}

#[expect(clippy::print_stderr, reason = "the CLI's own diagnostics")]
fn init_with(
    endpoint: &str,
    config: Option<&Config>,
    extra: impl FnOnce(ripcord_telemetry::TelemetryBuilder) -> ripcord_telemetry::TelemetryBuilder,
) -> Option<TelemetryGuard> {
    let protocol = match protocol_for(endpoint, |v| std::env::var(v).ok()) {
        Ok(p) => p,
        Err(why) => {
            eprintln!("ripcord: telemetry export disabled: {why}");
            return None;
        }
    };
    let mut b = ripcord_telemetry::init()
        .service_name("ripcord")
        .endpoint(endpoint)
        .protocol(protocol)
        .on_export_failure(|f: &ExportFailure| {
            eprintln!("ripcord: telemetry {f} (further export failures are not reported)");
        });
    if let Some(c) = config {
        for p in &c.chain {
            if let Some(k) = p.api_key.as_ref().filter(|k| !k.expose_secret().is_empty()) {
                b = b.redact(k.expose_secret().to_owned());
            }
        }
    }
    if let Some(c) = config {
        for k in &c.gateway_keys {
            b = b.redact(k.secret.expose_secret().to_owned());
        }
        if let Some(a) = &c.alerts {
            b = b.redact(a.settings().url.expose_secret().to_owned());
        }
    }
    match extra(b).install() {
        Ok(guard) => Some(guard),
        Err(e) => {
            tracing::warn!(error = %e, "telemetry export disabled");
            eprintln!("ripcord: telemetry export disabled: {e}");
            None
        }
    }
}
