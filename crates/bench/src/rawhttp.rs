//! The cheapest client: pre-built request bytes written on kept-alive TCP connections, the
//! response read with `httparse` and a `content-length`, nothing else.
//!
//! It shows the upstream's own ceiling (what it serves when the client costs almost nothing),
//! and it is the sequential keep-alive probe of rule 17 in docs/pitfalls.md: with one connection used one
//! request at a time, a server that leaves Nagle's algorithm on stalls ~40 ms per response.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connections are pooled; a call takes one (or opens one) and puts it back after a
/// complete keep-alive response. At concurrency 1 every call reuses the same connection.
#[derive(Debug)]
pub(crate) struct RawClient {
    addr: SocketAddr,
    request: Vec<u8>,
    pool: Mutex<Vec<Conn>>,
    connects: AtomicU64,
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// What came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    pub(crate) body_len: usize,
}

impl RawClient {
    /// A client POSTing `body` to `http://{addr}{path}` with these headers (plus `host`,
    /// `content-length` and `connection: keep-alive`).
    pub(crate) fn new(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Self {
        let mut head = format!("POST {path} HTTP/1.1\r\nhost: {addr}\r\n");
        for (name, value) in headers {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str(&format!(
            "content-length: {}\r\nconnection: keep-alive\r\n\r\n",
            body.len()
        ));
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        RawClient {
            addr,
            request,
            pool: Mutex::new(Vec::new()),
            connects: AtomicU64::new(0),
        }
    }

    /// Connections opened so far.
    pub(crate) fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    /// Sends the request once and reads the whole response.
    pub(crate) async fn call(&self) -> Result<RawResponse, String> {
        let pooled = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let stream = TcpStream::connect(self.addr)
                    .await
                    .map_err(|e| format!("raw client: connect to {}: {e}", self.addr))?;
                stream
                    .set_nodelay(true)
                    .map_err(|e| format!("raw client: TCP_NODELAY: {e}"))?;
                self.connects.fetch_add(1, Ordering::Relaxed);
                Conn {
                    stream,
                    buf: Vec::with_capacity(8192),
                }
            }
        };
        conn.stream
            .write_all(&self.request)
            .await
            .map_err(|e| format!("raw client: write: {e}"))?;
        let (resp, keep) = conn.read_response().await?;
        if keep {
            self.pool
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
        }
        Ok(resp)
    }
}

impl Conn {
    /// Reads one response; returns it and whether the connection may be reused.
    async fn read_response(&mut self) -> Result<(RawResponse, bool), String> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut parsed = httparse::Response::new(&mut headers);
            let status = parsed
                .parse(&self.buf)
                .map_err(|e| format!("raw client: bad response head: {e}"))?;
            if let httparse::Status::Complete(head_len) = status {
                let code = parsed.code.unwrap_or(0);
                let mut length = None;
                let mut close = false;
                for h in parsed.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        length = std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.trim().parse::<usize>().ok());
                    } else if h.name.eq_ignore_ascii_case("connection") {
                        close = h.value.eq_ignore_ascii_case(b"close");
                    } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                        return Err("raw client: only content-length bodies are supported".into());
                    }
                }
                let length = length
                    .ok_or_else(|| format!("raw client: status {code} without content-length"))?;
                let total = head_len + length;
                while self.buf.len() < total {
                    self.fill().await?;
                }
                self.buf.drain(..total);
                return Ok((
                    RawResponse {
                        status: code,
                        body_len: length,
                    },
                    !close,
                ));
            }
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> Result<(), String> {
        let n = self
            .stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|e| format!("raw client: read: {e}"))?;
        if n == 0 {
            return Err("raw client: the server closed the connection mid-response".into());
        }
        Ok(())
    }
}
