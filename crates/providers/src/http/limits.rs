use std::time::Duration;

use ripcord_core::{Context, Error, ErrorKind, Result, TimeoutPhase};
use tokio::time::Instant;

/// Time limits of a vendor call, by phase.
///
/// The fourth limit, the total, is the [`Context`] deadline of each call.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_providers::Timeouts;
/// let t = Timeouts::default()
///     .with_connect(Duration::from_secs(3))
///     .with_first_token(Duration::from_secs(20))
///     .with_stream_idle(Duration::from_secs(10));
/// assert_eq!(t.connect, Duration::from_secs(3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// Establishing the TCP (and TLS) connection. Default 5 s.
    pub connect: Duration,
    /// A non-streamed call: from sending the request to the response headers and the body
    /// (which vendors only send when the whole answer is ready). Default 30 s. A vendor that
    /// sends no response byte at all within it times out in [`TimeoutPhase::FirstByte`]; one
    /// that sent its headers but not the answer, in [`TimeoutPhase::FirstToken`].
    pub first_token: Duration,
    /// A stream: from sending the request to the response headers *and* the first answer
    /// event. Default 10 s: a stream's first token comes long before a whole answer would
    /// (see `docs/timeouts.md`).
    pub stream_first_token: Duration,
    /// The longest silence between two pieces of a stream (or body) after the first — any
    /// bytes count, keep-alive comments and pings included. Default 5 s.
    pub stream_idle: Duration,
    /// How many stream events that cannot be parsed one stream may skip (each is logged and
    /// counted) before the next one fails it as an invalid response. Default 3; 0 fails the
    /// stream at the first.
    pub max_skipped_events: u32,
}

/// The default limit of a non-streamed call (to its whole answer).
pub const DEFAULT_FIRST_TOKEN: Duration = Duration::from_secs(30);

/// The default limit to a stream's first answer event.
pub const DEFAULT_STREAM_FIRST_TOKEN: Duration = Duration::from_secs(10);

/// The default longest silence within a stream.
pub const DEFAULT_STREAM_IDLE: Duration = Duration::from_secs(5);

/// The default number of unparseable stream events skipped per stream.
pub const DEFAULT_MAX_SKIPPED_EVENTS: u32 = 3;

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            first_token: DEFAULT_FIRST_TOKEN,
            stream_first_token: DEFAULT_STREAM_FIRST_TOKEN,
            stream_idle: DEFAULT_STREAM_IDLE,
            max_skipped_events: DEFAULT_MAX_SKIPPED_EVENTS,
        }
    }
}

impl Timeouts {
    ripcord_core::setters! {
        /// Sets the connect limit.
        with_connect(d: Duration) => connect = d;
    }

    /// Sets the first-token limit of both modes: a non-streamed call's and a stream's.
    pub fn with_first_token(mut self, d: Duration) -> Self {
        self.first_token = d;
        self.stream_first_token = d;
        self
    }

    ripcord_core::setters! {
        /// Sets a stream's first-token limit only (after [`Timeouts::with_first_token`], which
        /// sets both).
        with_stream_first_token(d: Duration) => stream_first_token = d;
        /// Sets the stream-idle limit.
        with_stream_idle(d: Duration) => stream_idle = d;
        /// Sets how many unparseable stream events one stream may skip.
        with_max_skipped_events(n: u32) => max_skipped_events = n;
    }

    pub(crate) fn validate(&self, what: &str) -> Result<()> {
        for (name, d) in [
            ("connect", self.connect),
            ("first_token", self.first_token),
            ("stream_first_token", self.stream_first_token),
            ("stream_idle", self.stream_idle),
        ] {
            if d.is_zero() {
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    format!("{what}: timeouts.{name} must be greater than zero"),
                ));
            }
        }
        Ok(())
    }
}

/// Which limit a wait runs under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    pub(crate) at: Instant,
    pub(crate) phase: TimeoutPhase,
    pub(crate) after: Duration,
}

impl Limit {
    /// The first-token limit of a call started at `started`: a stream's, or a non-streamed
    /// call's.
    pub(crate) fn first_token(started: Instant, t: &Timeouts, stream: bool) -> Limit {
        let after = if stream {
            t.stream_first_token
        } else {
            t.first_token
        };
        Limit {
            at: started + after,
            phase: TimeoutPhase::FirstToken,
            after,
        }
    }

    pub(crate) fn idle(t: &Timeouts) -> Limit {
        Limit {
            at: Instant::now() + t.stream_idle,
            phase: TimeoutPhase::StreamIdle,
            after: t.stream_idle,
        }
    }
}

/// Runs `fut` under a phase limit, the context's deadline and its cancellation.
pub(crate) async fn guard<T>(
    ctx: &Context,
    limit: Limit,
    fut: impl Future<Output = T>,
) -> Result<T> {
    guard_until(ctx, ctx.deadline(), limit, fut).await
}

/// As [`guard`], with `deadline` in place of the context's deadline (a stream after its first
/// content runs under the context's stream bound instead).
pub(crate) async fn guard_until<T>(
    ctx: &Context,
    deadline: Option<Instant>,
    limit: Limit,
    fut: impl Future<Output = T>,
) -> Result<T> {
    let (at, phase) = match deadline {
        Some(d) if d <= limit.at => (d, TimeoutPhase::Total),
        _ => (limit.at, limit.phase),
    };
    // The work is polled first: a piece that is already there (the body of a small answer
    // usually arrives with its headers) returns without registering a timer or a cancellation
    // waiter; both are registered only when the work has to wait.
    tokio::select! {
        biased;
        r = tokio::time::timeout_at(at, fut) => r.map_err(|_| match phase {
            TimeoutPhase::Total => Error::timeout(TimeoutPhase::Total, "the call's deadline passed while waiting for the vendor"),
            TimeoutPhase::FirstToken => Error::timeout(
                TimeoutPhase::FirstToken,
                format!("no answer from the vendor within the first-token limit of {:?}", limit.after),
            ),
            TimeoutPhase::FirstByte => Error::timeout(
                TimeoutPhase::FirstByte,
                format!("the vendor sent no response byte within the first-token limit of {:?}", limit.after),
            ),
            TimeoutPhase::StreamIdle => Error::timeout(
                TimeoutPhase::StreamIdle,
                format!("the vendor went silent for longer than the stream-idle limit of {:?}", limit.after),
            ),
            other => Error::timeout(other, "a time limit passed"),
        }),
        () = ctx.cancellation().cancelled() => Err(Error::cancelled()),
    }
}

/// Checks the context before a call starts.
pub(crate) fn precheck(ctx: &Context) -> Result<()> {
    if ctx.is_cancelled() {
        return Err(Error::cancelled());
    }
    if ctx.is_expired() {
        // Nothing was sent: the vendor neither processed it nor is to blame for it.
        return Err(Error::timeout(
            TimeoutPhase::Total,
            "the call's deadline had passed before the request was sent",
        )
        .with_maybe_processed(false)
        .with_fault(ripcord_core::Fault::Local));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_and_whole_answers_have_their_own_first_token_limits() {
        let d = Timeouts::default();
        assert_eq!(d.first_token, Duration::from_secs(30));
        assert_eq!(d.stream_first_token, Duration::from_secs(10));
        assert_eq!(d.stream_idle, Duration::from_secs(5));
        let now = Instant::now();
        assert_eq!(
            Limit::first_token(now, &d, true).after,
            d.stream_first_token
        );
        assert_eq!(Limit::first_token(now, &d, false).after, d.first_token);
        // One setting for both, or a stream's alone.
        let both = d.with_first_token(Duration::from_secs(20));
        assert_eq!(
            (both.first_token, both.stream_first_token),
            (Duration::from_secs(20), Duration::from_secs(20))
        );
        let streams = both.with_stream_first_token(Duration::from_secs(4));
        assert_eq!(
            (streams.first_token, streams.stream_first_token),
            (Duration::from_secs(20), Duration::from_secs(4))
        );
    }

    #[test]
    fn zero_timeouts_are_rejected() {
        let t = Timeouts::default().with_stream_idle(Duration::ZERO);
        let e = t.validate("openai").unwrap_err();
        assert!(e.message().contains("stream_idle"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn guard_reports_the_phase_that_fired() {
        let t = Timeouts::default().with_first_token(Duration::from_secs(5));
        // The error a guard over a future that never finishes ends with.
        async fn fired(ctx: &Context, limit: Limit) -> ripcord_core::Error {
            guard(ctx, limit, std::future::pending::<()>())
                .await
                .unwrap_err()
        }
        let e = fired(
            &Context::new(),
            Limit::first_token(Instant::now(), &t, false),
        )
        .await;
        assert_eq!(e.timeout_phase(), Some(TimeoutPhase::FirstToken));

        let ctx = Context::new().with_timeout(Duration::from_secs(1));
        let e = fired(&ctx, Limit::first_token(Instant::now(), &t, false)).await;
        assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Total));

        let ctx = Context::new();
        ctx.cancellation().cancel();
        let e = fired(&ctx, Limit::idle(&t)).await;
        assert_eq!(e.kind(), ErrorKind::Cancelled);
    }
}
