//! The server itself: recording, keep-alive, `Connection: close`, pipelining, chunked and
//! `Expect: 100-continue` request bodies, bad requests, and shutdown on drop.
// Helpers of test code (outside `#[test]` fns): failing loudly is their job.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Script, Wire};
use serde_json::json;
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Reads one HTTP/1.1 response with a content-length body from a raw socket.
async fn read_response(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>, String) {
    let mut line = String::new();
    r.read_line(&mut line).await.unwrap();
    let status: u16 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(": ").unwrap();
        headers.push((n.to_ascii_lowercase(), v.to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.unwrap();
    (status, headers, String::from_utf8(body).unwrap())
}

fn openai_request(extra_headers: &str) -> String {
    let body = chat_body(Wire::OpenAi, false).to_string();
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{extra_headers}content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn records_method_path_headers_and_body_in_order() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let c = client();
    let body =
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "first"}], "seed": 7});
    c.post(format!("{}/v1/chat/completions", fake.base_url()))
        .bearer_auth("sk-test-123")
        .header("OpenAI-Organization", "org-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    c.get(format!("{}/v1/models", fake.base_url()))
        .send()
        .await
        .unwrap();
    let seen = fake.requests();
    assert_eq!(seen.len(), 2);
    let first = &seen[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(first.header("openai-organization"), Some("org-1"));
    assert!(
        first
            .headers
            .iter()
            .all(|(n, _)| n == &n.to_ascii_lowercase()),
        "names lowercased"
    );
    assert_eq!(first.json(), Some(body));
    assert_eq!(seen[1].method, "GET");
    assert!(seen[1].at >= first.at);
    assert_eq!(fake.hits(), 1, "only model endpoints are hits");
    assert!(
        !format!("{first:?}").contains("sk-test-123"),
        "Debug redacts credentials"
    );
    fake.clear();
    assert!(fake.requests().is_empty());
    assert_eq!(fake.hits(), 0);
    chat(&fake, false).await.unwrap();
    assert_eq!((fake.requests().len(), fake.hits()), (1, 1));
}

#[tokio::test]
async fn recording_can_be_disabled_but_hits_still_count() {
    let fake = FakeVendor::start_with(Wire::Anthropic, FakeOptions::fast())
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(chat(&fake, false).await.unwrap().status(), 200);
    }
    assert!(fake.requests().is_empty());
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn keep_alive_serves_two_requests_on_one_connection() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    // Raw: two requests, one after the other, on one socket.
    let mut r = BufReader::new(TcpStream::connect(fake.addr()).await.unwrap());
    for _ in 0..2 {
        r.get_mut()
            .write_all(openai_request("").as_bytes())
            .await
            .unwrap();
        let (status, headers, body) = read_response(&mut r).await;
        assert_eq!(status, 200);
        assert!(
            !headers.iter().any(|(n, _)| n == "connection"),
            "kept alive"
        );
        assert!(body.contains("chat.completion"));
    }
    // Through reqwest's pool: sequential requests reuse the connection.
    let c = client();
    chat_with(&c, &fake).await;
    chat_with(&c, &fake).await;
    let conns: Vec<u64> = fake.requests().iter().map(|r| r.conn).collect();
    assert_eq!(conns[0], conns[1], "raw requests shared a connection");
    assert_eq!(conns[2], conns[3], "pooled requests shared a connection");
    assert_ne!(conns[1], conns[2]);
}

async fn chat_with(c: &reqwest::Client, fake: &FakeVendor) {
    let resp = c
        .post(chat_url(fake))
        .json(&chat_body(fake.wire(), false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.bytes().await.unwrap();
}

#[tokio::test]
async fn connection_close_is_honoured_and_pipelining_works() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    // Two pipelined requests in one write, the second asking to close.
    let mut r = BufReader::new(TcpStream::connect(fake.addr()).await.unwrap());
    let both = openai_request("") + &openai_request("connection: close\r\n");
    r.get_mut().write_all(both.as_bytes()).await.unwrap();
    let (s1, h1, _) = read_response(&mut r).await;
    let (s2, h2, _) = read_response(&mut r).await;
    assert_eq!((s1, s2), (200, 200));
    assert!(!h1.iter().any(|(n, _)| n == "connection"));
    assert!(h2.contains(&("connection".to_owned(), "close".to_owned())));
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), r.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0, "server closed after the response");
}

#[tokio::test]
async fn chunked_and_expect_continue_request_bodies() {
    let fake = FakeVendor::start(Wire::Anthropic).await.unwrap();
    let body = chat_body(Wire::Anthropic, false).to_string();
    let (a, b) = body.split_at(body.len() / 2);
    let mut r = BufReader::new(TcpStream::connect(fake.addr()).await.unwrap());
    let chunked = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    r.get_mut().write_all(chunked.as_bytes()).await.unwrap();
    let (status, _, resp) = read_response(&mut r).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(fake.requests()[0].body, body.as_bytes(), "de-chunked");

    // Expect: 100-continue: the server says continue before the client sends the body.
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    r.get_mut().write_all(head.as_bytes()).await.unwrap();
    let mut line = String::new();
    r.read_line(&mut line).await.unwrap();
    assert_eq!(line, "HTTP/1.1 100 Continue\r\n");
    line.clear();
    r.read_line(&mut line).await.unwrap();
    assert_eq!(line, "\r\n");
    r.get_mut().write_all(body.as_bytes()).await.unwrap();
    let (status, _, _) = read_response(&mut r).await;
    assert_eq!(status, 200);
    assert_eq!(fake.hits(), 2);
}

#[tokio::test]
async fn malformed_request_head_gets_400_and_close() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let mut r = BufReader::new(TcpStream::connect(fake.addr()).await.unwrap());
    r.get_mut()
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: banana\r\n\r\n")
        .await
        .unwrap();
    let (status, headers, body) = read_response(&mut r).await;
    assert_eq!(status, 400);
    assert!(body.contains("content-length"), "{body}");
    assert!(headers.contains(&("connection".to_owned(), "close".to_owned())));
    assert_eq!(fake.hits(), 0);
}

#[tokio::test]
async fn dropping_the_server_refuses_new_connections_and_closes_open_ones() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    fake.set_script(Script::Sequence(vec![
        Behavior::Ok,
        Behavior::HangBeforeHeaders,
    ]));
    let addr = fake.addr();
    // A connection owned by a server task: one answered request proves it, the second hangs.
    let mut hung = BufReader::new(TcpStream::connect(addr).await.unwrap());
    hung.get_mut()
        .write_all(openai_request("").as_bytes())
        .await
        .unwrap();
    assert_eq!(read_response(&mut hung).await.0, 200);
    hung.get_mut()
        .write_all(openai_request("").as_bytes())
        .await
        .unwrap();
    assert!(format!("{fake:?}").contains("FakeVendor"));

    drop(fake);

    let refused = TcpStream::connect(addr).await;
    assert_eq!(
        refused.map(|_| ()).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused),
        "the port is closed as soon as the server is dropped"
    );
    // The hung connection is closed by the server's shutdown, not left open.
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), hung.read(&mut buf))
        .await
        .expect("the hung connection must be closed after drop");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}
