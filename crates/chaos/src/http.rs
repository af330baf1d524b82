//! A deliberately small HTTP/1.1 server side: request parsing with `httparse`, response heads,
//! chunked framing and SSE frames.
//!
//! A framework (hyper, axum) would hide exactly what this crate must control: when the head is
//! written, when each byte goes out, and how the connection ends (hang, RST, FIN mid-body).
//! Requests may use `Content-Length` or chunked bodies and `Expect: 100-continue`; connections
//! are kept alive unless the client says `Connection: close` (or speaks HTTP/1.0 without
//! `keep-alive`).

use std::future::{Future, poll_fn};
use std::io::Write as _;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Accepts connections on the listener `listener` finds in `shared` until it is taken (`None`:
/// the fake was dropped and its port closed), and serves each with `serve` in a task of this
/// loop's own [`JoinSet`], so aborting the loop aborts every connection. Nagle is off: with
/// delayed ACKs it would add ~40 ms to every small keep-alive response. An accept error (out of
/// file descriptors, a connection aborted before accept) backs off a moment instead of spinning,
/// then the loop keeps serving.
pub(crate) async fn accept_loop<S, Fut>(
    shared: Arc<S>,
    listener: fn(&S) -> &Mutex<Option<TcpListener>>,
    serve: impl Fn(Arc<S>, TcpStream) -> Fut,
) where
    S: Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    loop {
        let accepted = poll_fn(|cx| {
            let guard = listener(&shared)
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(l) => l.poll_accept(cx).map(Some),
                None => Poll::Ready(None),
            }
        })
        .await;
        match accepted {
            None => return,
            Some(Ok((stream, _peer))) => {
                let _ = stream.set_nodelay(true);
                while connections.try_join_next().is_some() {}
                connections.spawn(serve(Arc::clone(&shared), stream));
            }
            Some(Err(_)) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// Largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted (Anthropic's Messages API limit).
pub(crate) const MAX_BODY: usize = 32 * 1024 * 1024;
/// Most headers in a request.
const MAX_HEADERS: usize = 96;

/// One parsed request.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) method: String,
    pub(crate) path: String,
    /// Lowercased names; only filled when the server records requests.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    pub(crate) keep_alive: bool,
}

/// Why no request could be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The connection failed or closed in the middle of a request.
    Io,
    /// The request is malformed; answer with this status and message, then close.
    Bad(u16, String),
}

/// A connection: the socket plus bytes read but not yet consumed (pipelined requests).
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    buf: Vec<u8>,
}

struct Head {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    head_len: usize,
    content_length: Option<usize>,
    chunked: bool,
    keep_alive: bool,
    expect_continue: bool,
}

impl Conn {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            buf: Vec::with_capacity(8 * 1024),
        }
    }

    /// Reads one request. `Ok(None)` is a clean close between requests.
    pub(crate) async fn read_request(
        &mut self,
        keep_headers: bool,
    ) -> Result<Option<Incoming>, ReadError> {
        let head = loop {
            if !self.buf.is_empty() {
                if let Some(head) = parse_head(&self.buf, keep_headers)? {
                    break head;
                }
                if self.buf.len() > MAX_HEAD {
                    return Err(ReadError::Bad(431, "request head too large".to_owned()));
                }
            }
            if self.fill().await? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(ReadError::Io)
                };
            }
        };
        let body = if head.chunked {
            self.read_chunked(head.head_len, head.expect_continue)
                .await?
        } else {
            let len = head.content_length.unwrap_or(0);
            if len > MAX_BODY {
                return Err(ReadError::Bad(
                    413,
                    format!("request body of {len} bytes exceeds {MAX_BODY}"),
                ));
            }
            let total = head.head_len + len;
            if head.expect_continue && self.buf.len() < total {
                self.continue_100().await?;
            }
            while self.buf.len() < total {
                if self.fill().await? == 0 {
                    return Err(ReadError::Io);
                }
            }
            let body = self.buf[head.head_len..total].to_vec();
            self.buf.drain(..total);
            body
        };
        Ok(Some(Incoming {
            method: head.method,
            path: head.path,
            headers: head.headers,
            body,
            keep_alive: head.keep_alive,
        }))
    }

    async fn continue_100(&mut self) -> Result<(), ReadError> {
        self.stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .map_err(|_| ReadError::Io)
    }

    async fn fill(&mut self) -> Result<usize, ReadError> {
        self.buf.reserve(8 * 1024);
        self.stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|_| ReadError::Io)
    }

    async fn read_chunked(
        &mut self,
        head_len: usize,
        expect_continue: bool,
    ) -> Result<Vec<u8>, ReadError> {
        if expect_continue {
            self.continue_100().await?;
        }
        let mut body = Vec::new();
        let mut pos = head_len;
        loop {
            let parsed = httparse::parse_chunk_size(&self.buf[pos..]).map_err(|_| {
                ReadError::Bad(400, "invalid chunk size in chunked request body".to_owned())
            })?;
            let httparse::Status::Complete((used, size)) = parsed else {
                if self.fill().await? == 0 {
                    return Err(ReadError::Io);
                }
                continue;
            };
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            if size > MAX_BODY.saturating_sub(body.len()) {
                return Err(ReadError::Bad(
                    413,
                    format!("chunked request body exceeds {MAX_BODY} bytes"),
                ));
            }
            if size == 0 {
                // Last chunk: skip optional trailers up to the empty line.
                let start = pos + used;
                loop {
                    if self.buf[start..].starts_with(b"\r\n") {
                        self.buf.drain(..start + 2);
                        return Ok(body);
                    }
                    if let Some(end) = find(&self.buf[start..], b"\r\n\r\n") {
                        self.buf.drain(..start + end + 4);
                        return Ok(body);
                    }
                    if self.buf.len() - start > MAX_HEAD {
                        return Err(ReadError::Bad(431, "chunked trailers too large".to_owned()));
                    }
                    if self.fill().await? == 0 {
                        return Err(ReadError::Io);
                    }
                }
            }
            let data = pos + used;
            while self.buf.len() < data + size + 2 {
                if self.fill().await? == 0 {
                    return Err(ReadError::Io);
                }
            }
            if &self.buf[data + size..data + size + 2] != b"\r\n" {
                return Err(ReadError::Bad(
                    400,
                    "chunk data not followed by CRLF".to_owned(),
                ));
            }
            body.extend_from_slice(&self.buf[data..data + size]);
            pos = data + size + 2;
        }
    }

    /// Writes all of `bytes`; `false` when the client is gone.
    pub(crate) async fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }

    /// Waits until the client closes the connection (or it fails), discarding anything it sends.
    /// This is how a hang or a stall ends: by the client giving up, or the server being dropped.
    pub(crate) async fn wait_until_client_gone(&mut self) {
        let mut scratch = [0u8; 1024];
        while let Ok(n) = self.stream.read(&mut scratch).await {
            if n == 0 {
                break;
            }
        }
    }

    /// Resets the connection: SO_LINGER 0, then close, so the kernel sends RST instead of FIN.
    pub(crate) fn reset(self) {
        // `set_linger` is deprecated because a *non-zero* linger blocks the thread in close();
        // a zero linger never blocks: the socket is aborted at once. (`set_zero_linger` needs
        // tokio 1.50, newer than the workspace's minimum.)
        #[expect(deprecated, reason = "a zero linger never blocks close(); see above")]
        let _ = self.stream.set_linger(Some(std::time::Duration::ZERO));
        drop(self.stream);
    }
}

fn parse_head(buf: &[u8], keep_headers: bool) -> Result<Option<Head>, ReadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(ReadError::Bad(
                431,
                format!("more than {MAX_HEADERS} request headers"),
            ));
        }
        Err(e) => return Err(ReadError::Bad(400, format!("malformed request head: {e}"))),
    };
    let method = req.method.unwrap_or("GET").to_owned();
    let path = req.path.unwrap_or("/").to_owned();
    let http10 = req.version == Some(0);
    let mut head = Head {
        method,
        path,
        headers: Vec::new(),
        head_len,
        content_length: None,
        chunked: false,
        keep_alive: !http10,
        expect_continue: false,
    };
    if keep_headers {
        head.headers.reserve(req.headers.len());
    }
    for h in req.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("");
        if h.name.eq_ignore_ascii_case("content-length") {
            let len = value
                .trim()
                .parse::<usize>()
                .map_err(|_| ReadError::Bad(400, format!("invalid content-length {value:?}")))?;
            head.content_length = Some(len);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = value.to_ascii_lowercase().contains("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = value.to_ascii_lowercase();
            if v.contains("close") {
                head.keep_alive = false;
            } else if v.contains("keep-alive") {
                head.keep_alive = true;
            }
        } else if h.name.eq_ignore_ascii_case("expect") {
            head.expect_continue = value.eq_ignore_ascii_case("100-continue");
        }
        if keep_headers {
            head.headers.push((
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).into_owned(),
            ));
        }
    }
    Ok(Some(head))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// How a response body is framed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Framing {
    /// `content-length: n`.
    Length(usize),
    /// `transfer-encoding: chunked`.
    Chunked,
}

/// Appends a response head.
pub(crate) fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    content_type: Option<&str>,
    headers: &[(&str, &str)],
    framing: Framing,
    close: bool,
) {
    let _ = write!(out, "HTTP/1.1 {status} {}\r\n", reason(status));
    if let Some(ct) = content_type {
        let _ = write!(out, "content-type: {ct}\r\n");
    }
    for (name, value) in headers {
        let _ = write!(out, "{name}: {value}\r\n");
    }
    match framing {
        Framing::Length(n) => {
            let _ = write!(out, "content-length: {n}\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The chunked-encoding terminator.
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Appends `data` as one chunk of a chunked body.
pub(crate) fn write_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let _ = write!(out, "{:x}\r\n", data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The canonical reason phrase (clients ignore it; it keeps captures readable).
pub(crate) const fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Site Overloaded",
        _ => "Status",
    }
}

/// A streamed answer as a list of SSE events, each already framed as one HTTP chunk, so that
/// any run of consecutive events is one contiguous slice that goes out in a single write.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    buf: Vec<u8>,
    /// End offset in `buf` of each frame.
    ends: Vec<usize>,
    /// Indices of the content frames (text and tool-call deltas).
    content: Vec<usize>,
    scratch: Vec<u8>,
    /// Whether the next content frame must be sent with broken JSON.
    break_next: bool,
    /// Set once the tail starts: a pending breakage then applies to any frame.
    in_tail: bool,
    /// Index of the first tail frame, once known.
    tail_start: Option<usize>,
}

impl Frames {
    pub(crate) fn new(break_first_content: bool) -> Self {
        Frames {
            buf: Vec::with_capacity(2048),
            ends: Vec::with_capacity(16),
            content: Vec::with_capacity(8),
            scratch: Vec::with_capacity(512),
            break_next: break_first_content,
            in_tail: false,
            tail_start: None,
        }
    }

    /// The stream's SSE field values after `prefix` (`"event: "`, `"data: "`), in order: how
    /// the tests read a stream.
    #[cfg(test)]
    pub(crate) fn sse_fields(&self, prefix: &str) -> Vec<String> {
        String::from_utf8_lossy(self.bytes(0..self.len()))
            .lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(str::to_owned)
            .collect()
    }

    /// The stream's `data:` values as JSON (`null` for one that is not), the OpenAI wire's
    /// closing `[DONE]` left out.
    #[cfg(test)]
    pub(crate) fn sse_data(&self) -> Vec<serde_json::Value> {
        self.sse_fields("data: ")
            .iter()
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap_or_default())
            .collect()
    }

    /// Appends an SSE event whose data is `value` as JSON.
    pub(crate) fn push<T: Serialize>(&mut self, event: Option<&str>, value: &T, is_content: bool) {
        let mut json = std::mem::take(&mut self.scratch);
        json.clear();
        // Serializing plain structs of strings and numbers into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut json, value);
        let broken = (is_content || self.in_tail) && std::mem::take(&mut self.break_next);
        let data = if broken {
            broken_json(&json)
        } else {
            &json[..]
        };
        self.push_data(event, data, is_content);
        self.scratch = json;
    }

    /// Appends an SSE event with raw data (e.g. `[DONE]`).
    pub(crate) fn push_data(&mut self, event: Option<&str>, data: &[u8], is_content: bool) {
        let mut sse = Vec::with_capacity(data.len() + 32);
        write_sse(&mut sse, event, data);
        write_chunk(&mut self.buf, &sse);
        if is_content {
            self.content.push(self.ends.len());
        }
        self.ends.push(self.buf.len());
    }

    /// Appends a frame of raw bytes (a binary event-stream message), as one chunk.
    pub(crate) fn push_raw(&mut self, bytes: &[u8], is_content: bool) {
        write_chunk(&mut self.buf, bytes);
        if is_content {
            self.content.push(self.ends.len());
        }
        self.ends.push(self.buf.len());
    }

    /// Marks the start of the tail (finish reason, usage, terminator). If broken JSON was
    /// requested and no content frame carried it (an empty answer), the first tail frame
    /// pushed with [`Frames::push`] carries it.
    pub(crate) fn start_tail(&mut self) {
        self.in_tail = true;
        self.tail_start = Some(self.ends.len());
    }

    /// Index of the first tail frame (the end, if the tail was never started).
    pub(crate) fn tail_start(&self) -> usize {
        self.tail_start.unwrap_or(self.ends.len())
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn content(&self) -> &[usize] {
        &self.content
    }

    /// The bytes of frames `range` (chunk-framed, contiguous).
    pub(crate) fn bytes(&self, range: Range<usize>) -> &[u8] {
        if range.start >= range.end || range.start >= self.ends.len() {
            return &[];
        }
        let start = if range.start == 0 {
            0
        } else {
            self.ends[range.start - 1]
        };
        let end = self.ends[range.end.min(self.ends.len()) - 1];
        &self.buf[start..end]
    }

    /// Index one past the frame after which a stream cut "after `n` chunks" happens: before the
    /// first content frame for `n = 0`, after the `n`-th content frame otherwise (after the last
    /// one when `n` is larger than their count). Without content, the cut is before the tail,
    /// which starts at [`Frames::tail_start`].
    pub(crate) fn cut_after(&self, n: usize) -> usize {
        if self.content.is_empty() {
            return self.tail_start();
        }
        if n == 0 {
            return self.content[0];
        }
        self.content[n.min(self.content.len()) - 1] + 1
    }
}

/// Writes one SSE event: optional `event:` line, one `data:` line, blank line.
pub(crate) fn write_sse(out: &mut Vec<u8>, event: Option<&str>, data: &[u8]) {
    if let Some(name) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
}

/// The first half of a JSON text, cut on a UTF-8 boundary: never valid JSON for an object.
pub(crate) fn broken_json(json: &[u8]) -> &[u8] {
    let mut cut = json.len() / 2;
    while cut > 0 && (json[cut] & 0b1100_0000) == 0b1000_0000 {
        cut -= 1;
    }
    &json[..cut.max(1).min(json.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_head_reads_framing_and_connection() {
        let raw = b"POST /v1/x?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\nX-Api-Key: k\r\n\r\nabc";
        let Ok(Some(head)) = parse_head(raw, true) else {
            panic!("complete head expected");
        };
        assert_eq!(head.method, "POST");
        assert_eq!(head.path, "/v1/x?a=1");
        assert_eq!(head.content_length, Some(3));
        assert!(!head.keep_alive);
        assert_eq!(head.head_len, raw.len() - 3);
        assert!(
            head.headers
                .contains(&("x-api-key".to_owned(), "k".to_owned()))
        );
        assert!(matches!(
            parse_head(b"GET / HTTP/1.1\r\nHost:", false),
            Ok(None)
        ));
        assert!(matches!(
            parse_head(b"G\x00T / HTTP/1.1\r\n\r\n", false),
            Err(ReadError::Bad(400, _))
        ));
        let Ok(Some(h10)) = parse_head(b"GET / HTTP/1.0\r\n\r\n", false) else {
            panic!("complete head expected");
        };
        assert!(!h10.keep_alive, "HTTP/1.0 closes by default");
    }

    #[test]
    fn frames_slice_and_cut() {
        let mut f = Frames::new(false);
        f.push_data(None, b"pre", false);
        f.push_data(None, b"c1", true);
        f.push_data(Some("x"), b"c2", true);
        f.start_tail();
        f.push_data(None, b"[DONE]", false);
        assert_eq!(f.len(), 4);
        assert_eq!(f.tail_start(), 3);
        assert_eq!(f.cut_after(0), 1);
        assert_eq!(f.cut_after(1), 2);
        assert_eq!(f.cut_after(9), 3);
        assert_eq!(f.bytes(1..2), b"a\r\ndata: c1\n\n\r\n");
        assert_eq!(f.bytes(2..3), b"13\r\nevent: x\ndata: c2\n\n\r\n");
        assert_eq!(
            f.bytes(0..4).len(),
            f.bytes(0..2).len() + f.bytes(2..4).len()
        );
        assert!(f.bytes(3..3).is_empty());

        let mut empty = Frames::new(true);
        empty.push_data(None, b"pre", false);
        empty.start_tail();
        empty.push(None, &serde_json::json!({"finish": "stop"}), false);
        assert_eq!(empty.cut_after(2), 1, "no content: cut before the tail");
        let tail = String::from_utf8_lossy(empty.bytes(1..2)).into_owned();
        assert!(
            tail.contains("data: {\"fin") && !tail.contains("stop"),
            "{tail}"
        );
    }

    #[test]
    fn broken_json_never_parses() {
        for s in [r#"{"a":"héé"}"#, r#"{"x":1}"#, "{}", r#"{"t":"日本語"}"#] {
            let b = broken_json(s.as_bytes());
            assert!(std::str::from_utf8(b).is_ok());
            assert!(
                serde_json::from_slice::<serde_json::Value>(b).is_err(),
                "{s}"
            );
        }
    }
}
