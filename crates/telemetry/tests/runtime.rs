//! The OTLP exporters on both tokio runtime flavours: flushing and shutting down never need the
//! application's runtime, and the HTTP transport sends what it should.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

use std::sync::mpsc;
use std::time::Duration;

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{Chain, ChatModel, ChatRequest, Context};
use ripcord_telemetry::Protocol;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing_subscriber::layer::SubscriberExt;

/// Runs `f` on its own thread and fails (instead of hanging the suite) if it stalls.
fn within(limit: Duration, what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} stalled for {limit:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// A loopback port with nothing listening on it.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn emit_and_shut_down(protocol: Protocol, rt: tokio::runtime::Runtime) {
    let endpoint = format!("http://127.0.0.1:{}", closed_port());
    rt.block_on(async move {
        let telemetry = ripcord_telemetry::init()
            .ignore_environment()
            .endpoint(endpoint)
            .protocol(protocol)
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        let (layer, guard) = telemetry.into_parts();
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        tracing::info_span!("work", otel.name = "work").in_scope(|| tracing::info!("inside"));
        tokio::task::yield_now().await;
        // On the runtime thread, inside async code: the export has nowhere to go, and must
        // neither stall this runtime nor panic dropping telemetry's own.
        let flushed = guard.flush();
        let shut = guard.shutdown();
        assert!(
            flushed.is_err() || shut.is_err(),
            "nothing listens, so some export must fail"
        );
    });
}

/// Flushing and shutting down inside async code, for each transport and runtime flavour.
#[test]
fn shutdown_inside_either_runtime_flavour_does_not_stall() {
    type NewRuntime = fn() -> tokio::runtime::Runtime;
    let cases: [(&str, Protocol, NewRuntime); 3] = [
        (
            "gRPC shutdown (current-thread)",
            Protocol::Grpc,
            current_thread,
        ),
        ("gRPC shutdown (multi-thread)", Protocol::Grpc, multi_thread),
        (
            "HTTP shutdown (current-thread)",
            Protocol::HttpProtobuf,
            current_thread,
        ),
    ];
    for (what, protocol, runtime) in cases {
        within(Duration::from_secs(60), what, move || {
            emit_and_shut_down(protocol, runtime())
        });
    }
}

#[test]
fn dropping_the_guard_inside_async_code_flushes_without_panicking() {
    within(Duration::from_secs(60), "guard drop", || {
        current_thread().block_on(async {
            let telemetry = ripcord_telemetry::init()
                .ignore_environment()
                .endpoint(format!("http://127.0.0.1:{}", closed_port()))
                .protocol(Protocol::Grpc)
                .timeout(Duration::from_millis(300))
                .build()
                .unwrap();
            let (_layer, guard) = telemetry.into_parts();
            drop(guard);
        });
    });
}

/// One request as a minimal OTLP/HTTP receiver saw it.
#[derive(Debug)]
struct Seen {
    head: String,
    body_len: usize,
}

/// Accepts connections on `listener` and answers every request with an empty 200 (an empty
/// protobuf `Export*ServiceResponse`), reporting each request.
async fn receive(listener: TcpListener, seen: tokio::sync::mpsc::UnboundedSender<Seen>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            loop {
                let mut chunk = [0u8; 4096];
                let n = match sock.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let len = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() < end + 4 + len {
                        break;
                    }
                    buf.drain(..end + 4 + len);
                    let _ = seen.send(Seen {
                        head,
                        body_len: len,
                    });
                    let resp = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if sock.write_all(resp).await.is_err() {
                        return;
                    }
                }
            }
        });
    }
}

#[test]
fn http_export_posts_protobuf_with_the_headers_from_code() {
    within(Duration::from_secs(60), "HTTP export", || {
        let server_rt = multi_thread();
        let listener = server_rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        server_rt.spawn(receive(listener, tx));

        current_thread().block_on(async move {
            let telemetry = ripcord_telemetry::init()
                .ignore_environment()
                .endpoint(format!("http://{addr}"))
                .protocol(Protocol::HttpProtobuf)
                .header("x-tenant", "acme")
                .header("Authorization", "Bearer collector-token-123456")
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap();
            assert_eq!(
                telemetry.traces_endpoint(),
                format!("http://{addr}/v1/traces")
            );
            let dbg = format!("{telemetry:?}");
            assert!(!dbg.contains("collector-token"), "{dbg}");
            let (layer, guard) = telemetry.into_parts();
            let _default =
                tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
            let chain = Chain::builder()
                .link(ScriptedModel::new("a").reply("hi"))
                .build()
                .unwrap();
            chain
                .chat(&ChatRequest::user("hi"), &Context::new())
                .await
                .unwrap();
            guard.flush().expect("the receiver accepts the export");
            guard.shutdown().expect("clean shutdown");
        });

        let mut seen = Vec::new();
        while let Ok(s) = rx.try_recv() {
            seen.push(s);
        }
        let traces = seen
            .iter()
            .find(|s| s.head.starts_with("POST /v1/traces "))
            .unwrap_or_else(|| panic!("no traces export in {seen:#?}"));
        let head = traces.head.to_ascii_lowercase();
        assert!(
            head.contains("content-type: application/x-protobuf"),
            "{head}"
        );
        assert!(head.contains("x-tenant: acme"), "{head}");
        assert!(
            head.contains("authorization: bearer collector-token-123456"),
            "{head}"
        );
        assert!(traces.body_len > 0);
        assert!(
            seen.iter().any(|s| s.head.starts_with("POST /v1/metrics ")),
            "metrics are exported at flush: {seen:#?}"
        );
    });
}
