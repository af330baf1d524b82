//! What a scenario run leaves behind: plain data the checks, the statistics and the reports
//! read. Nothing here knows how it was recorded, so the checks can be tested on synthetic
//! records.
//!
//! Order matters more than time for the breaker checks: every call start, call end and breaker
//! transition gets a sequence number from one counter, and the run happens on a
//! current-thread runtime, where a breaker's admission, its listener and the first poll of the
//! call it admits happen in one poll of one task (the requests run outside tokio's cooperative
//! budget, so no `select!` yields in between). So "the state the breaker was in when it
//! admitted this call" is exactly "the last transition before this call's start", with no
//! clock-resolution ties to break. The probe count needs even less: an observed call starts
//! after its admission and ends before the breaker releases its probe permit, so the calls
//! the observer counts in flight are always a subset of the permit holders.

use std::collections::BTreeMap;

use ripcord_core::ErrorKind;
use serde::Serialize;

/// A breaker state, as the listener reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum State {
    Closed,
    Open,
    HalfOpen,
}

impl State {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// A model or the static reply answered.
    Answered {
        served_by: String,
        static_reply: bool,
    },
    /// The chain returned a classified error.
    Failed { kind: ErrorKind },
    /// Neither an answer nor an error: a stream that ended without its finish event.
    Lost { why: String },
    /// Still running when the run gave up waiting.
    Unfinished,
}

/// One attempt as the chain's provenance lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AttemptRec {
    pub(crate) provider: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error_kind: Option<ErrorKind>,
    pub(crate) latency_ms: f64,
}

/// One request of a virtual user.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RequestRec {
    pub(crate) id: String,
    pub(crate) user: usize,
    pub(crate) streamed: bool,
    /// False for a request marked not retry-safe (it must never be sent twice after a failure
    /// the vendor may have processed).
    pub(crate) retry_safe: bool,
    /// Milliseconds since the scenario started.
    pub(crate) start_ms: f64,
    /// When a streamed request's first content arrived (milliseconds since the scenario started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) first_content_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end_ms: Option<f64>,
    /// The request's own deadline, relative to its start.
    pub(crate) deadline_ms: f64,
    pub(crate) outcome: Outcome,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) attempts: Vec<AttemptRec>,
    /// Set when one answer of a stream carried text from two links without a `Restarted`
    /// between them (the links, in order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) spliced: Option<String>,
}

/// Records for the tests of the checks, the statistics and the reports.
#[cfg(test)]
impl RequestRec {
    /// Request `id` of user 0, retry-safe and not streamed, from `start_ms` to `end_ms` under a
    /// 1 s deadline, ended with `outcome` after `attempts`.
    pub(crate) fn sample(
        id: &str,
        start_ms: f64,
        end_ms: Option<f64>,
        outcome: Outcome,
        attempts: Vec<AttemptRec>,
    ) -> RequestRec {
        RequestRec {
            id: id.to_owned(),
            user: 0,
            streamed: false,
            retry_safe: true,
            start_ms,
            first_content_ms: None,
            end_ms,
            deadline_ms: 1000.0,
            outcome,
            attempts,
            spliced: None,
        }
    }
}

#[cfg(test)]
impl Outcome {
    /// Answered by link `by` (not the static reply).
    pub(crate) fn by(by: &str) -> Outcome {
        Outcome::Answered {
            served_by: by.to_owned(),
            static_reply: false,
        }
    }
}

#[cfg(test)]
impl AttemptRec {
    /// One successful attempt at each of `providers`, each taking `latency_ms`.
    pub(crate) fn answered(providers: &[&str], latency_ms: f64) -> Vec<AttemptRec> {
        providers
            .iter()
            .map(|p| AttemptRec {
                provider: (*p).to_owned(),
                error_kind: None,
                latency_ms,
            })
            .collect()
    }
}

#[cfg(test)]
impl LinkInfo {
    /// An OpenAI-wire link with `permits` half-open permits, open for `open_ms`, tripping after
    /// three failures.
    pub(crate) fn sample(name: &str, permits: usize, open_ms: u64) -> LinkInfo {
        LinkInfo {
            name: name.to_owned(),
            kind: "openai".to_owned(),
            permits,
            open_ms,
            failure_threshold: 3,
        }
    }
}

impl RequestRec {
    /// Time from start to end, if it ended.
    pub(crate) fn latency_ms(&self) -> Option<f64> {
        self.end_ms.map(|e| e - self.start_ms)
    }
}

/// How an observed call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "end", content = "kind", rename_all = "snake_case")]
pub(crate) enum CallEnd {
    Ok,
    Failed(ErrorKind),
    /// The caller dropped it (a deadline, a cancellation, a consumer that stopped reading).
    Dropped,
}

/// A call one of the observers saw: admitted by a breaker, or sent to a vendor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CallRec {
    /// The request it belongs to (from the context's metadata).
    pub(crate) request: Option<String>,
    pub(crate) link: String,
    pub(crate) start_seq: u64,
    pub(crate) start_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end: Option<CallEnd>,
}

impl CallRec {
    /// The error kind it ended with, if it failed.
    pub(crate) fn error_kind(&self) -> Option<ErrorKind> {
        match self.end {
            Some(CallEnd::Failed(k)) => Some(k),
            _ => None,
        }
    }
}

/// A breaker transition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TransitionRec {
    pub(crate) link: String,
    pub(crate) from: State,
    pub(crate) to: State,
    pub(crate) seq: u64,
    pub(crate) at_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) open_for_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cause: Option<ErrorKind>,
}

/// A link of the chain and the settings the checks need.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LinkInfo {
    pub(crate) name: String,
    /// The provider kind (`openai`, `anthropic`, `local-onnx`, …).
    pub(crate) kind: String,
    /// Half-open probe permits.
    pub(crate) permits: usize,
    pub(crate) open_ms: u64,
    pub(crate) failure_threshold: u32,
}

/// Where an API key showed up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Leak {
    /// What carried it (an event, a span, a report file) — never the key itself.
    pub(crate) place: String,
    /// Whose key it was.
    pub(crate) key_of: String,
}

/// A link a request passed over without calling it, as its provenance said.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SkipRec {
    pub(crate) provider: String,
    pub(crate) reason: String,
    /// For a window skip: the prompt's estimated tokens and the window judged by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) window: Option<u32>,
}

/// A streamed answer that carried text from more than one link, and what it recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ContinuedRec {
    /// The links whose text it carried, in order.
    pub(crate) links: Vec<String>,
    /// What is wrong with it (no continuation record for a join, a repeated or dropped piece),
    /// `None` when the continuation is sound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) problem: Option<String>,
}

/// What the fake Google token endpoint and the Vertex fakes saw of the run's access tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct TokenRec {
    /// How long each minted token lived.
    pub(crate) lifetime_ms: f64,
    /// Token exchanges received.
    pub(crate) exchanges: u64,
    /// Tokens minted (the first one, then one per refresh).
    pub(crate) minted: u64,
    /// Requests the Vertex fakes refused because their token had expired.
    pub(crate) expired_rejections: u64,
    /// Requests the Vertex fakes refused because their token was missing or never minted.
    pub(crate) unknown_rejections: u64,
}

/// Everything recorded in one scenario run.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Records {
    pub(crate) requests: Vec<RequestRec>,
    /// Calls admitted by a breaker (seen just inside it).
    pub(crate) admissions: Vec<CallRec>,
    /// Calls sent to a vendor (seen around each adapter).
    pub(crate) wires: Vec<CallRec>,
    pub(crate) transitions: Vec<TransitionRec>,
    /// Calls each breaker refused.
    pub(crate) rejections: BTreeMap<String, u64>,
    pub(crate) links: Vec<LinkInfo>,
    /// Requests each fake server counted.
    pub(crate) hits: BTreeMap<String, usize>,
    /// How long users kept sending.
    pub(crate) run_ms: f64,
    /// The bound of a stream after its first content (the chain's `stream_max_ms`).
    pub(crate) stream_max_ms: f64,
    /// How long the run waited for the users to finish.
    pub(crate) join_limit_ms: f64,
    /// False when some user was still busy at `join_limit_ms`.
    pub(crate) joined: bool,
    /// Log events, spans and report texts scanned for keys.
    pub(crate) scanned: u64,
    pub(crate) leaks: Vec<Leak>,
    /// Per request id: the links its answer (or error) says were skipped.
    pub(crate) skips: BTreeMap<String, Vec<SkipRec>>,
    /// Per request id: streamed answers continued on another link.
    pub(crate) continued: BTreeMap<String, ContinuedRec>,
    /// Per link: how often an open breaker checks the vendor in the background (ms).
    pub(crate) background_probe_ms: BTreeMap<String, u64>,
    /// The Vertex links' access tokens, when the chain has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens: Option<TokenRec>,
    /// The live reload the scenario made, when it made one.
    pub(crate) reload: Option<ReloadRec>,
    /// Per deployment of a pooled link (`link/deployment`): what its own fake server saw.
    pub(crate) deployments: BTreeMap<String, DeploymentRec>,
    /// Model answers per second of the same scenario run with every vendor healthy, when the
    /// scenario asks for that comparison.
    pub(crate) baseline_answers_per_s: Option<f64>,
}

/// What a mid-run reload did.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ReloadRec {
    /// When the rebuild began and when the new chain was swapped in.
    pub(crate) at_ms: f64,
    pub(crate) done_ms: f64,
    /// Why the reload was refused, when it was (the old chain then kept serving).
    pub(crate) error: Option<String>,
    /// The chain order before and after.
    pub(crate) old_order: Vec<String>,
    pub(crate) new_order: Vec<String>,
    /// Providers whose key the new config rotated.
    pub(crate) rotated: Vec<String>,
    /// Providers that had to stay unchanged.
    pub(crate) keeps: Vec<String>,
    /// Providers whose link the new build kept from the old one.
    pub(crate) reused: Vec<String>,
    /// Per provider: its breaker state just before the swap and in the new chain just after.
    pub(crate) breakers: Vec<(String, Option<String>, Option<String>)>,
    /// Per rotated provider, the requests its fake vendor received, in order: when (ms since
    /// the start) and whether they carried the rotated key.
    pub(crate) keyed: BTreeMap<String, Vec<(f64, bool)>>,
}

impl Records {
    /// The chain order a request that started at `start_ms` ran on: the reload's new order once
    /// it was swapped in, else the links' order.
    pub(crate) fn order_at(&self, start_ms: f64) -> Vec<&str> {
        match &self.reload {
            Some(r) if r.error.is_none() && start_ms >= r.done_ms => {
                r.new_order.iter().map(String::as_str).collect()
            }
            _ => self.links.iter().map(|l| l.name.as_str()).collect(),
        }
    }

    /// The vendor calls observed per request id, each request's in the order they started.
    pub(crate) fn wires_by_request(&self) -> BTreeMap<&str, Vec<&CallRec>> {
        let mut by_request: BTreeMap<&str, Vec<&CallRec>> = BTreeMap::new();
        for w in &self.wires {
            if let Some(id) = &w.request {
                by_request.entry(id.as_str()).or_default().push(w);
            }
        }
        for wires in by_request.values_mut() {
            wires.sort_by_key(|w| w.start_seq);
        }
        by_request
    }

    /// The link's settings, by name.
    pub(crate) fn link(&self, name: &str) -> Option<&LinkInfo> {
        self.links.iter().find(|l| l.name == name)
    }
}

/// One deployment of a pooled link, as its own fake server saw it and as the scenario scripted
/// it.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub(crate) struct DeploymentRec {
    /// The pooled link it belongs to.
    pub(crate) link: String,
    /// When each model request reached it (milliseconds since the scenario started).
    pub(crate) requests_ms: Vec<f64>,
    /// `(from, to, retry_after)` in milliseconds: spans of the run in which it answered every
    /// request 429 with that `retry-after`.
    pub(crate) throttled: Vec<(f64, f64, f64)>,
    /// True when it failed every request, all run.
    pub(crate) down_all_run: bool,
    /// True when it answered every request, all run.
    pub(crate) healthy_all_run: bool,
}
