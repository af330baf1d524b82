//! What several modules' unit tests share.

use ::http::header::{HeaderMap, HeaderValue};

/// A header map of `(name, value)` pairs.
pub(crate) fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_static(v));
    }
    h
}

/// `(input, cached input, output)` tokens, to assert a usage's counts in one line.
#[cfg(any(feature = "anthropic", feature = "gemini", feature = "bedrock"))]
pub(crate) fn usage_counts(u: &ripcord_core::Usage) -> (u64, u64, u64) {
    (u.input_tokens, u.cached_input_tokens, u.output_tokens)
}

pub(crate) mod requests;
