use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use ripcord_core::{Error, ErrorKind, Result};

#[cfg(feature = "reqwest")]
use super::chain;
use super::env;

/// A pooled HTTP client (hyper-util with rustls), cheap to clone: clones share one connection
/// pool.
///
/// Every provider builds its own by default; pass one to several providers to share the pool.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_providers::HttpClient;
/// let shared = HttpClient::new(Duration::from_secs(5))?;
/// let also_shared = shared.clone();
/// # drop(also_shared);
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone)]
pub struct HttpClient {
    pub(super) engine: Engine,
    connect_timeout: Option<Duration>,
}

pub(super) type Hyper = HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What sends the requests.
#[derive(Clone)]
pub(super) enum Engine {
    Hyper(Box<Hyper>),
    #[cfg(feature = "reqwest")]
    Reqwest(reqwest::Client),
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let engine = match self.engine {
            Engine::Hyper(_) => "hyper",
            #[cfg(feature = "reqwest")]
            Engine::Reqwest(_) => "reqwest",
        };
        f.debug_struct("HttpClient")
            .field("engine", &engine)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

/// The proxy variables reqwest reads; when one is set, [`HttpClient::new`] uses reqwest (or,
/// built without the `reqwest` feature, refuses: hyper-util's client has no proxy support).
const PROXY_VARS: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Whether `get` (the environment) names a proxy.
fn proxy_configured(get: impl Fn(&str) -> Option<String>) -> bool {
    PROXY_VARS.iter().any(|v| get(v).is_some())
}

impl HttpClient {
    /// A client with rustls (webpki roots), HTTP/1.1 and HTTP/2, TCP_NODELAY, a 90 s idle pool,
    /// this connect timeout, and no redirects (an API that redirects a POST is misconfigured,
    /// and following it would turn the POST into a GET).
    ///
    /// When a proxy is configured in the environment (`HTTPS_PROXY`, `HTTP_PROXY`,
    /// `ALL_PROXY`, upper or lower case), the client is reqwest's, which honours it (and
    /// `NO_PROXY`) — with the crate's `reqwest` feature; without it, a proxy in the
    /// environment is refused rather than bypassed.
    ///
    /// # Errors
    ///
    /// `Network` when the TLS backend cannot be initialised, or when a proxy is configured and
    /// the crate was built without its `reqwest` feature.
    pub fn new(connect_timeout: Duration) -> Result<HttpClient> {
        if proxy_configured(env) {
            return HttpClient::proxied(connect_timeout);
        }
        let mut tcp = HttpConnector::new();
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect_timeout));
        tcp.enforce_http(false);
        // The crypto provider is named, as reqwest does: rustls' process default is ambiguous
        // when the build links more than one.
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| {
                Error::new(
                    ErrorKind::Network,
                    format!("cannot build the HTTP client: {e}"),
                )
                .with_source(e)
            })?
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(tcp);
        let client = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_timer(TokioTimer::new())
            .build(tls);
        Ok(HttpClient {
            engine: Engine::Hyper(Box::new(client)),
            connect_timeout: Some(connect_timeout),
        })
    }

    /// A proxy is configured, and this build has no client that can use one.
    #[cfg(not(feature = "reqwest"))]
    fn proxied(_connect_timeout: Duration) -> Result<HttpClient> {
        let var = PROXY_VARS
            .iter()
            .find(|v| env(v).is_some())
            .unwrap_or(&PROXY_VARS[0]);
        Err(Error::new(
            ErrorKind::Network,
            format!(
                "{var} names a proxy, but ripcord-providers was built without its `reqwest` \
                 feature, the only client here that goes through proxies: enable the feature, \
                 or unset {var} to connect directly"
            ),
        ))
    }

    /// The same settings on reqwest, which honours proxies from the environment.
    #[cfg(feature = "reqwest")]
    fn proxied(connect_timeout: Duration) -> Result<HttpClient> {
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(connect_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Network,
                    format!("cannot build the HTTP client: {}", chain(&e)),
                )
                .with_source(e)
            })?;
        Ok(HttpClient {
            engine: Engine::Reqwest(client),
            connect_timeout: Some(connect_timeout),
        })
    }

    /// Wraps a reqwest client you configured yourself (proxies, extra roots, …; feature
    /// `reqwest`). Its own
    /// connect timeout applies; ripcord's [`Timeouts::connect`](super::Timeouts::connect) does not.
    #[cfg(feature = "reqwest")]
    pub fn from_reqwest(client: reqwest::Client) -> HttpClient {
        HttpClient {
            engine: Engine::Reqwest(client),
            connect_timeout: None,
        }
    }

    /// The reqwest client underneath, when there is one (see [`HttpClient::new`]; feature
    /// `reqwest`).
    #[cfg(feature = "reqwest")]
    pub fn reqwest(&self) -> Option<&reqwest::Client> {
        match &self.engine {
            Engine::Reqwest(c) => Some(c),
            Engine::Hyper(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_in_the_environment_selects_reqwest() {
        assert!(!proxy_configured(|_| None));
        for var in PROXY_VARS {
            assert!(proxy_configured(
                |v| (v == var).then(|| "http://proxy:3128".to_owned())
            ));
        }
        if !proxy_configured(env) {
            let c = HttpClient::new(Duration::from_secs(1)).unwrap();
            assert!(format!("{c:?}").contains("hyper"), "{c:?}");
            #[cfg(feature = "reqwest")]
            assert!(c.reqwest().is_none(), "{c:?}");
        }
        #[cfg(feature = "reqwest")]
        {
            let r = HttpClient::from_reqwest(reqwest::Client::new());
            assert!(r.reqwest().is_some());
            assert!(format!("{r:?}").contains("reqwest"));
        }
    }

    #[cfg(not(feature = "reqwest"))]
    #[test]
    fn without_reqwest_a_proxy_is_refused_by_name() {
        // The environment is the process's: only judge the refusal when a proxy is set there.
        if proxy_configured(env) {
            let e = HttpClient::new(Duration::from_secs(1)).unwrap_err();
            assert!(e.to_string().contains("`reqwest` feature"), "{e}");
        }
    }
}
