//! What the rows send: the request, the adapter's captured wire and the SDK's.

use std::time::Duration;

use futures::StreamExt;
use ripcord_chaos::{FakeOptions, FakeVendor, Wire};
use ripcord_core::{ChatModel, ChatRequest, Context};
use ripcord_providers::{HttpClient, OpenAi, OpenAiConfig};
/// The model the adapters ask for.
pub(crate) const MODEL: &str = "gpt-4o-mini";
/// The API key sent upstream (the fake checks none).
pub(crate) const KEY: &str = "sk-bench-not-a-real-key";
/// The question.
pub(crate) const PROMPT: &str = "Why is the sky blue?";
/// The answer cap (keeps the rate limiter's token reservations realistic).
pub(crate) const MAX_TOKENS: u32 = 64;

/// The request every ripcord row sends.
pub(crate) fn request() -> ChatRequest {
    ChatRequest::user(PROMPT).with_max_tokens(MAX_TOKENS)
}

/// What the OpenAI adapter puts on the wire, captured from a recording fake vendor, so the
/// floor sends byte-for-byte the same request.
#[derive(Debug, Clone)]
pub(crate) struct AdapterWire {
    /// The JSON body of a plain call.
    pub(crate) json_body: Vec<u8>,
    /// The JSON body of a streaming call.
    pub(crate) stream_body: Vec<u8>,
    /// Headers of a plain call, without those the HTTP client adds itself.
    pub(crate) json_headers: Vec<(String, String)>,
    /// Headers of a streaming call, likewise.
    pub(crate) stream_headers: Vec<(String, String)>,
}

fn own_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    const CLIENT_ADDED: &[&str] = &[
        "host",
        "content-length",
        "user-agent",
        "connection",
        "accept-encoding",
    ];
    headers
        .iter()
        .filter(|(n, _)| !CLIENT_ADDED.iter().any(|c| n.eq_ignore_ascii_case(c)))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect()
}

/// Captures the adapter's wire with an in-process recording fake.
pub(crate) async fn capture_adapter_wire() -> Result<AdapterWire, String> {
    let fake = FakeVendor::start_with(Wire::OpenAi, FakeOptions::default())
        .await
        .map_err(|e| format!("capture: bind: {e}"))?;
    let adapter = openai(&fake.base_url(), "primary", None)?;
    let req = request();
    adapter
        .chat(&req, &Context::new())
        .await
        .map_err(|e| format!("capture: chat: {e}"))?;
    let mut s = adapter
        .stream(&req, &Context::new())
        .await
        .map_err(|e| format!("capture: stream: {e}"))?;
    while let Some(ev) = s.next().await {
        ev.map_err(|e| format!("capture: stream: {e}"))?;
    }
    let sent = fake.requests();
    let [plain, streamed] = sent.as_slice() else {
        return Err(format!("capture: expected 2 requests, saw {}", sent.len()));
    };
    Ok(AdapterWire {
        json_body: plain.body.clone(),
        stream_body: streamed.body.clone(),
        json_headers: own_headers(&plain.headers),
        stream_headers: own_headers(&streamed.headers),
    })
}

/// The OpenAI Python SDK's request (the sync client of the venv's `openai` 3.57.0): its headers as captured from
/// the SDK, and the JSON it writes for `client.chat.completions.create(model=..., messages=...,
/// max_tokens=64)`.
pub(crate) fn sdk_wire() -> (Vec<(String, String)>, Vec<u8>) {
    let headers = [
        ("accept", "application/json"),
        ("content-type", "application/json"),
        ("authorization", "Bearer sk-bench-not-a-real-key"),
        ("user-agent", "OpenAI/Python 3.57.0"),
        ("x-stainless-lang", "python"),
        ("x-stainless-package-version", "3.57.0"),
        ("x-stainless-os", "Linux"),
        ("x-stainless-arch", "x64"),
        ("x-stainless-runtime", "CPython"),
        ("x-stainless-runtime-version", "3.11.7"),
        ("x-stainless-async", "false"),
        ("x-stainless-retry-count", "0"),
        ("x-stainless-read-timeout", "600"),
        ("accept-encoding", "gzip, deflate"),
    ];
    let body = format!(
        r#"{{"messages":[{{"role":"user","content":"{PROMPT}"}}],"model":"{MODEL}","max_tokens":{MAX_TOKENS}}}"#
    );
    (
        headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        body.into_bytes(),
    )
}

/// The HTTP client the chains share: ripcord's pooled client (hyper-util under rustls).
pub(crate) fn http_client() -> Result<HttpClient, String> {
    HttpClient::new(Duration::from_secs(10)).map_err(|e| format!("HTTP client: {e}"))
}

/// An OpenAI adapter on `base` (the fake's base URL, without `/v1`).
pub(crate) fn openai(
    base: &str,
    name: &str,
    client: Option<&HttpClient>,
) -> Result<OpenAi, String> {
    let mut cfg = OpenAiConfig::new(MODEL, KEY).with_base_url(format!("{base}/v1"));
    if let Some(c) = client {
        cfg = cfg.with_client(c.clone());
    }
    Ok(OpenAi::new(cfg)
        .map_err(|e| format!("adapter {name}: {e}"))?
        .named(name))
}
