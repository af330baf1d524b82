//! The real `ripcord serve` under abuse and at scale (issue 42): silent sockets, a low file
//! descriptor limit, slow readers, a stalled stderr, many connections. Each test pins one bound
//! and what happens at it; the gateway runs out of nothing a vendor is blamed for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod abuse_support;
mod support;

use abuse_support::*;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, Wire};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

// 1. Slot exhaustion without a key.

#[tokio::test(flavor = "multi_thread")]
async fn thirteen_hundred_silent_sockets_reopened_for_40_s_do_not_stop_an_authenticated_client_from_being_served_within_1_s()
 {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve_keyed("silent", &vendor, "");
    let to = addr(&served.url);
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let mut attackers = Vec::new();
    for _ in 0..1300 {
        let stop = Arc::clone(&stop);
        let opened = Arc::clone(&opened);
        attackers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                // Open, send nothing, wait for the gateway to close it; reopen a second later.
                if let Ok(mut s) = connect_from(ATTACKER, to).await {
                    opened.fetch_add(1, Ordering::Relaxed);
                    let mut b = [0u8; 64];
                    let _ = tokio::time::timeout(Duration::from_secs(15), s.read(&mut b)).await;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
    }
    let started = Instant::now();
    let mut calls = 0;
    let mut worst = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(40) {
        // A fresh client each time: a new connection must get in, not only a kept-alive one.
        let client = reqwest::Client::new();
        let t = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(1), chat(&client, &served.url))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "call {calls} not answered within 1 s at {:?}",
                    started.elapsed()
                )
            });
        assert_eq!(r.status(), 200, "call {calls}");
        let health = tokio::time::timeout(
            Duration::from_secs(1),
            client.get(format!("{}/healthz", served.url)).send(),
        )
        .await
        .expect("/healthz within 1 s")
        .unwrap();
        assert_eq!(health.status(), 200);
        worst = worst.max(t.elapsed());
        calls += 1;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.abort();
    }
    let opened = opened.load(Ordering::Relaxed);
    assert!(opened >= 1300, "the attack opened only {opened} sockets");
    assert!(calls >= 50, "{calls} calls");
    eprintln!("{calls} authenticated calls, worst {worst:?}, {opened} silent sockets opened");
}

#[tokio::test(flavor = "multi_thread")]
async fn beyond_the_connection_cap_healthz_still_answers_and_calls_get_503_with_retry_after() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve_keyed("cap", &vendor, "max_connections = 4\n");
    let to = addr(&served.url);
    // Four kept-alive connections take the four slots (one after the other: a quarter of the
    // slots may be waiting for a first request at once).
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(to).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut b = [0u8; 512];
        let n = s.read(&mut b).await.unwrap();
        assert!(b[..n].starts_with(b"HTTP/1.1 200"));
        held.push(s);
    }
    // The fifth is served in reserve: health probes answer, a call is refused with a wait.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let health = probe(&client, &served.url, "/healthz").await;
    assert_eq!(health.status(), 200);
    let ready = probe(&client, &served.url, "/readyz").await;
    assert_eq!(ready.status(), 200);
    let r = chat(&client, &served.url).await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(r.headers()["connection"], "close");
    let body: Value = r.json().await.unwrap();
    assert!(
        support::error_message(&body).contains("connection limit"),
        "{body}"
    );
    assert_eq!(vendor.hits(), 0);
    // A slot frees: calls are served again.
    drop(held.pop());
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let r = chat(&client, &served.url).await;
        if r.status() == 200 {
            break;
        }
        assert!(Instant::now() < end, "no slot came free");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_address_holds_at_most_its_cap_and_a_silent_socket_is_closed_after_the_first_byte_timeout()
 {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve_keyed(
        "per-ip",
        &vendor,
        "max_connections_per_ip = 3\nfirst_byte_timeout_ms = 400\n",
    );
    let to = addr(&served.url);
    let mut socks = Vec::new();
    for _ in 0..5 {
        socks.push(connect_from(ATTACKER, to).await.unwrap());
    }
    // The fourth and fifth are closed at once; the first three after the first-byte timeout.
    let start = Instant::now();
    let closed_at: Vec<Duration> =
        futures::future::join_all(socks.iter_mut().map(|s| async move {
            let mut b = [0u8; 16];
            let r = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b)).await;
            assert!(matches!(r, Ok(Ok(0)) | Ok(Err(_))), "still open after 5 s");
            start.elapsed()
        }))
        .await;
    let early = closed_at
        .iter()
        .filter(|d| **d < Duration::from_millis(300))
        .count();
    assert_eq!(early, 2, "two over the cap closed at once: {closed_at:?}");
    assert!(
        closed_at.iter().all(|d| *d < Duration::from_secs(2)),
        "{closed_at:?}"
    );
    // Another address is not affected.
    let r = chat(&reqwest::Client::new(), &served.url).await;
    assert_eq!(r.status(), 200);
}

// 2. Running out of file descriptors is the gateway's own limit.

#[tokio::test(flavor = "multi_thread")]
async fn out_of_descriptors_a_call_is_a_local_503_and_the_vendor_breaker_stays_closed() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    // 128 descriptors, a reserve larger than that: the silent sockets below use them all up.
    let served = serve_with_nofile(
        "emfile",
        &keyed(
            &vendor,
            "reserved_connections = 400\nfirst_byte_timeout_ms = 30000\nheader_timeout_ms = 30000\n",
        ),
        128,
    );
    wait_for_line(
        &served,
        "the descriptor limit is 128",
        Duration::from_secs(5),
    );
    // The client's kept-alive connection takes the one slot (its probe reaches no vendor).
    let client = reqwest::Client::new();
    let h = probe(&client, &served.url, "/healthz").await;
    assert_eq!(h.status(), 200);
    let to = addr(&served.url);
    let mut silent = Vec::new();
    // From 200 addresses: one address alone may not hold more than a few of them.
    for i in 1..=200 {
        silent.push(connect_from(Ipv4Addr::new(127, 0, 1, i), to).await.unwrap());
    }
    wait_for_line(&served, "out of file descriptors", Duration::from_secs(10));
    // The vendor cannot be reached: the gateway's fault, a 503 with a wait, nothing sent.
    let r = chat(&client, &served.url).await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"), "{:?}", r.headers());
    assert_eq!(vendor.hits(), 0);
    let ready = probe(&client, &served.url, "/readyz").await;
    assert_eq!(ready.status(), 200, "readiness unchanged");
    let log = wait_for_line(&served, "call failed", Duration::from_secs(5));
    assert!(log.contains("ran out of file descriptors"), "{log}");
    // The sockets go: the very next calls reach the vendor — its breaker (threshold 1) never
    // counted the local failure.
    drop(silent);
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let r = chat(&client, &served.url).await;
        if r.status() == 200 {
            break;
        }
        assert_eq!(
            r.status(),
            503,
            "only the local refusal while descriptors free up"
        );
        assert!(
            Instant::now() < end,
            "still refused 5 s after the descriptors came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(vendor.hits(), 1);
    assert_ready(&client, &served.url).await;
}

/// With Redis-shared breakers, one replica running out of descriptors opens the breaker on no
/// replica: the second replica (same config, same Redis) keeps serving, and so does the first
/// once its descriptors are back.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread")]
async fn out_of_descriptors_on_one_replica_opens_no_shared_breaker_on_the_other() {
    let Some(redis) = support::redis("the shared-breaker descriptor test").await else {
        return;
    };
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let text = keyed(
        &vendor,
        &format!(
            "reserved_connections = 400\nfirst_byte_timeout_ms = 30000\nheader_timeout_ms = 30000\n\n[state]\nbackend = \"redis\"\nurl = \"{}\"\nop_timeout_ms = 1000\nreplicas = 2\n",
            redis.url()
        ),
    );
    let starved = serve_with_nofile("emfile-redis-a", &text, 128);
    let healthy = serve("emfile-redis-b", &text);
    let client = reqwest::Client::new();
    assert_eq!(chat(&client, &healthy.url).await.status(), 200);
    let h = probe(&client, &starved.url, "/healthz").await;
    assert_eq!(h.status(), 200);
    let mut silent = Vec::new();
    for i in 1..=200 {
        silent.push(
            connect_from(Ipv4Addr::new(127, 0, 1, i), addr(&starved.url))
                .await
                .unwrap(),
        );
    }
    wait_for_line(&starved, "out of file descriptors", Duration::from_secs(10));
    // A few refused calls on the starved replica (the breaker's threshold is 1).
    for _ in 0..3 {
        let r = chat(&client, &starved.url).await;
        assert_eq!(r.status(), 503);
        assert!(r.headers().contains_key("retry-after"));
    }
    let hits = vendor.hits();
    // The other replica still reaches the vendor: nothing opened the shared breaker.
    for _ in 0..3 {
        let r = chat(&client, &healthy.url).await;
        assert_eq!(r.status(), 200, "the healthy replica refused a call");
    }
    assert_eq!(vendor.hits(), hits + 3);
    drop(silent);
    let end = Instant::now() + Duration::from_secs(5);
    while chat(&client, &starved.url).await.status() != 200 {
        assert!(
            Instant::now() < end,
            "the starved replica never served again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_descriptor_limit_set_low_a_burst_sheds_with_503_and_no_breaker_opens() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    vendor.set_script(Script::Always(Behavior::SlowFirstToken(
        Duration::from_millis(300),
    )));
    let served = serve_with_nofile("burst", &keyed(&vendor, ""), 256);
    let line = wait_for_line(
        &served,
        "the descriptor limit is 256",
        Duration::from_secs(5),
    );
    assert!(line.contains("at most 64 connections"), "{line}");
    let url = served.url.clone();
    let calls = (0..600).map(|_| {
        let url = url.clone();
        async move {
            // Every caller on a connection of its own.
            let client = reqwest::Client::new();
            match client
                .post(format!("{url}/v1/chat/completions"))
                .bearer_auth(GW_KEY)
                .json(&chat_body())
                .send()
                .await
            {
                Ok(r) => Some((r.status().as_u16(), r.headers().contains_key("retry-after"))),
                // Closed at once beyond the cap and its reserve.
                Err(_) => None,
            }
        }
    });
    let results = futures::future::join_all(calls).await;
    let ok = results
        .iter()
        .filter(|r| matches!(r, Some((200, _))))
        .count();
    let shed = results
        .iter()
        .filter(|r| matches!(r, Some((503, true))))
        .count();
    let other: Vec<_> = results
        .iter()
        .flatten()
        .filter(|(s, ra)| !(*s == 200 || (*s == 503 && *ra)))
        .collect();
    assert!(
        other.is_empty(),
        "answers other than 200 or 503 + Retry-After: {other:?}"
    );
    // A burst of new connections from one address: only a few may wait for a first request at
    // once, the rest of the burst is shed — but some are served.
    assert!(ok >= 1, "{ok} served");
    assert!(shed >= 1, "nothing shed with a 503");
    // No breaker opened: the next call is served by the vendor, and the gateway is ready.
    let client = reqwest::Client::new();
    let r = chat(&client, &served.url).await;
    assert_eq!(r.status(), 200);
    assert_ready(&client, &served.url).await;
    eprintln!(
        "{ok} served, {shed} shed, {} closed at once",
        results.iter().filter(|r| r.is_none()).count()
    );
}

// 4. A slow reader holds its slot for the write timeout, not for the stream's whole bound.

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_stops_reading_a_stream_is_dropped_after_the_write_timeout_and_its_slot_freed()
 {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    // A long stream: far more than the socket buffers between the gateway and the client.
    let text = "lorem ipsum dolor sit amet ".repeat(600_000);
    vendor.set_script(Script::Always(Behavior::Reply(
        Reply::text(text).with_chunks(4000),
    )));
    let served = serve_keyed(
        "slow-reader",
        &vendor,
        "max_concurrency = 1\nmax_queue = 0\nwrite_timeout_ms = 1000\n",
    );
    let to = addr(&served.url);
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut slow = sock.connect(to).await.unwrap();
    let body = json!({"model": "ripcord", "stream": true, "messages": [{"role": "user", "content": "hi"}]})
        .to_string();
    slow.write_all(
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {GW_KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut head = vec![0u8; 1024];
    let n = slow.read(&mut head).await.unwrap();
    assert!(
        head[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head[..n])
    );
    // Other calls get a short answer.
    vendor.set_script(Script::Always(Behavior::Ok));
    // The slow reader now reads nothing. Its route's one slot is taken: a call is shed, until
    // the write timeout drops the stalled stream and frees it.
    let client = reqwest::Client::new();
    let start = Instant::now();
    let mut shed = 0;
    loop {
        let r = chat(&client, &served.url).await;
        match r.status().as_u16() {
            200 => break,
            503 => shed += 1,
            s => panic!("status {s}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(6),
            "the slot was never freed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shed >= 1, "the stalled stream held its slot at first");
    let freed = start.elapsed();
    assert!(freed >= Duration::from_millis(800), "freed after {freed:?}");
    // What the slow reader gets is a cut stream (no `[DONE]`): it was dropped, not finished.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut rest)).await;
    assert!(
        !String::from_utf8_lossy(&rest).contains("[DONE]"),
        "the stalled stream was finished instead of dropped"
    );
    // The vendor was not blamed: its breaker (threshold 1) let the next call through.
    assert_eq!(chat(&client, &served.url).await.status(), 200);
}

// 5. A stalled stderr costs bounded memory.

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_stderr_drops_and_counts_log_lines_instead_of_growing_memory() {
    use std::io::{BufRead, BufReader};
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let path = config("stderr", &keyed(&vendor, ""));
    let mut child = support::ripcord()
        .env("GW_KEYS", GW_KEY)
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (url, _) = ripcord_chaos::process::serving_url(&mut lines).unwrap();
    // From here nobody reads stderr: the pipe fills and the log's writer blocks.
    let pid = child.id();
    let warm = reqwest::Client::new();
    for _ in 0..200 {
        warm.get(format!("{url}/healthz")).send().await.unwrap();
    }
    let before = rss_kib(pid);
    // 12,000 access lines of about 2 KB each (a long path: 24 MB of log text) while stderr is
    // stalled; unbounded, the queue would hold all of it.
    let long = "a".repeat(2000);
    let tasks = (0..8).map(|_| {
        let url = format!("{url}/{long}");
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            for _ in 0..1500 {
                let r = client.get(&url).bearer_auth(GW_KEY).send().await.unwrap();
                assert_eq!(r.status(), 404);
            }
        })
    });
    for t in futures::future::join_all(tasks).await {
        t.unwrap();
    }
    let after = rss_kib(pid);
    let grew_mib = after.saturating_sub(before) / 1024;
    assert!(
        grew_mib <= 12,
        "RSS grew {grew_mib} MiB ({before} -> {after} KiB)"
    );
    // Reading again: the log says how many lines it dropped.
    let reader = std::thread::spawn(move || {
        lines
            .map_while(Result::ok)
            .find(|l| l.contains("log line(s) dropped"))
    });
    // One more line, so a batch is written after the reader drained the pipe.
    let end = Instant::now() + Duration::from_secs(10);
    while !reader.is_finished() && Instant::now() < end {
        let _ = warm.get(format!("{url}/healthz")).send().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let found = reader.join().unwrap();
    assert!(found.is_some(), "no line counting the dropped lines");
}

// 7. Smaller ones.

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_half_closes_after_its_request_still_gets_the_answer() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve_keyed("half-close", &vendor, "");
    for _ in 0..5 {
        let mut s = TcpStream::connect(addr(&served.url)).await.unwrap();
        let body = chat_body().to_string();
        s.write_all(
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {GW_KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        s.shutdown().await.unwrap();
        let answer = support::read_to_close(&mut s, Duration::from_secs(5), "the answer").await;
        let text = String::from_utf8_lossy(&answer);
        // The FIN may arrive before the answer begins: then the gateway's probe (an interim
        // 100, which a closed socket would answer with a reset) comes first.
        let last = text.trim_start_matches("HTTP/1.1 100 Continue\r\n\r\n");
        assert!(last.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("chat.completion"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_metrics_address_refuses_a_host_name_a_rebinding_page_would_send() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let port = support::free_port();
    let _served = serve_keyed(
        "metrics-host",
        &vendor,
        &format!("metrics_listen = \"127.0.0.1:{port}\"\n"),
    );
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let ok = client.get(&url).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let rebound = client
        .get(&url)
        .header("host", format!("attacker.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 421);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_status_page_forbids_framing_and_foreign_content() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve_keyed("status-csp", &vendor, "");
    let r = support::get_keyed(&format!("{}/status", served.url), GW_KEY).await;
    assert_eq!(r.status(), 200);
    let csp = support::header(&r, "content-security-policy");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert_eq!(r.headers()["x-frame-options"], "DENY");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_refused_for_its_key_is_closed_after_the_401() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let served = serve_keyed("401-close", &vendor, "");
    let mut s = TcpStream::connect(addr(&served.url)).await.unwrap();
    s.write_all(
        b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong-key-000000000000000000000\r\n\r\n",
    )
    .await
    .unwrap();
    let answer =
        support::read_to_close(&mut s, Duration::from_secs(5), "the close after the 401").await;
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 401"));
}
