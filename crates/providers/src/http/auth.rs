use std::fmt;
use std::sync::Arc;

use ::http::header::{HeaderName, HeaderValue};
use ripcord_core::{Error, ErrorKind, Result};
use secrecy::{ExposeSecret, SecretString};

/// How a provider authenticates: a header built once from a secret key.
///
/// The header value is marked sensitive (reqwest and hyper redact it), and `Debug` prints
/// `[redacted]`. The key is kept only to scrub it from vendor error messages that echo it.
#[derive(Clone)]
pub(crate) struct Auth {
    pub(super) header: Option<(HeaderName, HeaderValue)>,
    key: Option<Arc<SecretString>>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.header {
            Some((name, _)) => write!(f, "{name}: [redacted]"),
            None => f.write_str("none"),
        }
    }
}

impl Auth {
    /// No authentication (local servers).
    #[cfg_attr(not(any(feature = "openai", feature = "bedrock")), allow(dead_code))]
    pub(crate) fn none() -> Auth {
        Auth {
            header: None,
            key: None,
        }
    }

    /// `Authorization: Bearer <key>`.
    #[cfg_attr(not(any(feature = "openai", feature = "bedrock")), allow(dead_code))]
    pub(crate) fn bearer(key: SecretString, what: &str) -> Result<Auth> {
        let value = format!("Bearer {}", key.expose_secret());
        Auth::build(HeaderName::from_static("authorization"), &value, key, what)
    }

    /// `<name>: <key>` (Anthropic `x-api-key`, Azure `api-key`).
    #[cfg_attr(not(any(feature = "anthropic", feature = "azure")), allow(dead_code))]
    pub(crate) fn header(name: &'static str, key: SecretString, what: &str) -> Result<Auth> {
        let value = key.expose_secret().to_owned();
        Auth::build(HeaderName::from_static(name), &value, key, what)
    }

    fn build(name: HeaderName, value: &str, key: SecretString, what: &str) -> Result<Auth> {
        if key.expose_secret().trim().is_empty() {
            return Err(Error::new(
                ErrorKind::Auth,
                format!("{what}: the API key is empty"),
            ));
        }
        let mut v = HeaderValue::from_str(value).map_err(|_| {
            Error::new(
                ErrorKind::Auth,
                format!(
                    "{what}: the API key contains characters that are not allowed in an HTTP header"
                ),
            )
        })?;
        v.set_sensitive(true);
        Ok(Auth {
            header: Some((name, v)),
            key: Some(Arc::new(key)),
        })
    }

    /// Removes the key from a text a vendor sent back (some echo the key they rejected).
    pub(crate) fn scrub(&self, e: Error) -> Error {
        let Some(key) = &self.key else { return e };
        let key = key.expose_secret();
        if key.len() < 4 {
            return e;
        }
        let e = if e.message().contains(key) {
            let m = e.message().replace(key, "[redacted]");
            e.with_message(m)
        } else {
            e
        };
        match e.vendor_code() {
            Some(c) if c.contains(key) => {
                let c = c.replace(key, "[redacted]");
                e.with_vendor_code(c)
            }
            _ => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_debug_never_shows_the_key() {
        let a = Auth::bearer(SecretString::from("sk-very-secret-123"), "test").unwrap();
        let dbg = format!("{a:?}");
        assert!(!dbg.contains("sk-very-secret-123"), "{dbg}");
        assert!(dbg.contains("[redacted]"));
    }

    #[test]
    fn bad_keys_are_rejected_without_echoing_them() {
        let e = Auth::bearer(SecretString::from("sk-abc\ndef"), "openai").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert!(!e.to_string().contains("sk-abc"));
        let e = Auth::header("x-api-key", SecretString::from("  "), "anthropic").unwrap_err();
        assert!(e.to_string().contains("empty"));
    }

    #[test]
    fn scrub_removes_echoed_keys() {
        let a = Auth::bearer(SecretString::from("sk-echo-me-please"), "t").unwrap();
        let e = a.scrub(Error::new(
            ErrorKind::Auth,
            "Incorrect API key provided: sk-echo-me-please.",
        ));
        assert_eq!(e.message(), "Incorrect API key provided: [redacted].");
    }
}
