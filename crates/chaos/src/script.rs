//! What the fake vendor does with each request: a [`Behavior`], chosen per request by a [`Script`].
//!
//! A script is plain data (`Clone + Debug`), so a scenario can be built once and handed to many
//! servers. When it is installed with [`FakeVendor::set_script`](crate::FakeVendor::set_script) it
//! is compiled into a private *plan* that carries the mutable state — the sequence position, the
//! seeded random generator, the script clock — so installing a script always restarts it. The
//! plan holds every behaviour behind an `Arc`: choosing one per request costs a lock and a
//! reference-count increment, never a deep clone (the server doubles as a benchmark upstream).

use std::sync::Arc;
use std::time::Duration;

use crate::reply::Reply;
use crate::vendor_error::VendorError;
use ripcord_core::rng::SplitMix64;

/// What to do with one request to a model endpoint.
///
/// "Chunks" below are the content events of a streamed answer: text deltas and tool-call
/// deltas. The events before the first chunk (OpenAI's role chunk; Anthropic's
/// `message_start`, `content_block_start` and `ping`) are the *preamble*; the events after the
/// last chunk (finish reason, usage, `[DONE]` / `message_delta`, `message_stop`) are the *tail*.
/// An `after_chunks` larger than the answer's chunk count acts as "after the last chunk".
///
/// Behaviours that describe a stream also apply to plain JSON requests, as documented on each
/// variant, so one script can drive streaming and non-streaming clients.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_chaos::{Behavior, VendorError};
/// let brownout = vec![
///     Behavior::Error(VendorError::ServerError),
///     Behavior::SlowFirstToken(Duration::from_millis(200)),
///     Behavior::Ok,
/// ];
/// assert_eq!(brownout.len(), 3);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Behavior {
    /// Success with the server's default [`Reply`]: JSON, or SSE when the request body has
    /// `"stream": true`.
    Ok,
    /// Success with this reply.
    Reply(Reply),
    /// A streamed success with these delays: headers at once, the first event after
    /// `first_token`, each later chunk `between` after the previous one. A non-streaming
    /// request gets the whole JSON response after `first_token`.
    Stream {
        /// Delay between the response headers and the first SSE event.
        first_token: Duration,
        /// Delay before each chunk after the first.
        between: Duration,
    },
    /// Any status with this raw body and these extra headers (no `content-type` is added; put
    /// one in `headers` if the body needs it).
    Status {
        /// The HTTP status code.
        status: u16,
        /// The raw body.
        body: String,
        /// Extra response headers.
        headers: Vec<(String, String)>,
    },
    /// Read the request and never answer. The connection stays open until the client gives up
    /// or the server is dropped.
    HangBeforeHeaders,
    /// Headers at once, the first event after the delay, the rest without delay. A
    /// non-streaming request gets the headers at once and the body after the delay.
    SlowFirstToken(Duration),
    /// Send the preamble and `after_chunks` chunks, then stall with the connection open until
    /// the client gives up. A non-streaming request gets the headers and half of the body.
    StallMidStream {
        /// Chunks sent before the stall.
        after_chunks: usize,
    },
    /// Read the request, then reset the connection (TCP RST) without a response.
    ResetBeforeResponse,
    /// Send the preamble and `after_chunks` chunks, then reset the connection. A non-streaming
    /// request gets the headers and half of the body before the reset.
    ResetMidStream {
        /// Chunks sent before the reset.
        after_chunks: usize,
    },
    /// A 200 whose body is not valid JSON (the first half of the real body). A stream sends its
    /// first chunk as a `data:` line with broken JSON and the rest of the stream as usual.
    MalformedJson,
    /// Send the preamble and `after_chunks` chunks, then end the response cleanly (chunked
    /// terminator) without the tail: no finish reason, no `[DONE]`, no `message_stop`. A
    /// non-streaming request gets a `content-length` for the whole body but only half of it
    /// before the server closes the connection.
    TruncatedStream {
        /// Chunks sent before the clean end.
        after_chunks: usize,
    },
    /// A complete stream — content, finish reason (`finish_reason`, `message_delta` with
    /// `stop_reason`) and usage — that ends cleanly without its terminator (`data: [DONE]`,
    /// `message_stop`). A non-streaming request gets the whole answer.
    StopWithoutDone,
    /// A complete stream with `count` unparseable `data:` events inserted after its first
    /// content event; every real event is still sent. A non-streaming request gets the whole
    /// answer.
    MalformedEvents {
        /// How many broken events.
        count: usize,
    },
    /// A stream that carries the vendor's in-band error event after `after_chunks` chunks
    /// (`0`: the error is the very first event, before any preamble), then ends cleanly. A
    /// non-streaming request gets a 200 whose body is the vendor's error object.
    InBandError {
        /// Chunks sent before the error event.
        after_chunks: usize,
        /// The error to send.
        error: VendorError,
    },
    /// The vendor-accurate error status, body and headers for this wire.
    Error(VendorError),
    /// On the OpenAI Responses wire: a stream that ends with `response.failed` (its response's
    /// `error` carrying the error's code) after `after_chunks` chunks, and for a non-streaming
    /// request a 200 whose Response has `status: "failed"` — how OpenAI reports a generation
    /// that failed. On every other route, the same as [`Behavior::InBandError`].
    ResponseFailed {
        /// Chunks sent before the failure.
        after_chunks: usize,
        /// The error to carry.
        error: VendorError,
    },
    /// Exactly these bytes, for streaming and non-streaming requests alike: a recorded vendor
    /// answer replayed byte for byte (see [`RawResponse`]).
    Raw(RawResponse),
}

/// A recorded vendor answer: status, headers and body bytes as the vendor sent them, and how
/// the body ends on the wire.
///
/// # Examples
///
/// ```
/// use ripcord_chaos::{Behavior, RawEnd, RawResponse};
/// let cut = Behavior::Raw(RawResponse::new(
///     200,
///     vec![("content-type".into(), "text/event-stream".into())],
///     b": keep-alive\n\n: keep-alive\n\n".to_vec(),
///     RawEnd::ChunkedCut,
/// ));
/// assert!(matches!(cut, Behavior::Raw(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawResponse {
    /// The HTTP status.
    pub status: u16,
    /// Response headers, sent in this order (no `content-type` is added).
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
    /// How the body ends.
    pub end: RawEnd,
}

impl RawResponse {
    /// A recorded answer: status, headers in order, body bytes, and how the body ends.
    pub fn new(
        status: u16,
        headers: Vec<(String, String)>,
        body: impl Into<Vec<u8>>,
        end: RawEnd,
    ) -> Self {
        RawResponse {
            status,
            headers,
            body: body.into(),
            end,
        }
    }
}

/// How a [`RawResponse`] body ends on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RawEnd {
    /// `content-length` of the body, then the whole body.
    #[default]
    Length,
    /// `transfer-encoding: chunked`, the body as one chunk, then the terminator.
    Chunked,
    /// A `content-length` 64 bytes longer than the body: the body, then the connection closes
    /// (a body cut before its declared length).
    ShortOfLength,
    /// Chunked, the body as one chunk, then the connection closes without the terminator (a
    /// stream whose socket closed).
    ChunkedCut,
}

/// How the behaviour is chosen for each request.
///
/// Time in a script is measured from the moment the script was installed (`start` or
/// `set_script`); inside a [`Script::Timeline`] each segment's clock starts at its offset.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_chaos::{Behavior, Script, VendorError};
/// // An outage that recovers after two seconds, with 30% errors for the next three.
/// let scenario = Script::Timeline(vec![
///     (Duration::ZERO, Script::Always(Behavior::Error(VendorError::Overloaded))),
///     (Duration::from_secs(2), Script::Probability {
///         p: 0.3,
///         fault: Behavior::Error(VendorError::ServerError),
///         otherwise: Behavior::Ok,
///         seed: 7,
///     }),
///     (Duration::from_secs(5), Script::Always(Behavior::Ok)),
/// ]);
/// assert!(matches!(scenario, Script::Timeline(ref s) if s.len() == 3));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Script {
    /// The same behaviour for every request.
    Always(Behavior),
    /// One behaviour per request in order; the last one repeats. An empty sequence is
    /// [`Behavior::Ok`].
    Sequence(Vec<Behavior>),
    /// `fault` with probability `p`, else `otherwise`, drawn from a generator seeded with
    /// `seed`: the same seed gives the same outcomes for the same request order. `p` is clamped
    /// to `0.0..=1.0`; NaN counts as `0.0`.
    Probability {
        /// Probability of the fault per request.
        p: f64,
        /// The behaviour when the draw falls under `p`.
        fault: Behavior,
        /// The behaviour otherwise.
        otherwise: Behavior,
        /// Seed of the generator.
        seed: u64,
    },
    /// `fault` for requests arriving in `from..until` (script time), else `otherwise`.
    Window {
        /// Start of the fault window (inclusive).
        from: Duration,
        /// End of the fault window (exclusive).
        until: Duration,
        /// The behaviour inside the window.
        fault: Behavior,
        /// The behaviour outside the window.
        otherwise: Behavior,
    },
    /// Piecewise scripts: from each offset on, that script applies (segments are sorted by
    /// offset; before the first offset the answer is [`Behavior::Ok`]). Each segment keeps its
    /// own state and measures its time from its offset.
    Timeline(Vec<(Duration, Script)>),
}

impl Default for Script {
    fn default() -> Self {
        Script::Always(Behavior::Ok)
    }
}

/// A compiled [`Script`] with its state. `None` from [`Plan::pick`] means [`Behavior::Ok`].
#[derive(Debug)]
pub(crate) enum Plan {
    Always(Arc<Behavior>),
    Sequence {
        steps: Vec<Arc<Behavior>>,
        next: usize,
    },
    Probability {
        p: f64,
        fault: Arc<Behavior>,
        otherwise: Arc<Behavior>,
        rng: SplitMix64,
    },
    Window {
        from: Duration,
        until: Duration,
        fault: Arc<Behavior>,
        otherwise: Arc<Behavior>,
    },
    Timeline(Vec<(Duration, Plan)>),
}

impl Plan {
    pub(crate) fn new(script: &Script) -> Plan {
        match script {
            Script::Always(b) => Plan::Always(Arc::new(b.clone())),
            Script::Sequence(steps) => Plan::Sequence {
                steps: steps.iter().cloned().map(Arc::new).collect(),
                next: 0,
            },
            Script::Probability {
                p,
                fault,
                otherwise,
                seed,
            } => Plan::Probability {
                p: if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) },
                fault: Arc::new(fault.clone()),
                otherwise: Arc::new(otherwise.clone()),
                rng: SplitMix64::seeded(*seed),
            },
            Script::Window {
                from,
                until,
                fault,
                otherwise,
            } => Plan::Window {
                from: *from,
                until: *until,
                fault: Arc::new(fault.clone()),
                otherwise: Arc::new(otherwise.clone()),
            },
            Script::Timeline(segments) => {
                let mut plans: Vec<(Duration, Plan)> =
                    segments.iter().map(|(at, s)| (*at, Plan::new(s))).collect();
                plans.sort_by_key(|(at, _)| *at);
                Plan::Timeline(plans)
            }
        }
    }

    /// Chooses the behaviour for one request arriving `elapsed` after the script started.
    pub(crate) fn pick(&mut self, elapsed: Duration) -> Option<Arc<Behavior>> {
        match self {
            Plan::Always(b) => Some(Arc::clone(b)),
            Plan::Sequence { steps, next } => {
                let step = steps.get(*next).or_else(|| steps.last()).map(Arc::clone);
                if *next < steps.len() {
                    *next += 1;
                }
                step
            }
            Plan::Probability {
                p,
                fault,
                otherwise,
                rng,
            } => {
                // `next_f64` is in [0, 1): p = 0 never faults, p = 1 always does.
                if rng.next_f64() < *p {
                    Some(Arc::clone(fault))
                } else {
                    Some(Arc::clone(otherwise))
                }
            }
            Plan::Window {
                from,
                until,
                fault,
                otherwise,
            } => {
                if elapsed >= *from && elapsed < *until {
                    Some(Arc::clone(fault))
                } else {
                    Some(Arc::clone(otherwise))
                }
            }
            Plan::Timeline(segments) => {
                let (at, plan) = segments.iter_mut().rev().find(|(at, _)| *at <= elapsed)?;
                let local = elapsed.saturating_sub(*at);
                plan.pick(local)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn is_ok(b: &Option<Arc<Behavior>>) -> bool {
        matches!(b.as_deref(), None | Some(Behavior::Ok))
    }

    #[test]
    fn sequence_advances_then_repeats_last() {
        let mut plan = Plan::new(&Script::Sequence(vec![
            Behavior::Error(VendorError::Overloaded),
            Behavior::HangBeforeHeaders,
            Behavior::Ok,
        ]));
        let picks: Vec<_> = (0..5).map(|_| plan.pick(ms(0))).collect();
        assert_eq!(
            picks[0].as_deref(),
            Some(&Behavior::Error(VendorError::Overloaded))
        );
        assert_eq!(picks[1].as_deref(), Some(&Behavior::HangBeforeHeaders));
        assert!(picks[2..].iter().all(is_ok));
    }

    #[test]
    fn empty_sequence_is_ok() {
        let mut plan = Plan::new(&Script::Sequence(vec![]));
        assert!(plan.pick(ms(0)).is_none());
    }

    #[test]
    fn probability_is_seeded_and_roughly_calibrated() {
        let script = Script::Probability {
            p: 0.3,
            fault: Behavior::Error(VendorError::ServerError),
            otherwise: Behavior::Ok,
            seed: 42,
        };
        let draw = |script: &Script| {
            let mut plan = Plan::new(script);
            (0..2000)
                .map(|_| !is_ok(&plan.pick(ms(0))))
                .collect::<Vec<bool>>()
        };
        let a = draw(&script);
        assert_eq!(a, draw(&script), "same seed, same outcomes");
        let faults = a.iter().filter(|f| **f).count();
        assert!(
            (480..=720).contains(&faults),
            "{faults} faults of 2000 at p=0.3"
        );
        let other = Script::Probability {
            p: 0.3,
            fault: Behavior::Error(VendorError::ServerError),
            otherwise: Behavior::Ok,
            seed: 43,
        };
        assert_ne!(a, draw(&other), "another seed, other outcomes");
    }

    #[test]
    fn probability_edges_and_nan() {
        for (p, expect_fault) in [
            (0.0, false),
            (1.0, true),
            (f64::NAN, false),
            (7.0, true),
            (-1.0, false),
        ] {
            let mut plan = Plan::new(&Script::Probability {
                p,
                fault: Behavior::HangBeforeHeaders,
                otherwise: Behavior::Ok,
                seed: 1,
            });
            for _ in 0..100 {
                assert_eq!(!is_ok(&plan.pick(ms(0))), expect_fault, "p = {p}");
            }
        }
    }

    #[test]
    fn window_is_half_open() {
        let mut plan = Plan::new(&Script::Window {
            from: ms(100),
            until: ms(200),
            fault: Behavior::ResetBeforeResponse,
            otherwise: Behavior::Ok,
        });
        assert!(is_ok(&plan.pick(ms(99))));
        assert!(!is_ok(&plan.pick(ms(100))));
        assert!(!is_ok(&plan.pick(ms(199))));
        assert!(is_ok(&plan.pick(ms(200))));
    }

    #[test]
    fn timeline_picks_latest_segment_with_local_clock_and_own_state() {
        let mut plan = Plan::new(&Script::Timeline(vec![
            // Deliberately out of order: segments are sorted by offset.
            (
                ms(1000),
                Script::Window {
                    from: ms(0),
                    until: ms(50),
                    fault: Behavior::HangBeforeHeaders,
                    otherwise: Behavior::Ok,
                },
            ),
            (
                ms(100),
                Script::Sequence(vec![Behavior::MalformedJson, Behavior::ResetBeforeResponse]),
            ),
        ]));
        assert!(plan.pick(ms(50)).is_none(), "before the first offset: Ok");
        assert_eq!(
            plan.pick(ms(100)).as_deref(),
            Some(&Behavior::MalformedJson)
        );
        assert_eq!(
            plan.pick(ms(900)).as_deref(),
            Some(&Behavior::ResetBeforeResponse)
        );
        assert_eq!(
            plan.pick(ms(1020)).as_deref(),
            Some(&Behavior::HangBeforeHeaders)
        );
        assert!(is_ok(&plan.pick(ms(1050))));
    }
}
