//! What every chat answer of both front doors carries: the provenance headers
//! (`x-ripcord-attempts`, `x-ripcord-served-by`, `x-ripcord-degraded`) and the parsing of a
//! JSON request body.

use axum::http::{HeaderMap, HeaderValue};
use ripcord_core::Provenance;
use std::time::{SystemTime, UNIX_EPOCH};

use super::errors::GatewayError;

/// The gateway's own header names, checked once at compile time (a name given as a `&str`
/// is parsed again on every insert and lookup).
pub(super) mod hdr {
    use axum::http::HeaderName;

    /// The route that served (`x-ripcord-route`).
    pub(crate) const ROUTE: HeaderName = HeaderName::from_static("x-ripcord-route");
    /// Who pays (`x-ripcord-tenant`), on the request (a sub-tenant claim) and the answer.
    pub(crate) const TENANT: HeaderName = HeaderName::from_static("x-ripcord-tenant");
    /// The model the client asked for (`x-ripcord-requested-model`).
    pub(crate) const REQUESTED_MODEL: HeaderName =
        HeaderName::from_static("x-ripcord-requested-model");
    /// The link that served (`x-ripcord-served-by`).
    pub(crate) const SERVED_BY: HeaderName = HeaderName::from_static("x-ripcord-served-by");
    /// Every attempt of the call (`x-ripcord-attempts`).
    pub(crate) const ATTEMPTS: HeaderName = HeaderName::from_static("x-ripcord-attempts");
    /// Whether a fallback served (`x-ripcord-degraded`).
    pub(crate) const DEGRADED: HeaderName = HeaderName::from_static("x-ripcord-degraded");
    /// How a token count was made (`x-ripcord-token-count`).
    pub(crate) const TOKEN_COUNT: HeaderName = HeaderName::from_static("x-ripcord-token-count");
    /// `false` on errors a retry cannot fix (the OpenAI SDKs read it).
    pub(crate) const SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");
    /// The wait in milliseconds, next to `Retry-After` in seconds.
    pub(crate) const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");
}

/// `x-ripcord-attempts`: every attempt in order,
/// `link/model=outcome[(status)]:latency_ms[;max_tokens=N]`, comma-separated — the same record `ripcord chat --json` prints.
///
/// With `expose` off (`[server] expose_errors = false`, the default) no link or model is
/// named: each link is `linkN`, N its place among the links the call tried (`link1=overloaded(529):12ms,
/// link2=ok:40ms`), so a client still sees how many attempts and fallbacks its call took.
pub(super) fn attempts_header(p: &Provenance, expose: bool) -> Option<HeaderValue> {
    let mut seen: Vec<&str> = Vec::new();
    let parts: Vec<String> = p
        .attempts
        .iter()
        .map(|a| {
            let outcome = a.error_kind.map_or("ok", |k| k.as_str());
            let status = a.status.map(|s| format!("({s})")).unwrap_or_default();
            // A `max_tokens` the chain lowered to the link's cap is said with the attempt.
            let clamped = a
                .clamped_max_tokens
                .map(|n| format!(";max_tokens={n}"))
                .unwrap_or_default();
            let who = if expose {
                format!("{}/{}", a.provider, a.model)
            } else {
                let n = match seen.iter().position(|s| *s == &*a.provider) {
                    Some(i) => i + 1,
                    None => {
                        seen.push(&a.provider);
                        seen.len()
                    }
                };
                format!("link{n}")
            };
            format!(
                "{who}={outcome}{status}:{}ms{clamped}",
                a.latency.as_millis()
            )
        })
        .collect();
    HeaderValue::from_str(&parts.join(", ")).ok()
}

/// The provenance headers of an answer; `expose` as in [`attempts_header`].
pub(super) fn set_provenance_headers(headers: &mut HeaderMap, p: &Provenance, expose: bool) {
    if let Some(v) = attempts_header(p, expose) {
        headers.insert(hdr::ATTEMPTS, v);
    }
    let served = p
        .served_by
        .as_deref()
        .unwrap_or(if p.static_reply { "static" } else { "none" });
    if let Ok(v) = HeaderValue::from_str(served) {
        headers.insert(hdr::SERVED_BY, v);
    }
    headers.insert(
        hdr::DEGRADED,
        HeaderValue::from_static(if p.degraded { "true" } else { "false" }),
    );
    super::notice::set_skipped(headers, p);
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Parses a JSON request body, or the 400 that names what is wrong with it: the path of the
/// field at fault (`messages[1].tool_calls`), or that the body is not JSON.
pub(super) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, GatewayError> {
    let not_json = |e: &serde_json::Error| {
        GatewayError::invalid(format!("the request body is not valid JSON: {e}"))
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return not_json(&inner);
        }
        // The field's path says where; the line and column serde adds say it again, less
        // usefully (a body is usually one line), so they are left out.
        let full = inner.to_string();
        let at = format!(" at line {} column {}", inner.line(), inner.column());
        let message = full.strip_suffix(&at).unwrap_or(&full);
        if path == "." {
            GatewayError::invalid(message)
        } else {
            GatewayError::invalid_at(path, message)
        }
    })?;
    de.end().map_err(|e| not_json(&e))?;
    Ok(parsed)
}

/// Deserialises an optional field so that an explicit `null` is the same as leaving it out:
/// the type's default. SDKs write `null` for what they do not set (`tool_calls: null` in a
/// `model_dump()` of an answer, `tools: null`, `stream: null`), and a plain `#[serde(default)]`
/// accepts only absence. Use as `#[serde(default, deserialize_with = "null_default")]`.
pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    Ok(<Option<T> as serde::Deserialize>::deserialize(d)?.unwrap_or_default())
}

/// Deserialises an optional sampling number (`temperature`, `top_p`, a penalty) as `f32`,
/// refusing one that is not a finite `f32`. serde would turn `1e39` into `f32::INFINITY`,
/// which JSON then writes as `null` to the vendor: the caller's number would be silently
/// dropped. Here it is a 400 naming the field (the path comes from [`parse_body`]). Use as
/// `#[serde(default, deserialize_with = "finite_f32")]`.
pub(crate) fn finite_f32<'de, D>(d: D) -> Result<Option<f32>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    match <Option<f64> as serde::Deserialize>::deserialize(d)? {
        None => Ok(None),
        // In range: checked just before.
        Some(x) if x.is_finite() && x.abs() <= f64::from(f32::MAX) => Ok(Some(x as f32)),
        Some(x) => Err(serde::de::Error::custom(format!(
            "{x:e} is out of range: expected a finite number no larger than {:e} in size",
            f32::MAX
        ))),
    }
}
