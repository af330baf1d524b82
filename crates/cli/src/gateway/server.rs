//! The gateway's accept loop: what `axum::serve` does not do.
//!
//! `axum::serve` hands hyper no timer, so hyper's header-read timeout is silently off and a
//! client that sends half a header block holds its connection forever; it also has no
//! connection cap and no drain deadline. This loop serves the same router over hyper's HTTP/1
//! connection with:
//!
//! - `TCP_NODELAY` on every accepted socket (with Nagle on, a keep-alive client waits ~40 ms
//!   per response for a delayed ACK);
//! - a header-read timeout (hyper's, driven by a tokio timer): a connection whose header block
//!   is not complete in time is closed. hyper starts that timer whenever it waits for a head,
//!   so it also bounds the wait for the next request on a kept-alive connection;
//! - an idle timeout: a connection with no bytes read or written for that long is shut down
//!   gracefully (a response in flight still finishes);
//! - a connection cap: at most `max_connections` are served at once; the next accept waits for
//!   one to close, so the excess waits in the kernel's listen backlog instead of in memory;
//! - a drain deadline: on shutdown the listener closes, every connection is asked to finish its
//!   in-flight request and close, and whatever is still running when the grace period ends is
//!   cut.
//!
//! The body-read timeout and the checks made before a body is read live in the router's front
//! middleware ([`super::front`]), where the request is known.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The limits of the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct ServeLimits {
    /// Longest wait for a request's header block (and for the next request on a kept-alive
    /// connection).
    pub header_timeout: Duration,
    /// A connection with no traffic for this long is closed.
    pub idle_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
    /// On shutdown, how long in-flight requests may finish before they are cut.
    pub shutdown_grace: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        let s = crate::config::ServerSettings::default();
        ServeLimits {
            header_timeout: s.header_timeout,
            idle_timeout: s.idle_timeout,
            max_connections: s.max_connections,
            shutdown_grace: s.shutdown_grace,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains (see the module docs).
///
/// # Errors
///
/// I/O errors of the listener other than per-connection accept failures (which are logged and
/// skipped).
pub async fn serve_router(
    listener: TcpListener,
    app: Router,
    limits: ServeLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // Take a connection slot first: at the cap, the next client waits in the backlog.
        let permit = tokio::select! {
            () = &mut shutdown => break,
            p = Arc::clone(&slots).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (tcp, _peer) = tokio::select! {
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Per-connection failures (e.g. the peer reset before accept, or out of
                    // file descriptors for a moment) must not stop the server.
                    tracing::warn!(target: "ripcord::gateway", error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        // Reap finished connection tasks so the set does not grow.
        while conns.try_join_next().is_some() {}
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(target: "ripcord::gateway", error = %e, "could not set TCP_NODELAY on an accepted connection");
        }
        let app = app.clone();
        let stop = stop_rx.clone();
        conns.spawn(async move {
            serve_connection(tcp, app, limits, stop).await;
            drop(permit);
        });
    }
    drop(listener);
    // Drain: every connection finishes its in-flight request and closes; at the deadline the
    // rest are cut.
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(limits.shutdown_grace, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            target: "ripcord::gateway",
            cut = conns.len(),
            grace_ms = u64::try_from(limits.shutdown_grace.as_millis()).unwrap_or(u64::MAX),
            "shutdown grace period over: cutting the requests still in flight"
        );
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    }
    Ok(())
}

async fn serve_connection(
    tcp: TcpStream,
    app: Router,
    limits: ServeLimits,
    mut stop: watch::Receiver<bool>,
) {
    let started = Instant::now();
    let activity = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(Tracked {
        inner: tcp,
        started,
        last: Arc::clone(&activity),
    });
    let service = TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service).with_upgrades();
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    loop {
        let last = Duration::from_millis(activity.load(Ordering::Relaxed));
        let idle_at = started + last + limits.idle_timeout;
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(target: "ripcord::gateway", error = %e, "connection closed with an error");
                }
                return;
            }
            changed = stop.changed(), if !closing => {
                if changed.is_err() || *stop.borrow() {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = tokio::time::sleep_until(idle_at), if !closing => {
                let now_last = Duration::from_millis(activity.load(Ordering::Relaxed));
                if now_last == last {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// A socket that records when it last moved a byte (ms since the connection started).
struct Tracked {
    inner: TcpStream,
    started: Instant,
    last: Arc<AtomicU64>,
}

impl Tracked {
    fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
