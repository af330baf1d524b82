use ripcord_core::{Error, ErrorKind, Result};

/// Joins a base URL and an endpoint path and checks the result.
///
/// The base URL must be `http` or `https` and must not carry credentials (keys go in headers,
/// where they are redacted; a URL ends up in logs and error messages).
pub(crate) fn endpoint(base: &str, path: &str, what: &str) -> Result<url::Url> {
    let joined = format!("{}{path}", base.trim().trim_end_matches('/'));
    let url = url::Url::parse(&joined).map_err(|e| {
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
    pub(super) url: url::Url,
    pub(super) uri: http::Uri,
}

impl Target {
    /// Checks that the URL is also a valid request URI.
    pub(crate) fn new(url: url::Url, what: &str) -> Result<Target> {
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
    type Target = url::Url;

    fn deref(&self) -> &url::Url {
        &self.url
    }
}

/// Headers ripcord sets itself on every vendor request; `with_header` may not replace them.
const OWN_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "content-type",
    "accept",
    "content-length",
    "host",
    "anthropic-version",
];

/// An adapter's custom headers as a header map (see [`add_custom_headers`]).
#[cfg(any(feature = "gemini", feature = "vertex-anthropic", feature = "bedrock"))]
pub(crate) fn custom_headers(
    custom: &[(String, secrecy::SecretString)],
    what: &str,
) -> Result<http::HeaderMap> {
    let mut headers = http::HeaderMap::new();
    add_custom_headers(&mut headers, custom, what)?;
    Ok(headers)
}

/// Adds an adapter's custom headers (`with_header`: a gateway's own key behind Helicone or
/// Portkey, an org header) to `headers`, each value marked sensitive so it never reaches a log
/// or `Debug` output. A name or value that cannot be a header, or a header ripcord sets itself,
/// is an `InvalidRequest` naming the header.
pub(crate) fn add_custom_headers(
    headers: &mut http::HeaderMap,
    custom: &[(String, secrecy::SecretString)],
    what: &str,
) -> Result<()> {
    use secrecy::ExposeSecret as _;
    for (name, value) in custom {
        let header = http::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
            Error::new(
                ErrorKind::InvalidRequest,
                format!("{what}: {name:?} cannot be a header name"),
            )
        })?;
        if OWN_HEADERS.contains(&header.as_str()) {
            return Err(Error::new(
                ErrorKind::InvalidRequest,
                format!(
                    "{what}: the header {header} is set by ripcord itself (the key goes in the config's api key)"
                ),
            ));
        }
        let mut v = http::HeaderValue::from_str(value.expose_secret()).map_err(|_| {
            Error::new(
                ErrorKind::InvalidRequest,
                format!("{what}: the value of header {header} cannot be a header value"),
            )
        })?;
        v.set_sensitive(true);
        headers.append(header, v);
    }
    Ok(())
}
