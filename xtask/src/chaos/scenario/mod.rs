//! Scenarios: timelines of faults per fake vendor, built in or read from a TOML file.
//!
//! A scenario names vendors by the *provider names* of the chain (`primary`, `backup`, `local`
//! in the default chain) and says, from some point of the run on, what each one does. Times
//! are either a fraction of the run (`at = 0.4`), so the built-in scenarios keep their shape
//! whatever `--duration` says, or seconds (`at_s = 2.5`). Before a vendor's first phase it is
//! healthy.
//!
//! The cloud vendors are `ripcord-chaos` fake servers, so their faults are real HTTP faults
//! (statuses with vendor-accurate bodies, hangs, stalls, resets). The local model is the real
//! one; the only fault it takes is `fail`: while a `fail` phase is on, a switch in front of it
//! answers `model_not_found` ("local model unavailable: made to fail by the scenario").
//!
//! The file format (documented in the README's "Chaos runs" section):
//!
//! ```toml
//! [[scenario]]
//! name = "backup-browns-out"
//! description = "primary is down; backup fails half its calls"
//! [scenario.expect]
//! must_serve = ["backup"]      # each must answer at least one request ("static" allowed)
//! max_trips = 6                # breaker trips per link, at most
//! min_answered_pct = 95.0      # answers (models + static reply) among all requests
//!
//! [[scenario.phase]]
//! vendor = "primary"
//! at = 0.0                     # fraction of the run, or `at_s` in seconds
//! fault = "overloaded"
//!
//! [[scenario.phase]]
//! vendor = "backup"
//! at_s = 1.0
//! fault = "server_error"
//! p = 0.5                      # probability of the fault per request (default 1)
//! otherwise = "slow_first_token"
//! delay_ms = 400               # parameters apply to `fault` and `otherwise` alike
//! ```

use std::collections::BTreeSet;
use std::time::Duration;

use ripcord_chaos::{Behavior, Script, VendorError};

mod file;

pub(crate) use file::parse;

/// The name the static reply goes by in `must_serve` and in reports.
pub(crate) const STATIC: &str = "static";

/// The built-in scenario that runs on the Bedrock chain (`--bedrock`).
pub(crate) const CLAUDE_THREE_WAYS: &str = "claude-three-ways";

/// The source of the built-in scenarios.
pub(crate) const BUILT_IN: &str = "built-in";

/// What a vendor does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A healthy answer (streamed: 40 ms to the first token, 10 ms between chunks).
    Ok,
    /// 503 (OpenAI wire) / 529 (Anthropic wire).
    Overloaded,
    /// 500.
    ServerError,
    /// 502 with an HTML body, as a proxy sends it.
    BadGateway,
    /// 429 with `retry-after` (`retry_after_ms`; none when unset).
    RateLimited { retry_after_ms: Option<u64> },
    /// 429 `insufficient_quota` (OpenAI wire) / 400 credit balance (Anthropic wire).
    QuotaExhausted,
    /// 429 "Request too large … on tokens per min" (OpenAI wire) / 413 (Anthropic wire): a
    /// request that can never fit, however long one waits.
    RequestTooLarge,
    /// 401.
    Auth,
    /// 403 permission.
    PermissionDenied,
    /// 403 region.
    RegionBlocked,
    /// 404 model.
    ModelNotFound,
    /// 400 content policy.
    ContentFiltered,
    /// 400.
    InvalidRequest,
    /// Never answers.
    Hang,
    /// Headers at once, the first token after `delay_ms`.
    SlowFirstToken { delay_ms: u64 },
    /// Stalls after `after_chunks` chunks with the connection open.
    StallMidStream { after_chunks: usize },
    /// TCP reset before any response.
    Reset,
    /// TCP reset after `after_chunks` chunks.
    ResetMidStream { after_chunks: usize },
    /// A clean end without the stream's terminal event.
    Truncated { after_chunks: usize },
    /// A 200 whose body is broken JSON.
    MalformedJson,
    /// A complete stream with its stop reason and usage that ends cleanly without `[DONE]` /
    /// `message_stop` (a non-streaming request gets its whole answer).
    StopWithoutDone,
    /// A complete stream with one unparseable event after its first content (a non-streaming
    /// request gets its whole answer).
    MalformedEvent,
    /// Accepts the connection and the request, and never sends a byte.
    Silent,
    /// A healthy answer that streams long: 16 chunks, `between_ms` apart (a non-streaming
    /// request gets its whole answer at once).
    LongStream { between_ms: u64 },
    /// 400 "the prompt is too long", stating the model's window (OpenAI wire: 128000 tokens;
    /// Anthropic wire: 200000).
    ContextTooLong,
    /// A stream that carries the vendor's in-band `overloaded` error event after `after_chunks`
    /// chunks.
    InBandOverloaded { after_chunks: usize },
    /// The local tier fails (`model_not_found`); the only fault `local` takes besides `ok`.
    Fail,
}

/// The chunks of a [`Fault::LongStream`] answer.
pub(crate) const LONG_STREAM_CHUNKS: usize = 16;

/// Parameters a fault name may take, with their defaults.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FaultParams {
    pub(crate) retry_after_ms: Option<u64>,
    pub(crate) delay_ms: Option<u64>,
    pub(crate) after_chunks: Option<usize>,
}

/// Every fault name, for messages.
pub(crate) const FAULT_NAMES: &[&str] = &[
    "ok",
    "overloaded",
    "server_error",
    "bad_gateway",
    "rate_limited",
    "quota_exhausted",
    "request_too_large",
    "auth",
    "permission_denied",
    "region_blocked",
    "model_not_found",
    "content_filtered",
    "invalid_request",
    "hang",
    "slow_first_token",
    "stall_mid_stream",
    "reset",
    "reset_mid_stream",
    "truncated",
    "malformed_json",
    "stop_without_done",
    "malformed_event",
    "silent",
    "long_stream",
    "context_too_long",
    "in_band_overloaded",
    "fail",
];

impl Fault {
    /// Parses a fault name with its parameters.
    pub(crate) fn parse(name: &str, p: FaultParams) -> Option<Fault> {
        let chunks = p.after_chunks.unwrap_or(1);
        Some(match name {
            "ok" => Fault::Ok,
            "overloaded" => Fault::Overloaded,
            "server_error" => Fault::ServerError,
            "bad_gateway" => Fault::BadGateway,
            "rate_limited" => Fault::RateLimited {
                retry_after_ms: p.retry_after_ms,
            },
            "quota_exhausted" => Fault::QuotaExhausted,
            "request_too_large" => Fault::RequestTooLarge,
            "auth" => Fault::Auth,
            "permission_denied" => Fault::PermissionDenied,
            "region_blocked" => Fault::RegionBlocked,
            "model_not_found" => Fault::ModelNotFound,
            "content_filtered" => Fault::ContentFiltered,
            "invalid_request" => Fault::InvalidRequest,
            "hang" => Fault::Hang,
            "slow_first_token" => Fault::SlowFirstToken {
                delay_ms: p.delay_ms.unwrap_or(800),
            },
            "stall_mid_stream" => Fault::StallMidStream {
                after_chunks: chunks,
            },
            "reset" => Fault::Reset,
            "reset_mid_stream" => Fault::ResetMidStream {
                after_chunks: chunks,
            },
            "truncated" => Fault::Truncated {
                after_chunks: chunks,
            },
            "malformed_json" => Fault::MalformedJson,
            "stop_without_done" => Fault::StopWithoutDone,
            "malformed_event" => Fault::MalformedEvent,
            "silent" => Fault::Silent,
            "long_stream" => Fault::LongStream {
                between_ms: p.delay_ms.unwrap_or(300),
            },
            "context_too_long" => Fault::ContextTooLong,
            "in_band_overloaded" => Fault::InBandOverloaded {
                after_chunks: chunks,
            },
            "fail" => Fault::Fail,
            _ => return None,
        })
    }

    /// The fault's name, as written in a scenario file.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Fault::Ok => "ok",
            Fault::Overloaded => "overloaded",
            Fault::ServerError => "server_error",
            Fault::BadGateway => "bad_gateway",
            Fault::RateLimited { .. } => "rate_limited",
            Fault::QuotaExhausted => "quota_exhausted",
            Fault::RequestTooLarge => "request_too_large",
            Fault::Auth => "auth",
            Fault::PermissionDenied => "permission_denied",
            Fault::RegionBlocked => "region_blocked",
            Fault::ModelNotFound => "model_not_found",
            Fault::ContentFiltered => "content_filtered",
            Fault::InvalidRequest => "invalid_request",
            Fault::Hang => "hang",
            Fault::SlowFirstToken { .. } => "slow_first_token",
            Fault::StallMidStream { .. } => "stall_mid_stream",
            Fault::Reset => "reset",
            Fault::ResetMidStream { .. } => "reset_mid_stream",
            Fault::Truncated { .. } => "truncated",
            Fault::MalformedJson => "malformed_json",
            Fault::StopWithoutDone => "stop_without_done",
            Fault::MalformedEvent => "malformed_event",
            Fault::Silent => "silent",
            Fault::LongStream { .. } => "long_stream",
            Fault::ContextTooLong => "context_too_long",
            Fault::InBandOverloaded { .. } => "in_band_overloaded",
            Fault::Fail => "fail",
        }
    }

    /// A short label with the parameters, for reports.
    pub(crate) fn label(self) -> String {
        match self {
            Fault::RateLimited {
                retry_after_ms: Some(ms),
            } => format!("rate_limited (retry-after {ms} ms)"),
            Fault::SlowFirstToken { delay_ms } => format!("slow_first_token ({delay_ms} ms)"),
            Fault::LongStream { between_ms } => {
                format!("long_stream ({LONG_STREAM_CHUNKS} chunks, {between_ms} ms apart)")
            }
            Fault::StallMidStream { after_chunks }
            | Fault::ResetMidStream { after_chunks }
            | Fault::Truncated { after_chunks }
            | Fault::InBandOverloaded { after_chunks } => {
                format!("{} (after {after_chunks} chunks)", self.name())
            }
            other => other.name().to_owned(),
        }
    }

    /// What the fake server does. `None` for [`Fault::Fail`], which only the local tier takes.
    pub(crate) fn behavior(self) -> Option<Behavior> {
        let ms = Duration::from_millis;
        Some(match self {
            Fault::Ok => Behavior::Stream {
                first_token: ms(40),
                between: ms(10),
            },
            Fault::Overloaded => Behavior::Error(VendorError::Overloaded),
            Fault::ServerError => Behavior::Error(VendorError::ServerError),
            Fault::BadGateway => Behavior::Error(VendorError::BadGateway),
            Fault::RateLimited { retry_after_ms } => Behavior::Error(VendorError::RateLimited {
                retry_after: retry_after_ms.map(ms),
            }),
            Fault::QuotaExhausted => Behavior::Error(VendorError::QuotaExhausted),
            Fault::RequestTooLarge => Behavior::Error(VendorError::TooLargeForRateLimit),
            Fault::Auth => Behavior::Error(VendorError::Auth),
            Fault::PermissionDenied => Behavior::Error(VendorError::PermissionDenied),
            Fault::RegionBlocked => Behavior::Error(VendorError::RegionBlocked),
            Fault::ModelNotFound => Behavior::Error(VendorError::ModelNotFound),
            Fault::ContentFiltered => Behavior::Error(VendorError::ContentFiltered),
            Fault::ContextTooLong => Behavior::Error(VendorError::ContextTooLong),
            Fault::InBandOverloaded { after_chunks } => Behavior::InBandError {
                after_chunks,
                error: VendorError::Overloaded,
            },
            Fault::InvalidRequest => Behavior::Error(VendorError::InvalidRequest),
            Fault::Hang => Behavior::HangBeforeHeaders,
            Fault::SlowFirstToken { delay_ms } => Behavior::SlowFirstToken(ms(delay_ms)),
            Fault::StallMidStream { after_chunks } => Behavior::StallMidStream { after_chunks },
            Fault::Reset => Behavior::ResetBeforeResponse,
            Fault::ResetMidStream { after_chunks } => Behavior::ResetMidStream { after_chunks },
            Fault::Truncated { after_chunks } => Behavior::TruncatedStream { after_chunks },
            Fault::MalformedJson => Behavior::MalformedJson,
            Fault::StopWithoutDone => Behavior::StopWithoutDone,
            Fault::MalformedEvent => Behavior::MalformedEvents { count: 1 },
            Fault::Silent => Behavior::HangBeforeHeaders,
            Fault::LongStream { between_ms } => Behavior::Stream {
                first_token: ms(40),
                between: ms(between_ms),
            },
            Fault::Fail => return None,
        })
    }

    /// True for the faults the local tier can take.
    pub(crate) fn fits_local(self) -> bool {
        matches!(self, Fault::Ok | Fault::Fail)
    }
}

/// When a phase starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum At {
    /// A fraction of the run, in `[0, 1)`.
    Fraction(f64),
    /// Seconds from the start.
    Seconds(f64),
}

impl At {
    /// The offset for a run of `run`.
    pub(crate) fn offset(self, run: Duration) -> Duration {
        match self {
            At::Fraction(f) => run.mul_f64(f),
            At::Seconds(s) => Duration::from_secs_f64(s),
        }
    }
}

/// From `at` on, `vendor` answers `fault` with probability `p`, else `otherwise`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Phase {
    pub(crate) vendor: String,
    pub(crate) at: At,
    pub(crate) fault: Fault,
    pub(crate) p: f64,
    pub(crate) otherwise: Fault,
}

impl Phase {
    pub(crate) fn new(vendor: &str, at: f64, fault: Fault) -> Phase {
        Phase {
            vendor: vendor.to_owned(),
            at: At::Fraction(at),
            fault,
            p: 1.0,
            otherwise: Fault::Ok,
        }
    }

    fn sometimes(mut self, p: f64, otherwise: Fault) -> Phase {
        self.p = p;
        self.otherwise = otherwise;
        self
    }

    /// A short label, for reports.
    pub(crate) fn label(&self) -> String {
        if self.p >= 1.0 {
            self.fault.label()
        } else {
            format!(
                "{:.0}% {}, else {}",
                self.p * 100.0,
                self.fault.label(),
                self.otherwise.label()
            )
        }
    }
}

/// A bound on breaker trips per link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxTrips {
    /// `ceil(run / open) + 1` per link: a breaker that keeps each trip open for its full
    /// open duration cannot trip more often than that.
    Auto,
    /// At most this many per link.
    Fixed(u32),
}

/// What must hold besides the invariants (checked and reported the same way).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Expect {
    /// Each must answer at least one request (`static` for the static reply).
    pub(crate) must_serve: Vec<String>,
    /// Breaker trips per link.
    pub(crate) max_trips: Option<MaxTrips>,
    /// Answers (model or static) among all requests, in percent.
    pub(crate) min_answered_pct: Option<f64>,
}

/// Local limits a scenario puts on one link of the chain (a bulkhead and an RPM limit), to
/// load it past what it admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkLimits {
    /// Bulkhead slots.
    pub(crate) slots: usize,
    /// The bulkhead's longest queue wait, in milliseconds.
    pub(crate) queue_wait_ms: u64,
    /// Requests per minute.
    pub(crate) rpm: u32,
}

/// A link's breaker spells and background probe, as a scenario sets them (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spells {
    pub(crate) open_ms: u64,
    pub(crate) open_max_ms: u64,
    pub(crate) background_probe_ms: Option<u64>,
}

/// How a scenario changes the run besides its faults.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Load {
    /// At least this many virtual users (the run's `--users` when larger).
    pub(crate) min_users: Option<usize>,
    /// Limits per link.
    pub(crate) limits: Vec<(String, LinkLimits)>,
    /// The chain continues cut streams on the next link (`stream_policy = "continue"`, no
    /// hold-back) instead of restarting them.
    pub(crate) stream_continue: bool,
    /// The cloud links ask for models no table knows (their windows are unknown).
    pub(crate) unknown_models: bool,
    /// Breaker spells per link.
    pub(crate) spells: Vec<(String, Spells)>,
}

/// One scenario.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scenario {
    pub(crate) name: String,
    pub(crate) description: String,
    /// `built-in` or the file it came from.
    pub(crate) source: String,
    pub(crate) phases: Vec<Phase>,
    pub(crate) expect: Expect,
    /// Extra load and limits (built-in scenarios only).
    pub(crate) load: Load,
}

impl Scenario {
    /// The vendors the scenario scripts.
    pub(crate) fn vendors(&self) -> BTreeSet<&str> {
        self.phases.iter().map(|p| p.vendor.as_str()).collect()
    }

    /// This vendor's phases, sorted by start (stable: a later phase at the same time wins).
    /// True when some vendor answers with long streams (the fakes then send
    /// [`LONG_STREAM_CHUNKS`] chunks).
    pub(crate) fn long_streams(&self) -> bool {
        self.phases.iter().any(|p| {
            matches!(p.fault, Fault::LongStream { .. })
                || matches!(p.otherwise, Fault::LongStream { .. })
        })
    }

    pub(crate) fn phases_of(&self, vendor: &str, run: Duration) -> Vec<(Duration, &Phase)> {
        let mut v: Vec<(Duration, &Phase)> = self
            .phases
            .iter()
            .filter(|p| p.vendor == vendor)
            .map(|p| (p.at.offset(run), p))
            .collect();
        v.sort_by_key(|(at, _)| *at);
        v
    }

    /// The fake server's script for `vendor`: healthy, then each phase from its offset on.
    /// Seeds derive from `seed`, the scenario and the phase, so a run is repeatable.
    pub(crate) fn script(&self, vendor: &str, run: Duration, seed: u64) -> Script {
        let healthy = Fault::Ok.behavior().unwrap_or(Behavior::Ok);
        let mut segments = vec![(Duration::ZERO, Script::Always(healthy.clone()))];
        for (i, (at, phase)) in self.phases_of(vendor, run).into_iter().enumerate() {
            let fault = phase.fault.behavior().unwrap_or_else(|| healthy.clone());
            let script = if phase.p >= 1.0 {
                Script::Always(fault)
            } else {
                Script::Probability {
                    p: phase.p,
                    fault,
                    otherwise: phase
                        .otherwise
                        .behavior()
                        .unwrap_or_else(|| healthy.clone()),
                    seed: mix(seed ^ mix(hash_str(&self.name) ^ hash_str(vendor)) ^ i as u64),
                }
            };
            segments.push((at, script));
        }
        Script::Timeline(segments)
    }
}

/// The SplitMix64 finalizer.
pub(crate) const fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a, for mixing names into seeds (stable across releases, unlike `DefaultHasher`).
pub(crate) fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A small seeded generator (SplitMix64): the request mix and think times of the virtual users.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// A uniform draw in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform draw in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// The built-in scenarios, in the order they run.
pub(crate) fn builtins() -> Vec<Scenario> {
    let s = |name: &str, description: &str, phases: Vec<Phase>, must_serve: &[&str]| Scenario {
        name: name.to_owned(),
        description: description.to_owned(),
        source: BUILT_IN.to_owned(),
        phases,
        expect: Expect {
            must_serve: must_serve.iter().map(|s| (*s).to_owned()).collect(),
            max_trips: Some(MaxTrips::Auto),
            min_answered_pct: Some(99.0),
        },
        load: Load::default(),
    };
    // Healthy vendors under load: no breaker may trip, every request must be answered.
    let healthy = |mut sc: Scenario| {
        sc.expect.max_trips = Some(MaxTrips::Fixed(0));
        sc.expect.min_answered_pct = Some(100.0);
        sc
    };
    // The flapping vendor: down for 0.3 s, up for 0.3 s, all run long (fractions of a 6 s run
    // at the default --quick length; proportionally longer in longer runs).
    let flaps: Vec<Phase> = (0..20)
        .map(|i| {
            let fault = if i % 2 == 0 {
                Fault::Overloaded
            } else {
                Fault::Ok
            };
            Phase::new("primary", f64::from(i) * 0.05, fault)
        })
        .collect();
    vec![
        s(
            "primary-outage",
            "primary answers 503 for the first 45% of the run, then recovers",
            vec![
                Phase::new("primary", 0.0, Fault::Overloaded),
                Phase::new("primary", 0.45, Fault::Ok),
            ],
            &["primary", "backup"],
        ),
        s(
            "brownout",
            "primary fails 30% of calls with 500 and answers the rest with a slow first token",
            vec![
                Phase::new("primary", 0.1, Fault::ServerError)
                    .sometimes(0.3, Fault::SlowFirstToken { delay_ms: 450 }),
                Phase::new("primary", 0.8, Fault::Ok),
            ],
            // Retries absorb most 500s: falling back to backup is possible, not expected.
            &["primary"],
        ),
        s(
            "rate-limit-storm",
            "primary answers 429 with retry-after to 80% of calls; backup to 20%",
            vec![
                Phase::new(
                    "primary",
                    0.1,
                    Fault::RateLimited {
                        retry_after_ms: Some(1000),
                    },
                )
                .sometimes(0.8, Fault::Ok),
                Phase::new(
                    "backup",
                    0.1,
                    Fault::RateLimited {
                        retry_after_ms: Some(200),
                    },
                )
                .sometimes(0.2, Fault::Ok),
                Phase::new("primary", 0.75, Fault::Ok),
                Phase::new("backup", 0.75, Fault::Ok),
            ],
            &["primary", "backup"],
        ),
        s(
            "quota-exhausted",
            "primary runs out of quota (429 insufficient_quota) a fifth into the run: never retried",
            vec![Phase::new("primary", 0.2, Fault::QuotaExhausted)],
            &["primary", "backup"],
        ),
        {
            let mut too_large = s(
                "request-too-large",
                "primary answers half the calls with a 429 'Request too large … tokens per min': never retried, never charged to its breaker",
                vec![
                    Phase::new("primary", 0.1, Fault::RequestTooLarge).sometimes(0.5, Fault::Ok),
                    Phase::new("primary", 0.8, Fault::Ok),
                ],
                &["primary", "backup"],
            );
            // The verdict is about the request, not the vendor: however often it comes, it
            // must never open a breaker.
            too_large.expect.max_trips = Some(MaxTrips::Fixed(0));
            too_large
        },
        s(
            "auth-revoked",
            "primary's key is revoked (401) mid-run",
            vec![Phase::new("primary", 0.4, Fault::Auth)],
            &["primary", "backup"],
        ),
        s(
            "region-blocked",
            "primary refuses this region (403) from 15% of the run on",
            vec![Phase::new("primary", 0.15, Fault::RegionBlocked)],
            &["primary", "backup"],
        ),
        s(
            "stalls",
            "40% of primary's answers stall after the first chunk (streams restart on backup)",
            vec![
                Phase::new("primary", 0.1, Fault::StallMidStream { after_chunks: 1 })
                    .sometimes(0.4, Fault::Ok),
                Phase::new("primary", 0.85, Fault::Ok),
            ],
            &["primary", "backup"],
        ),
        s(
            "flapping",
            "primary flips between 503 and healthy every 5% of the run: the breaker must not thrash",
            flaps,
            &["primary", "backup"],
        ),
        s(
            "all-cloud-down",
            "both cloud vendors fail (503, resets): the local model answers, then it fails too and the static reply answers",
            vec![
                Phase::new("primary", 0.0, Fault::Overloaded),
                Phase::new("backup", 0.0, Fault::Reset),
                Phase::new("local", 0.6, Fault::Fail),
            ],
            &["local", STATIC],
        ),
        s(
            "hostile-streams",
            "streams that misbehave: primary ends answers without [DONE], then slips an unparseable event into them, goes silent (accepts, never answers), then cuts half its streams after the first chunk; backup does the same two stream faults: every stream with a stop reason completes, a silent primary is never retried, a cut inside the hold-back falls over unseen, no answer mixes two models",
            vec![
                Phase::new("primary", 0.0, Fault::StopWithoutDone),
                Phase::new("primary", 0.25, Fault::MalformedEvent),
                Phase::new("primary", 0.45, Fault::Silent),
                Phase::new("primary", 0.65, Fault::ResetMidStream { after_chunks: 1 })
                    .sometimes(0.5, Fault::Ok),
                Phase::new("backup", 0.0, Fault::MalformedEvent)
                    .sometimes(0.5, Fault::StopWithoutDone),
            ],
            &["primary", "backup"],
        ),
        healthy(s(
            "long-streams",
            "primary streams every answer for longer than the deadline (16 chunks, 300 ms apart): each completes, and no breaker trips on a healthy vendor",
            vec![Phase::new(
                "primary",
                0.0,
                Fault::LongStream { between_ms: 300 },
            )],
            &["primary"],
        )),
        {
            let mut sc = healthy(s(
                "saturation",
                "three times more users than primary's bulkhead slots, past its RPM, and primary answers 10% of calls 429 without retry-after: refusals stay local, the chain falls past them",
                vec![
                    Phase::new(
                        "primary",
                        0.0,
                        Fault::RateLimited {
                            retry_after_ms: None,
                        },
                    )
                    .sometimes(0.1, Fault::Ok),
                ],
                &["primary", "backup"],
            ));
            sc.load = Load {
                min_users: Some(12),
                limits: vec![(
                    "primary".to_owned(),
                    LinkLimits {
                        slots: 4,
                        queue_wait_ms: 200,
                        rpm: 120,
                    },
                )],
                ..Load::default()
            };
            sc
        },
        s(
            CLAUDE_THREE_WAYS,
            "on the Bedrock chain (--bedrock): Anthropic's API answers 529 all run; Claude on Bedrock answers until 40% of the run, then throttles (429 ThrottlingException); the local model answers the rest",
            vec![
                Phase::new("claude", 0.0, Fault::Overloaded),
                Phase::new(
                    "claude-bedrock",
                    0.4,
                    Fault::RateLimited {
                        retry_after_ms: None,
                    },
                ),
            ],
            &["claude-bedrock", "local"],
        ),
        {
            let mut sc = s(
                "unknown-windows",
                "both cloud links ask for models no table knows; primary refuses every prompt as too long and states its window: the backup is tried (not judged by a guess) and no link is passed over without a record",
                vec![Phase::new("primary", 0.0, Fault::ContextTooLong)],
                &["backup"],
            );
            // The verdict is about the request: it must never open a breaker.
            sc.expect.max_trips = Some(MaxTrips::Fixed(0));
            sc.load.unknown_models = true;
            sc
        },
        {
            let mut sc = s(
                "breaker-recovers",
                "primary is down (503) for the first half of the run, long enough for its spells to grow; it is back at 50% and its breaker lets traffic back within one background probe, not at the end of a grown spell",
                vec![
                    Phase::new("primary", 0.0, Fault::Overloaded),
                    Phase::new("primary", 0.5, Fault::Ok),
                ],
                &["primary", "backup"],
            );
            sc.load.spells = vec![(
                "primary".to_owned(),
                Spells {
                    open_ms: 250,
                    open_max_ms: 4_000,
                    background_probe_ms: Some(400),
                },
            )];
            sc
        },
        {
            let mut sc = s(
                "stream-continue",
                "primary cuts its streams (a clean end after 4 chunks), then stalls them after 2 chunks, then sends an in-band error after 3: each is continued on backup, once, with a record, and nothing delivered is repeated or dropped",
                vec![
                    Phase::new("primary", 0.0, Fault::Truncated { after_chunks: 4 }),
                    Phase::new("primary", 0.33, Fault::StallMidStream { after_chunks: 2 }),
                    Phase::new("primary", 0.66, Fault::InBandOverloaded { after_chunks: 3 }),
                ],
                &["primary"],
            );
            sc.load.stream_continue = true;
            // Short spells, so the breaker that trips on the cuts lets primary start most
            // streams anyway (every cut is the vendor's failure).
            sc.load.spells = vec![(
                "primary".to_owned(),
                Spells {
                    open_ms: 100,
                    open_max_ms: 200,
                    background_probe_ms: None,
                },
            )];
            // Every cut counts against primary, and its spells are 100-200 ms: it trips often
            // by design (the bound of a 1 s spell does not apply).
            sc.expect.max_trips = Some(MaxTrips::Fixed(80));
            // A request not marked retry-safe is never continued: its stream ends with the
            // error (one request in four is such a request).
            sc.expect.min_answered_pct = Some(60.0);
            sc
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_cover_the_issue() {
        let b = builtins();
        let names: Vec<&str> = b.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), 17);
        let unique: BTreeSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        for s in &b {
            for p in &s.phases {
                assert_eq!(p.vendor == "local", p.fault == Fault::Fail, "{}", s.name);
                assert!(matches!(p.at, At::Fraction(f) if (0.0..1.0).contains(&f)));
            }
            assert!(!s.expect.must_serve.is_empty());
        }
        for name in ["long-streams", "saturation"] {
            let sc = b.iter().find(|s| s.name == name).unwrap();
            assert_eq!(sc.expect.max_trips, Some(MaxTrips::Fixed(0)), "{name}");
        }
        assert!(b.iter().any(Scenario::long_streams));
        let faults: BTreeSet<&str> = b
            .iter()
            .flat_map(|s| s.phases.iter().map(|p| p.fault.name()))
            .collect();
        for f in [
            "overloaded",
            "server_error",
            "rate_limited",
            "quota_exhausted",
            "request_too_large",
            "auth",
            "region_blocked",
            "stall_mid_stream",
            "fail",
        ] {
            assert!(faults.contains(f), "no built-in scenario uses {f}");
        }
    }

    #[test]
    fn rng_is_seeded() {
        let draws = |seed| {
            let mut r = Rng::new(seed);
            (0..8).map(|_| r.below(100)).collect::<Vec<_>>()
        };
        assert_eq!(draws(1), draws(1));
        assert_ne!(draws(1), draws(2));
        let mut r = Rng::new(3);
        assert!(
            (0..1000)
                .map(|_| r.next_f64())
                .all(|x| (0.0..1.0).contains(&x))
        );
    }
}
