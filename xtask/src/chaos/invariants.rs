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
use super::scenario::{Expect, MaxTrips, STATIC};

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
    fn new(id: &str, title: &str, detail: String, mut offenders: Vec<String>) -> Check {
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

    fn failed(mut self, why: String) -> Check {
        self.passed = false;
        self.detail = format!("{}; {why}", self.detail);
        self
    }
}

/// The seven invariants, in order.
pub(crate) fn check_all(r: &Records, tolerance_ms: f64) -> Vec<Check> {
    vec![
        deadline(r, tolerance_ms),
        never_retry(r),
        half_open(r),
        open_breaker(r),
        answered(r),
        no_keys(r),
        no_resend(r),
    ]
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
    let mut by_request: BTreeMap<&str, Vec<&CallRec>> = BTreeMap::new();
    for w in &r.wires {
        if let Some(id) = &w.request {
            by_request.entry(id.as_str()).or_default().push(w);
        }
    }
    let mut offenders = Vec::new();
    let mut unsafe_requests = 0usize;
    let mut ambiguous_ends = 0usize;
    for q in r.requests.iter().filter(|q| !q.retry_safe) {
        unsafe_requests += 1;
        let mut wires = by_request.get(q.id.as_str()).cloned().unwrap_or_default();
        wires.sort_by_key(|w| w.start_seq);
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
    let mut by_request: BTreeMap<&str, Vec<&CallRec>> = BTreeMap::new();
    for w in &r.wires {
        if let Some(id) = &w.request {
            by_request.entry(id.as_str()).or_default().push(w);
        }
    }
    let mut offenders = Vec::new();
    let mut verdicts = 0usize;
    for q in &r.requests {
        let mut wires = by_request.get(q.id.as_str()).cloned().unwrap_or_default();
        wires.sort_by_key(|w| w.start_seq);
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

/// Requests each link (or `static`) answered.
pub(crate) fn served_counts(r: &Records) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for q in &r.requests {
        if let Outcome::Answered {
            served_by,
            static_reply,
        } = &q.outcome
        {
            let who = if *static_reply {
                STATIC
            } else {
                served_by.as_str()
            };
            *m.entry(who.to_owned()).or_default() += 1;
        }
    }
    m
}

/// Breaker trips (transitions into open) per link.
pub(crate) fn trips(r: &Records) -> BTreeMap<String, usize> {
    let mut m: BTreeMap<String, usize> = r.links.iter().map(|l| (l.name.clone(), 0)).collect();
    for t in &r.transitions {
        if t.to == State::Open {
            *m.entry(t.link.clone()).or_default() += 1;
        }
    }
    m
}

/// The scenario's expectations.
pub(crate) fn expectations(r: &Records, e: &Expect) -> Vec<Check> {
    let mut out = Vec::new();
    if !e.must_serve.is_empty() {
        let served = served_counts(r);
        let missing: Vec<String> = e
            .must_serve
            .iter()
            .filter(|w| served.get(w.as_str()).copied().unwrap_or(0) == 0)
            .map(|w| format!("{w}: answered no request"))
            .collect();
        let shown: Vec<String> = e
            .must_serve
            .iter()
            .map(|w| format!("{w} {}", served.get(w.as_str()).copied().unwrap_or(0)))
            .collect();
        out.push(Check::new(
            "must-serve",
            &format!("{} each answer some requests", e.must_serve.join(", ")),
            format!("answered: {}", shown.join(", ")),
            missing,
        ));
    }
    if let Some(bound) = e.max_trips {
        let mut offenders = Vec::new();
        let mut shown = Vec::new();
        for (link, n) in trips(r) {
            let max = match bound {
                MaxTrips::Fixed(n) => n as usize,
                MaxTrips::Auto => {
                    let open = r.link(&link).map_or(1, |l| l.open_ms.max(1)) as f64;
                    let run = r
                        .requests
                        .iter()
                        .filter_map(|q| q.end_ms)
                        .fold(r.run_ms, f64::max);
                    (run / open).ceil() as usize + 1
                }
            };
            // Each trip brings at most two more transitions (to half-open, then closed or
            // open again): more means the state machine moves without tripping.
            let moves = r.transitions.iter().filter(|t| t.link == link).count();
            shown.push(format!("{link} {n}/{max} ({moves} transitions)"));
            if n > max {
                offenders.push(format!("{link}: tripped {n} times, at most {max} allowed"));
            } else if moves > 3 * max {
                offenders.push(format!(
                    "{link}: {moves} transitions, at most {} allowed",
                    3 * max
                ));
            }
        }
        out.push(Check::new(
            "no-thrash",
            "breakers do not thrash (trips and transitions per link bounded)",
            format!("trips/bound: {}", shown.join(", ")),
            offenders,
        ));
    }
    if let Some(min) = e.min_answered_pct {
        // A request marked not retry-safe whose vendor may have processed it before failing
        // must not be sent anywhere else: its honest classified error counts as handled.
        let mut ambiguous_unsafe: BTreeMap<&str, bool> = BTreeMap::new();
        for w in &r.wires {
            if let Some(id) = &w.request
                && ambiguous(w)
            {
                ambiguous_unsafe.insert(id.as_str(), true);
            }
        }
        let handled = |q: &&super::record::RequestRec| match q.outcome {
            Outcome::Answered { .. } => true,
            Outcome::Failed { .. } => !q.retry_safe && ambiguous_unsafe.contains_key(q.id.as_str()),
            _ => false,
        };
        let total = r.requests.len();
        let answers = r
            .requests
            .iter()
            .filter(|q| matches!(q.outcome, Outcome::Answered { .. }))
            .count();
        let held = r.requests.iter().filter(handled).count() - answers;
        let pct = if total == 0 {
            0.0
        } else {
            (answers + held) as f64 * 100.0 / total as f64
        };
        let offenders: Vec<String> = if pct + 1e-9 < min {
            r.requests
                .iter()
                .filter(|q| !handled(q))
                .map(|q| format!("{}: not answered", q.id))
                .collect()
        } else {
            Vec::new()
        };
        let answers_detail = if held == 0 {
            format!("{answers} of {total} answered ({pct:.1}%)")
        } else {
            format!(
                "{answers} of {total} answered, {held} not retry-safe ended with an honest error after an ambiguous failure ({pct:.1}%)"
            )
        };
        let mut c = Check::new(
            "answered-share",
            &format!("at least {min:.0}% of requests answered"),
            answers_detail,
            offenders,
        );
        if total == 0 {
            c = c.failed("no requests were made".to_owned());
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::record::{CallEnd, Leak, LinkInfo, RequestRec, TransitionRec};
    use super::*;

    fn link(name: &str, permits: usize) -> LinkInfo {
        LinkInfo {
            name: name.to_owned(),
            kind: "openai".to_owned(),
            permits,
            open_ms: 1000,
            failure_threshold: 3,
        }
    }

    fn req(id: &str, start: f64, end: Option<f64>, outcome: Outcome) -> RequestRec {
        RequestRec {
            id: id.to_owned(),
            retry_safe: true,
            first_content_ms: None,
            user: 0,
            streamed: false,
            start_ms: start,
            end_ms: end,
            deadline_ms: 1000.0,
            outcome,
            attempts: Vec::new(),
            spliced: None,
        }
    }

    fn ok(by: &str) -> Outcome {
        Outcome::Answered {
            served_by: by.to_owned(),
            static_reply: by == STATIC,
        }
    }

    fn call(
        id: &str,
        link: &str,
        start: u64,
        end: Option<u64>,
        kind: Option<ErrorKind>,
    ) -> CallRec {
        CallRec {
            request: Some(id.to_owned()),
            link: link.to_owned(),
            start_seq: start,
            start_ms: start as f64,
            end_seq: end,
            end_ms: end.map(|e| e as f64),
            end: end.map(|_| kind.map_or(CallEnd::Ok, CallEnd::Failed)),
        }
    }

    fn tr(link: &str, from: State, to: State, seq: u64) -> TransitionRec {
        TransitionRec {
            link: link.to_owned(),
            from,
            to,
            seq,
            at_ms: seq as f64,
            open_for_ms: (to == State::Open).then_some(1000.0),
            cause: None,
        }
    }

    fn records() -> Records {
        Records {
            links: vec![link("primary", 1), link("backup", 2)],
            joined: true,
            run_ms: 2000.0,
            ..Records::default()
        }
    }

    #[test]
    fn a_stream_is_held_to_its_deadline_until_first_content_then_to_the_stream_bound() {
        let mut r = records();
        r.stream_max_ms = 8000.0;
        let stream = |id: &str, first: Option<f64>, end: f64| {
            let mut q = req(id, 0.0, Some(end), ok("primary"));
            q.streamed = true;
            q.first_content_ms = first;
            q
        };
        r.requests = vec![
            stream("long", Some(40.0), 5000.0),
            stream("late-first", Some(1500.0), 2000.0),
            stream("past-bound", Some(40.0), 9000.0),
            stream("no-content", None, 1600.0),
        ];
        let c = deadline(&r, 100.0);
        let ids: Vec<&str> = c
            .offenders
            .iter()
            .map(|o| o.split(':').next().unwrap())
            .collect();
        assert_eq!(ids, ["late-first", "past-bound", "no-content"], "{c:?}");
    }

    #[test]
    fn no_resend_flags_a_second_send_of_an_unsafe_request_after_an_ambiguous_failure() {
        let mut r = records();
        let unsafe_req = |id: &str| {
            let mut q = req(id, 0.0, Some(10.0), ok("backup"));
            q.retry_safe = false;
            q
        };
        r.requests = vec![
            unsafe_req("resent"),
            unsafe_req("fine"),
            unsafe_req("refused-then-retried"),
            req("safe", 0.0, Some(10.0), ok("backup")),
        ];
        r.wires = vec![
            call("resent", "primary", 1, Some(2), Some(ErrorKind::Network)),
            call("resent", "backup", 3, Some(4), None),
            call("fine", "primary", 5, Some(6), Some(ErrorKind::Timeout)),
            // Not ambiguous: the vendor answered 503 at once; another try is fine.
            call(
                "refused-then-retried",
                "primary",
                7,
                Some(8),
                Some(ErrorKind::Overloaded),
            ),
            call("refused-then-retried", "backup", 9, Some(10), None),
            // Retry-safe: may be sent again.
            call("safe", "primary", 11, Some(12), Some(ErrorKind::Network)),
            call("safe", "backup", 13, Some(14), None),
        ];
        let c = no_resend(&r);
        assert!(!c.passed);
        assert_eq!(c.offender_count, 1, "{c:?}");
        assert!(
            c.offenders[0].starts_with("resent: primary ended network"),
            "{c:?}"
        );
    }

    #[test]
    fn an_unsafe_request_ending_in_an_honest_error_after_an_ambiguous_failure_is_handled() {
        let mut r = records();
        let failed = || Outcome::Failed {
            kind: ErrorKind::Timeout,
        };
        let mut u = req("u", 0.0, Some(10.0), failed());
        u.retry_safe = false;
        r.requests = vec![u, req("s", 0.0, Some(10.0), failed())];
        r.wires = vec![
            call("u", "primary", 1, Some(2), Some(ErrorKind::Timeout)),
            call("s", "primary", 3, Some(4), Some(ErrorKind::Timeout)),
        ];
        let e = Expect {
            min_answered_pct: Some(100.0),
            ..Expect::default()
        };
        let c = expectations(&r, &e)
            .into_iter()
            .find(|c| c.id == "answered-share")
            .unwrap();
        assert!(!c.passed);
        assert_eq!(c.offenders, ["s: not answered"], "{c:?}");
        assert!(c.detail.contains("1 not retry-safe"), "{c:?}");
    }

    #[test]
    fn deadline_flags_late_and_missing_returns() {
        let mut r = records();
        r.requests = vec![
            req("u0-1", 0.0, Some(900.0), ok("primary")),
            req("u0-2", 0.0, Some(1100.0), ok("static")),
            req("u0-3", 0.0, Some(1200.0), ok("backup")),
            req("u0-4", 0.0, None, Outcome::Unfinished),
        ];
        let c = deadline(&r, 150.0);
        assert!(!c.passed);
        assert_eq!(c.offender_count, 2, "{c:?}");
        assert!(c.offenders[0].starts_with("u0-3: returned after 1200 ms"));
        assert_eq!(c.offenders[1], "u0-4: never returned");
        r.requests.truncate(2);
        assert!(deadline(&r, 150.0).passed);
    }

    #[test]
    fn never_retry_reads_wire_attempts_and_provenance() {
        let mut r = records();
        r.requests = vec![
            req("a", 0.0, Some(10.0), ok("backup")),
            req("b", 0.0, Some(10.0), ok("backup")),
            req("c", 0.0, Some(10.0), ok("primary")),
        ];
        r.wires = vec![
            // a: quota on primary, then backup: fine.
            call("a", "primary", 1, Some(2), Some(ErrorKind::QuotaExhausted)),
            call("a", "backup", 3, Some(4), None),
            // b: quota on primary, then primary again twice: the naive retry.
            call("b", "primary", 5, Some(6), Some(ErrorKind::QuotaExhausted)),
            call("b", "primary", 7, Some(8), Some(ErrorKind::QuotaExhausted)),
            call("b", "primary", 9, Some(10), Some(ErrorKind::QuotaExhausted)),
            call("b", "backup", 11, Some(12), None),
            // c: a retryable 500 retried on primary: fine.
            call("c", "primary", 13, Some(14), Some(ErrorKind::ServerError)),
            call("c", "primary", 15, Some(16), None),
        ];
        let c = never_retry(&r);
        assert!(!c.passed);
        assert_eq!(
            c.offenders,
            ["b: primary answered quota_exhausted, then was attempted 2 more times"]
        );
        // The same found in provenance alone.
        r.wires.clear();
        r.requests[2].attempts = vec![
            AttemptRec {
                provider: "primary".into(),
                error_kind: Some(ErrorKind::Auth),
                latency_ms: 1.0,
            },
            AttemptRec {
                provider: "primary".into(),
                error_kind: None,
                latency_ms: 1.0,
            },
        ];
        let c = never_retry(&r);
        assert_eq!(
            c.offenders,
            ["c: primary answered auth, then was attempted 1 more time"]
        );
        r.requests[2].attempts[1].provider = "backup".into();
        assert!(never_retry(&r).passed);
    }

    #[test]
    fn half_open_counts_probes_in_flight_per_window() {
        let mut r = records();
        r.transitions = vec![
            tr("primary", State::Closed, State::Open, 10),
            tr("primary", State::Open, State::HalfOpen, 20),
            tr("primary", State::HalfOpen, State::Closed, 40),
        ];
        r.admissions = vec![
            call("x", "primary", 5, Some(30), None), // closed, still running: not a probe
            call("p1", "primary", 21, Some(39), None), // the probe
            call("y", "primary", 41, Some(42), None), // closed again
        ];
        let c = half_open(&r);
        assert!(c.passed, "{c:?}");
        assert_eq!(
            c.detail,
            "1 half-open windows, 1 probes, at most 1 in flight at once"
        );
        // A second probe while the first is in flight: a stampede.
        r.admissions.push(call("p2", "primary", 25, Some(35), None));
        let c = half_open(&r);
        assert!(!c.passed);
        assert_eq!(
            c.offenders,
            ["p2: admitted to primary as probe 2 of at most 1"]
        );
        // The same on backup, whose breaker has two permits, is fine.
        for t in &mut r.transitions {
            t.link = "backup".into();
        }
        for a in &mut r.admissions {
            a.link = "backup".into();
        }
        assert!(half_open(&r).passed);
        // Sequential probes in one window (the first was ignored) are fine too.
        let mut r = records();
        r.transitions = vec![
            tr("primary", State::Closed, State::Open, 1),
            tr("primary", State::Open, State::HalfOpen, 2),
        ];
        r.admissions = vec![
            call("p1", "primary", 3, Some(4), None),
            call("p2", "primary", 5, None, None),
        ];
        assert!(half_open(&r).passed);
    }

    #[test]
    fn open_breaker_flags_admissions_while_open_and_bypasses() {
        let mut r = records();
        r.transitions = vec![
            tr("primary", State::Closed, State::Open, 10),
            tr("primary", State::Open, State::HalfOpen, 20),
        ];
        r.admissions = vec![
            call("a", "primary", 1, Some(9), None),
            call("b", "primary", 21, Some(25), None),
        ];
        r.wires = vec![
            call("a", "primary", 2, Some(3), Some(ErrorKind::ServerError)),
            call("a", "primary", 4, Some(12), None), // a retry still inside a's admission
            call("b", "primary", 22, Some(23), None),
        ];
        let c = open_breaker(&r);
        assert!(c.passed, "{c:?}");
        r.admissions.push(call("c", "primary", 15, Some(16), None));
        r.wires.push(call("d", "primary", 17, Some(18), None));
        r.wires.push(call("a", "primary", 30, Some(31), None));
        let c = open_breaker(&r);
        assert!(!c.passed);
        assert_eq!(
            c.offenders,
            [
                "c: admitted to primary while its breaker was open",
                "d: reached primary without passing its breaker",
                "a: reached primary without passing its breaker",
            ]
        );
    }

    #[test]
    fn answered_flags_lost_unfinished_and_late_users() {
        let mut r = records();
        r.requests = vec![
            req("a", 0.0, Some(1.0), ok("primary")),
            req(
                "b",
                0.0,
                Some(1.0),
                Outcome::Failed {
                    kind: ErrorKind::ContentFiltered,
                },
            ),
        ];
        assert!(answered(&r).passed);
        r.requests.push(req(
            "c",
            0.0,
            Some(1.0),
            Outcome::Lost {
                why: "no finish".into(),
            },
        ));
        r.requests.push(req("d", 0.0, None, Outcome::Unfinished));
        let c = answered(&r);
        assert_eq!(c.offenders, ["c: lost: no finish", "d: never finished"]);
        r.requests.truncate(2);
        r.joined = false;
        r.join_limit_ms = 9000.0;
        let c = answered(&r);
        assert!(!c.passed);
        assert!(
            c.detail.ends_with("still busy 9.0 s after the start"),
            "{}",
            c.detail
        );
    }

    #[test]
    fn no_keys_fails_on_any_leak() {
        let mut r = records();
        r.scanned = 10;
        assert!(no_keys(&r).passed);
        r.leaks.push(Leak {
            place: "event ripcord.vendor_error field message".into(),
            key_of: "primary".into(),
        });
        let c = no_keys(&r);
        assert!(!c.passed);
        assert_eq!(
            c.offenders,
            ["event ripcord.vendor_error field message: the key of primary"]
        );
    }

    #[test]
    fn expectations_check_serving_trips_and_answers() {
        let mut r = records();
        r.requests = vec![
            req("a", 0.0, Some(1.0), ok("primary")),
            req("b", 0.0, Some(1.0), ok(STATIC)),
            req(
                "c",
                0.0,
                Some(1.0),
                Outcome::Failed {
                    kind: ErrorKind::InvalidRequest,
                },
            ),
        ];
        r.transitions = (0..4)
            .map(|i| tr("primary", State::Closed, State::Open, i))
            .collect();
        let e = Expect {
            must_serve: vec!["primary".into(), "backup".into(), STATIC.into()],
            max_trips: Some(MaxTrips::Auto),
            min_answered_pct: Some(60.0),
        };
        let c = expectations(&r, &e);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].offenders, ["backup: answered no request"]);
        // 2 s at 1 s open: at most 3 trips.
        assert_eq!(
            c[1].offenders,
            ["primary: tripped 4 times, at most 3 allowed"]
        );
        assert!(c[2].passed, "{:?}", c[2]);
        let e = Expect {
            must_serve: vec![],
            max_trips: Some(MaxTrips::Fixed(4)),
            min_answered_pct: Some(90.0),
        };
        let c = expectations(&r, &e);
        assert!(c[0].passed);
        assert!(!c[1].passed);
        assert_eq!(c[1].offenders, ["c: not answered"]);
    }
}
