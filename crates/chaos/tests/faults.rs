//! Transport faults as a client sees them: hangs and stalls become timeouts, resets become
//! errors (RST, not FIN), delays are real, truncated bodies fail to read.

mod support;

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, Wire};
use serde_json::Value;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WIRES: [Wire; 2] = [Wire::OpenAi, Wire::Anthropic];

fn raw_request(fake: &FakeVendor, stream: bool) -> Vec<u8> {
    let body = chat_body(fake.wire(), stream).to_string();
    let path = match fake.wire() {
        Wire::OpenAi => "/v1/chat/completions",
        _ => "/v1/messages",
    };
    format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test]
async fn hang_before_headers_is_a_client_timeout() {
    for wire in WIRES {
        let fake = fake_always(wire, Behavior::HangBeforeHeaders).await;
        let c = client_with_timeout(Duration::from_millis(300));
        let err = chat_send_err(&c, &fake).await;
        assert!(err.is_timeout(), "{wire:?}: {}", chain(&err));
        // The request was read and recorded before the server started hanging.
        assert_eq!(fake.hits(), 1);
        assert_eq!(fake.requests().len(), 1);
    }
}

#[tokio::test]
async fn stall_mid_stream_is_an_idle_timeout_after_the_given_chunks() {
    for wire in WIRES {
        let fake = fake_always(wire, Behavior::StallMidStream { after_chunks: 2 }).await;
        let mut reader = SseReader::new(chat(&fake, true).await.unwrap());
        let mut deltas = 0;
        loop {
            match reader.next_within(Duration::from_millis(300)).await {
                Ok(Some(ev)) => {
                    let v = ev.json();
                    let is_delta = v["type"] == "content_block_delta"
                        || v["choices"][0]["delta"]["content"]
                            .as_str()
                            .is_some_and(|s| !s.is_empty());
                    deltas += usize::from(is_delta);
                }
                Ok(None) => panic!("{wire:?}: the stream must not end"),
                Err(e) => {
                    assert_eq!(e, "idle timeout", "{wire:?}");
                    break;
                }
            }
        }
        assert_eq!(deltas, 2, "{wire:?}");
    }
}

#[tokio::test]
async fn stall_on_a_json_request_sends_half_a_body_then_nothing() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    fake.set_script(Script::Always(Behavior::StallMidStream { after_chunks: 0 }));
    let resp = chat(&fake, false).await.unwrap();
    assert_eq!(resp.status(), 200, "headers arrive");
    let read = tokio::time::timeout(Duration::from_millis(300), resp.bytes()).await;
    assert!(read.is_err(), "the body never completes");
}

#[tokio::test]
async fn reset_before_response_is_an_rst() {
    for wire in WIRES {
        let fake = fake_always(wire, Behavior::ResetBeforeResponse).await;
        // Through reqwest: an error that is not a timeout, promptly.
        let c = client_with_timeout(Duration::from_secs(5));
        let started = tokio::time::Instant::now();
        let err = chat_send_err(&c, &fake).await;
        assert!(!err.is_timeout(), "{}", chain(&err));
        assert!(started.elapsed() < Duration::from_secs(4));
        // On a raw socket: ECONNRESET, not a clean EOF.
        let mut s = TcpStream::connect(fake.addr()).await.unwrap();
        s.write_all(&raw_request(&fake, false)).await.unwrap();
        let mut buf = [0u8; 64];
        let got = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap();
        assert_eq!(
            got.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::ConnectionReset),
            "{wire:?}"
        );
    }
}

#[tokio::test]
async fn reset_mid_stream_fails_the_body_after_the_given_chunks() {
    for wire in WIRES {
        let fake = fake_always(wire, Behavior::ResetMidStream { after_chunks: 1 }).await;
        let mut reader = SseReader::new(chat(&fake, true).await.unwrap());
        let (events, err) = reader.collect().await;
        let err = err.unwrap_or_else(|| panic!("{wire:?}: body must fail, got {events:#?}"));
        assert!(!err.is_timeout(), "{}", chain(&err));
        let last = events.last().unwrap().json();
        let is_delta = last["type"] == "content_block_delta"
            || last["choices"][0]["delta"]["content"].is_string();
        assert!(
            is_delta,
            "{wire:?}: last event before the reset is the first delta: {last}"
        );
        // JSON request: headers and half a body, then the reset.
        let resp = chat(&fake, false).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.bytes().await.is_err());
    }
}

#[tokio::test]
async fn truncated_json_body_is_an_early_eof() {
    let fake = FakeVendor::start(Wire::Anthropic).await.unwrap();
    fake.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 0,
    }));
    let resp = chat(&fake, false).await.unwrap();
    assert_eq!(resp.status(), 200);
    let err = resp.bytes().await.unwrap_err();
    assert!(!err.is_timeout(), "{}", chain(&err));
    // On a raw socket: the announced length is not delivered, then a clean FIN.
    let mut s = TcpStream::connect(fake.addr()).await.unwrap();
    s.write_all(&raw_request(&fake, false)).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8(got).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let announced: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(body.len() < announced, "{} of {announced}", body.len());
}

#[tokio::test]
async fn stream_delays_are_real() {
    for wire in WIRES {
        let fake = FakeVendor::start(wire).await.unwrap();
        let (first_token, between) = (Duration::from_millis(150), Duration::from_millis(60));
        fake.set_script(Script::Always(Behavior::Stream {
            first_token,
            between,
        }));
        // Measured from before the request is sent, every bound below is strict: the server
        // cannot send a delta earlier than its delays allow, however loaded the machine is.
        let sent = tokio::time::Instant::now();
        let mut reader = SseReader::new(chat(&fake, true).await.unwrap());
        let mut arrivals = Vec::new();
        while let Some(ev) = reader.next().await.unwrap() {
            let v = ev.json();
            let is_delta = v["type"] == "content_block_delta"
                || v["choices"][0]["delta"]["content"]
                    .as_str()
                    .is_some_and(|s| !s.is_empty());
            if is_delta {
                arrivals.push(sent.elapsed());
            }
        }
        assert_eq!(arrivals.len(), 4, "{wire:?}");
        for (k, at) in arrivals.iter().enumerate() {
            let earliest = first_token + between * k as u32;
            assert!(
                *at >= earliest,
                "{wire:?}: delta {k} at {at:?}, before {earliest:?}"
            );
        }
        // A JSON request gets the whole answer after the first-token delay.
        let sent = tokio::time::Instant::now();
        let v: Value = chat(&fake, false).await.unwrap().json().await.unwrap();
        assert!(sent.elapsed() >= first_token);
        assert!(v.get("choices").is_some() || v.get("content").is_some());
    }
}
