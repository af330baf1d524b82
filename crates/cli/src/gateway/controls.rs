//! The per-request control headers, read once for every chat door into the call's
//! [`Context`], where the library's own fields carry them to the layers that act on them:
//!
//! - `x-ripcord-locality: local-only` or `region=eu,us` → [`Context::with_locality`]: the chain
//!   skips every link the requirement forbids (a cloud link for `local-only`; for regions, a
//!   cloud link whose region, the provider's `data_region` or the adapter's, is not listed) and
//!   records each skip (`x-ripcord-skipped`).
//! - `x-ripcord-retry-safe: false` → [`Context::with_retry_safe`]: after a failure the vendor
//!   may have processed (a timeout or a reset after the request left), neither the retry, nor
//!   the fallback, nor a stream continuation sends it again.
//! - `Idempotency-Key` → [`Context::with_idempotency_key`], and the request counts as
//!   retry-safe: the client has given the request an identity, so a second delivery is one it
//!   can recognise. None of the built-in adapters forwards the key: neither OpenAI's chat and
//!   responses APIs nor Anthropic's messages API document an idempotency header (their
//!   official SDKs set none), and a key sent to them would promise a de-duplication nobody
//!   performs.
//! - `x-ripcord-priority: high|normal|low` → [`Context::with_priority`]: the order in each
//!   link's bulkhead queue.
//! - `x-ripcord-intent: NAME` → [`Context::with_intent`]: picks the route's `intent_replies`
//!   text for the static reply and its `intent_notices` text for the degradation notice.
//!
//! A key's `controls` say which of these its clients may send, and how high a priority; a
//! malformed value, or one the key may not send, is a 400 that names the header.

use axum::http::{HeaderMap, HeaderName};
use ripcord_core::{Context, LocalityRequirement};

use super::errors::GatewayError;
use crate::config::{KeyControls, parse_priority, priority_name};

/// `x-ripcord-locality`.
pub(super) const LOCALITY: HeaderName = HeaderName::from_static("x-ripcord-locality");
/// `x-ripcord-retry-safe`.
pub(super) const RETRY_SAFE: HeaderName = HeaderName::from_static("x-ripcord-retry-safe");
/// `Idempotency-Key`.
pub(super) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// `x-ripcord-priority`.
pub(super) const PRIORITY: HeaderName = HeaderName::from_static("x-ripcord-priority");
/// `x-ripcord-intent`.
pub(super) const INTENT: HeaderName = HeaderName::from_static("x-ripcord-intent");

/// The longest `Idempotency-Key` accepted (the usual limit of APIs that take one).
const MAX_IDEMPOTENCY_KEY: usize = 255;
/// The longest intent name accepted.
const MAX_INTENT: usize = 64;

fn bad(header: &HeaderName, why: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(400, "invalid_header", format!("header {header}: {why}"))
        .with_param(header.as_str())
}

fn forbidden(header: &HeaderName, why: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(400, "header_not_allowed", format!("header {header}: {why}"))
        .with_param(header.as_str())
}

/// Why a key is refused a control header it may not send.
const NOT_ALLOWED: &str =
    "this gateway key may not send it (see `controls` of its [[server.keys]])";

/// Header `name` read by `parse` (a value it rejects is refused as not what was `expected`),
/// and refused when the key may not send it (`allowed` false); `None` when absent.
fn control<T>(
    headers: &HeaderMap,
    name: &HeaderName,
    allowed: bool,
    expected: impl std::fmt::Display,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, GatewayError> {
    let Some(v) = text(headers, name)? else {
        return Ok(None);
    };
    let value = parse(v).ok_or_else(|| bad(name, format!("expected {expected}, got {v:?}")))?;
    if !allowed {
        return Err(forbidden(name, NOT_ALLOWED));
    }
    Ok(Some(value))
}

/// The header's value as trimmed text, `None` when absent; a value that is not visible ASCII
/// is malformed.
fn text<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Result<Option<&'h str>, GatewayError> {
    let mut values = headers.get_all(name).iter();
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(bad(name, "sent more than once"));
    }
    let s = v
        .to_str()
        .map_err(|_| bad(name, "is not visible ASCII text"))?
        .trim();
    if s.is_empty() {
        return Err(bad(name, "is empty"));
    }
    Ok(Some(s))
}

/// Parses `local-only`, `any` or `region=eu,us`.
pub(super) fn parse_locality(s: &str) -> Option<LocalityRequirement> {
    if s.eq_ignore_ascii_case("local-only") {
        return Some(LocalityRequirement::LocalOnly);
    }
    if s.eq_ignore_ascii_case("any") {
        return Some(LocalityRequirement::Any);
    }
    let list = s.strip_prefix("region=")?;
    let regions: Vec<String> = list
        .split(',')
        .map(|r| r.trim().to_ascii_lowercase())
        .collect();
    let valid = |r: &String| {
        !r.is_empty()
            && r.len() <= 32
            && r.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    regions
        .iter()
        .all(valid)
        .then_some(LocalityRequirement::Regions(regions))
}

/// `ctx` with the controls the request's headers set, as far as `allowed` lets them.
///
/// # Errors
///
/// A 400 naming the header, for a malformed value or one the key may not send.
pub(super) fn apply(
    mut ctx: Context,
    headers: &HeaderMap,
    allowed: &KeyControls,
) -> Result<Context, GatewayError> {
    let expected = "`local-only`, `any` or `region=eu,us`";
    if let Some(req) = control(
        headers,
        &LOCALITY,
        allowed.locality,
        expected,
        parse_locality,
    )? {
        ctx = ctx.with_locality(req);
    }
    let safe = match text(headers, &RETRY_SAFE)? {
        None => None,
        Some(v) if v.eq_ignore_ascii_case("true") => Some(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Some(false),
        Some(v) => {
            return Err(bad(
                &RETRY_SAFE,
                format!("expected `true` or `false`, got {v:?}"),
            ));
        }
    };
    let key = text(headers, &IDEMPOTENCY_KEY)?;
    if let Some(k) = key
        && k.len() > MAX_IDEMPOTENCY_KEY
    {
        return Err(bad(
            &IDEMPOTENCY_KEY,
            format!("is longer than {MAX_IDEMPOTENCY_KEY} characters"),
        ));
    }
    if (safe.is_some() || key.is_some()) && !allowed.retry_safe {
        let which = if safe.is_some() {
            &RETRY_SAFE
        } else {
            &IDEMPOTENCY_KEY
        };
        return Err(forbidden(which, NOT_ALLOWED));
    }
    if let Some(k) = key {
        // A request with its own identity may be delivered again: the client can recognise it.
        ctx = ctx.with_idempotency_key(k).with_retry_safe(true);
    } else if let Some(s) = safe {
        ctx = ctx.with_retry_safe(s);
    }
    let expected = "`high`, `normal` or `low`";
    let priority = |v: &str| parse_priority(&v.to_ascii_lowercase());
    if let Some(p) = control(headers, &PRIORITY, allowed.priority, expected, priority)? {
        if p > allowed.max_priority {
            return Err(forbidden(
                &PRIORITY,
                format!(
                    "this gateway key may ask for `{}` at most",
                    priority_name(allowed.max_priority)
                ),
            ));
        }
        ctx = ctx.with_priority(p);
    }
    let intent = |v: &str| {
        let ok = v.len() <= MAX_INTENT
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        ok.then(|| v.to_owned())
    };
    // The expectation is formatted only when a value is refused (no allocation per request).
    let expected = format_args!("a name of up to {MAX_INTENT} letters, digits, `-`, `_` or `.`");
    if let Some(v) = control(headers, &INTENT, allowed.intent, expected, intent)? {
        ctx = ctx.with_intent(v);
    }
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use ripcord_core::Priority;

    fn headers(pairs: &[(&HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append((*k).clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn locality_values_parse() {
        assert_eq!(
            parse_locality("local-only"),
            Some(LocalityRequirement::LocalOnly)
        );
        assert_eq!(
            parse_locality("region=EU, us"),
            Some(LocalityRequirement::Regions(vec!["eu".into(), "us".into()]))
        );
        assert_eq!(parse_locality("region="), None);
        assert_eq!(parse_locality("local"), None);
        assert_eq!(parse_locality("region=eu;us"), None);
    }

    #[test]
    fn every_control_reaches_the_context() {
        let h = headers(&[
            (&LOCALITY, "region=eu"),
            (&RETRY_SAFE, "false"),
            (&PRIORITY, "low"),
            (&INTENT, "billing"),
        ]);
        let ctx = apply(Context::new(), &h, &KeyControls::default()).unwrap();
        assert_eq!(
            ctx.locality(),
            &LocalityRequirement::Regions(vec!["eu".into()])
        );
        assert!(!ctx.retry_safe());
        assert_eq!(ctx.priority(), Priority::Low);
        assert_eq!(ctx.intent(), Some("billing"));
        assert_eq!(ctx.idempotency_key(), None);
    }

    #[test]
    fn an_idempotency_key_makes_the_request_retry_safe() {
        let h = headers(&[(&RETRY_SAFE, "false"), (&IDEMPOTENCY_KEY, "order-1042")]);
        let ctx = apply(Context::new(), &h, &KeyControls::default()).unwrap();
        assert!(ctx.retry_safe());
        assert_eq!(ctx.idempotency_key(), Some("order-1042"));
    }

    #[test]
    fn malformed_and_forbidden_values_name_the_header() {
        let all = KeyControls::default();
        let none = KeyControls {
            locality: false,
            retry_safe: false,
            priority: true,
            intent: false,
            max_priority: Priority::Normal,
        };
        // Malformed values under a key that may set everything, then forbidden ones.
        for (controls, name, value) in [
            (&all, &LOCALITY, "anywhere"),
            (&all, &RETRY_SAFE, "maybe"),
            (&all, &PRIORITY, "urgent"),
            (&all, &INTENT, "has space"),
            (&none, &LOCALITY, "local-only"),
            (&none, &IDEMPOTENCY_KEY, "k-1"),
            (&none, &PRIORITY, "high"),
            (&none, &INTENT, "billing"),
        ] {
            let e = apply(Context::new(), &headers(&[(name, value)]), controls).unwrap_err();
            assert_eq!(e.status, 400, "{name}: {value}");
            assert!(e.message().contains(name.as_str()), "{}", e.message());
        }
        let twice = headers(&[(&PRIORITY, "low"), (&PRIORITY, "high")]);
        assert!(apply(Context::new(), &twice, &all).is_err());
    }
}
