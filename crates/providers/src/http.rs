//! The HTTP plumbing every adapter shares: one pooled client, time limits by phase, API keys
//! that never leak, and the mapping of transport failures to ripcord errors.
//!
//! # The client underneath
//!
//! By default requests go through hyper-util's pooled client (HTTP/1.1 and HTTP/2 over rustls
//! with the webpki roots) — the stack reqwest itself runs on. ripcord builds each request from
//! parts prepared when the provider is built (the parsed URI, the fixed headers with the key),
//! so a call pays for none of reqwest's per-request layers: it re-parses every request's URL in
//! its redirect layer even with redirects off, wraps each request in a retry layer and matches
//! proxies. Measured by `cargo xtask bench`, those layers cost about a third of a loopback
//! call's client CPU. A reqwest client is still used when you pass one
//! ([`HttpClient::from_reqwest`]: proxies, extra roots) and when a proxy is configured in the
//! environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`), which reqwest honours.
//!
//! # Why the limits are enforced here and not by the client
//!
//! HTTP clients offer a connect timeout and a whole-request timeout. The first is exactly what
//! we want for [`TimeoutPhase::Connect`] (the only phase a client can tell apart), so it is
//! configured on the client. The others are not one number: waiting
//! for the first token, the gap between two stream events and the caller's deadline are three
//! different limits with three different remedies (see rule 4 of docs/pitfalls.md), so each await on the
//! network goes through [`guard`], which races it against the phase limit, the
//! [`Context`] deadline and the caller's cancellation, and reports which one fired.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use ripcord_core::{Context, Error, ErrorKind, Result, TimeoutPhase};
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;

/// Time limits of a vendor call, by phase.
///
/// The fourth limit, the total, is the [`Context`] deadline of each call.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_providers::Timeouts;
/// let t = Timeouts::default()
///     .with_connect(Duration::from_secs(3))
///     .with_first_token(Duration::from_secs(20))
///     .with_stream_idle(Duration::from_secs(10));
/// assert_eq!(t.connect, Duration::from_secs(3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// Establishing the TCP (and TLS) connection. Default 5 s.
    pub connect: Duration,
    /// From sending the request to the response headers *and* the first answer event of a
    /// stream (or the first body bytes of a non-streaming answer, which vendors only send when
    /// the whole answer is ready). Default 30 s. A vendor that sends no response byte at all
    /// within it times out in [`TimeoutPhase::FirstByte`]; one that sent its headers but no
    /// answer event, in [`TimeoutPhase::FirstToken`].
    pub first_token: Duration,
    /// The longest silence between two pieces of a stream (or body) after the first. Default 60 s.
    pub stream_idle: Duration,
    /// How many stream events that cannot be parsed one stream may skip (each is logged and
    /// counted) before the next one fails it as an invalid response. Default 3; 0 fails the
    /// stream at the first.
    pub max_skipped_events: u32,
}

/// The default number of unparseable stream events skipped per stream.
pub const DEFAULT_MAX_SKIPPED_EVENTS: u32 = 3;

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            first_token: Duration::from_secs(30),
            stream_idle: Duration::from_secs(60),
            max_skipped_events: DEFAULT_MAX_SKIPPED_EVENTS,
        }
    }
}

impl Timeouts {
    /// Sets the connect limit.
    pub fn with_connect(mut self, d: Duration) -> Self {
        self.connect = d;
        self
    }

    /// Sets the first-token limit.
    pub fn with_first_token(mut self, d: Duration) -> Self {
        self.first_token = d;
        self
    }

    /// Sets the stream-idle limit.
    pub fn with_stream_idle(mut self, d: Duration) -> Self {
        self.stream_idle = d;
        self
    }

    /// Sets how many unparseable stream events one stream may skip.
    pub fn with_max_skipped_events(mut self, n: u32) -> Self {
        self.max_skipped_events = n;
        self
    }

    pub(crate) fn validate(&self, what: &str) -> Result<()> {
        for (name, d) in [
            ("connect", self.connect),
            ("first_token", self.first_token),
            ("stream_idle", self.stream_idle),
        ] {
            if d.is_zero() {
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    format!("{what}: timeouts.{name} must be greater than zero"),
                ));
            }
        }
        Ok(())
    }
}

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
    engine: Engine,
    connect_timeout: Option<Duration>,
}

type Hyper = HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What sends the requests.
#[derive(Clone)]
enum Engine {
    Hyper(Box<Hyper>),
    Reqwest(reqwest::Client),
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let engine = match self.engine {
            Engine::Hyper(_) => "hyper",
            Engine::Reqwest(_) => "reqwest",
        };
        f.debug_struct("HttpClient")
            .field("engine", &engine)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

/// The proxy variables reqwest reads; when one is set, [`HttpClient::new`] uses reqwest.
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
    /// `NO_PROXY`).
    ///
    /// # Errors
    ///
    /// `Network` when the TLS backend cannot be initialised.
    pub fn new(connect_timeout: Duration) -> Result<HttpClient> {
        if proxy_configured(env) {
            return HttpClient::reqwest_with(connect_timeout);
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

    /// The same settings on reqwest, which honours proxies from the environment.
    fn reqwest_with(connect_timeout: Duration) -> Result<HttpClient> {
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

    /// Wraps a reqwest client you configured yourself (proxies, extra roots, …). Its own
    /// connect timeout applies; ripcord's [`Timeouts::connect`] does not.
    pub fn from_reqwest(client: reqwest::Client) -> HttpClient {
        HttpClient {
            engine: Engine::Reqwest(client),
            connect_timeout: None,
        }
    }

    /// The reqwest client underneath, when there is one (see [`HttpClient::new`]).
    pub fn reqwest(&self) -> Option<&reqwest::Client> {
        match &self.engine {
            Engine::Reqwest(c) => Some(c),
            Engine::Hyper(_) => None,
        }
    }
}

/// How a provider authenticates: a header built once from a secret key.
///
/// The header value is marked sensitive (reqwest and hyper redact it), and `Debug` prints
/// `[redacted]`. The key is kept only to scrub it from vendor error messages that echo it.
#[derive(Clone)]
pub(crate) struct Auth {
    header: Option<(HeaderName, HeaderValue)>,
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
    #[cfg_attr(not(feature = "openai"), allow(dead_code))]
    pub(crate) fn none() -> Auth {
        Auth {
            header: None,
            key: None,
        }
    }

    /// `Authorization: Bearer <key>`.
    #[cfg_attr(not(feature = "openai"), allow(dead_code))]
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
    url: reqwest::Url,
    uri: http::Uri,
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

/// Everything a provider needs to talk to its vendor: the pooled client, the auth header,
/// fixed extra headers, and the time limits.
#[derive(Clone, Debug)]
pub(crate) struct Transport {
    pub(crate) http: HttpClient,
    /// The client was built here (so its connect timeout follows `timeouts.connect`).
    owns_client: bool,
    pub(crate) auth: Auth,
    pub(crate) timeouts: Timeouts,
    /// Every header of a JSON call (the fixed extras, content type, accept, user agent, the
    /// key), built once.
    json_headers: HeaderMap,
    /// The same for a streaming call.
    sse_headers: HeaderMap,
}

/// The largest success body we accept (embeddings of big batches are large).
pub(crate) const MAX_BODY: usize = 256 * 1024 * 1024;
/// How much of an error body we read.
pub(crate) const MAX_ERROR_BODY: usize = 64 * 1024;

/// The headers of every request: `extra`, then content type, accept, user agent and the key.
fn request_headers(extra: &HeaderMap, auth: &Auth, accept: &'static str) -> HeaderMap {
    let mut h = extra.clone();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(ACCEPT, HeaderValue::from_static(accept));
    if !h.contains_key(USER_AGENT) {
        h.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("ripcord/", env!("CARGO_PKG_VERSION"))),
        );
    }
    if let Some((name, value)) = &auth.header {
        h.insert(name.clone(), value.clone());
    }
    h
}

impl Transport {
    /// Builds the transport: the given client, or a new one with `timeouts.connect`.
    pub(crate) fn new(
        client: Option<HttpClient>,
        auth: Auth,
        headers: HeaderMap,
        timeouts: Timeouts,
        what: &str,
    ) -> Result<Transport> {
        timeouts.validate(what)?;
        let owns_client = client.is_none();
        let http = match client {
            Some(c) => c,
            None => HttpClient::new(timeouts.connect)?,
        };
        Ok(Transport {
            http,
            owns_client,
            json_headers: request_headers(&headers, &auth, "application/json"),
            sse_headers: request_headers(&headers, &auth, "text/event-stream"),
            auth,
            timeouts,
        })
    }

    /// The same transport with other limits. A client built here is rebuilt when the connect
    /// limit changes (a client passed in keeps its own).
    pub(crate) fn with_timeouts(&self, timeouts: Timeouts, what: &str) -> Result<Transport> {
        timeouts.validate(what)?;
        let http = if self.owns_client && timeouts.connect != self.timeouts.connect {
            HttpClient::new(timeouts.connect)?
        } else {
            self.http.clone()
        };
        Ok(Transport {
            http,
            timeouts,
            ..self.clone()
        })
    }

    /// POSTs a JSON body and waits for the response headers (any status).
    /// Returns the response and when the request was sent.
    pub(crate) async fn post(
        &self,
        ctx: &Context,
        target: &Target,
        body: Vec<u8>,
        sse: bool,
    ) -> Result<(Response, Instant)> {
        precheck(ctx)?;
        let headers = if sse {
            &self.sse_headers
        } else {
            &self.json_headers
        };
        let started = Instant::now();
        // No response byte yet: a timeout here is a silent vendor (see `TimeoutPhase::FirstByte`).
        let limit = Limit {
            phase: TimeoutPhase::FirstByte,
            ..Limit::first_token(started, &self.timeouts)
        };
        let resp = match &self.http.engine {
            Engine::Hyper(client) => {
                let mut req = http::Request::new(Full::new(Bytes::from(body)));
                *req.method_mut() = http::Method::POST;
                *req.uri_mut() = target.uri.clone();
                *req.headers_mut() = headers.clone();
                let resp = guard(ctx, limit, client.request(req))
                    .await?
                    .map_err(|e| transport_error(TransportError::Send(e), Stage::Send))?;
                let (parts, body) = resp.into_parts();
                Response {
                    status: parts.status,
                    headers: parts.headers,
                    body: ResponseBody::Hyper(body),
                }
            }
            Engine::Reqwest(client) => {
                let req = client
                    .post(target.url.clone())
                    .headers(headers.clone())
                    .body(body);
                let mut resp = guard(ctx, limit, req.send())
                    .await?
                    .map_err(|e| transport_error(TransportError::Reqwest(e), Stage::Send))?;
                Response {
                    status: resp.status(),
                    headers: std::mem::take(resp.headers_mut()),
                    body: ResponseBody::Reqwest(resp),
                }
            }
        };
        Ok((resp, started))
    }

    /// Reads a whole success body.
    pub(crate) async fn body(
        &self,
        ctx: &Context,
        started: Instant,
        resp: &mut Response,
    ) -> Result<Bytes> {
        read_body(
            ctx,
            &self.timeouts,
            Limit::first_token(started, &self.timeouts),
            resp,
            MAX_BODY,
            false,
        )
        .await
    }

    /// Reads the status, headers and the start of the body of a failed response. A body that
    /// cannot be read (stalled, reset) is treated as empty: the status alone still classifies.
    pub(crate) async fn error_parts(
        &self,
        ctx: &Context,
        started: Instant,
        mut resp: Response,
    ) -> Result<(u16, HeaderMap, Bytes)> {
        let status = resp.status.as_u16();
        let headers = std::mem::take(&mut resp.headers);
        let limit = Limit::first_token(started, &self.timeouts);
        let body =
            match read_body(ctx, &self.timeouts, limit, &mut resp, MAX_ERROR_BODY, true).await {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Cancelled => return Err(e),
                Err(_) => Bytes::new(),
            };
        Ok((status, headers, body))
    }
}

/// A response whose headers have arrived; its body is read piece by piece.
pub(crate) struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: ResponseBody,
}

enum ResponseBody {
    Hyper(hyper::body::Incoming),
    Reqwest(reqwest::Response),
}

/// A body read as a stream of pieces.
pub(crate) type BodyStream =
    std::pin::Pin<Box<dyn Stream<Item = std::result::Result<Bytes, TransportError>> + Send>>;

impl Response {
    /// The status.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// The next piece of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self) -> std::result::Result<Option<Bytes>, TransportError> {
        match &mut self.body {
            ResponseBody::Hyper(body) => loop {
                match body.frame().await {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(TransportError::Body(e)),
                    // Trailers and empty frames carry no body bytes.
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) if !data.is_empty() => return Ok(Some(data)),
                        _ => {}
                    },
                }
            },
            ResponseBody::Reqwest(resp) => resp.chunk().await.map_err(TransportError::Reqwest),
        }
    }

    /// The rest of the body as a stream of pieces.
    pub(crate) fn into_stream(self) -> BodyStream {
        match self.body {
            ResponseBody::Reqwest(resp) => Box::pin(
                resp.bytes_stream()
                    .map(|r| r.map_err(TransportError::Reqwest)),
            ),
            ResponseBody::Hyper(_) => Box::pin(futures::stream::unfold(self, |mut r| async {
                match r.chunk().await {
                    Ok(Some(b)) => Some((Ok(b), r)),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), r)),
                }
            })),
        }
    }
}

/// A failure of the HTTP client.
#[derive(Debug)]
pub(crate) enum TransportError {
    /// Sending the request or waiting for the response headers (hyper).
    Send(hyper_util::client::legacy::Error),
    /// Reading the body (hyper).
    Body(hyper::Error),
    /// Anything, through reqwest.
    Reqwest(reqwest::Error),
}

/// True when a response declares a JSON body (a vendor answering a stream request with a JSON
/// error object and status 200).
pub(crate) fn is_json(resp: &Response) -> bool {
    resp.headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// Which limit a wait runs under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    pub(crate) at: Instant,
    pub(crate) phase: TimeoutPhase,
    pub(crate) after: Duration,
}

impl Limit {
    pub(crate) fn first_token(started: Instant, t: &Timeouts) -> Limit {
        Limit {
            at: started + t.first_token,
            phase: TimeoutPhase::FirstToken,
            after: t.first_token,
        }
    }

    pub(crate) fn idle(t: &Timeouts) -> Limit {
        Limit {
            at: Instant::now() + t.stream_idle,
            phase: TimeoutPhase::StreamIdle,
            after: t.stream_idle,
        }
    }
}

/// Runs `fut` under a phase limit, the context's deadline and its cancellation.
pub(crate) async fn guard<T>(
    ctx: &Context,
    limit: Limit,
    fut: impl Future<Output = T>,
) -> Result<T> {
    guard_until(ctx, ctx.deadline(), limit, fut).await
}

/// As [`guard`], with `deadline` in place of the context's deadline (a stream after its first
/// content runs under the context's stream bound instead).
pub(crate) async fn guard_until<T>(
    ctx: &Context,
    deadline: Option<Instant>,
    limit: Limit,
    fut: impl Future<Output = T>,
) -> Result<T> {
    let (at, phase) = match deadline {
        Some(d) if d <= limit.at => (d, TimeoutPhase::Total),
        _ => (limit.at, limit.phase),
    };
    // The work is polled first: a piece that is already there (the body of a small answer
    // usually arrives with its headers) returns without registering a timer or a cancellation
    // waiter; both are registered only when the work has to wait.
    tokio::select! {
        biased;
        r = tokio::time::timeout_at(at, fut) => r.map_err(|_| match phase {
            TimeoutPhase::Total => Error::timeout(TimeoutPhase::Total, "the call's deadline passed while waiting for the vendor"),
            TimeoutPhase::FirstToken => Error::timeout(
                TimeoutPhase::FirstToken,
                format!("no answer from the vendor within the first-token limit of {:?}", limit.after),
            ),
            TimeoutPhase::FirstByte => Error::timeout(
                TimeoutPhase::FirstByte,
                format!("the vendor sent no response byte within the first-token limit of {:?}", limit.after),
            ),
            TimeoutPhase::StreamIdle => Error::timeout(
                TimeoutPhase::StreamIdle,
                format!("the vendor went silent for longer than the stream-idle limit of {:?}", limit.after),
            ),
            other => Error::timeout(other, "a time limit passed"),
        }),
        () = ctx.cancellation().cancelled() => Err(Error::cancelled()),
    }
}

/// Checks the context before a call starts.
pub(crate) fn precheck(ctx: &Context) -> Result<()> {
    if ctx.is_cancelled() {
        return Err(Error::cancelled());
    }
    if ctx.is_expired() {
        // Nothing was sent: the vendor neither processed it nor is to blame for it.
        return Err(Error::timeout(
            TimeoutPhase::Total,
            "the call's deadline had passed before the request was sent",
        )
        .with_maybe_processed(false)
        .with_fault(ripcord_core::Fault::Local));
    }
    Ok(())
}

/// Reads a whole (non-streaming) body: the first bytes under `first`, then each further piece
/// under the idle limit. More than `max` bytes is an `InvalidResponse` (`truncate = false`) or
/// cut off (`truncate = true`, for error bodies, which we only need the start of).
pub(crate) async fn read_body(
    ctx: &Context,
    timeouts: &Timeouts,
    first: Limit,
    resp: &mut Response,
    max: usize,
    truncate: bool,
) -> Result<Bytes> {
    // A body that arrives in one piece (most answers) is returned as that piece, uncopied;
    // pieces are gathered only from the second on.
    let mut whole: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    let mut limit = first;
    loop {
        let chunk = guard(ctx, limit, resp.chunk())
            .await?
            .map_err(|e| transport_error(e, Stage::Body))?;
        let Some(chunk) = chunk else { break };
        if let Some(w) = whole.take() {
            buf.extend_from_slice(&w);
        }
        if buf.len() + chunk.len() > max {
            if truncate {
                let room = max - buf.len();
                buf.extend_from_slice(&chunk[..room]);
                break;
            }
            return Err(Error::new(
                ErrorKind::InvalidResponse,
                format!("the response body is larger than {max} bytes"),
            ));
        }
        if buf.is_empty() {
            whole = Some(chunk);
        } else {
            buf.extend_from_slice(&chunk);
        }
        limit = Limit::idle(timeouts);
    }
    Ok(whole.unwrap_or_else(|| buf.freeze()))
}

/// Where a transport error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Connecting, sending, waiting for headers.
    Send,
    /// Reading a body.
    Body,
    /// Reading a stream after it started.
    Stream,
}

/// Maps a client failure to a ripcord error: connect timeouts, refused/reset connections,
/// broken bodies. URLs are left out (keys never live in URLs here, but nothing else needs it).
pub(crate) fn transport_error(e: TransportError, stage: Stage) -> Error {
    match e {
        TransportError::Send(e) => {
            let detail = chain(&e);
            let err = if e.is_connect() && io_kind(&e) == Some(std::io::ErrorKind::TimedOut) {
                connect_timeout(&detail)
            } else if e.is_connect() {
                cannot_connect(&detail)
            } else {
                connection_failed(stage, &detail)
            };
            err.with_source(e)
        }
        TransportError::Body(e) => {
            let detail = chain(&e);
            let err = if stage != Stage::Send && !has_io_error(&e) {
                // No transport failure underneath: the body ended before its declared length
                // or chunked terminator, or broke its framing — a truncated answer.
                truncated(&detail)
            } else {
                connection_failed(stage, &detail)
            };
            err.with_source(e)
        }
        TransportError::Reqwest(e) => {
            let e = e.without_url();
            let detail = chain(&e);
            let err = if e.is_connect() && e.is_timeout() {
                connect_timeout(&detail)
            } else if e.is_connect() {
                cannot_connect(&detail)
            } else if e.is_timeout() {
                Error::timeout(
                    TimeoutPhase::FirstToken,
                    format!("the HTTP client timed out: {detail}"),
                )
            } else if stage != Stage::Send && !has_io_error(&e) && (e.is_body() || e.is_decode()) {
                // We never ask reqwest to decode anything, so a body "decode" error is a body
                // that ended early without a transport failure: a truncated answer.
                truncated(&detail)
            } else {
                connection_failed(stage, &detail)
            };
            err.with_source(e)
        }
    }
}

fn connect_timeout(detail: &str) -> Error {
    Error::timeout(
        TimeoutPhase::Connect,
        format!("connecting to the vendor timed out: {detail}"),
    )
}

/// A connection that was never made: nothing was sent, so the vendor cannot have processed it.
fn cannot_connect(detail: &str) -> Error {
    Error::new(
        ErrorKind::Network,
        format!("cannot connect to the vendor: {detail}"),
    )
    .with_maybe_processed(false)
}

/// A body that stopped before its declared length or its chunked terminator. The connection
/// failed, not the vendor's grammar, so it is a `Network` error — and the request had reached
/// the vendor, which may have processed it.
fn truncated(detail: &str) -> Error {
    Error::new(
        ErrorKind::Network,
        format!("response truncated: the connection closed before the end of the body: {detail}"),
    )
    .with_request_delivered()
}

fn connection_failed(stage: Stage, detail: &str) -> Error {
    let what = match stage {
        Stage::Send => "the connection failed before a response arrived",
        Stage::Body => "the connection failed while reading the response",
        Stage::Stream => "the connection failed mid-stream",
    };
    let e = Error::new(ErrorKind::Network, format!("{what}: {detail}"));
    // Once a response is being read the request has reached the vendor.
    if stage == Stage::Send {
        e
    } else {
        e.with_request_delivered()
    }
}

/// The kind of the first I/O error among the causes, if any.
fn io_kind(e: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        src = s.source();
    }
    None
}

/// True when an I/O failure (reset, broken pipe — not a plain early end of file) is among the
/// causes: a transport failure rather than a truncated answer.
fn has_io_error(e: &(dyn std::error::Error + 'static)) -> bool {
    io_kind(e).is_some_and(|k| k != std::io::ErrorKind::UnexpectedEof)
}

/// The error and its sources as one line ("a: b: c"), without repeats.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

/// A short, single-line excerpt of a non-JSON body for an error message.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(120);
    let mut last_space = true;
    for c in text.chars() {
        let c = if c.is_whitespace() { ' ' } else { c };
        if c == ' ' && last_space {
            continue;
        }
        last_space = c == ' ';
        out.push(c);
        if out.len() >= 120 {
            out.push('…');
            break;
        }
    }
    out.trim().to_owned()
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

    #[test]
    fn a_proxy_in_the_environment_selects_reqwest() {
        assert!(!proxy_configured(|_| None));
        for var in PROXY_VARS {
            assert!(proxy_configured(
                |v| (v == var).then(|| "http://proxy:3128".to_owned())
            ));
        }
        let c = HttpClient::new(Duration::from_secs(1)).unwrap();
        if !proxy_configured(env) {
            assert!(c.reqwest().is_none(), "{c:?}");
            assert!(format!("{c:?}").contains("hyper"));
        }
        let r = HttpClient::from_reqwest(reqwest::Client::new());
        assert!(r.reqwest().is_some());
        assert!(format!("{r:?}").contains("reqwest"));
    }

    #[test]
    fn zero_timeouts_are_rejected() {
        let t = Timeouts::default().with_stream_idle(Duration::ZERO);
        let e = t.validate("openai").unwrap_err();
        assert!(e.message().contains("stream_idle"), "{e}");
    }

    #[test]
    fn excerpts_are_short_and_single_line() {
        let e = excerpt(b"<html>\n  <body>   502 Bad Gateway </body>\n</html>");
        assert_eq!(e, "<html> <body> 502 Bad Gateway </body> </html>");
        assert!(excerpt(&[b'x'; 1000]).chars().count() <= 121);
    }

    #[tokio::test(start_paused = true)]
    async fn guard_reports_the_phase_that_fired() {
        let t = Timeouts::default().with_first_token(Duration::from_secs(5));
        let ctx = Context::new();
        let e = guard(
            &ctx,
            Limit::first_token(Instant::now(), &t),
            std::future::pending::<()>(),
        )
        .await
        .unwrap_err();
        assert_eq!(e.timeout_phase(), Some(TimeoutPhase::FirstToken));

        let ctx = Context::new().with_timeout(Duration::from_secs(1));
        let e = guard(
            &ctx,
            Limit::first_token(Instant::now(), &t),
            std::future::pending::<()>(),
        )
        .await
        .unwrap_err();
        assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Total));

        let ctx = Context::new();
        ctx.cancellation().cancel();
        let e = guard(&ctx, Limit::idle(&t), std::future::pending::<()>())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled);
    }
}
