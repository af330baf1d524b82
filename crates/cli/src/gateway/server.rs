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
//! - a write timeout: a connection whose client has not taken a byte of its answer for
//!   `write_timeout` (a slow consumer: it stopped reading a stream, or reads too slowly for the
//!   socket's buffer to drain) is dropped. Dropping the answer cancels the upstream call or
//!   stream — a consumer that stopped reading is the caller's fault, never the vendor's — and
//!   releases its admission slot and its connection slot;
//! - an idle timeout: a connection with no bytes read or written for that long is shut down
//!   gracefully (a response in flight still finishes);
//! - a first-byte timeout: a new connection that sends nothing for `first_byte_timeout` is
//!   closed (a silent socket holds a slot for that long, not for the whole header timeout);
//! - a per-address cap: at most `max_connections_per_ip` connections from one client address;
//!   the next is closed as soon as it is accepted;
//! - a share for connections that have not sent a request yet: at most a quarter of
//!   `max_connections` (an unauthenticated client cannot hold what callers with keys need),
//!   and one address at most a quarter of that share (its further new connections are served
//!   in reserve, below); a connection whose request was refused for its key (401) is closed
//!   after the answer;
//! - a connection cap: at most `max_connections` are served at once. The loop keeps accepting
//!   beyond it (the listen backlog never fills with clients nobody will serve): up to
//!   `reserved_connections` more are served in *reserve*, where `/healthz` and `/readyz` answer
//!   as usual and everything else gets a 503 with `Retry-After` and `Connection: close`; past
//!   that, a connection is closed as soon as it is accepted;
//! - descriptor exhaustion handled as the gateway's own limit: an accept that fails for want of
//!   file descriptors pauses the loop briefly and logs one warning per few seconds (with the
//!   count of the ones not logged) instead of one line per failure;
//! - a drain deadline: on shutdown the listener closes, every connection is asked to finish its
//!   in-flight request and close, and whatever is still running when the grace period ends is
//!   cut. A stream still running then is told first ([`StreamCut`]): it ends with its door's
//!   error event (Chat's `error` chunk, Messages' `event: error`, Responses'
//!   `response.failed`), and the connections get [`CUT_FLUSH`] more to send it before they are
//!   dropped.
//!
//! Clients that half-close (shut down their sending side after the request) are answered, and
//! a client that closes or resets its socket while its request is served still cancels its
//! upstream call: the socket is watched for that while a request is in flight (see
//! [`super::socket`]).
//! hyper's own refusals of a request it cannot parse (431, 414, 400) get a JSON body like
//! every other error: the socket wrapper sends them in their place (see [`super::automatic`]).
//!
//! The body-read timeout and the checks made before a body is read live in the router's front
//! middleware ([`super::front`]), where the request is known.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Request, Version, header};
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::descriptors;
use super::errors::refusal;
use super::socket::{Guarded, Socket, Tracked, watch_peer};

/// How long streams cut at the end of the shutdown grace period have to send their error
/// event before their connections are dropped.
pub(crate) const CUT_FLUSH: Duration = Duration::from_millis(500);

/// Given to every request (as a request extension): turns `true` when the shutdown grace
/// period is over, so a stream still running ends now with its door's error event instead
/// of being dropped mid-event.
#[derive(Clone, Debug)]
pub(crate) struct StreamCut(pub(crate) watch::Receiver<bool>);

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
    /// Longest wait for the first byte of a new connection.
    pub first_byte_timeout: Duration,
    /// Most connections open at once from one client address.
    pub max_connections_per_ip: usize,
    /// Connections beyond `max_connections` served in reserve (health probes answered, the
    /// rest refused with a 503).
    pub reserved_connections: usize,
    /// A connection whose client takes no byte of its answer for this long is dropped.
    pub write_timeout: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits::from_settings(&crate::config::ServerSettings::default())
    }
}

impl ServeLimits {
    /// The limits `[server]` configures.
    pub fn from_settings(s: &crate::config::ServerSettings) -> Self {
        ServeLimits {
            header_timeout: s.header_timeout,
            idle_timeout: s.idle_timeout,
            max_connections: s.max_connections,
            shutdown_grace: s.shutdown_grace,
            first_byte_timeout: s.first_byte_timeout,
            max_connections_per_ip: s.max_connections_per_ip,
            reserved_connections: s.reserved_connections,
            write_timeout: s.write_timeout,
        }
    }

    /// These limits with `max_connections` lowered so that every connection served (its own
    /// socket and one to a vendor) and every one in reserve fits under a descriptor limit of
    /// `nofile`, with 64 descriptors left for everything else: the gateway sheds
    /// before it runs out. Returns the limits and whether the cap was lowered.
    pub fn fitted_to_descriptors(mut self, nofile: u64) -> (Self, bool) {
        let reserved = u64::try_from(self.reserved_connections).unwrap_or(u64::MAX);
        let room = nofile.saturating_sub(descriptors::BASE_RESERVE.saturating_add(reserved)) / 2;
        let fit = usize::try_from(room).unwrap_or(usize::MAX).max(1);
        if fit < self.max_connections {
            self.max_connections = fit;
            (self, true)
        } else {
            (self, false)
        }
    }

    fn max_unproven(&self) -> usize {
        (self.max_connections / 4).max(1)
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
    let reserve = Arc::new(Semaphore::new(limits.reserved_connections));
    let per_ip = Arc::new(PerIp::default());
    let unproven = Arc::new(AtomicUsize::new(0));
    let mut accept_log = RateLimitedLog::new(Duration::from_secs(5));
    let mut turned_away = RateLimitedLog::new(Duration::from_secs(5));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (cut_tx, cut_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Per-connection failures (the peer reset before accept, or out of file
                    // descriptors for a moment) must not stop the server. Out of descriptors,
                    // the connection stays in the backlog: pause rather than spin on it.
                    let exhausted = descriptors::is_exhausted(&e);
                    if let Some(skipped) = accept_log.ready() {
                        if exhausted {
                            tracing::warn!(target: "ripcord::gateway", error = %e, not_logged = skipped,
                                "accept failed: this process is out of file descriptors (a local limit); new connections wait");
                        } else {
                            tracing::warn!(target: "ripcord::gateway", error = %e, not_logged = skipped, "accept failed");
                        }
                    }
                    let pause = if exhausted { 50 } else { 10 };
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    continue;
                }
            },
        };
        // Reap finished connection tasks so the set does not grow.
        while conns.try_join_next().is_some() {}
        let Some(ip_slot) = per_ip.take(peer.ip(), limits.max_connections_per_ip) else {
            if let Some(skipped) = turned_away.ready() {
                tracing::warn!(target: "ripcord::gateway", not_logged = skipped,
                    max_connections_per_ip = limits.max_connections_per_ip,
                    "a client address is at its connection cap: closing its new connections");
            }
            drop(tcp);
            continue;
        };
        // One address holds at most a quarter of the share of connections without a request;
        // past it, its new connections are served in reserve (or closed when that is full).
        let mut fresh = Unproven::take(&per_ip, peer.ip(), (limits.max_unproven() / 4).max(1));
        let counted = fresh
            .as_mut()
            .is_some_and(|f| f.count_in(&unproven, limits.max_unproven()));
        let slot = if counted {
            Arc::clone(&slots).try_acquire_owned().ok()
        } else {
            None
        };
        let mode = match (fresh, slot) {
            (Some(fresh), Some(slot)) => Mode::Full { _slot: slot, fresh },
            (mut fresh, _) => {
                if let Some(f) = fresh.as_mut() {
                    f.uncount();
                }
                match Arc::clone(&reserve).try_acquire_owned() {
                    Ok(p) => Mode::Reserve { _slot: p, fresh },
                    Err(_) => {
                        if let Some(skipped) = turned_away.ready() {
                            tracing::warn!(target: "ripcord::gateway", not_logged = skipped,
                                max_connections = limits.max_connections,
                                "at the connection cap and its reserve: closing new connections");
                        }
                        drop(tcp);
                        continue;
                    }
                }
            }
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(target: "ripcord::gateway", error = %e, "could not set TCP_NODELAY on an accepted connection");
        }
        let app = app.clone();
        let stop = stop_rx.clone();
        let cut = StreamCut(cut_rx.clone());
        conns.spawn(async move {
            serve_connection(tcp, peer, app, limits, stop, mode, cut).await;
            drop(ip_slot);
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
        // Streams end with their door's error event, and have a moment to send it.
        let _ = cut_tx.send(true);
        let _ = tokio::time::timeout(CUT_FLUSH, async {
            while conns.join_next().await.is_some() {}
        })
        .await;
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    }
    Ok(())
}

/// How a connection is served.
enum Mode {
    /// In one of the `max_connections` slots; `fresh` holds its place among the connections
    /// that have not sent a request yet until the first one arrives.
    Full {
        _slot: OwnedSemaphorePermit,
        fresh: Unproven,
    },
    /// In reserve: health probes answered, everything else refused (one request, then close).
    Reserve {
        _slot: OwnedSemaphorePermit,
        fresh: Option<Unproven>,
    },
}

/// A place among the connections that have not sent a request yet — its address's, and
/// (for a connection in a slot) the gateway's; given back on the first request or when the
/// connection ends.
struct Unproven {
    table: Arc<PerIp>,
    ip: IpAddr,
    global: Option<Arc<AtomicUsize>>,
    held: AtomicBool,
}

impl Unproven {
    /// A place in `ip`'s count, if it holds fewer than `max`.
    fn take(table: &Arc<PerIp>, ip: IpAddr, max: usize) -> Option<Self> {
        table.claim(ip, max, Counts::fresh).then(|| Unproven {
            table: Arc::clone(table),
            ip,
            global: None,
            held: AtomicBool::new(true),
        })
    }

    /// Also takes a place in the gateway's count, if it holds fewer than `max`.
    fn count_in(&mut self, count: &Arc<AtomicUsize>, max: usize) -> bool {
        let took = count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok();
        if took {
            self.global = Some(Arc::clone(count));
        }
        took
    }

    /// Gives back the place in the gateway's count.
    fn uncount(&mut self) {
        if let Some(g) = self.global.take() {
            g.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn release(&self) {
        if self.held.swap(false, Ordering::AcqRel) {
            if let Some(g) = &self.global {
                g.fetch_sub(1, Ordering::AcqRel);
            }
            self.table.give_back(self.ip, Counts::fresh);
        }
    }
}

impl Drop for Unproven {
    fn drop(&mut self) {
        self.release();
    }
}

/// Connections per client address: open, and of those without a request yet.
#[derive(Default)]
struct PerIp {
    open: Mutex<HashMap<IpAddr, Counts>>,
}

#[derive(Default, Clone, Copy)]
struct Counts {
    open: usize,
    fresh: usize,
}

impl Counts {
    fn open(&mut self) -> &mut usize {
        &mut self.open
    }

    fn fresh(&mut self) -> &mut usize {
        &mut self.fresh
    }
}

/// One connection's place in its address's count.
struct IpSlot {
    table: Arc<PerIp>,
    ip: IpAddr,
}

impl PerIp {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Counts>> {
        match self.open.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Takes a place in the count `which` picks of `ip`'s, if it holds fewer than `max`.
    fn claim(&self, ip: IpAddr, max: usize, which: fn(&mut Counts) -> &mut usize) -> bool {
        let mut open = self.lock();
        let n = which(open.entry(ip).or_default());
        let took = *n < max;
        if took {
            *n += 1;
        }
        took
    }

    /// Gives back a place in the count `which` picks of `ip`'s; an address with no
    /// connections left is forgotten.
    fn give_back(&self, ip: IpAddr, which: fn(&mut Counts) -> &mut usize) {
        let mut open = self.lock();
        if let Some(c) = open.get_mut(&ip) {
            let n = which(c);
            *n = n.saturating_sub(1);
            if c.open == 0 && c.fresh == 0 {
                open.remove(&ip);
            }
        }
    }

    fn take(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<IpSlot> {
        self.claim(ip, max, Counts::open).then(|| IpSlot {
            table: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        self.table.give_back(self.ip, Counts::open);
    }
}

/// At most one line per `every`, counting the ones not written.
struct RateLimitedLog {
    every: Duration,
    last: Option<Instant>,
    skipped: u64,
}

impl RateLimitedLog {
    fn new(every: Duration) -> Self {
        RateLimitedLog {
            every,
            last: None,
            skipped: 0,
        }
    }

    /// `Some(lines not written since the last one)` when a line may be written now.
    fn ready(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < self.every)
        {
            self.skipped += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.skipped))
    }
}

/// Paths a connection in reserve still serves.
fn health_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// Serves one request of a connection: marks it as having sent a request, refuses what a
/// reserve connection does not serve, and closes a connection whose key was refused.
async fn serve_request(
    app: Router,
    req: Request<Incoming>,
    sock: Arc<Socket>,
    reserve: bool,
    fresh: Option<Arc<Unproven>>,
    cut: StreamCut,
) -> Result<Response, std::convert::Infallible> {
    // In flight from here until the answer's body is done (or dropped).
    let in_flight = sock.begin(req.version() >= Version::HTTP_11);
    let mut req = req;
    req.extensions_mut().insert(sock.peer_fin());
    let resp = answer(app, req, reserve, fresh, cut).await?;
    Ok(resp.map(|inner| {
        axum::body::Body::new(Guarded {
            inner,
            _in_flight: in_flight,
        })
    }))
}

async fn answer(
    mut app: Router,
    mut req: Request<Incoming>,
    reserve: bool,
    fresh: Option<Arc<Unproven>>,
    cut: StreamCut,
) -> Result<Response, std::convert::Infallible> {
    if let Some(f) = &fresh {
        f.release();
    }
    req.extensions_mut().insert(cut);
    if reserve && !health_path(req.uri().path()) {
        let mut resp = refusal(
            req.uri().path(),
            503,
            "server_overloaded",
            "The gateway is at its connection limit; please retry shortly.",
            None,
            Some(super::shed::SHED_RETRY_AFTER),
        );
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return Ok(resp);
    }
    let mut resp = tower_service::Service::call(&mut app, req).await?;
    if resp.status() == axum::http::StatusCode::UNAUTHORIZED {
        // A client without a valid key does not keep its connection.
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(resp)
}

async fn serve_connection(
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    app: Router,
    limits: ServeLimits,
    mut stop: watch::Receiver<bool>,
    mode: Mode,
    cut: StreamCut,
) {
    let sock = Socket::new(tcp);
    let started = sock.started();
    let io = TokioIo::new(Tracked::new(Arc::clone(&sock)));
    let (reserve, fresh, _slot) = match mode {
        Mode::Full { _slot, fresh } => (false, Some(Arc::new(fresh)), _slot),
        Mode::Reserve { _slot, fresh } => (true, fresh.map(Arc::new), _slot),
    };
    let service_sock = Arc::clone(&sock);
    let service = hyper::service::service_fn(move |req| {
        serve_request(
            app.clone(),
            req,
            Arc::clone(&service_sock),
            reserve,
            fresh.clone(),
            cut.clone(),
        )
    });
    let header_timeout = if reserve {
        limits.header_timeout.min(limits.first_byte_timeout)
    } else {
        limits.header_timeout
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        // A client that shuts down its sending side after its request still gets the answer;
        // one that closes or resets its socket is found by `watch_peer` instead.
        .half_close(true)
        .keep_alive(!reserve);
    let conn = builder.serve_connection(io, service).with_upgrades();
    let mut conn = std::pin::pin!(conn);
    let mut left = std::pin::pin!(watch_peer(&sock));
    let mut closing = false;
    let first_byte_by = started + limits.first_byte_timeout;
    // How often a blocked write is looked at: a stalled client is dropped between one and
    // one and a half write timeouts after its last byte taken.
    let write_check = (limits.write_timeout / 2).max(Duration::from_millis(10));
    loop {
        let last = sock.last_activity();
        let idle_at = started + last + limits.idle_timeout;
        let silent = !sock.heard();
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(target: "ripcord::gateway", error = %e, "connection closed with an error");
                }
                return;
            }
            () = left.as_mut() => {
                // Dropping the connection drops the request's handler and its answer: the
                // upstream call or stream is cancelled.
                tracing::debug!(target: "ripcord::gateway", "the client left while its request was served: connection dropped");
                return;
            }
            changed = stop.changed(), if !closing => {
                if changed.is_err() || *stop.borrow() {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = tokio::time::sleep_until(first_byte_by), if silent => {
                if !sock.heard() {
                    // Not a byte since the connection opened: close it without an answer.
                    return;
                }
            }
            () = tokio::time::sleep(write_check) => {
                if let Some(stalled) = sock.stalled()
                    && stalled >= limits.write_timeout
                {
                    // The client's address says which connection it was (a caller's own
                    // fault, so the operator can tell whom to ask).
                    tracing::info!(
                        target: "ripcord::gateway",
                        stalled_ms = u64::try_from(stalled.as_millis()).unwrap_or(u64::MAX),
                        peer = %peer,
                        "a client stopped taking its answer: connection dropped (slow consumer)"
                    );
                    return;
                }
            }
            () = tokio::time::sleep_until(idle_at), if !closing => {
                if sock.last_activity() == last {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}
