use ::http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use bytes::Bytes;
use http_body_util::Full;
use ripcord_core::{Context, Error, ErrorKind, Result, TimeoutPhase};
use tokio::time::Instant;

use super::body::ResponseBody;
use super::client::Engine;
use super::{
    Auth, HttpClient, Limit, Response, Stage, Target, Timeouts, TransportError, guard, precheck,
    read_body, transport_error,
};

/// Authentication computed per request from its exact bytes (AWS SigV4): called with the
/// final method, URI, headers and body just before they are sent, it adds its headers (a
/// date, a signature) to `headers`. Nothing may change after it ran.
pub(crate) trait Sign: Send + Sync + std::fmt::Debug {
    /// Adds the signature headers.
    ///
    /// # Errors
    ///
    /// The request cannot be signed (credentials unusable as header values, a bad URI).
    fn sign(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &mut HeaderMap,
        body: &[u8],
    ) -> Result<()>;
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
    /// Per-request signing, when the vendor wants it (Bedrock's SigV4).
    signer: Option<std::sync::Arc<dyn Sign>>,
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
            signer: None,
        })
    }

    ripcord_core::setters! {
        /// Signs every request with `signer`, after all other headers are set.
        #[cfg_attr(not(feature = "bedrock"), allow(dead_code))]
        pub(crate) with_signer(signer: std::sync::Arc<dyn Sign>) => signer = Some(signer);
    }

    /// Streaming calls accept `accept` instead of `text/event-stream` (Bedrock answers
    /// `application/vnd.amazon.eventstream`).
    #[cfg_attr(not(feature = "bedrock"), allow(dead_code))]
    pub(crate) fn with_stream_accept(mut self, accept: &'static str) -> Transport {
        self.sse_headers
            .insert(ACCEPT, HeaderValue::from_static(accept));
        self
    }

    /// The same transport sending form bodies (`application/x-www-form-urlencoded`), for OAuth
    /// token endpoints.
    #[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
    pub(crate) fn form(mut self) -> Transport {
        let form = HeaderValue::from_static("application/x-www-form-urlencoded");
        self.json_headers.insert(CONTENT_TYPE, form.clone());
        self.sse_headers.insert(CONTENT_TYPE, form);
        self
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

    /// Sends a request and returns its successful (2xx) response with when it was sent: the
    /// one way every adapter calls its vendor.
    ///
    /// Any other status is an error here, never in the adapter: the start of the body is read
    /// (under the first-token limit; a body that cannot be read counts as empty, so the status
    /// alone still classifies) and handed with the status and headers to `classify`, the
    /// vendor's error mapping. The adapter's own code only ever sees answers.
    #[cfg_attr(
        not(any(
            feature = "openai",
            feature = "anthropic",
            feature = "vertex",
            feature = "vertex-anthropic",
            feature = "bedrock"
        )),
        allow(dead_code)
    )]
    pub(crate) async fn send(
        &self,
        ctx: &Context,
        target: &Target,
        body: Vec<u8>,
        sse: bool,
        classify: impl FnOnce(u16, &HeaderMap, &[u8]) -> Error,
    ) -> Result<(Response, Instant)> {
        self.send_with(ctx, target, body, sse, None, classify).await
    }

    /// [`Transport::send`] with one more header for this request only: a credential that
    /// changes while the provider lives (an OAuth access token), which cannot be built into
    /// the fixed headers. Mark its value sensitive.
    pub(crate) async fn send_with(
        &self,
        ctx: &Context,
        target: &Target,
        body: Vec<u8>,
        sse: bool,
        extra: Option<(HeaderName, HeaderValue)>,
        classify: impl FnOnce(u16, &HeaderMap, &[u8]) -> Error,
    ) -> Result<(Response, Instant)> {
        self.request(ctx, target, http::Method::POST, body, sse, extra, classify)
            .await
    }

    /// GETs `target` — a cheap read such as the vendor's model list — as a liveness check: a
    /// success status is the answer (its body is not read); any other status is classified by
    /// `classify` like a chat error, and a transport failure like any other.
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    pub(crate) async fn check(
        &self,
        ctx: &Context,
        target: &Target,
        classify: impl FnOnce(u16, &HeaderMap, &[u8]) -> Error,
    ) -> Result<()> {
        self.request(
            ctx,
            target,
            http::Method::GET,
            Vec::new(),
            false,
            None,
            classify,
        )
        .await
        .map(|_| ())
    }

    /// Sends a request (a JSON body for a POST) and waits for the response headers. Returns a
    /// success response and when the request was sent; any other status is read and classified
    /// by `classify` (a 404 naming the URL it was sent to).
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of a request, and the classifier"
    )]
    async fn request(
        &self,
        ctx: &Context,
        target: &Target,
        method: http::Method,
        body: Vec<u8>,
        sse: bool,
        extra: Option<(HeaderName, HeaderValue)>,
        classify: impl FnOnce(u16, &HeaderMap, &[u8]) -> Error,
    ) -> Result<(Response, Instant)> {
        precheck(ctx)?;
        let method_name = method.clone();
        let fixed = if sse {
            &self.sse_headers
        } else {
            &self.json_headers
        };
        // A per-request header first, then the signature over the final headers (nothing may
        // change after signing).
        let custom;
        let headers = if extra.is_none() && self.signer.is_none() {
            fixed
        } else {
            let mut h = fixed.clone();
            if let Some((name, value)) = extra {
                h.insert(name, value);
            }
            if let Some(signer) = &self.signer {
                signer.sign(&method, &target.uri, &mut h, &body)?;
            }
            custom = h;
            &custom
        };
        let started = Instant::now();
        // No response byte yet: a timeout here is a silent vendor (see `TimeoutPhase::FirstByte`).
        let limit = Limit {
            phase: TimeoutPhase::FirstByte,
            ..Limit::first_token(started, &self.timeouts, sse)
        };
        let resp = match &self.http.engine {
            Engine::Hyper(client) => {
                let mut req = http::Request::new(Full::new(Bytes::from(body)));
                *req.method_mut() = method;
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
            #[cfg(feature = "reqwest")]
            Engine::Reqwest(client) => {
                let req = client
                    .request(method, target.url.clone())
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
        if resp.status().is_success() {
            return Ok((resp, started));
        }
        let (status, headers, raw) = self.error_parts(ctx, started, resp, sse).await?;
        Err(naming_url(
            classify(status, &headers, &raw),
            status,
            method_name.as_str(),
            target,
        ))
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
            Limit::first_token(started, &self.timeouts, false),
            resp,
            MAX_BODY,
            false,
        )
        .await
    }

    /// Reads the status, headers and the start of the body of a failed response. A body that
    /// cannot be read (stalled, reset) is treated as empty: the status alone still classifies.
    async fn error_parts(
        &self,
        ctx: &Context,
        started: Instant,
        mut resp: Response,
        sse: bool,
    ) -> Result<(u16, HeaderMap, Bytes)> {
        let status = resp.status.as_u16();
        let headers = std::mem::take(&mut resp.headers);
        let limit = Limit::first_token(started, &self.timeouts, sse);
        let body =
            match read_body(ctx, &self.timeouts, limit, &mut resp, MAX_ERROR_BODY, true).await {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Cancelled => return Err(e),
                Err(_) => Bytes::new(),
            };
        Ok((status, headers, body))
    }
}

/// A 404 names the URL it was sent to (without its query): a wrong base URL — `/v1` given
/// twice, or missing — reads as "model not found", and only the URL shows which it was.
fn naming_url(e: Error, status: u16, method: &str, target: &Target) -> Error {
    if status != 404 {
        return e;
    }
    let mut url = target.url.clone();
    url.set_query(None);
    let message = format!("{} ({method} {url})", e.message());
    e.with_message(message)
}
