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

pub(crate) mod requests;
