//! How long a vendor asks us to wait, read from its response headers (and, as a last resort,
//! from the error text).
//!
//! Vendors say "wait" in several dialects, and a retry policy must honour the most precise one:
//!
//! 1. `retry-after-ms: 1500` — OpenAI and Azure, milliseconds;
//! 2. `Retry-After: 7` or `Retry-After: Wed, 21 Oct 2015 07:28:00 GMT` — RFC 9110, seconds or an
//!    HTTP date;
//! 3. `x-ratelimit-reset-requests: 1s` / `x-ratelimit-reset-tokens: 6m0s` — OpenAI-style Go
//!    durations (`20ms`, `1.5s`, `1h2m3s`), taking the limit that is actually exhausted
//!    (`x-ratelimit-remaining-* = 0`) or, when none says so, the longest;
//! 4. "Please try again in 20s" in the error message, when no header said anything.
//!
//! Every value is capped at [`MAX_RETRY_AFTER`]: a bogus date ten years ahead must not park a
//! retry loop (the chain falls back anyway once a wait exceeds its budget).

use std::time::{Duration, SystemTime};

use ::http::header::{HeaderMap, RETRY_AFTER};

/// The longest wait we ever report (one day).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The wait the headers ask for, relative to `now` (used for HTTP dates).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use http::header::{HeaderMap, HeaderValue};
/// use ripcord_providers::retry_after::from_headers;
///
/// let mut h = HeaderMap::new();
/// h.insert("x-ratelimit-reset-tokens", HeaderValue::from_static("6m0s"));
/// assert_eq!(from_headers(&h, SystemTime::now()), Some(Duration::from_secs(360)));
/// h.insert("retry-after", HeaderValue::from_static("2"));
/// assert_eq!(from_headers(&h, SystemTime::now()), Some(Duration::from_secs(2)));
/// h.insert("retry-after-ms", HeaderValue::from_static("1250"));
/// assert_eq!(from_headers(&h, SystemTime::now()), Some(Duration::from_millis(1250)));
/// ```
pub fn from_headers(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };

    if let Some(ms) = text("retry-after-ms").and_then(parse_millis) {
        return Some(cap(ms));
    }
    if let Some(d) = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, now))
    {
        return Some(cap(d));
    }

    let requests = text("x-ratelimit-reset-requests").and_then(parse_go_duration);
    let tokens = text("x-ratelimit-reset-tokens").and_then(parse_go_duration);
    let exhausted = |name: &str| text(name).is_some_and(|v| v == "0");
    let picked = match (
        exhausted("x-ratelimit-remaining-requests"),
        exhausted("x-ratelimit-remaining-tokens"),
    ) {
        (true, true) => requests.max(tokens),
        (true, false) => requests.or(tokens),
        (false, true) => tokens.or(requests),
        (false, false) => requests.max(tokens),
    };
    picked.map(cap)
}

/// Parses a `Retry-After` value: delay seconds (integer or fractional) or an HTTP date.
///
/// A date in the past means "now" (zero).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use ripcord_providers::retry_after::parse_retry_after;
/// let now = UNIX_EPOCH + Duration::from_secs(1_445_412_470);
/// assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now), Some(Duration::from_secs(10)));
/// assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
/// assert_eq!(parse_retry_after("soon", now), None);
/// ```
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Some(d) = parse_seconds(value) {
        return Some(d);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parses a Go-style duration as used in OpenAI's `x-ratelimit-reset-*` headers: a sequence of
/// decimal numbers with units `h`, `m`, `s`, `ms`, `us`/`µs`, `ns` (`"6m0s"`, `"1.5s"`,
/// `"20ms"`). A bare number is taken as seconds.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_providers::retry_after::parse_go_duration;
/// assert_eq!(parse_go_duration("6m0s"), Some(Duration::from_secs(360)));
/// assert_eq!(parse_go_duration("20ms"), Some(Duration::from_millis(20)));
/// assert_eq!(parse_go_duration("1h2m3.5s"), Some(Duration::from_millis(3_723_500)));
/// assert_eq!(parse_go_duration("abc"), None);
/// ```
pub fn parse_go_duration(value: &str) -> Option<Duration> {
    let s = value.trim();
    if s.is_empty() {
        return None;
    }
    if let Some(d) = parse_seconds(s) {
        return Some(d);
    }
    let mut total = 0.0_f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * factor;
    }
    finite_secs(total)
}

/// Finds "try again in 6s" / "retry after 6 seconds" in an error message.
pub(crate) fn from_message(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    for marker in [
        "try again in ",
        "try again after ",
        "retry after ",
        "retry in ",
    ] {
        if let Some(at) = lower.find(marker) {
            let tail = &lower[at + marker.len()..];
            let mut words = tail.split_whitespace();
            let Some(first) = words.next() else { continue };
            let first = first.trim_end_matches(['.', ',', ';', ')']);
            // "6 seconds" / "2 minutes"
            if let Some(n) = parse_seconds(first) {
                let unit = words.next().unwrap_or("");
                let factor = if unit.starts_with("minute") || unit.starts_with("min") {
                    60
                } else if unit.starts_with("sec") || unit.starts_with('s') {
                    1
                } else {
                    continue;
                };
                return Some(cap(n.saturating_mul(factor)));
            }
            // "20ms" / "1.5s" / "6m0s"
            if let Some(d) = parse_go_duration(first) {
                return Some(cap(d));
            }
        }
    }
    None
}

fn parse_millis(value: &str) -> Option<Duration> {
    let ms: f64 = value.parse().ok()?;
    finite_secs(ms / 1000.0)
}

fn parse_seconds(value: &str) -> Option<Duration> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let secs: f64 = value.parse().ok()?;
    finite_secs(secs)
}

fn finite_secs(secs: f64) -> Option<Duration> {
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(
        Duration::try_from_secs_f64(secs.min(MAX_RETRY_AFTER.as_secs_f64()))
            .unwrap_or(MAX_RETRY_AFTER),
    )
}

fn cap(d: Duration) -> Duration {
    d.min(MAX_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::test_support::headers;

    /// Which header wins: `retry-after-ms`, then `retry-after`, then the reset header of the
    /// exhausted limit (else the longer reset).
    #[test]
    fn header_precedence() {
        let now = SystemTime::now();
        type Case = (
            &'static str,
            &'static [(&'static str, &'static str)],
            Option<Duration>,
        );
        let cases: &[Case] = &[
            (
                "ms before retry-after before reset",
                &[
                    ("retry-after-ms", "20"),
                    ("retry-after", "3"),
                    ("x-ratelimit-reset-requests", "1s"),
                ],
                Some(Duration::from_millis(20)),
            ),
            (
                "retry-after before reset",
                &[("retry-after", "3"), ("x-ratelimit-reset-requests", "1s")],
                Some(Duration::from_secs(3)),
            ),
            ("no headers", &[], None),
            (
                "the exhausted limit's reset",
                &[
                    ("x-ratelimit-reset-requests", "120ms"),
                    ("x-ratelimit-reset-tokens", "6m0s"),
                    ("x-ratelimit-remaining-requests", "0"),
                    ("x-ratelimit-remaining-tokens", "5000"),
                ],
                Some(Duration::from_millis(120)),
            ),
            (
                "the longer reset when none is exhausted",
                &[
                    ("x-ratelimit-reset-requests", "120ms"),
                    ("x-ratelimit-reset-tokens", "6m0s"),
                ],
                Some(Duration::from_secs(360)),
            ),
        ];
        for (name, pairs, want) in cases {
            assert_eq!(from_headers(&headers(pairs), now), *want, "{name}");
        }
    }

    #[test]
    fn http_date_in_the_past_is_zero_and_far_future_is_capped() {
        let now = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::ZERO)
        );
        let h = headers(&[("retry-after", "99999999")]);
        assert_eq!(from_headers(&h, now), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn garbage_is_ignored() {
        let now = SystemTime::now();
        for bad in ["", "-1", "1e3", "NaN", "soon", "1x", "s"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad}");
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
        let h = headers(&[("retry-after", "later"), ("retry-after-ms", "x")]);
        assert_eq!(from_headers(&h, now), None);
    }

    #[test]
    fn message_hints() {
        let cases = [
            (
                "Rate limit reached for gpt-4o. Please try again in 20ms. Visit ...",
                Some(Duration::from_millis(20)),
            ),
            (
                "Please retry after 6 seconds.",
                Some(Duration::from_secs(6)),
            ),
            (
                "Please try again in 1.5s.",
                Some(Duration::from_millis(1500)),
            ),
            ("try again later", None),
            (
                "please try again after 1 seconds",
                Some(Duration::from_secs(1)),
            ),
            ("Retry after 2 minutes.", Some(Duration::from_secs(120))),
        ];
        for (message, want) in cases {
            assert_eq!(from_message(message), want, "{message}");
        }
    }
}
