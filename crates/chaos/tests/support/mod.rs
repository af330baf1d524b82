//! Shared helpers for the chaos integration tests: request bodies, a client, and an SSE reader
//! that parses what the fake vendor emits (so the tests check framing, not just bytes).
#![allow(dead_code)]
// Helpers of test code: failing loudly is their job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, Wire};
use serde_json::{Value, json};

/// A client with a generous overall timeout (tests that expect a timeout set their own).
pub(crate) fn client() -> reqwest::Client {
    client_with_timeout(Duration::from_secs(10))
}

/// A client whose overall timeout is `timeout`.
pub(crate) fn client_with_timeout(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("client")
}

/// `GET {base}{path}` on the fake with the default client, as JSON.
pub(crate) async fn get_json(fake: &FakeVendor, path: &str) -> Value {
    let resp = client()
        .get(format!("{}{path}", fake.base_url()))
        .send()
        .await
        .unwrap();
    resp.json().await.unwrap()
}

/// A fake of `wire` that behaves as `behavior` on every request.
pub(crate) async fn fake_always(wire: Wire, behavior: Behavior) -> FakeVendor {
    let fake = FakeVendor::start(wire).await.expect("fake vendor");
    fake.set_script(Script::Always(behavior));
    fake
}

/// The chat endpoint of a fake.
pub(crate) fn chat_url(fake: &FakeVendor) -> String {
    match fake.wire() {
        Wire::OpenAi => format!("{}/v1/chat/completions", fake.base_url()),
        _ => format!("{}/v1/messages", fake.base_url()),
    }
}

/// A minimal valid chat body for the fake's wire.
pub(crate) fn chat_body(wire: Wire, stream: bool) -> Value {
    match wire {
        Wire::OpenAi => json!({
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": stream,
        }),
        _ => json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": stream,
        }),
    }
}

/// Sends a chat request (streaming or not) with the default client.
pub(crate) async fn chat(fake: &FakeVendor, stream: bool) -> reqwest::Result<reqwest::Response> {
    client()
        .post(chat_url(fake))
        .json(&chat_body(fake.wire(), stream))
        .send()
        .await
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sse {
    pub(crate) event: Option<String>,
    pub(crate) data: String,
}

impl Sse {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }

    /// The event name, or the JSON `type` for unnamed events.
    pub(crate) fn name(&self) -> String {
        self.event.clone().unwrap_or_default()
    }
}

/// Parses a complete SSE text (events separated by blank lines).
pub(crate) fn parse_sse(text: &str) -> Vec<Sse> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        if block.trim().is_empty() {
            continue;
        }
        let mut event = None;
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
            }
        }
        out.push(Sse {
            event,
            data: data.join("\n"),
        });
    }
    out
}

/// Reads a streamed response event by event as the bytes arrive.
pub(crate) struct SseReader {
    resp: reqwest::Response,
    buf: String,
    pub(crate) ended: bool,
}

impl SseReader {
    pub(crate) fn new(resp: reqwest::Response) -> Self {
        SseReader {
            resp,
            buf: String::new(),
            ended: false,
        }
    }

    /// The next complete event; `Ok(None)` at a clean end of the body.
    pub(crate) async fn next(&mut self) -> reqwest::Result<Option<Sse>> {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                if let Some(ev) = parse_sse(&block).into_iter().next() {
                    return Ok(Some(ev));
                }
                continue;
            }
            if self.ended {
                return Ok(None);
            }
            match self.resp.chunk().await? {
                Some(bytes) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                None => self.ended = true,
            }
        }
    }

    /// The next event, or an error string if none arrives within `limit`.
    pub(crate) async fn next_within(&mut self, limit: Duration) -> Result<Option<Sse>, String> {
        match tokio::time::timeout(limit, self.next()).await {
            Ok(Ok(ev)) => Ok(ev),
            Ok(Err(e)) => Err(format!("body error: {e}")),
            Err(_) => Err("idle timeout".to_owned()),
        }
    }

    /// All remaining events until the body ends or fails.
    pub(crate) async fn collect(&mut self) -> (Vec<Sse>, Option<reqwest::Error>) {
        let mut events = Vec::new();
        loop {
            match self.next().await {
                Ok(Some(ev)) => events.push(ev),
                Ok(None) => return (events, None),
                Err(e) => return (events, Some(e)),
            }
        }
    }
}

/// The header value as a string (empty if absent).
pub(crate) fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Walks an error's source chain into one string (to look for "reset", "closed", ...).
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(" | ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The error a non-streamed chat request to `fake` over `c` fails with.
pub(crate) async fn chat_send_err(c: &reqwest::Client, fake: &FakeVendor) -> reqwest::Error {
    c.post(chat_url(fake))
        .json(&chat_body(fake.wire(), false))
        .send()
        .await
        .expect_err("the request fails")
}
