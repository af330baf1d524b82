//! The clients of `gateway-under-abuse`: the attacks and the legitimate callers, over raw
//! HTTP/1.1 on loopback sockets (each from its own 127/8 address, as separate machines would
//! be), and what each saw.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use super::checks::{CallRec, Outcome, ProbeRec, Who};

/// Connects to `to` from the loopback address `from`, with a small receive buffer when asked.
pub(crate) async fn connect_from(
    from: Ipv4Addr,
    to: SocketAddr,
    recv_buffer: Option<u32>,
) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(IpAddr::V4(from), 0))?;
    if let Some(n) = recv_buffer {
        s.set_recv_buffer_size(n)?;
    }
    let s = s.connect(to).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// A request's bytes: `POST path` with a JSON body, or `GET path`.
pub(crate) fn request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    close: bool,
) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (n, v) in headers {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    if let Some(b) = body {
        r.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    if close {
        r.push_str("Connection: close\r\n");
    }
    r.push_str("\r\n");
    if let Some(b) = body {
        r.push_str(b);
    }
    r.into_bytes()
}

/// A chat request body for `model`.
pub(crate) fn chat_body(model: &str, stream: bool) -> String {
    serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 16,
        "stream": stream,
    })
    .to_string()
}

/// A keyed chat call's bytes: `POST /v1/chat/completions` for `model` with `key` as its bearer
/// token, closing the connection after it.
fn chat_request(key: &str, model: &str, stream: bool) -> Vec<u8> {
    let auth = format!("Bearer {key}");
    request(
        "POST",
        "/v1/chat/completions",
        &[("Authorization", auth.as_str())],
        Some(&chat_body(model, stream)),
        true,
    )
}

/// A response head as read.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) retry_after: bool,
    pub(crate) close: bool,
    pub(crate) length: Option<usize>,
}

/// Why an exchange got no answer.
#[derive(Debug)]
pub(crate) enum NoAnswer {
    /// The connection ended before a byte of a response.
    Closed,
    /// Anything else (a malformed answer, a connect failure).
    Failed(String),
}

fn parse_head(buf: &[u8]) -> Result<Head, NoAnswer> {
    let text = String::from_utf8_lossy(buf);
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| NoAnswer::Failed(format!("bad status line in {text:?}")))?;
    let mut head = Head {
        status,
        retry_after: false,
        close: false,
        length: None,
    };
    for l in lines {
        let Some((n, v)) = l.split_once(':') else {
            continue;
        };
        let (n, v) = (n.trim().to_ascii_lowercase(), v.trim());
        match n.as_str() {
            "retry-after" => head.retry_after = !v.is_empty(),
            "connection" => head.close = v.eq_ignore_ascii_case("close"),
            "content-length" => head.length = v.parse().ok(),
            _ => {}
        }
    }
    Ok(head)
}

/// Reads one response (head, and a `content-length` body) from `s`, skipping interim 1xx
/// answers. `buf` carries bytes read past the previous response.
pub(crate) async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Head, NoAnswer> {
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) if buf.is_empty() => return Err(NoAnswer::Closed),
                Ok(0) => return Err(NoAnswer::Failed("the answer's head was cut".to_owned())),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(NoAnswer::Failed(e.to_string())),
            }
        };
        let head = parse_head(&buf[..end])?;
        buf.drain(..end);
        if (100..200).contains(&head.status) {
            continue;
        }
        let want = head.length.unwrap_or(0);
        while buf.len() < want {
            let mut chunk = [0u8; 16384];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => {
                    return Err(NoAnswer::Failed("the answer's body was cut".to_owned()));
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..want);
        return Ok(head);
    }
}

fn outcome(r: Result<Result<Head, NoAnswer>, tokio::time::error::Elapsed>) -> (Outcome, bool) {
    match r {
        Err(_) => (Outcome::NoAnswer("not answered in time".to_owned()), true),
        Ok(Err(NoAnswer::Closed)) => (Outcome::Closed, true),
        Ok(Err(NoAnswer::Failed(e))) => (Outcome::NoAnswer(e), true),
        Ok(Ok(h)) => (
            Outcome::Status {
                code: h.status,
                retry_after: h.retry_after,
            },
            h.close,
        ),
    }
}

/// What every client shares: the gateway, when to stop, and the records.
pub(crate) struct Field {
    pub(crate) to: SocketAddr,
    pub(crate) stop: AtomicBool,
    pub(crate) calls: std::sync::Mutex<Vec<CallRec>>,
    pub(crate) start: Instant,
    /// The connections the gateway said it dropped as slow consumers.
    pub(crate) slow_drops: super::child::SlowDrops,
}

impl Field {
    fn record(&self, who: Who, outcome: Outcome, t: Instant) {
        let rec = CallRec {
            who,
            outcome,
            at_ms: t.duration_since(self.start).as_secs_f64() * 1000.0,
            ms: t.elapsed().as_secs_f64() * 1000.0,
        };
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(rec);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A caller with a key on one kept-alive connection (reopened when the gateway closes it),
/// calling until told to stop; `next_header` gives each call's extra header (a sub-tenant).
pub(crate) async fn caller(
    f: Arc<Field>,
    who: Who,
    from: Ipv4Addr,
    key: String,
    pause: Duration,
    mut next_header: impl FnMut() -> Option<(&'static str, String)>,
) {
    let body = chat_body("chat", false);
    let auth = format!("Bearer {key}");
    let mut conn: Option<TcpStream> = None;
    let mut buf = Vec::new();
    while !f.stopped() {
        let t = Instant::now();
        if conn.is_none() {
            match tokio::time::timeout(Duration::from_secs(5), connect_from(from, f.to, None)).await
            {
                Ok(Ok(s)) => conn = Some(s),
                _ => {
                    f.record(who, Outcome::NoAnswer("cannot connect".to_owned()), t);
                    tokio::time::sleep(pause).await;
                    continue;
                }
            }
            buf.clear();
        }
        let Some(s) = conn.as_mut() else { continue };
        let extra = next_header();
        let mut headers = vec![("Authorization", auth.as_str())];
        if let Some((n, v)) = &extra {
            headers.push((n, v.as_str()));
        }
        let req = request("POST", "/v1/chat/completions", &headers, Some(&body), false);
        let r = tokio::time::timeout(Duration::from_secs(10), async {
            s.write_all(&req)
                .await
                .map_err(|e| NoAnswer::Failed(e.to_string()))?;
            read_response(s, &mut buf).await
        })
        .await;
        let (o, close) = outcome(r);
        f.record(who, o, t);
        if close {
            conn = None;
        }
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
}

/// Silent sockets from `from`: `count` at once, each opened, left silent until the gateway
/// closes it, and reopened `pause` later. Counts the sockets opened.
pub(crate) async fn silent(f: Arc<Field>, from: Ipv4Addr, count: usize, pause: Duration) -> usize {
    let opened = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..count {
        let (f, opened) = (Arc::clone(&f), Arc::clone(&opened));
        tasks.spawn(async move {
            while !f.stopped() {
                if let Ok(Ok(mut s)) =
                    tokio::time::timeout(Duration::from_secs(2), connect_from(from, f.to, None))
                        .await
                {
                    opened.fetch_add(1, Ordering::Relaxed);
                    let mut b = [0u8; 64];
                    let _ = tokio::time::timeout(Duration::from_secs(15), s.read(&mut b)).await;
                }
                tokio::time::sleep(pause).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    opened.load(Ordering::Relaxed)
}

/// What a slow reader saw.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SlowSeen {
    /// It got its stream's head (a 200).
    pub(crate) started: bool,
    /// The gateway's log said it dropped this connection as a slow consumer: how long after
    /// the stream's head that line was read, and how long the gateway said its writes had
    /// been refused.
    pub(crate) reported: Option<(f64, u64)>,
    /// What the client saw when it read again: the stream ended without `[DONE]` (cut), or
    /// with it (finished: the answer fitted in the buffers, or it was never stalled).
    pub(crate) cut: bool,
    pub(crate) finished: bool,
}

/// A slow reader: asks for a long stream with a tiny receive buffer (set before connecting,
/// so the window it advertises stays small), reads its head, then reads nothing until the
/// gateway says (in its log) that it dropped this connection, or `wait` has passed. Then it
/// reads what is left, to see the stream's end from its side too.
pub(crate) async fn slow_reader(
    f: Arc<Field>,
    from: Ipv4Addr,
    key: String,
    wait: Duration,
) -> SlowSeen {
    let t = Instant::now();
    let mut seen = SlowSeen::default();
    let Ok(Ok(mut s)) =
        tokio::time::timeout(Duration::from_secs(5), connect_from(from, f.to, Some(4096))).await
    else {
        f.record(
            Who::SlowReader,
            Outcome::NoAnswer("cannot connect".to_owned()),
            t,
        );
        return seen;
    };
    let me = s.local_addr().ok();
    let req = chat_request(&key, "long", true);
    if s.write_all(&req).await.is_err() {
        f.record(Who::SlowReader, Outcome::Closed, t);
        return seen;
    }
    // The head (a stream's, or a refusal's).
    let mut got = Vec::new();
    let mut b = [0u8; 1024];
    let head_end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut b)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&b[..n]),
            Ok(_) => {
                f.record(Who::SlowReader, Outcome::Closed, t);
                return seen;
            }
            Err(_) => {
                f.record(
                    Who::SlowReader,
                    Outcome::NoAnswer("no head in time".to_owned()),
                    t,
                );
                return seen;
            }
        }
    };
    let began = std::time::Instant::now();
    let head = match parse_head(&got[..head_end]) {
        Ok(h) => h,
        Err(NoAnswer::Failed(e)) => {
            f.record(Who::SlowReader, Outcome::NoAnswer(e), t);
            return seen;
        }
        Err(_) => return seen,
    };
    f.record(
        Who::SlowReader,
        Outcome::Status {
            code: head.status,
            retry_after: head.retry_after,
        },
        t,
    );
    if head.status != 200 {
        return seen;
    }
    seen.started = true;
    // Read nothing until the gateway says it dropped this connection (polled: the line comes
    // from the child's stderr reader), or until `wait` has passed.
    while began.elapsed() < wait {
        let drop = f
            .slow_drops
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|d| Some(d.peer) == me)
            .copied();
        if let Some(d) = drop {
            let after = d.seen.saturating_duration_since(began);
            seen.reported = Some((after.as_secs_f64() * 1000.0, d.stalled_ms));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut tail: Vec<u8> = got.split_off(head_end);
    let mut big = vec![0u8; 65536];
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.read(&mut big).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    // Only the end matters: keep the last few bytes.
                    tail.extend_from_slice(&big[..n]);
                    if tail.len() > 64 {
                        tail.drain(..tail.len() - 64);
                    }
                }
            }
        }
    })
    .await
    .is_ok();
    let done = String::from_utf8_lossy(&tail).contains("[DONE]");
    seen.finished = ended && done;
    seen.cut = ended && !done;
    seen
}

/// One connection of a burst: an authenticated call, `Connection: close`, answered or not.
pub(crate) async fn burst_one(f: Arc<Field>, from: Ipv4Addr, key: Arc<str>) {
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), async {
        let mut s = connect_from(from, f.to, None)
            .await
            .map_err(|e| NoAnswer::Failed(format!("connect: {e}")))?;
        let req = chat_request(&key, "chat", false);
        // A connection closed at once may refuse the write: that is a closed connection too.
        if s.write_all(&req).await.is_err() {
            return Err(NoAnswer::Closed);
        }
        read_response(&mut s, &mut Vec::new()).await
    })
    .await;
    f.record(Who::Burst, outcome(r).0, t);
}

/// Health probes: every `every`, `GET /healthz` on a fresh connection from `from`, answered
/// within `bound` (a connection closed at the door is opened again within the same bound).
pub(crate) async fn prober(
    f: Arc<Field>,
    from: Ipv4Addr,
    every: Duration,
    bound: Duration,
) -> Vec<ProbeRec> {
    let mut out = Vec::new();
    let req = request("GET", "/healthz", &[], None, true);
    while !f.stopped() {
        let t = Instant::now();
        let mut tries = 0;
        let answered = tokio::time::timeout(bound, async {
            loop {
                tries += 1;
                if let Ok(mut s) = connect_from(from, f.to, None).await
                    && s.write_all(&req).await.is_ok()
                    && let Ok(h) = read_response(&mut s, &mut Vec::new()).await
                    && h.status == 200
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .is_ok();
        out.push(ProbeRec {
            at_ms: t.duration_since(f.start).as_secs_f64() * 1000.0,
            answered_ms: answered.then(|| t.elapsed().as_secs_f64() * 1000.0),
            tries,
        });
        tokio::time::sleep(every.saturating_sub(t.elapsed())).await;
    }
    out
}

/// `GET path` with a key on a fresh connection; the status and body.
pub(crate) async fn get(to: SocketAddr, path: &str, key: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(to)
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    let auth = format!("Bearer {key}");
    s.write_all(&request(
        "GET",
        path,
        &[("Authorization", &auth)],
        None,
        true,
    ))
    .await
    .map_err(|e| format!("GET {path}: {e}"))?;
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut all))
        .await
        .map_err(|_| format!("GET {path}: no answer in 10 s"))?
        .map_err(|e| format!("GET {path}: {e}"))?;
    let text = String::from_utf8_lossy(&all).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("GET {path}: no status in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}
