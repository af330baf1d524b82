//! Transport behaviour of the adapters, against raw loopback sockets where the test must see
//! the socket itself: refused and hanging connects, dropping a stream, connection reuse.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind, StreamEvent, TimeoutPhase};
use ripcord_providers::{OpenAi, OpenAiConfig};
use support::*;

/// A loopback address nothing listens on: a connect to it is refused.
fn refusing_addr() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// A call on `m` fails to connect: a clean network error.
async fn assert_cannot_connect(m: &impl ChatModel) {
    let e = chat_err(m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::Network, "{e}");
    assert!(e.message().contains("cannot connect"), "{e}");
    assert_error_clean(&e);
}

#[tokio::test]
async fn refused_connections_are_network_errors() {
    let addr = refusing_addr();
    let m = OpenAi::new(
        OpenAiConfig::new("gpt-4o", KEY)
            .with_base_url(format!("http://{addr}/v1"))
            .with_timeouts(timeouts()),
    )
    .unwrap();
    assert_cannot_connect(&m).await;
}

#[tokio::test]
async fn connect_timeout_is_its_own_phase() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let _listener = socket.listen(0).unwrap();
    // Fill the accept queue (never accepted).
    let mut fillers = Vec::new();
    for _ in 0..8 {
        match tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            Ok(Ok(s)) => fillers.push(s),
            _ => break,
        }
    }
    let m = OpenAi::new(
        OpenAiConfig::new("gpt-4o", KEY)
            .with_base_url(format!("http://{addr}/v1"))
            .with_timeouts(timeouts().with_connect(Duration::from_millis(300))),
    )
    .unwrap();
    let t0 = Instant::now();
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Connect), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 16 * 1024];
        let mut seen = Vec::new();
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            seen.extend_from_slice(&buf[..n]);
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
        sock.write_all(head.as_bytes()).await.unwrap();
        sock.write_all(chunk.as_bytes()).await.unwrap();
        // Keep the stream open; wait for the client to go away.
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        closed.is_ok()
    };
    let client = async {
        let m = OpenAi::new(
            OpenAiConfig::new("gpt-4o", KEY)
                .with_base_url(format!("http://{addr}/v1"))
                .with_timeouts(timeouts()),
        )
        .unwrap();
        let mut s = m
            .stream(&ChatRequest::user("hi"), &Context::new())
            .await
            .unwrap();
        let first = s.next().await.unwrap().unwrap();
        assert_eq!(first, StreamEvent::text("Hi"));
        drop(s);
        drop(m);
    };
    let (closed, ()) = tokio::join!(server, client);
    assert!(closed, "the vendor never saw the connection close");
}

#[tokio::test]
async fn finished_streams_reuse_the_pooled_connection() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    let server = tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                loop {
                    // One request: headers, then Content-Length bytes of body.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let n = sock.read(&mut tmp).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&tmp[..n]);
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        let n = sock.read(&mut tmp).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&tmp[..n]);
                    }
                    buf.drain(..head_end + len);
                    let events = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n0\r\n\r\n",
                        events.len()
                    );
                    if sock.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let m = OpenAi::new(
        OpenAiConfig::new("gpt-4o", KEY)
            .with_base_url(format!("http://{addr}/v1"))
            .with_timeouts(timeouts()),
    )
    .unwrap();
    for _ in 0..2 {
        let events = stream_ok(&m, &ChatRequest::user("hi")).await;
        assert_eq!(text_of(&events), "ok");
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the second stream opened a new connection"
    );
    server.abort();
}

/// A reqwest client passed in (proxies, extra roots) serves every path the default one does:
/// answers, streams, a truncated body and a refused connection, classified the same way.
#[cfg(feature = "reqwest")]
#[tokio::test]
async fn a_reqwest_client_passed_in_behaves_like_the_default_one() {
    use ripcord_chaos::{Behavior, Script};
    use ripcord_providers::HttpClient;

    let fake = openai_fake().await;
    let client = HttpClient::from_reqwest(reqwest::Client::new());
    assert!(client.reqwest().is_some());
    let m = OpenAi::new(openai_cfg(&fake, "gpt-4o").with_client(client.clone())).unwrap();
    let r = chat_ok(&m, &ChatRequest::user("hi")).await;
    assert!(!r.text().is_empty());
    let events = stream_ok(&m, &ChatRequest::user("hi")).await;
    assert!(!text_of(&events).is_empty());
    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    let header = |name: &str| {
        sent[0]
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert!(header("user-agent").is_some_and(|v| v.starts_with("ripcord/")));
    assert!(header("authorization").is_some_and(|v| v.starts_with("Bearer ")));

    fake.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 2,
    }));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::Network, "{e}");
    assert!(e.message().contains("truncated"), "{e}");

    let addr = refusing_addr();
    let refused = OpenAi::new(
        OpenAiConfig::new("gpt-4o", KEY)
            .with_base_url(format!("http://{addr}/v1"))
            .with_client(client),
    )
    .unwrap();
    assert_cannot_connect(&refused).await;
}

/// The default client sends what the vendor expects: content type, accept, user agent, key.
#[tokio::test]
async fn the_default_client_sends_the_expected_headers() {
    let fake = openai_fake().await;
    let m = openai(&fake);
    chat_ok(&m, &ChatRequest::user("hi")).await;
    let _ = stream_ok(&m, &ChatRequest::user("hi")).await;
    let sent = fake.requests();
    for (req, accept) in sent.iter().zip(["application/json", "text/event-stream"]) {
        let header = |name: &str| {
            req.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(header("accept").as_deref(), Some(accept));
        assert_eq!(header("content-type").as_deref(), Some("application/json"));
        assert_eq!(
            header("content-length"),
            Some(req.body.len().to_string()),
            "a sized body, not chunked"
        );
        assert!(header("host").is_some());
        assert!(header("user-agent").is_some_and(|v| v.starts_with("ripcord/")));
        assert_eq!(header("authorization"), Some(format!("Bearer {KEY}")));
    }
}
