use std::sync::atomic::{AtomicUsize, Ordering};

use ::http::StatusCode;
use ::http::header::{CONTENT_TYPE, HeaderMap};
use bytes::{Bytes, BytesMut};
use futures::Stream;
#[cfg(feature = "reqwest")]
use futures::StreamExt;
use http_body_util::BodyExt;
use ripcord_core::{Context, Error, ErrorKind, Fault, Result};

use super::{Limit, Stage, Timeouts, guard, transport_error};

/// A response whose headers have arrived; its body is read piece by piece.
pub(crate) struct Response {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: ResponseBody,
}

pub(super) enum ResponseBody {
    Hyper(hyper::body::Incoming),
    #[cfg(feature = "reqwest")]
    Reqwest(reqwest::Response),
}

/// A body read as a stream of pieces.
pub(crate) type BodyStream =
    std::pin::Pin<Box<dyn Stream<Item = std::result::Result<Bytes, TransportError>> + Send>>;

impl Response {
    /// The status.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// The next piece of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self) -> std::result::Result<Option<Bytes>, TransportError> {
        match &mut self.body {
            ResponseBody::Hyper(body) => loop {
                match body.frame().await {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(TransportError::Body(e)),
                    // Trailers and empty frames carry no body bytes.
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) if !data.is_empty() => return Ok(Some(data)),
                        _ => {}
                    },
                }
            },
            #[cfg(feature = "reqwest")]
            ResponseBody::Reqwest(resp) => resp.chunk().await.map_err(TransportError::Reqwest),
        }
    }

    /// The rest of the body as a stream of pieces.
    pub(crate) fn into_stream(self) -> BodyStream {
        match self.body {
            #[cfg(feature = "reqwest")]
            ResponseBody::Reqwest(resp) => Box::pin(
                resp.bytes_stream()
                    .map(|r| r.map_err(TransportError::Reqwest)),
            ),
            ResponseBody::Hyper(_) => Box::pin(futures::stream::unfold(self, |mut r| async {
                match r.chunk().await {
                    Ok(Some(b)) => Some((Ok(b), r)),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), r)),
                }
            })),
        }
    }
}

/// A failure of the HTTP client.
#[derive(Debug)]
pub(crate) enum TransportError {
    /// Sending the request or waiting for the response headers (hyper).
    Send(hyper_util::client::legacy::Error),
    /// Reading the body (hyper).
    Body(hyper::Error),
    /// Anything, through reqwest.
    #[cfg(feature = "reqwest")]
    Reqwest(reqwest::Error),
}

/// True when a response declares a JSON body (a vendor answering a stream request with a JSON
/// error object and status 200).
pub(crate) fn is_json(resp: &Response) -> bool {
    resp.headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// The default bound on bytes of whole (non-streamed) vendor answers being read at once,
/// across every call of the process.
pub const DEFAULT_RESPONSE_BUFFER_LIMIT: usize = 512 * 1024 * 1024;

static BUFFER_LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_RESPONSE_BUFFER_LIMIT);
static BUFFERED: AtomicUsize = AtomicUsize::new(0);

/// Sets the bound on bytes of whole vendor answers being read at once across the process
/// (default [`DEFAULT_RESPONSE_BUFFER_LIMIT`]). Each answer has its own bound too (256 MiB); this
/// one keeps many large answers at once from taking the process's memory: an answer that would
/// pass it fails as a local overload (`Overloaded`, charged to this process, never the
/// vendor's breaker), and the chain falls back.
pub fn set_response_buffer_limit(bytes: usize) {
    BUFFER_LIMIT.store(bytes.max(1), Ordering::Relaxed);
}

/// Bytes of whole vendor answers being read now, across the process.
pub fn response_bytes_buffered() -> usize {
    BUFFERED.load(Ordering::Relaxed)
}

/// One body's share of the process-wide buffer bound, given back when the read ends.
struct BufferShare {
    held: usize,
}

impl BufferShare {
    fn grow(&mut self, n: usize) -> bool {
        let limit = BUFFER_LIMIT.load(Ordering::Relaxed);
        let took = BUFFERED
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                b.checked_add(n).filter(|t| *t <= limit)
            })
            .is_ok();
        if took {
            self.held += n;
        }
        took
    }
}

impl Drop for BufferShare {
    fn drop(&mut self) {
        BUFFERED.fetch_sub(self.held, Ordering::AcqRel);
    }
}

/// Reads a whole (non-streaming) body: the first bytes under `first`, then each further piece
/// under the idle limit. More than `max` bytes is an `InvalidResponse` (`truncate = false`) or
/// cut off (`truncate = true`, for error bodies, which we only need the start of).
pub(crate) async fn read_body(
    ctx: &Context,
    timeouts: &Timeouts,
    first: Limit,
    resp: &mut Response,
    max: usize,
    truncate: bool,
) -> Result<Bytes> {
    // A body that arrives in one piece (most answers) is returned as that piece, uncopied;
    // pieces are gathered only from the second on.
    let mut whole: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    let mut limit = first;
    let mut share = BufferShare { held: 0 };
    loop {
        let chunk = guard(ctx, limit, resp.chunk())
            .await?
            .map_err(|e| transport_error(e, Stage::Body))?;
        let Some(chunk) = chunk else { break };
        if !share.grow(chunk.len()) {
            let limit = BUFFER_LIMIT.load(Ordering::Relaxed);
            return Err(Error::new(
                ErrorKind::Overloaded,
                format!(
                    "this process is reading {limit} bytes of vendor answers at once, its bound: \
                     this answer was dropped (a local limit, not the vendor)"
                ),
            )
            .with_fault(Fault::Local)
            .with_request_delivered()
            .with_retry_after(std::time::Duration::from_secs(1)));
        }
        if let Some(w) = whole.take() {
            buf.extend_from_slice(&w);
        }
        if buf.len() + chunk.len() > max {
            if truncate {
                let room = max - buf.len();
                buf.extend_from_slice(&chunk[..room]);
                break;
            }
            return Err(Error::new(
                ErrorKind::InvalidResponse,
                format!("the response body is larger than {max} bytes"),
            ));
        }
        if buf.is_empty() {
            whole = Some(chunk);
        } else {
            buf.extend_from_slice(&chunk);
        }
        limit = Limit::idle(timeouts);
    }
    Ok(whole.unwrap_or_else(|| buf.freeze()))
}
