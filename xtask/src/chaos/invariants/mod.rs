//! The invariants every run must keep, and the scenario's own expectations — each a PASS or
//! a FAIL with the offending request ids.
//!
//! | id | invariant | read from |
//! | --- | --- | --- |
//! | `deadline` | no call returned after its deadline (plus a tolerance); a stream got its first content by its deadline and ended by the stream bound | request start/first content/end |
//! | `never-retry` | no link attempted again for a request after a fail-fast or never-retry kind | wire attempts, provenance |
//! | `half-open` | probes in flight in a half-open window ≤ the breaker's permits | admissions, transitions |
//! | `open-breaker` | no call admitted while its breaker was open; no vendor attempt outside an admitted call | admissions, wire attempts |
//! | `answered` | every request got an answer or a classified error; every user finished in time | requests |
//! | `no-keys` | no API key in any log event, span or report | the capture layer, the reports |
//! | `no-resend` | a request marked not retry-safe is never sent again after a failure the vendor may have processed (timeout, reset, truncated or invalid answer, a call cut mid-flight) | wire attempts |

use std::collections::{BTreeMap, HashMap};

use ripcord_core::ErrorKind;
use serde::Serialize;

use super::record::{AttemptRec, CallRec, Outcome, Records, State};

mod expect;
mod pools;

pub(crate) use expect::{expectations, served_counts, trips};
pub(crate) use pools::answers_per_s;

/// Kinds after which the same link must not be tried again within the request: the vendor
/// has said the request, the key, the account or the model cannot succeed there.
pub(crate) const NEVER_RETRY: &[ErrorKind] = &[
    ErrorKind::QuotaExhausted,
    ErrorKind::Auth,
    ErrorKind::PermissionDenied,
    ErrorKind::RegionBlocked,
    ErrorKind::ModelNotFound,
    ErrorKind::PayloadTooLarge,
    ErrorKind::ContextLengthExceeded,
    ErrorKind::ContentFiltered,
    ErrorKind::InvalidRequest,
];

/// Offenders listed in full in a check; the rest are counted.
const MAX_LISTED: usize = 20;

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Check {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) passed: bool,
    /// What it looked at, and what it found.
    pub(crate) detail: String,
    /// Offending request ids (or places, for keys), with a reason each.
    pub(crate) offenders: Vec<String>,
    /// How many offenders there were (the list is cut at twenty).
    pub(crate) offender_count: usize,
}

impl Check {
    pub(crate) fn new(id: &str, title: &str, detail: String, mut offenders: Vec<String>) -> Check {
        let offender_count = offenders.len();
        offenders.truncate(MAX_LISTED);
        Check {
            id: id.to_owned(),
            title: title.to_owned(),
            passed: offender_count == 0,
            detail,
            offenders,
            offender_count,
        }
    }

    /// A check that could not judge anything (no offenders to list): failed because `why`.
    pub(crate) fn unmet(id: &str, title: &str, detail: String, why: String) -> Check {
        Check::new(id, title, detail, Vec::new()).failed(why)
    }

    pub(crate) fn failed(mut self, why: String) -> Check {
        self.passed = false;
        self.detail = format!("{}; {why}", self.detail);
        self
    }
}

#[cfg(test)]
impl Check {
    /// Asserts that the detail line ends with `tail`, showing the line when it does not.
    pub(crate) fn assert_detail_ends_with(&self, tail: &str) {
        assert!(self.detail.ends_with(tail), "{}", self.detail);
    }
}

/// The seven invariants, in order, then the checks of pooled links (when the chain has one).
pub(crate) fn check_all(r: &Records, tolerance_ms: f64) -> Vec<Check> {
    let mut checks = vec![
        deadline(r, tolerance_ms),
        never_retry(r),
        half_open(r),
        open_breaker(r),
        answered(r),
        no_keys(r),
        no_resend(r),
    ];
    checks.extend(pools::pools(r));
    checks
}

/// True when a vendor call ended in a way that leaves the vendor possibly having processed
/// the request: a timeout, a reset, a truncated or invalid answer, or a call cut mid-flight.
fn ambiguous(w: &CallRec) -> bool {
    match w.end {
        Some(super::record::CallEnd::Dropped) => true,
        Some(super::record::CallEnd::Failed(k)) => matches!(
            k,
            ErrorKind::Timeout
                | ErrorKind::Network
                | ErrorKind::InvalidResponse
                | ErrorKind::DeadlineExceeded
        ),
        _ => false,
    }
}

/// (7) No re-send of a request marked not retry-safe after an ambiguous failure.
pub(crate) fn no_resend(r: &Records) -> Check {
    let by_request = r.wires_by_request();
    let mut offenders = Vec::new();
    let mut unsafe_requests = 0usize;
    let mut ambiguous_ends = 0usize;
    for q in r.requests.iter().filter(|q| !q.retry_safe) {
        unsafe_requests += 1;
        let wires = by_request.get(q.id.as_str()).cloned().unwrap_or_default();
        if let Some(pos) = wires.iter().position(|w| ambiguous(w)) {
            ambiguous_ends += 1;
            let first = wires[pos];
            let after = &wires[pos + 1..];
            if let Some(again) = after.first() {
                let how = match first.end {
                    Some(super::record::CallEnd::Failed(k)) => k.as_str().to_owned(),
                    _ => "cut mid-flight".to_owned(),
                };
                offenders.push(format!(
                    "{}: {} ended {how} (the vendor may have processed it), then it was sent again to {} ({} more time{})",
                    q.id,
                    first.link,
                    again.link,
                    after.len(),
                    if after.len() == 1 { "" } else { "s" }
                ));
            }
        }
    }
    Check::new(
        "no-resend",
        "no re-send of a request marked not retry-safe after an ambiguous failure",
        format!(
            "{unsafe_requests} requests not retry-safe; {ambiguous_ends} met an ambiguous failure"
        ),
        offenders,
    )
}

/// (1) No call returned after its deadline.
pub(crate) fn deadline(r: &Records, tolerance_ms: f64) -> Check {
    let mut offenders = Vec::new();
    let mut worst: f64 = f64::NEG_INFINITY;
    for q in &r.requests {
        // A stream that delivered is bounded by its deadline only up to its first content;
        // then by the stream bound.
        let first = match (q.streamed, q.first_content_ms) {
            (true, Some(fc)) => Some(fc - q.start_ms),
            _ => None,
        };
        if let Some(first) = first
            && first > q.deadline_ms + tolerance_ms
        {
            offenders.push(format!(
                "{}: first content after {:.0} ms (deadline {:.0} ms)",
                q.id, first, q.deadline_ms
            ));
        }
        let bound = match first {
            Some(_) if r.stream_max_ms > 0.0 => r.stream_max_ms,
            _ => q.deadline_ms,
        };
        match q.latency_ms() {
            Some(l) => {
                worst = worst.max(first.unwrap_or(l) - q.deadline_ms);
                if l > bound + tolerance_ms {
                    offenders.push(format!(
                        "{}: returned after {:.0} ms ({} {:.0} ms)",
                        q.id,
                        l,
                        if first.is_some() {
                            "stream bound"
                        } else {
                            "deadline"
                        },
                        bound
                    ));
                }
            }
            None => offenders.push(format!("{}: never returned", q.id)),
        }
    }
    let detail = if worst.is_finite() {
        let closest = if worst <= 0.0 {
            format!("{:.0} ms before", -worst)
        } else {
            format!("{worst:.0} ms after")
        };
        format!(
            "{} requests; the closest returned {closest} its deadline (tolerance {tolerance_ms:.0} ms)",
            r.requests.len()
        )
    } else {
        format!("{} requests", r.requests.len())
    };
    Check::new(
        "deadline",
        "no call returned after its deadline",
        detail,
        offenders,
    )
}

/// Finds a link attempted again after a never-retry kind, in one request's attempts in order.
fn repeated_after_verdict<'a>(
    attempts: impl Iterator<Item = (&'a str, Option<ErrorKind>)>,
) -> Option<(String, ErrorKind, usize)> {
    let mut verdict: HashMap<&str, ErrorKind> = HashMap::new();
    let mut found: Option<(String, ErrorKind, usize)> = None;
    for (link, kind) in attempts {
        if let Some(&k) = verdict.get(link) {
            match &mut found {
                Some((l, _, n)) if l == link => *n += 1,
                Some(_) => {}
                None => found = Some((link.to_owned(), k, 1)),
            }
        }
        if let Some(k) = kind.filter(|k| NEVER_RETRY.contains(k)) {
            verdict.entry(link).or_insert(k);
        }
    }
    found
}

/// (2) No retry of a fail-fast or never-retry kind.
pub(crate) fn never_retry(r: &Records) -> Check {
    let by_request = r.wires_by_request();
    let mut offenders = Vec::new();
    let mut verdicts = 0usize;
    for q in &r.requests {
        let wires = by_request.get(q.id.as_str()).cloned().unwrap_or_default();
        verdicts += wires
            .iter()
            .filter(|w| w.error_kind().is_some_and(|k| NEVER_RETRY.contains(&k)))
            .count();
        let from_wire =
            repeated_after_verdict(wires.iter().map(|w| (w.link.as_str(), w.error_kind())));
        let from_provenance = repeated_after_verdict(
            q.attempts
                .iter()
                .map(|a: &AttemptRec| (a.provider.as_str(), a.error_kind)),
        );
        if let Some((link, kind, n)) = from_wire.or(from_provenance) {
            offenders.push(format!(
                "{}: {link} answered {kind}, then was attempted {n} more time{}",
                q.id,
                if n == 1 { "" } else { "s" }
            ));
        }
    }
    Check::new(
        "never-retry",
        "no retry of a fail-fast or never-retry kind",
        format!(
            "{} vendor attempts; {verdicts} ended with a never-retry kind",
            r.wires.len()
        ),
        offenders,
    )
}

/// Each admission's breaker state and half-open window (the index of the transition into
/// half-open that opened it), from the transitions before it.
fn admission_states(r: &Records) -> Vec<(State, Option<usize>)> {
    let mut by_link: HashMap<&str, Vec<(u64, State, usize)>> = HashMap::new();
    for (i, t) in r.transitions.iter().enumerate() {
        by_link
            .entry(t.link.as_str())
            .or_default()
            .push((t.seq, t.to, i));
    }
    for v in by_link.values_mut() {
        v.sort_by_key(|(seq, ..)| *seq);
    }
    r.admissions
        .iter()
        .map(|a| {
            let last = by_link.get(a.link.as_str()).and_then(|ts| {
                let n = ts.partition_point(|(seq, ..)| *seq < a.start_seq);
                n.checked_sub(1).map(|i| ts[i])
            });
            match last {
                None => (State::Closed, None),
                Some((_, State::HalfOpen, i)) => (State::HalfOpen, Some(i)),
                Some((_, s, _)) => (s, None),
            }
        })
        .collect()
}

/// (3) Half-open probes in flight ≤ the configured permits.
pub(crate) fn half_open(r: &Records) -> Check {
    let states = admission_states(r);
    let mut windows: BTreeMap<usize, Vec<&CallRec>> = BTreeMap::new();
    for (a, (_, w)) in r.admissions.iter().zip(&states) {
        if let Some(w) = w {
            windows.entry(*w).or_default().push(a);
        }
    }
    let mut offenders = Vec::new();
    let mut peak = 0usize;
    let mut probes = 0usize;
    for calls in windows.values() {
        probes += calls.len();
        for a in calls {
            let permits = r.link(&a.link).map_or(1, |l| l.permits.max(1));
            let in_flight = calls
                .iter()
                .filter(|b| b.start_seq <= a.start_seq && b.end_seq.is_none_or(|e| e > a.start_seq))
                .count();
            peak = peak.max(in_flight);
            if in_flight > permits {
                offenders.push(format!(
                    "{}: admitted to {} as probe {in_flight} of at most {permits}",
                    a.request.as_deref().unwrap_or("(no request id)"),
                    a.link
                ));
            }
        }
    }
    Check::new(
        "half-open",
        "half-open probes never exceed the breaker's permits",
        format!(
            "{} half-open windows, {probes} probes, at most {peak} in flight at once",
            windows.len()
        ),
        offenders,
    )
}

/// (4) No call reached a vendor whose breaker was open, except probes.
pub(crate) fn open_breaker(r: &Records) -> Check {
    let states = admission_states(r);
    let mut offenders = Vec::new();
    for (a, (s, _)) in r.admissions.iter().zip(&states) {
        if *s == State::Open {
            offenders.push(format!(
                "{}: admitted to {} while its breaker was open",
                a.request.as_deref().unwrap_or("(no request id)"),
                a.link
            ));
        }
    }
    let mut admitted: HashMap<(&str, &str), Vec<&CallRec>> = HashMap::new();
    for a in &r.admissions {
        if let Some(id) = &a.request {
            admitted
                .entry((id.as_str(), a.link.as_str()))
                .or_default()
                .push(a);
        }
    }
    for w in &r.wires {
        let inside = w.request.as_deref().is_some_and(|id| {
            admitted.get(&(id, w.link.as_str())).is_some_and(|calls| {
                calls
                    .iter()
                    .any(|a| a.start_seq < w.start_seq && a.end_seq.is_none_or(|e| e > w.start_seq))
            })
        });
        if !inside {
            offenders.push(format!(
                "{}: reached {} without passing its breaker",
                w.request.as_deref().unwrap_or("(no request id)"),
                w.link
            ));
        }
    }
    let refused: u64 = r.rejections.values().sum();
    Check::new(
        "open-breaker",
        "no call reached a vendor whose breaker was open, except probes",
        format!(
            "{} admissions, {} vendor attempts; breakers refused {refused} calls",
            r.admissions.len(),
            r.wires.len()
        ),
        offenders,
    )
}

/// (5) Every request got an answer or a classified error; none lost, none hung.
pub(crate) fn answered(r: &Records) -> Check {
    let mut offenders = Vec::new();
    let (mut answers, mut errors) = (0usize, 0usize);
    for q in &r.requests {
        match &q.outcome {
            Outcome::Answered { .. } => answers += 1,
            Outcome::Failed { .. } => errors += 1,
            Outcome::Lost { why } => offenders.push(format!("{}: lost: {why}", q.id)),
            Outcome::Unfinished => offenders.push(format!("{}: never finished", q.id)),
        }
    }
    let check = Check::new(
        "answered",
        "every request got an answer or a classified error",
        format!(
            "{} started: {answers} answers, {errors} classified errors",
            r.requests.len()
        ),
        offenders,
    );
    if r.joined {
        check
    } else {
        check.failed(format!(
            "the users were still busy {:.1} s after the start",
            r.join_limit_ms / 1000.0
        ))
    }
}

/// (6) No API key in any log line, span or report.
pub(crate) fn no_keys(r: &Records) -> Check {
    Check::new(
        "no-keys",
        "no API key appeared in any log line, span or report",
        format!("{} log events, spans and report texts scanned", r.scanned),
        r.leaks
            .iter()
            .map(|l| format!("{}: the key of {}", l.place, l.key_of))
            .collect(),
    )
}

#[cfg(test)]
mod tests;
