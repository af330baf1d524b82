//! The scenario's own expectations (who must serve, how often a breaker may trip, the share of
//! requests answered), and the counts they read.

use std::collections::BTreeMap;

use super::super::record::{Outcome, Records, State};
use super::super::scenario::{Expect, MaxTrips, STATIC};
use super::{Check, ambiguous};

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
        let handled = |q: &&super::super::record::RequestRec| match q.outcome {
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
