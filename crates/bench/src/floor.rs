//! The floor: a raw `reqwest` POST of a fixed request, with the response parsed into the
//! fields an OpenAI client reads. No ripcord code runs on this path.
//!
//! [`HyperPost`] is the same POST on hyper-util's client, the transport ripcord's adapters use:
//! against it the rows show what ripcord adds over its own HTTP path.
//!
//! The same type sends the OpenAI Python SDK's wire (its JSON and headers) for the gateway
//! rows: what differs between rows is only the URL, the headers and the body.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use tokio::time::Instant;

/// A reqwest client with the settings ripcord's transport has: rustls, TCP_NODELAY, a 90 s
/// idle pool, a 10 s connect timeout, no redirects.
pub(crate) fn reqwest_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("floor: reqwest client: {e}"))
}

/// Headers from (lower-case name, value) pairs; `what` names the floor in errors.
fn header_map(what: &str, headers: &[(String, String)]) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("{what}: bad header name {name:?}: {e}"))?;
        let v = HeaderValue::from_str(value)
            .map_err(|e| format!("{what}: bad value for header {name:?}: {e}"))?;
        map.append(n, v);
    }
    Ok(map)
}

/// A fixed POST.
#[derive(Debug, Clone)]
pub(crate) struct RawPost {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    body: Bytes,
}

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
struct Choice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    choices: Vec<StreamChoice>,
}

#[derive(Deserialize)]
struct StreamChoice {
    #[serde(default)]
    delta: Delta,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

impl RawPost {
    /// A POST of `body` to `url` with these headers (names lower-case).
    pub(crate) fn new(
        client: reqwest::Client,
        url: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<RawPost, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("floor: bad URL {url:?}: {e}"))?;
        Ok(RawPost {
            client,
            url,
            headers: header_map("floor", headers)?,
            body: Bytes::from(body),
        })
    }

    async fn send(&self) -> Result<reqwest::Response, String> {
        let resp = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(self.body.clone())
            .send()
            .await
            .map_err(|e| format!("floor: send: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("floor: status {}", resp.status()));
        }
        Ok(resp)
    }

    /// One JSON completion, parsed; fails unless it carries answer text.
    pub(crate) async fn json(&self) -> Result<(), String> {
        let resp = self.send().await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("floor: body: {e}"))?;
        check_completion(&bytes)
    }

    /// One JSON answer of any wire, parsed; fails unless the string at `text_at` (a JSON
    /// pointer: `/content/0/text` for Anthropic's Messages, `/output_text` for Responses) is
    /// non-empty.
    pub(crate) async fn answer(&self, text_at: &'static str) -> Result<(), String> {
        let resp = self.send().await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("floor: body: {e}"))?;
        let v: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("floor: bad JSON: {e}"))?;
        match v.pointer(text_at).and_then(serde_json::Value::as_str) {
            Some(t) if !t.is_empty() => Ok(()),
            _ => Err(format!("floor: no answer text at {text_at}")),
        }
    }

    /// One SSE stream read to `[DONE]`, every event parsed; returns the time from the start of
    /// the call to the first event carrying answer text.
    pub(crate) async fn sse_first_content(&self) -> Result<Duration, String> {
        let start = Instant::now();
        let resp = self.send().await?;
        let mut body = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::with_capacity(4096);
        let mut first = None;
        let mut done = false;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| format!("floor: stream: {e}"))?;
            buf.extend_from_slice(&chunk);
            let mut used = 0;
            while let Some(end) = find_event_end(&buf[used..]) {
                let event = &buf[used..used + end];
                used += end + 2;
                for line in event.split(|&b| b == b'\n') {
                    let Some(data) = line.strip_prefix(b"data:") else {
                        continue;
                    };
                    let data = data.trim_ascii();
                    if data == b"[DONE]" {
                        done = true;
                        continue;
                    }
                    let c: StreamChunk = serde_json::from_slice(data)
                        .map_err(|e| format!("floor: bad SSE JSON: {e}"))?;
                    let has_text = c
                        .choices
                        .first()
                        .and_then(|ch| ch.delta.content.as_deref())
                        .is_some_and(|t| !t.is_empty());
                    if has_text && first.is_none() {
                        first = Some(start.elapsed());
                    }
                }
            }
            buf.drain(..used);
        }
        match (first, done) {
            (Some(d), true) => Ok(d),
            _ => Err("floor: the stream ended without text or [DONE]".into()),
        }
    }
}

/// Checks a completion as an OpenAI client reads it: fails unless it carries answer text, a
/// finish reason, token counts and the model.
fn check_completion(bytes: &[u8]) -> Result<(), String> {
    let c: Completion =
        serde_json::from_slice(bytes).map_err(|e| format!("floor: bad JSON: {e}"))?;
    let choice = c.choices.first().ok_or("floor: no choices")?;
    let text = choice.message.content.as_deref().unwrap_or_default();
    let finished = choice.finish_reason.is_some();
    let tokens = c.usage.map_or(0, |u| u.prompt_tokens + u.completion_tokens);
    if text.is_empty() || !finished || tokens == 0 || c.model.is_none() {
        return Err("floor: incomplete completion".into());
    }
    Ok(())
}

type Hyper = HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The same fixed POST on hyper-util's pooled client, built as ripcord's transport builds
/// its own (rustls, HTTP/1.1 and 2, TCP_NODELAY, 90 s idle pool, 10 s connect timeout).
#[derive(Clone)]
pub(crate) struct HyperPost {
    client: Hyper,
    uri: http::Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl HyperPost {
    /// A POST of `body` to `url` with these headers (names lower-case).
    pub(crate) fn new(
        url: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<HyperPost, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("hyper floor: bad URL {url:?}: {e}"))?;
        let map = header_map("hyper floor", headers)?;
        let mut tcp = HttpConnector::new();
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(Duration::from_secs(10)));
        tcp.enforce_http(false);
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| format!("hyper floor: TLS: {e}"))?
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(tcp);
        let client = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_timer(TokioTimer::new())
            .build(tls);
        Ok(HyperPost {
            client,
            uri,
            headers: map,
            body: Bytes::from(body),
        })
    }

    /// One JSON completion, parsed; fails unless it carries answer text.
    pub(crate) async fn json(&self) -> Result<(), String> {
        let mut req = http::Request::new(Full::new(self.body.clone()));
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| format!("hyper floor: send: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("hyper floor: status {}", resp.status()));
        }
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("hyper floor: body: {e}"))?
            .to_bytes();
        check_completion(&bytes)
    }
}

fn find_event_end(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_end_at_a_blank_line() {
        assert_eq!(find_event_end(b"data: x\n\ndata: y\n\n"), Some(7));
        assert_eq!(find_event_end(b"data: x\n"), None);
    }

    #[test]
    fn bad_headers_are_named() {
        let e = RawPost::new(
            reqwest::Client::new(),
            "http://127.0.0.1:1/v1/chat/completions",
            &[("bad header".into(), "x".into())],
            Vec::new(),
        )
        .unwrap_err();
        assert!(e.contains("bad header"), "{e}");
        let e = RawPost::new(reqwest::Client::new(), "not a url", &[], Vec::new()).unwrap_err();
        assert!(e.contains("not a url"), "{e}");
    }
}
