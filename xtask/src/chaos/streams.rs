//! The stream invariants, checked in every scenario (they hold trivially where a scenario
//! scripts none of the faults they are about):
//!
//! | id | invariant | read from |
//! | --- | --- | --- |
//! | `no-splice` | no answer carried text from two links without a `Restarted` between them | stream events per request |
//! | `stop-reason-completes` | every vendor stream that carried its stop reason — a clean end without `[DONE]` / `message_stop`, an unparseable event amid a healthy stream — ended successfully | wire calls, the scenario's phases |
//! | `silent-not-resent` | a link that timed out without sending a byte (`silent`) was not tried again for the same request | wire calls, the scenario's phases |
//!
//! The last two map a wire call to the fault its vendor was answering with by its start time;
//! calls that start within [`EDGE_MS`] of a phase change, or in a phase that mixes in other
//! faults, are not judged.

use std::collections::BTreeMap;
use std::time::Duration;

use ripcord_core::ErrorKind;

use super::invariants::Check;
use super::record::{CallEnd, CallRec, Records};
use super::scenario::{Fault, Scenario};

/// Each vendor's phases: start and end (milliseconds into the run) and the faults it may answer
/// with in between.
type Windows = BTreeMap<String, Vec<(f64, f64, Vec<Fault>)>>;

/// Calls this close to a phase change are not judged (the fake switches by its own clock).
const EDGE_MS: f64 = 100.0;

/// The three stream invariants.
pub(crate) fn check_streams(r: &Records, scenario: &Scenario) -> Vec<Check> {
    vec![
        no_splice(r),
        stop_reason_completes(r, scenario),
        silent_not_resent(r, scenario),
    ]
}

/// No client received text from two models in one answer.
pub(crate) fn no_splice(r: &Records) -> Check {
    let streamed = r.requests.iter().filter(|q| q.streamed).count();
    let offenders: Vec<String> = r
        .requests
        .iter()
        .filter_map(|q| {
            q.spliced
                .as_ref()
                .map(|links| format!("{}: text from {links} in one answer", q.id))
        })
        .collect();
    Check::new(
        "no-splice",
        "no answer carries text from two models",
        format!("{streamed} streamed requests"),
        offenders,
    )
}

/// The faults a vendor answers with from each phase on, and when the phase starts and ends.
fn windows(scenario: &Scenario, vendor: &str, run: Duration) -> Vec<(f64, f64, Vec<Fault>)> {
    let phases = scenario.phases_of(vendor, run);
    let mut out: Vec<(f64, f64, Vec<Fault>)> = Vec::new();
    let mut start = 0.0;
    let mut faults = vec![Fault::Ok];
    for (at, phase) in phases {
        let at = at.as_secs_f64() * 1000.0;
        out.push((start, at, faults));
        start = at;
        faults = if phase.p >= 1.0 {
            vec![phase.fault]
        } else {
            vec![phase.fault, phase.otherwise]
        };
    }
    out.push((start, f64::INFINITY, faults));
    out
}

/// The faults the vendor behind `w` may have answered it with, or `None` near a phase change.
fn faults_at<'a>(windows: &'a Windows, w: &CallRec) -> Option<&'a [Fault]> {
    let list = windows.get(&w.link)?;
    list.iter()
        .find(|(start, end, _)| w.start_ms >= start + EDGE_MS && w.start_ms < end - EDGE_MS)
        .map(|(_, _, f)| f.as_slice())
}

fn all_windows(r: &Records, scenario: &Scenario) -> BTreeMap<String, Vec<(f64, f64, Vec<Fault>)>> {
    let run = Duration::from_secs_f64(r.run_ms / 1000.0);
    scenario
        .vendors()
        .into_iter()
        .map(|v| (v.to_owned(), windows(scenario, v, run)))
        .collect()
}

/// Every vendor stream that carried its stop reason ended successfully.
pub(crate) fn stop_reason_completes(r: &Records, scenario: &Scenario) -> Check {
    let windows = all_windows(r, scenario);
    let hostile = |f: &Fault| matches!(f, Fault::StopWithoutDone | Fault::MalformedEvent);
    let mut judged = 0usize;
    let mut offenders = Vec::new();
    for w in &r.wires {
        let Some(faults) = faults_at(&windows, w) else {
            continue;
        };
        // Only phases made of complete answers, at least one of them hostile.
        if !faults.iter().any(hostile)
            || !faults
                .iter()
                .all(|f| hostile(f) || matches!(f, Fault::Ok | Fault::LongStream { .. }))
        {
            continue;
        }
        judged += 1;
        match w.end {
            Some(CallEnd::Failed(k))
                if !matches!(k, ErrorKind::DeadlineExceeded | ErrorKind::Cancelled) =>
            {
                offenders.push(format!(
                    "{}: {} answered with its stop reason ({}) but the call failed: {}",
                    w.request.as_deref().unwrap_or("?"),
                    w.link,
                    faults
                        .iter()
                        .map(|f| f.name())
                        .collect::<Vec<_>>()
                        .join(" / "),
                    k.as_str()
                ));
            }
            _ => {}
        }
    }
    Check::new(
        "stop-reason-completes",
        "every stream that carried a stop reason ends successfully",
        format!("{judged} vendor calls answered without a terminator or with an unparseable event"),
        offenders,
    )
}

/// No attempt was re-sent to a silent link within one request.
pub(crate) fn silent_not_resent(r: &Records, scenario: &Scenario) -> Check {
    let windows = all_windows(r, scenario);
    let mut silent_timeouts = 0usize;
    let mut offenders = Vec::new();
    for (id, wires) in r.wires_by_request() {
        for (i, w) in wires.iter().enumerate() {
            let silent = faults_at(&windows, w).is_some_and(|f| f == [Fault::Silent]);
            if !silent || w.error_kind() != Some(ErrorKind::Timeout) {
                continue;
            }
            silent_timeouts += 1;
            let again = wires[i + 1..].iter().filter(|l| l.link == w.link).count();
            if again > 0 {
                offenders.push(format!(
                    "{id}: {} sent no byte and timed out, then was tried {again} more time{}",
                    w.link,
                    if again == 1 { "" } else { "s" }
                ));
            }
        }
    }
    Check::new(
        "silent-not-resent",
        "no attempt is re-sent to a silent link",
        format!("{silent_timeouts} calls timed out on a silent link"),
        offenders,
    )
}

#[cfg(test)]
mod tests {
    use super::super::scenario::{Phase, builtins};
    use super::*;

    fn wire(request: &str, link: &str, seq: u64, at: f64, end: CallEnd) -> CallRec {
        CallRec {
            request: Some(request.to_owned()),
            link: link.to_owned(),
            start_seq: seq,
            start_ms: at,
            end_seq: Some(seq + 1),
            end_ms: Some(at + 10.0),
            end: Some(end),
        }
    }

    #[test]
    fn the_stream_invariants_catch_what_they_are_about() {
        let mut sc = builtins()
            .into_iter()
            .find(|s| s.name == "hostile-streams")
            .unwrap();
        sc.phases = vec![
            Phase::new("primary", 0.0, Fault::Silent),
            Phase::new("primary", 0.5, Fault::StopWithoutDone),
        ];
        let mut r = Records {
            run_ms: 2000.0,
            ..Records::default()
        };
        let timeout = CallEnd::Failed(ErrorKind::Timeout);
        r.wires = vec![
            // Silent, then again on the same link: re-sent.
            wire("a", "primary", 1, 300.0, timeout),
            wire("a", "primary", 3, 600.0, timeout),
            // Silent, then the next link: fine.
            wire("b", "primary", 5, 300.0, timeout),
            wire("b", "backup", 7, 400.0, CallEnd::Ok),
            // A stop-reason stream that failed.
            wire(
                "c",
                "primary",
                9,
                1500.0,
                CallEnd::Failed(ErrorKind::Network),
            ),
            wire("d", "primary", 11, 1500.0, CallEnd::Ok),
        ];
        let c = silent_not_resent(&r, &sc);
        assert!(!c.passed);
        assert_eq!(c.offender_count, 1, "{:?}", c.offenders);
        assert!(c.offenders[0].starts_with("a:"));
        let c = stop_reason_completes(&r, &sc);
        assert_eq!(c.offender_count, 1, "{:?}", c.offenders);
        assert!(c.offenders[0].starts_with("c:"));
        assert!(no_splice(&r).passed);
    }
}
