//! What to export where: the builder's settings merged with the standard `OTEL_*` variables.
//!
//! Resolution is a pure function of the builder and an environment lookup, so it is tested
//! without touching the process environment. Code wins over the environment, the environment
//! over the defaults — the order the OpenTelemetry specification asks for.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use crate::error::TelemetryError;

/// `OTEL_SDK_DISABLED`: `true` turns telemetry off (a no-op guard, nothing exported).
pub const OTEL_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// `OTEL_SERVICE_NAME`.
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// `OTEL_EXPORTER_OTLP_ENDPOINT`: base URL; `/v1/traces` and `/v1/metrics` are appended for HTTP.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: full URL for traces (used as is).
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`: full URL for metrics (used as is).
pub const OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc` or `http/protobuf`.
pub const OTEL_EXPORTER_OTLP_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value,key2=value2` (values percent-decoded).
pub const OTEL_EXPORTER_OTLP_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// `OTEL_EXPORTER_OTLP_TIMEOUT`: export timeout in milliseconds.
pub const OTEL_EXPORTER_OTLP_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// `OTEL_TRACES_SAMPLER`: `always_on`, `always_off`, `traceidratio`, `parentbased_always_on`,
/// `parentbased_always_off`, `parentbased_traceidratio`.
pub const OTEL_TRACES_SAMPLER: &str = "OTEL_TRACES_SAMPLER";
/// `OTEL_TRACES_SAMPLER_ARG`: the ratio for the `*traceidratio` samplers.
pub const OTEL_TRACES_SAMPLER_ARG: &str = "OTEL_TRACES_SAMPLER_ARG";
/// `OTEL_METRIC_EXPORT_INTERVAL`: milliseconds between metric exports.
pub const OTEL_METRIC_EXPORT_INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";

/// The default service name.
pub const DEFAULT_SERVICE_NAME: &str = "ripcord";
/// The default export timeout (the specification's 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default interval between metric exports (the specification's 60 s).
pub const DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Protocol {
    /// OTLP/gRPC (default port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (default port 4318); the specification's default.
    #[default]
    HttpProtobuf,
}

impl Protocol {
    /// The `OTEL_EXPORTER_OTLP_PROTOCOL` spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    /// The default endpoint for the protocol.
    pub const fn default_endpoint(self) -> &'static str {
        match self {
            Protocol::Grpc => "http://localhost:4317",
            Protocol::HttpProtobuf => "http://localhost:4318",
        }
    }

    fn parse(s: &str) -> Result<Protocol, TelemetryError> {
        match s.trim() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" | "http" => Ok(Protocol::HttpProtobuf),
            other => Err(TelemetryError::config(
                OTEL_EXPORTER_OTLP_PROTOCOL,
                format!("unsupported protocol {other:?}; use \"grpc\" or \"http/protobuf\""),
            )),
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = TelemetryError;

    /// Parses the `OTEL_EXPORTER_OTLP_PROTOCOL` spelling: `grpc` or `http/protobuf` (`http`
    /// is accepted too). `http/json` is not supported.
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_telemetry::Protocol;
    /// assert_eq!("grpc".parse::<Protocol>().unwrap(), Protocol::Grpc);
    /// assert!("http/json".parse::<Protocol>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Protocol, TelemetryError> {
        Protocol::parse(s)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the builder was told in code (`None` = not set, ask the environment).
#[derive(Debug, Default)]
pub(crate) struct CodeSettings {
    pub(crate) service_name: Option<String>,
    pub(crate) endpoint: Option<String>,
    pub(crate) protocol: Option<Protocol>,
    pub(crate) headers: Vec<(String, SecretString)>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) sampling_ratio: Option<f64>,
    pub(crate) metric_interval: Option<Duration>,
    pub(crate) resource: Vec<(String, String)>,
}

/// Header values are secrets (collector auth tokens): `Debug` shows names only.
#[derive(Clone)]
pub(crate) struct Headers(pub(crate) BTreeMap<String, SecretString>);

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, "[REDACTED]")))
            .finish()
    }
}

impl Headers {
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.expose_secret()))
    }
}

/// The sampler to use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Sampling {
    /// Parent-based with this root ratio (1.0 = everything).
    ParentRatio(f64),
    /// This ratio regardless of the parent.
    Ratio(f64),
}

/// Everything resolved: what `init` builds from.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub(crate) disabled: bool,
    pub(crate) service_name: String,
    pub(crate) protocol: Protocol,
    pub(crate) traces_endpoint: String,
    pub(crate) metrics_endpoint: String,
    pub(crate) headers: Headers,
    pub(crate) timeout: Duration,
    pub(crate) sampling: Sampling,
    pub(crate) metric_interval: Duration,
    pub(crate) resource: Vec<(String, String)>,
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

fn parse_millis(var: &str, v: &str) -> Result<Duration, TelemetryError> {
    v.trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| TelemetryError::config(var, format!("expected milliseconds, got {v:?}")))
}

/// A duration setting: the one set in code, else the environment variable `var` (milliseconds),
/// else `default`; zero is refused, naming the setting `(field, what)`.
fn positive_duration(
    (field, what): (&str, &str),
    set: Option<Duration>,
    var: &str,
    get: &dyn Fn(&str) -> Option<String>,
    default: Duration,
) -> Result<Duration, TelemetryError> {
    let d = match set {
        Some(d) => d,
        None => match get(var) {
            Some(v) => parse_millis(var, &v)?,
            None => default,
        },
    };
    if d.is_zero() {
        return Err(TelemetryError::config(
            field,
            format!("{what} must be greater than zero"),
        ));
    }
    Ok(d)
}

fn check_ratio(what: &str, r: f64) -> Result<f64, TelemetryError> {
    if r.is_finite() && (0.0..=1.0).contains(&r) {
        Ok(r)
    } else {
        Err(TelemetryError::config(
            what,
            format!("the sampling ratio must be within 0..=1, got {r}"),
        ))
    }
}

/// Decodes `%XX` escapes (the headers variable is percent-encoded).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `key=value,key2=value2`.
fn parse_headers(v: &str) -> Result<Vec<(String, String)>, TelemetryError> {
    let mut out = Vec::new();
    for (n, pair) in v.split(',').enumerate() {
        if pair.trim().is_empty() {
            continue;
        }
        let Some((k, val)) = pair.split_once('=') else {
            return Err(TelemetryError::config(
                OTEL_EXPORTER_OTLP_HEADERS,
                format!(
                    "entry {} has no '=' (expected key=value pairs separated by commas)",
                    n + 1
                ),
            ));
        };
        let k = percent_decode(k.trim()).to_ascii_lowercase();
        if k.is_empty() {
            return Err(TelemetryError::config(
                OTEL_EXPORTER_OTLP_HEADERS,
                format!("entry {} has an empty header name", n + 1),
            ));
        }
        out.push((k, percent_decode(val.trim())));
    }
    Ok(out)
}

fn append_path(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

fn check_endpoint(what: &str, url: &str) -> Result<(), TelemetryError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(TelemetryError::config(
            what,
            format!("endpoint {url:?} must start with http:// or https://"),
        ))
    }
}

impl CodeSettings {
    /// Merges the settings with the environment (`env` looks a variable up).
    pub(crate) fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Resolved, TelemetryError> {
        let get = |k: &str| non_empty(env(k));
        let disabled = get(OTEL_SDK_DISABLED).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let service_name = self
            .service_name
            .clone()
            .or_else(|| get(OTEL_SERVICE_NAME))
            .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
        let protocol = match self.protocol {
            Some(p) => p,
            None => match get(OTEL_EXPORTER_OTLP_PROTOCOL) {
                Some(v) => Protocol::parse(&v)?,
                None => Protocol::default(),
            },
        };
        // Per-signal variables are full URLs; the base endpoint (code or variable) gets the
        // signal path appended for HTTP. An endpoint given in code wins over both variables.
        let (traces_endpoint, metrics_endpoint) = match (&self.endpoint, protocol) {
            (Some(base), Protocol::Grpc) => (base.clone(), base.clone()),
            (Some(base), Protocol::HttpProtobuf) => (
                append_path(base, "/v1/traces"),
                append_path(base, "/v1/metrics"),
            ),
            (None, p) => {
                let base = get(OTEL_EXPORTER_OTLP_ENDPOINT);
                let from_base = |path: &str| match (&base, p) {
                    (Some(b), Protocol::Grpc) => b.clone(),
                    (Some(b), Protocol::HttpProtobuf) => append_path(b, path),
                    (None, Protocol::Grpc) => p.default_endpoint().to_owned(),
                    (None, Protocol::HttpProtobuf) => append_path(p.default_endpoint(), path),
                };
                (
                    get(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
                        .unwrap_or_else(|| from_base("/v1/traces")),
                    get(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)
                        .unwrap_or_else(|| from_base("/v1/metrics")),
                )
            }
        };
        check_endpoint("endpoint", &traces_endpoint)?;
        check_endpoint("endpoint", &metrics_endpoint)?;

        let mut headers = BTreeMap::new();
        if let Some(v) = env(OTEL_EXPORTER_OTLP_HEADERS) {
            for (k, v) in parse_headers(&v)? {
                headers.insert(k, SecretString::from(v));
            }
        }
        for (k, v) in &self.headers {
            headers.insert(k.to_ascii_lowercase(), v.clone());
        }

        let timeout = positive_duration(
            ("timeout", "the export timeout"),
            self.timeout,
            OTEL_EXPORTER_OTLP_TIMEOUT,
            &get,
            DEFAULT_TIMEOUT,
        )?;

        let sampling = match self.sampling_ratio {
            Some(r) => Sampling::ParentRatio(check_ratio("sampling_ratio", r)?),
            None => {
                let arg = || -> Result<f64, TelemetryError> {
                    match get(OTEL_TRACES_SAMPLER_ARG) {
                        Some(a) => {
                            let r = a.parse::<f64>().map_err(|_| {
                                TelemetryError::config(
                                    OTEL_TRACES_SAMPLER_ARG,
                                    format!("expected a number, got {a:?}"),
                                )
                            })?;
                            check_ratio(OTEL_TRACES_SAMPLER_ARG, r)
                        }
                        None => Ok(1.0),
                    }
                };
                match get(OTEL_TRACES_SAMPLER).as_deref() {
                    None | Some("parentbased_always_on") => Sampling::ParentRatio(1.0),
                    Some("always_on") => Sampling::Ratio(1.0),
                    Some("always_off") => Sampling::Ratio(0.0),
                    Some("parentbased_always_off") => Sampling::ParentRatio(0.0),
                    Some("traceidratio") => Sampling::Ratio(arg()?),
                    Some("parentbased_traceidratio") => Sampling::ParentRatio(arg()?),
                    Some(other) => {
                        return Err(TelemetryError::config(
                            OTEL_TRACES_SAMPLER,
                            format!("unsupported sampler {other:?}"),
                        ));
                    }
                }
            }
        };

        let metric_interval = positive_duration(
            ("metric_interval", "the metric export interval"),
            self.metric_interval,
            OTEL_METRIC_EXPORT_INTERVAL,
            &get,
            DEFAULT_METRIC_INTERVAL,
        )?;

        Ok(Resolved {
            disabled,
            service_name,
            protocol,
            traces_endpoint,
            metrics_endpoint,
            headers: Headers(headers),
            timeout,
            sampling,
            metric_interval,
            resource: self.resource.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn defaults_follow_the_specification() {
        let r = CodeSettings::default().resolve(&env(&[])).unwrap();
        assert!(!r.disabled);
        assert_eq!(r.service_name, "ripcord");
        assert_eq!(r.protocol, Protocol::HttpProtobuf);
        assert_eq!(r.traces_endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(r.metrics_endpoint, "http://localhost:4318/v1/metrics");
        assert_eq!(r.timeout, Duration::from_secs(10));
        assert_eq!(r.sampling, Sampling::ParentRatio(1.0));
        assert_eq!(r.metric_interval, Duration::from_secs(60));
    }

    #[test]
    fn environment_fills_what_code_leaves_open() {
        let e = env(&[
            (OTEL_SERVICE_NAME, "checkout"),
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318/"),
            (
                OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
                "http://metrics:9090/otlp/v1/metrics",
            ),
            (
                OTEL_EXPORTER_OTLP_HEADERS,
                "Authorization=Bearer%20abc,x-tenant=acme",
            ),
            (OTEL_EXPORTER_OTLP_TIMEOUT, "2500"),
            (OTEL_TRACES_SAMPLER, "parentbased_traceidratio"),
            (OTEL_TRACES_SAMPLER_ARG, "0.25"),
            (OTEL_METRIC_EXPORT_INTERVAL, "1000"),
        ]);
        let r = CodeSettings::default().resolve(&e).unwrap();
        assert_eq!(r.service_name, "checkout");
        assert_eq!(r.traces_endpoint, "http://collector:4318/v1/traces");
        assert_eq!(r.metrics_endpoint, "http://metrics:9090/otlp/v1/metrics");
        let h: Vec<_> = r.headers.iter().collect();
        assert_eq!(
            h,
            vec![("authorization", "Bearer abc"), ("x-tenant", "acme")]
        );
        assert_eq!(r.timeout, Duration::from_millis(2500));
        assert_eq!(r.sampling, Sampling::ParentRatio(0.25));
        assert_eq!(r.metric_interval, Duration::from_secs(1));
    }

    #[test]
    fn code_wins_over_the_environment() {
        let e = env(&[
            (OTEL_SERVICE_NAME, "from-env"),
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://env:4318"),
            (
                OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
                "http://env:4318/v1/traces",
            ),
            (OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf"),
            (OTEL_EXPORTER_OTLP_HEADERS, "x-tenant=env,x-other=kept"),
            (OTEL_TRACES_SAMPLER, "always_off"),
        ]);
        let code = CodeSettings {
            service_name: Some("from-code".into()),
            endpoint: Some("http://127.0.0.1:4317".into()),
            protocol: Some(Protocol::Grpc),
            headers: vec![("X-Tenant".into(), SecretString::from("code"))],
            sampling_ratio: Some(0.5),
            ..CodeSettings::default()
        };
        let r = code.resolve(&e).unwrap();
        assert_eq!(r.service_name, "from-code");
        assert_eq!(r.protocol, Protocol::Grpc);
        assert_eq!(r.traces_endpoint, "http://127.0.0.1:4317");
        assert_eq!(r.metrics_endpoint, "http://127.0.0.1:4317");
        let h: Vec<_> = r.headers.iter().collect();
        assert_eq!(h, vec![("x-other", "kept"), ("x-tenant", "code")]);
        assert_eq!(r.sampling, Sampling::ParentRatio(0.5));
    }

    #[test]
    fn grpc_uses_the_base_endpoint_without_a_path() {
        let e = env(&[
            (OTEL_EXPORTER_OTLP_PROTOCOL, "grpc"),
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4317"),
        ]);
        let r = CodeSettings::default().resolve(&e).unwrap();
        assert_eq!(r.traces_endpoint, "http://c:4317");
        let r = CodeSettings::default()
            .resolve(&env(&[(OTEL_EXPORTER_OTLP_PROTOCOL, "grpc")]))
            .unwrap();
        assert_eq!(r.traces_endpoint, "http://localhost:4317");
    }

    #[test]
    fn bad_values_name_the_setting() {
        let cases: [(&'static [(&'static str, &'static str)], &str); 6] = [
            (
                &[(OTEL_EXPORTER_OTLP_PROTOCOL, "http/json")],
                OTEL_EXPORTER_OTLP_PROTOCOL,
            ),
            (
                &[(OTEL_EXPORTER_OTLP_TIMEOUT, "soon")],
                OTEL_EXPORTER_OTLP_TIMEOUT,
            ),
            (
                &[
                    (OTEL_TRACES_SAMPLER, "traceidratio"),
                    (OTEL_TRACES_SAMPLER_ARG, "1.5"),
                ],
                OTEL_TRACES_SAMPLER_ARG,
            ),
            (
                &[(OTEL_TRACES_SAMPLER, "jaeger_remote")],
                OTEL_TRACES_SAMPLER,
            ),
            (
                &[(OTEL_EXPORTER_OTLP_HEADERS, "novalue")],
                OTEL_EXPORTER_OTLP_HEADERS,
            ),
            (
                &[(OTEL_EXPORTER_OTLP_ENDPOINT, "collector:4318")],
                "endpoint",
            ),
        ];
        for (pairs, what) in cases {
            let e = CodeSettings::default().resolve(&env(pairs)).unwrap_err();
            assert!(e.to_string().contains(what), "{e} should name {what}");
        }
        let code = CodeSettings {
            sampling_ratio: Some(f64::NAN),
            ..CodeSettings::default()
        };
        assert!(
            code.resolve(&env(&[]))
                .unwrap_err()
                .to_string()
                .contains("sampling_ratio")
        );
    }

    #[test]
    fn sdk_disabled_is_honoured() {
        let r = CodeSettings::default()
            .resolve(&env(&[(OTEL_SDK_DISABLED, "TRUE")]))
            .unwrap();
        assert!(r.disabled);
    }

    #[test]
    fn header_values_never_show_in_debug() {
        let code = CodeSettings {
            headers: vec![(
                "authorization".into(),
                SecretString::from("Bearer s3cr3t-token"),
            )],
            ..CodeSettings::default()
        };
        let r = code.resolve(&env(&[])).unwrap();
        let dbg = format!("{r:?}");
        assert!(dbg.contains("authorization"));
        assert!(!dbg.contains("s3cr3t"), "{dbg}");
    }

    #[test]
    fn percent_decoding_keeps_malformed_escapes() {
        assert_eq!(percent_decode("a%20b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
