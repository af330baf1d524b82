//! Half-close against disconnect, through the real `ripcord serve` (issue 42).
//!
//! The gateway serves HTTP/1 with half-close on, so a client that shuts down its sending side
//! after its request (FIN, then still reading) gets its answer. A client that goes away
//! instead — closes its socket (FIN, and no longer reading) or resets it (RST) — must not keep
//! its upstream call running: the fake vendor, holding its answer, sees its connection dropped
//! within a bound. Each case is pinned for a plain and a streamed call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod abuse_support;
mod support;

use abuse_support::*;

use std::time::{Duration, Instant};

use ripcord_chaos::{Behavior, FakeVendor, Script, Wire};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long after the client left the vendor's connection must be gone. The gateway notices
/// at once (a reset) or after one round trip on loopback (a close answered by the probe);
/// the rest is slack for a loaded machine.
const CANCEL_BOUND: Duration = Duration::from_secs(2);

fn gateway(tag: &str, vendor: &FakeVendor) -> support::Served {
    serve_keyed(tag, vendor, "")
}

/// A raw HTTP/1.1 chat request (streamed or not), `Connection: close`.
fn request(stream: bool) -> Vec<u8> {
    let body = json!({
        "model": "ripcord",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 20,
        "stream": stream,
    })
    .to_string();
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {GW_KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Waits (bounded) until `cond` holds; panics with `what` otherwise.
async fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

/// Sends the request, half-closes, and reads the whole answer.
async fn half_closed_call(url: &str, stream: bool) -> String {
    let mut s = TcpStream::connect(addr(url)).await.unwrap();
    s.write_all(&request(stream)).await.unwrap();
    s.shutdown().await.unwrap();
    let answer = support::read_to_close(
        &mut s,
        Duration::from_secs(10),
        "the half-closed client's answer",
    )
    .await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Reads the answer on `s` up to its first content event (within 5 s a read); what was read.
async fn first_content_event(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\"content\"") {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b))
            .await
            .expect("the stream's first event within 5 s")
            .unwrap();
        assert!(
            n > 0,
            "the gateway closed: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&b[..n]);
    }
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_half_closes_during_a_held_call_gets_the_whole_answer_plain_and_streamed() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    // The vendor holds each answer a while, so the client's FIN arrives mid-call.
    vendor.set_script(Script::Always(Behavior::SlowFirstToken(
        Duration::from_millis(600),
    )));
    let served = gateway("half-held", &vendor);
    let plain = half_closed_call(&served.url, false).await;
    // The FIN came before the answer began: the gateway's probe, an interim 100, comes first
    // (a client that had closed its socket would have answered it with a reset).
    assert!(
        plain.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"),
        "{plain}"
    );
    assert!(plain.contains("\"chat.completion\""), "{plain}");
    assert!(
        plain.contains("Hello! How can I help you today?"),
        "{plain}"
    );
    let streamed = half_closed_call(&served.url, true).await;
    assert!(
        streamed.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"),
        "{streamed}"
    );
    assert!(streamed.contains("text/event-stream"), "{streamed}");
    assert!(streamed.contains("data: [DONE]"), "{streamed}");
    // A FIN after the stream began (the client read its first event, then half-closed): the
    // stream's probe is an SSE comment, and the rest of the answer follows.
    vendor.set_script(Script::Always(Behavior::Stream {
        first_token: Duration::from_millis(50),
        between: Duration::from_millis(150),
    }));
    let mut s = TcpStream::connect(addr(&served.url)).await.unwrap();
    s.write_all(&request(true)).await.unwrap();
    let mut got = first_content_event(&mut s).await;
    s.shutdown().await.unwrap();
    got.extend(
        support::read_to_close(&mut s, Duration::from_secs(10), "the rest of the stream").await,
    );
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("\r\n: \n\n\r\n"), "no probe comment: {text}");
    assert!(text.contains("data: [DONE]"), "{text}");
    assert_eq!(vendor.abandoned(), 0);
    assert_eq!(vendor.hits(), 3);
}

/// How the client leaves.
#[derive(Debug, Clone, Copy)]
enum Leave {
    /// `close()`: FIN, and nothing read any more.
    Close,
    /// SO_LINGER 0, then close: RST.
    Reset,
}

/// Starts a call the vendor holds, leaves once the vendor has it (after reading the stream's
/// first event, when `read_first` is set), and returns how long the vendor's connection
/// outlived the client.
async fn leave_mid_call(
    served: &support::Served,
    vendor: &FakeVendor,
    stream: bool,
    read_first: bool,
    leave: Leave,
) -> Duration {
    let hits = vendor.hits();
    let abandoned = vendor.abandoned();
    let mut s = TcpStream::connect(addr(&served.url)).await.unwrap();
    s.write_all(&request(stream)).await.unwrap();
    wait_until(
        Duration::from_secs(5),
        "the call reaching the vendor",
        || vendor.hits() > hits,
    )
    .await;
    if read_first {
        // The head and the first content event have reached the client.
        first_content_event(&mut s).await;
    } else {
        // Held: nothing has been answered yet.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            vendor.abandoned(),
            abandoned,
            "the vendor's hold ended early"
        );
    }
    if matches!(leave, Leave::Reset) {
        #[expect(
            deprecated,
            reason = "a zero linger never blocks close(); it sends RST"
        )]
        s.set_linger(Some(Duration::ZERO)).unwrap();
    }
    drop(s);
    wait_until(
        CANCEL_BOUND,
        &format!(
            "the vendor's connection dropped after the client left ({leave:?}, stream {stream})"
        ),
        || vendor.abandoned() > abandoned,
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_closes_or_resets_mid_call_cancels_its_upstream_call_plain_and_streamed() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    vendor.set_script(Script::Always(Behavior::HangBeforeHeaders));
    let served = gateway("leave-held", &vendor);
    let mut took = Vec::new();
    for stream in [false, true] {
        for leave in [Leave::Close, Leave::Reset] {
            let t = leave_mid_call(&served, &vendor, stream, false, leave).await;
            took.push(format!("stream {stream} {leave:?}: {t:?}"));
        }
    }
    // A stream whose vendor stalls after its first event: the client has read that much.
    vendor.set_script(Script::Always(Behavior::StallMidStream { after_chunks: 1 }));
    for leave in [Leave::Close, Leave::Reset] {
        let t = leave_mid_call(&served, &vendor, true, true, leave).await;
        took.push(format!("stalled stream {leave:?}: {t:?}"));
    }
    eprintln!("vendor connection dropped after the client left: {took:?}");
    // The gateway is still healthy, and the vendor's breaker (threshold 1) counted nothing.
    vendor.set_script(Script::Always(Behavior::Ok));
    let r = chat(&reqwest::Client::new(), &served.url).await;
    assert_eq!(r.status(), 200);
}
