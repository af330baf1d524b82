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
use ripcord_core::rng::{GOLDEN_GAMMA, SplitMix64, mix64};

mod builtins;
mod file;

pub(crate) use builtins::builtins;
pub(crate) use file::parse;

/// The name the static reply goes by in `must_serve` and in reports.
pub(crate) const STATIC: &str = "static";

/// The built-in scenario that runs on the Bedrock chain (`--bedrock`).
pub(crate) const CLAUDE_THREE_WAYS: &str = "claude-three-ways";

/// The built-in scenario that runs on the Vertex chain (`--vertex`).
pub(crate) const CLAUDE_VIA_VERTEX: &str = "claude-via-vertex";
/// The built-in scenario that runs on the pooled chain (a link of three deployments).
pub(crate) const REGIONS: &str = "regions";

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

/// The answer every fake gives in a scenario whose streams are continued
/// ([`Load::stream_continue`]): 64 words, streamed one word per chunk, so a fault "after 40
/// chunks" cuts it after 40 tokens. The fakes continue it from any start of it a continuation
/// request carries, so a continued answer must come out as exactly this text.
pub(crate) const CONTINUED_ANSWER: &str = "Rayleigh scattering explains the blue sky: sunlight holds every colour, and the molecules of nitrogen and oxygen in the air scatter short wavelengths far more strongly than long ones. Blue light is therefore thrown across the whole dome overhead, while red and orange pass straight through, which is why sunsets glow warm when light crosses much more air near the low horizon at dusk.";

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
    /// How long the access tokens of the Vertex links live (default an hour): short, so they
    /// expire and are refreshed during the run.
    pub(crate) token_lifetime_ms: Option<u64>,
    /// A live reload of the config mid-run.
    pub(crate) reload: Option<Reload>,
    /// Run the scenario once with every vendor healthy first, and check its throughput
    /// against that run's.
    pub(crate) healthy_baseline: bool,
}

/// A live reload a scenario makes mid-run, the one `POST /admin/reload` (or `SIGHUP`) makes on
/// `ripcord serve`: the running config is changed, rebuilt with `ripcord-cli`'s reload build
/// (every unchanged provider keeps its link, breaker and all) and swapped in while requests are
/// in flight; calls that started before the swap finish on the old chain.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Reload {
    /// When, as a fraction of the run.
    pub(crate) at: f64,
    /// The new chain order: these providers first, in this order, then the rest as they were.
    pub(crate) order: Vec<String>,
    /// Providers whose upstream key the new config rotates (their links are rebuilt).
    pub(crate) rotate: Vec<String>,
    /// Providers the reload leaves unchanged: each must keep its link and its breaker state.
    pub(crate) keeps: Vec<String>,
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

/// The SplitMix64 step (one increment, then the finalizer): mixes names and indices into seeds.
pub(crate) const fn mix(z: u64) -> u64 {
    mix64(z.wrapping_add(GOLDEN_GAMMA))
}

/// FNV-1a, for mixing names into seeds (stable across releases, unlike `DefaultHasher`).
pub(crate) fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A small seeded generator (the workspace's SplitMix64): the request mix and think times of the
/// virtual users.
#[derive(Debug, Clone)]
pub(crate) struct Rng(SplitMix64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        // One increment ahead of the seed, so a seed draws what it drew before the generator
        // moved to ripcord-core (scenario runs stay comparable across releases).
        Rng(SplitMix64::seeded(seed.wrapping_add(GOLDEN_GAMMA)))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniform draw in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        self.0.next_f64()
    }

    /// A uniform draw in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
