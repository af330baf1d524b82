use ripcord_core::{Error, ErrorKind, Fault, TimeoutPhase};

use super::TransportError;

/// Where a transport error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Connecting, sending, waiting for headers.
    Send,
    /// Reading a body.
    Body,
    /// Reading a stream after it started.
    Stream,
}

/// Maps a client failure to a ripcord error: connect timeouts, refused/reset connections,
/// broken bodies. URLs are left out (keys never live in URLs here, but nothing else needs it).
pub(crate) fn transport_error(e: TransportError, stage: Stage) -> Error {
    if let Some(why) = local_exhaustion(&e) {
        return match e {
            TransportError::Send(e) => {
                out_of_local_resources(why, &chain(&e), stage).with_source(e)
            }
            TransportError::Body(e) => {
                out_of_local_resources(why, &chain(&e), stage).with_source(e)
            }
            #[cfg(feature = "reqwest")]
            TransportError::Reqwest(e) => {
                let e = e.without_url();
                out_of_local_resources(why, &chain(&e), stage).with_source(e)
            }
        };
    }
    match e {
        TransportError::Send(e) => {
            let detail = chain(&e);
            let err = if e.is_connect() && io_kind(&e) == Some(std::io::ErrorKind::TimedOut) {
                connect_timeout(&detail)
            } else if e.is_connect() {
                cannot_connect(&detail)
            } else {
                connection_failed(stage, &detail)
            };
            err.with_source(e)
        }
        TransportError::Body(e) => {
            let detail = chain(&e);
            let err = if stage != Stage::Send && !has_io_error(&e) {
                // No transport failure underneath: the body ended before its declared length
                // or chunked terminator, or broke its framing — a truncated answer.
                truncated(&detail)
            } else {
                connection_failed(stage, &detail)
            };
            err.with_source(e)
        }
        #[cfg(feature = "reqwest")]
        TransportError::Reqwest(e) => {
            let e = e.without_url();
            let detail = chain(&e);
            let err = if e.is_connect() && e.is_timeout() {
                connect_timeout(&detail)
            } else if e.is_connect() {
                cannot_connect(&detail)
            } else if e.is_timeout() {
                Error::timeout(
                    TimeoutPhase::FirstToken,
                    format!("the HTTP client timed out: {detail}"),
                )
            } else if stage != Stage::Send && !has_io_error(&e) && (e.is_body() || e.is_decode()) {
                // We never ask reqwest to decode anything, so a body "decode" error is a body
                // that ended early without a transport failure: a truncated answer.
                truncated(&detail)
            } else {
                connection_failed(stage, &detail)
            };
            err.with_source(e)
        }
    }
}

/// What this process ran out of, when a transport failure is the gateway's own resource limit
/// rather than anything the vendor did: out of file descriptors (`EMFILE`, `ENFILE`), of
/// memory or socket buffers (`ENOMEM`, `ENOBUFS`), or of local ports (`EADDRNOTAVAIL`).
fn local_exhaustion(e: &TransportError) -> Option<&'static str> {
    let e: &(dyn std::error::Error + 'static) = match e {
        TransportError::Send(e) => e,
        TransportError::Body(e) => e,
        #[cfg(feature = "reqwest")]
        TransportError::Reqwest(e) => e,
    };
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && let Some(why) = exhausted_os_resource(io)
        {
            return Some(why);
        }
        src = s.source();
    }
    None
}

/// The local resource an I/O error says this process ran out of, if it says so.
pub(crate) fn exhausted_os_resource(io: &std::io::Error) -> Option<&'static str> {
    match io.kind() {
        std::io::ErrorKind::OutOfMemory => return Some("memory"),
        std::io::ErrorKind::AddrNotAvailable => return Some("local ports"),
        _ => {}
    }
    let code = io.raw_os_error()?;
    if os::FILE_DESCRIPTORS.contains(&code) {
        Some("file descriptors")
    } else if os::MEMORY.contains(&code) {
        Some("memory")
    } else if os::PORTS.contains(&code) {
        Some("local ports")
    } else {
        None
    }
}

/// The OS error numbers of resource exhaustion (std has no stable `ErrorKind` for `EMFILE`).
#[cfg(unix)]
mod os {
    /// `EMFILE` (this process) and `ENFILE` (the system): the same numbers on Linux, the BSDs
    /// and macOS.
    pub(super) const FILE_DESCRIPTORS: &[i32] = &[24, 23];
    /// `ENOMEM`, and `ENOBUFS` (105 on Linux, 55 on the BSDs and macOS).
    #[cfg(target_os = "linux")]
    pub(super) const MEMORY: &[i32] = &[12, 105];
    #[cfg(not(target_os = "linux"))]
    pub(super) const MEMORY: &[i32] = &[12, 55];
    /// `EADDRNOTAVAIL` (99 on Linux, 49 on the BSDs and macOS).
    #[cfg(target_os = "linux")]
    pub(super) const PORTS: &[i32] = &[99];
    #[cfg(not(target_os = "linux"))]
    pub(super) const PORTS: &[i32] = &[49];
}

/// Winsock's numbers: `WSAEMFILE`, `WSAENOBUFS`, `WSAEADDRNOTAVAIL`.
#[cfg(windows)]
mod os {
    pub(super) const FILE_DESCRIPTORS: &[i32] = &[10024];
    pub(super) const MEMORY: &[i32] = &[10055, 8];
    pub(super) const PORTS: &[i32] = &[10049];
}

#[cfg(not(any(unix, windows)))]
mod os {
    pub(super) const FILE_DESCRIPTORS: &[i32] = &[];
    pub(super) const MEMORY: &[i32] = &[];
    pub(super) const PORTS: &[i32] = &[];
}

/// The gateway ran out of one of its own resources: a local refusal, never the vendor's fault
/// (no breaker, health record or shared state counts it). Before a response arrived nothing
/// reached the vendor; a body cut by it may have been processed.
fn out_of_local_resources(what: &str, detail: &str, stage: Stage) -> Error {
    let e = Error::new(
        ErrorKind::Overloaded,
        format!("this process ran out of {what} (a local limit, not the vendor): {detail}"),
    )
    .with_fault(Fault::Local)
    .with_retry_after(std::time::Duration::from_secs(1));
    if stage == Stage::Send {
        e.with_maybe_processed(false)
    } else {
        e.with_request_delivered()
    }
}

fn connect_timeout(detail: &str) -> Error {
    Error::timeout(
        TimeoutPhase::Connect,
        format!("connecting to the vendor timed out: {detail}"),
    )
}

/// A connection that was never made: nothing was sent, so the vendor cannot have processed it.
fn cannot_connect(detail: &str) -> Error {
    Error::new(
        ErrorKind::Network,
        format!("cannot connect to the vendor: {detail}"),
    )
    .with_maybe_processed(false)
}

/// A body that stopped before its declared length or its chunked terminator. The connection
/// failed, not the vendor's grammar, so it is a `Network` error — and the request had reached
/// the vendor, which may have processed it.
fn truncated(detail: &str) -> Error {
    Error::new(
        ErrorKind::Network,
        format!("response truncated: the connection closed before the end of the body: {detail}"),
    )
    .with_request_delivered()
}

fn connection_failed(stage: Stage, detail: &str) -> Error {
    let what = match stage {
        Stage::Send => "the connection failed before a response arrived",
        Stage::Body => "the connection failed while reading the response",
        Stage::Stream => "the connection failed mid-stream",
    };
    let e = Error::new(ErrorKind::Network, format!("{what}: {detail}"));
    // Once a response is being read the request has reached the vendor.
    if stage == Stage::Send {
        e
    } else {
        e.with_request_delivered()
    }
}

/// The kind of the first I/O error among the causes, if any.
fn io_kind(e: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        src = s.source();
    }
    None
}

/// True when an I/O failure (reset, broken pipe — not a plain early end of file) is among the
/// causes: a transport failure rather than a truncated answer.
fn has_io_error(e: &(dyn std::error::Error + 'static)) -> bool {
    io_kind(e).is_some_and(|k| k != std::io::ErrorKind::UnexpectedEof)
}

/// The error and its sources as one line ("a: b: c"), without repeats.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

/// A short, single-line excerpt of a non-JSON body for an error message.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(120);
    let mut last_space = true;
    for c in text.chars() {
        let c = if c.is_whitespace() { ' ' } else { c };
        if c == ' ' && last_space {
            continue;
        }
        last_space = c == ' ';
        out.push(c);
        if out.len() >= 120 {
            out.push('…');
            break;
        }
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_ports_or_memory_is_local() {
        let emfile = std::io::Error::from_raw_os_error(os::FILE_DESCRIPTORS[0]);
        assert_eq!(exhausted_os_resource(&emfile), Some("file descriptors"));
        let ports = std::io::Error::from(std::io::ErrorKind::AddrNotAvailable);
        assert_eq!(exhausted_os_resource(&ports), Some("local ports"));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(exhausted_os_resource(&refused), None);
        let e = out_of_local_resources("file descriptors", "tcp open error", Stage::Send);
        assert_eq!(e.fault(), Fault::Local);
        assert!(!e.counts_against_link());
        assert!(!e.maybe_processed());
        assert!(e.to_string().contains("not the vendor"));
    }

    #[test]
    fn excerpts_are_short_and_single_line() {
        let e = excerpt(b"<html>\n  <body>   502 Bad Gateway </body>\n</html>");
        assert_eq!(e, "<html> <body> 502 Bad Gateway </body> </html>");
        assert!(excerpt(&[b'x'; 1000]).chars().count() <= 121);
    }
}
