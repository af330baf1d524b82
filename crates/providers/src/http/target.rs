use ripcord_core::{Error, ErrorKind, Result};

/// Joins a base URL and an endpoint path and checks the result.
///
/// The base URL must be `http` or `https` and must not carry credentials (keys go in headers,
/// where they are redacted; a URL ends up in logs and error messages).
pub(crate) fn endpoint(base: &str, path: &str, what: &str) -> Result<reqwest::Url> {
    let joined = format!("{}{path}", base.trim().trim_end_matches('/'));
    let url = reqwest::Url::parse(&joined).map_err(|e| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("{what}: invalid base URL {base:?}: {e}"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            format!(
                "{what}: the base URL must be http or https, got {:?}",
                url.scheme()
            ),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            format!("{what}: the base URL must not carry credentials; pass the API key separately"),
        ));
    }
    Ok(url)
}

/// Reads an environment variable, treating empty as unset.
pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// An endpoint: its URL, and the URI requests are sent to, parsed once when the provider is
/// built rather than on every call.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(super) url: reqwest::Url,
    pub(super) uri: http::Uri,
}

impl Target {
    /// Checks that the URL is also a valid request URI.
    pub(crate) fn new(url: reqwest::Url, what: &str) -> Result<Target> {
        let uri = url.as_str().parse::<http::Uri>().map_err(|e| {
            Error::new(
                ErrorKind::InvalidRequest,
                format!(
                    "{what}: the URL {:?} is not a valid request URI: {e}",
                    url.as_str()
                ),
            )
        })?;
        Ok(Target { url, uri })
    }
}

impl std::ops::Deref for Target {
    type Target = reqwest::Url;

    fn deref(&self) -> &reqwest::Url {
        &self.url
    }
}
