//! The socket under one gateway connection: what hyper reads and writes through, what the
//! accept loop learns from it (traffic, stalled writes), and the watch that tells a client
//! that half-closed from one that left.
//!
//! # Half-close against disconnect
//!
//! hyper serves with half-close on, so a client that shuts down its sending side after its
//! request (FIN, then still reading) gets its answer. hyper then no longer reads the socket
//! while a request is served, so it would also miss a client that went away: closed its socket
//! (FIN, and nothing read any more) or reset it (RST). Its upstream call would run on to its
//! deadline. On the wire the two FINs look the same; only a write tells them apart — a socket
//! that was closed answers the next bytes it receives with a RST, a half-closed one takes them.
//!
//! So while a request is in flight the connection loop watches the socket ([`watch_peer`]):
//!
//! - a reset (or any socket error) means the client left;
//! - a FIN makes the gateway write something harmless: before the response has begun, an
//!   interim `HTTP/1.1 100 Continue` (every HTTP/1.1 client skips a 1xx it did not ask for;
//!   none is sent to an HTTP/1.0 client); in a stream that has begun, an SSE comment line
//!   (`: \n\n`, which SSE parsers ignore), written by the stream itself when it is told
//!   ([`PeerFin`]). A client that closed answers with a RST, which the watch sees;
//! - a response that is already being written is its own probe.
//!
//! When the watch sees the client gone, the loop drops the connection, which drops the
//! request's handler and its answer: the upstream call or stream is cancelled. A half-closed
//! client keeps reading and gets the whole answer (with the interim 100 before it, when its FIN
//! came before the answer began).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::automatic;

/// The interim answer written to find out whether a client that sent a FIN still reads.
pub(super) const PROBE_INTERIM: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The SSE comment a stream writes for the same purpose (ignored by SSE parsers).
pub(crate) const PROBE_COMMENT: &[u8] = b": \n\n";

/// How often a socket with unread bytes waiting (a request body still arriving, or a
/// pipelined request) is looked at again for a FIN behind them.
const PEEK_AGAIN: Duration = Duration::from_millis(50);

/// Given to every request (as a request extension): turns `true` when the client sent a FIN
/// while its stream was being written, so the stream writes [`PROBE_COMMENT`] at once (a
/// client that closed answers it with a RST and the connection is dropped).
#[derive(Clone, Debug)]
pub(crate) struct PeerFin(pub(crate) watch::Receiver<bool>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One connection's socket and what is known about it, shared by hyper's I/O ([`Tracked`])
/// and the connection loop.
pub(super) struct Socket {
    tcp: TcpStream,
    started: Instant,
    /// When a byte last moved (ms since the connection started).
    last: AtomicU64,
    /// The client has sent a byte.
    heard: AtomicBool,
    /// When a write was first refused with no byte taken since (ms since start, plus one), or 0.
    blocked: AtomicU64,
    /// Requests being served, from their head until their response body is done.
    in_flight: watch::Sender<usize>,
    /// The request in flight is HTTP/1.1 or later (an interim answer may be sent to it).
    http11: AtomicBool,
    /// A byte of the response to the request in flight has been written.
    answering: AtomicBool,
    /// The interim probe's bytes not written yet: they go out before any more of hyper's.
    probe: Mutex<Vec<u8>>,
    /// Set when the client sent a FIN while its answer was being written.
    fin: watch::Sender<bool>,
}

impl Socket {
    pub(super) fn new(tcp: TcpStream) -> Arc<Socket> {
        Arc::new(Socket {
            tcp,
            started: Instant::now(),
            last: AtomicU64::new(0),
            heard: AtomicBool::new(false),
            blocked: AtomicU64::new(0),
            in_flight: watch::Sender::new(0),
            http11: AtomicBool::new(false),
            answering: AtomicBool::new(false),
            probe: Mutex::new(Vec::new()),
            fin: watch::Sender::new(false),
        })
    }

    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// When a byte last moved, since the connection started.
    pub(super) fn last_activity(&self) -> Duration {
        Duration::from_millis(self.last.load(Ordering::Relaxed))
    }

    /// True once the client has sent a byte.
    pub(super) fn heard(&self) -> bool {
        self.heard.load(Ordering::Relaxed)
    }

    /// How long writes have been refused with no byte taken, if they are.
    pub(super) fn stalled(&self) -> Option<Duration> {
        let since = self.blocked.load(Ordering::Relaxed);
        (since > 0).then(|| {
            self.started
                .elapsed()
                .saturating_sub(Duration::from_millis(since - 1))
        })
    }

    /// The handle a request's stream watches for the client's FIN.
    pub(super) fn peer_fin(&self) -> PeerFin {
        PeerFin(self.fin.subscribe())
    }

    /// A request's head has arrived: it is in flight until the returned guard (moved into its
    /// response body) is dropped.
    pub(super) fn begin(self: &Arc<Self>, http11: bool) -> InFlight {
        self.http11.store(http11, Ordering::Relaxed);
        self.answering.store(false, Ordering::Relaxed);
        self.in_flight.send_modify(|n| *n += 1);
        InFlight(Arc::clone(self))
    }

    fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    /// Records the outcome of a write of `buf`: progress clears the stall, a refusal starts
    /// one. hyper's own `100 Continue` (to a request that expects it) is not the answer.
    fn wrote(&self, r: &Poll<io::Result<usize>>, buf: &[u8]) {
        match r {
            Poll::Ready(Ok(n)) if *n > 0 => {
                self.touch();
                if !buf.starts_with(b"HTTP/1.1 100 ") {
                    self.answering.store(true, Ordering::Relaxed);
                }
                self.blocked.store(0, Ordering::Relaxed);
            }
            Poll::Pending if self.blocked.load(Ordering::Relaxed) == 0 => {
                let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.blocked.store(ms.saturating_add(1), Ordering::Relaxed);
            }
            _ => {}
        }
    }

    fn poll_write_vectored_raw(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            match self.tcp.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_write_raw(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            match self.tcp.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
        }
    }

    /// Writes what is left of the interim probe; `Ready(Ok)` when nothing is.
    fn poll_probe(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut probe = lock(&self.probe);
        while !probe.is_empty() {
            let n = ready!(self.poll_write_raw(cx, &probe))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            probe.drain(..n);
        }
        Poll::Ready(Ok(()))
    }

    /// Waits until `pred` holds for the count of requests in flight.
    async fn in_flight_is(&self, pred: impl FnMut(&usize) -> bool) {
        let mut rx = self.in_flight.subscribe();
        // The sender lives as long as `self`: `wait_for` cannot fail here.
        let _ = rx.wait_for(pred).await;
    }
}

/// A request in flight (see [`Socket::begin`]).
pub(super) struct InFlight(Arc<Socket>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A response body that keeps its request in flight until it is done or dropped.
pub(super) struct Guarded {
    pub(super) inner: axum::body::Body,
    pub(super) _in_flight: InFlight,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Resolves when the client is known to have left while a request was in flight (see the
/// module docs); otherwise runs as long as the connection.
pub(super) async fn watch_peer(sock: &Socket) {
    let mut b = [0u8; 1];
    loop {
        sock.in_flight_is(|n| *n > 0).await;
        let fin = tokio::select! {
            r = sock.tcp.peek(&mut b) => match r {
                Ok(0) => true,
                // Bytes wait unread (a body still arriving, a pipelined request): look again
                // in a moment.
                Ok(_) => {
                    tokio::time::sleep(PEEK_AGAIN).await;
                    false
                }
                Err(_) => return,
            },
            () = sock.in_flight_is(|n| *n == 0) => false,
        };
        if !fin {
            continue;
        }
        // A FIN with a request in flight: make the client answer a write.
        if !sock.answering.load(Ordering::Relaxed) && sock.http11.load(Ordering::Relaxed) {
            lock(&sock.probe).extend_from_slice(PROBE_INTERIM);
            let sent = std::future::poll_fn(|cx| sock.poll_probe(cx));
            if tokio::time::timeout(Duration::from_secs(1), sent)
                .await
                .is_ok_and(|r| r.is_err())
            {
                return;
            }
        } else {
            sock.fin.send_replace(true);
        }
        tokio::select! {
            // The reset a closed socket answers with (an error either way).
            _ = sock.tcp.ready(Interest::ERROR) => return,
            // Answered: hyper reads the FIN itself now and closes the connection.
            () = sock.in_flight_is(|n| *n == 0) => std::future::pending::<()>().await,
        }
    }
}

/// The socket as hyper sees it: it records when it last moved a byte and whether the client
/// has sent one, sends hyper's own refusals in their JSON form (see [`super::automatic`]), and
/// sends the interim probe first when one is waiting.
pub(super) struct Tracked {
    pub(super) sock: Arc<Socket>,
    /// hyper's own refusal being sent in its JSON form, while it is.
    pending: Option<Replacing>,
}

impl Tracked {
    pub(super) fn new(sock: Arc<Socket>) -> Self {
        Tracked {
            sock,
            pending: None,
        }
    }
}

/// A write of hyper's that is being sent as other bytes (see [`super::automatic`]).
struct Replacing {
    bytes: Vec<u8>,
    sent: usize,
    /// How many of hyper's bytes it stands for (reported as written once all are sent).
    replaces: usize,
}

impl Tracked {
    /// Sends what stands in for hyper's write; `Ready(Ok(n))` with the count of hyper's bytes
    /// once all of it is sent.
    fn send_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        loop {
            let Some(p) = self.pending.as_mut() else {
                return Poll::Ready(Ok(0));
            };
            if p.sent >= p.bytes.len() {
                let n = p.replaces;
                self.pending = None;
                return Poll::Ready(Ok(n));
            }
            match self.sock.poll_write_raw(cx, &p.bytes[p.sent..]) {
                Poll::Ready(Ok(0)) => {
                    self.pending = None;
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => p.sent += n,
                Poll::Ready(Err(e)) => {
                    self.pending = None;
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let sock = &self.sock;
        loop {
            ready!(sock.tcp.poll_read_ready(cx))?;
            match sock.tcp.try_read_buf(buf) {
                Ok(n) => {
                    if n > 0 {
                        sock.touch();
                        sock.heard.store(true, Ordering::Relaxed);
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.sock.poll_probe(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                self.sock.wrote(&Poll::Pending, buf);
                return Poll::Pending;
            }
        }
        if self.pending.is_none()
            && let Some((bytes, replaces)) = automatic::replacement(buf)
        {
            self.pending = Some(Replacing {
                bytes,
                sent: 0,
                replaces,
            });
        }
        let r = if self.pending.is_some() {
            self.send_replacement(cx)
        } else {
            self.sock.poll_write_raw(cx, buf)
        };
        self.sock.wrote(&r, buf);
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // A response head that may be hyper's own refusal goes through `poll_write`, alone.
        let first = bufs.iter().find(|b| !b.is_empty());
        if let Some(head) = first
            && (self.pending.is_some() || head.starts_with(b"HTTP/1.1 4"))
        {
            return self.poll_write(cx, head);
        }
        let sock = &self.sock;
        let r = match sock.poll_probe(cx) {
            Poll::Ready(Ok(())) => sock.poll_write_vectored_raw(cx, bufs),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        };
        sock.wrote(&r, bufs.first().map_or(&[][..], |b| &b[..]));
        r
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sock.poll_probe(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.sock.poll_probe(cx))?;
        Poll::Ready(socket2::SockRef::from(&self.sock.tcp).shutdown(std::net::Shutdown::Write))
    }
}
