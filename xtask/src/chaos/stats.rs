//! What the chain did in a scenario, in numbers: who served, how fast, how often it retried
//! and fell back, and what the breakers did.

use std::collections::BTreeMap;

use serde::Serialize;

use super::invariants::{served_counts, trips};
use super::record::{Outcome, Records, State};
use super::scenario::STATIC;

/// A share of the requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Share {
    pub(crate) who: String,
    pub(crate) count: usize,
    pub(crate) pct: f64,
}

/// Latency percentiles over the requests that returned, in milliseconds (nearest rank).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub(crate) struct Latency {
    pub(crate) p50: f64,
    pub(crate) p95: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
}

/// Requests that went from one link to the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Fallback {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) count: usize,
}

/// One breaker over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct BreakerSummary {
    pub(crate) link: String,
    pub(crate) transitions: usize,
    pub(crate) trips: usize,
    pub(crate) open_ms: f64,
    pub(crate) refused: u64,
}

impl BreakerSummary {
    /// Its transitions, trips, time open (in seconds, after `unit_gap`) and refusals, for the
    /// reports.
    pub(crate) fn counts(&self, unit_gap: &str) -> String {
        format!(
            "{} transitions, {} trips, open {:.1}{unit_gap}s, refused {}",
            self.transitions,
            self.trips,
            self.open_ms / 1000.0,
            self.refused
        )
    }
}

/// A stretch of time a breaker spent open or half-open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Band {
    pub(crate) from_ms: f64,
    pub(crate) to_ms: f64,
    pub(crate) state: State,
}

/// A scenario's numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Summary {
    pub(crate) requests: usize,
    pub(crate) streamed: usize,
    pub(crate) by_model: usize,
    pub(crate) by_static: usize,
    pub(crate) errors: usize,
    /// Lost or unfinished.
    pub(crate) lost: usize,
    pub(crate) success_pct: f64,
    pub(crate) static_pct: f64,
    pub(crate) error_pct: f64,
    /// Links in chain order, then `static`.
    pub(crate) served_by: Vec<Share>,
    pub(crate) errors_by_kind: BTreeMap<String, usize>,
    pub(crate) latency_ms: Latency,
    /// Vendor attempts beyond the first per link, per request.
    pub(crate) retries_per_call: f64,
    /// Vendor attempts per request.
    pub(crate) attempts_per_call: f64,
    pub(crate) fallbacks: Vec<Fallback>,
    pub(crate) breakers: Vec<BreakerSummary>,
    /// Requests each fake server counted.
    pub(crate) vendor_hits: BTreeMap<String, usize>,
    /// Vendor attempts the observers saw, per link.
    pub(crate) wire_attempts: BTreeMap<String, usize>,
    /// When the last request ended (or the users stopped), in milliseconds.
    pub(crate) end_ms: f64,
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

/// Nearest-rank percentile of sorted values.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// When the scenario's records end.
pub(crate) fn end_ms(r: &Records) -> f64 {
    r.requests
        .iter()
        .filter_map(|q| q.end_ms)
        .fold(r.run_ms, f64::max)
}

/// The open and half-open stretches of a link's breaker. An open breaker whose open time has
/// passed counts as half-open (it lets the next call through as a probe).
pub(crate) fn bands(r: &Records, link: &str) -> Vec<Band> {
    let end = end_ms(r);
    let mut ts: Vec<_> = r.transitions.iter().filter(|t| t.link == link).collect();
    ts.sort_by_key(|t| t.seq);
    let mut out = Vec::new();
    for (i, t) in ts.iter().enumerate() {
        let next = ts.get(i + 1).map_or(end, |n| n.at_ms).max(t.at_ms);
        match t.to {
            State::Open => {
                let until = t.open_for_ms.map_or(next, |d| (t.at_ms + d).min(next));
                out.push(Band {
                    from_ms: t.at_ms,
                    to_ms: until,
                    state: State::Open,
                });
                if until < next {
                    out.push(Band {
                        from_ms: until,
                        to_ms: next,
                        state: State::HalfOpen,
                    });
                }
            }
            State::HalfOpen => out.push(Band {
                from_ms: t.at_ms,
                to_ms: next,
                state: State::HalfOpen,
            }),
            State::Closed => {}
        }
    }
    // Merge a half-open-by-time stretch with the half-open transition that follows it.
    let mut merged: Vec<Band> = Vec::with_capacity(out.len());
    for b in out {
        match merged.last_mut() {
            Some(last) if last.state == b.state && (last.to_ms - b.from_ms).abs() < 1e-9 => {
                last.to_ms = b.to_ms;
            }
            _ => merged.push(b),
        }
    }
    merged
}

/// The link sequence of one request's attempts, consecutive repeats collapsed.
fn hops(attempts: &[super::record::AttemptRec]) -> Vec<&str> {
    let mut v: Vec<&str> = Vec::new();
    for a in attempts {
        if v.last() != Some(&a.provider.as_str()) {
            v.push(a.provider.as_str());
        }
    }
    v
}

/// Summarises a run.
pub(crate) fn summarize(r: &Records) -> Summary {
    let total = r.requests.len();
    let (mut by_model, mut by_static, mut errors, mut lost) = (0, 0, 0, 0);
    let mut errors_by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut fallbacks: BTreeMap<(String, String), usize> = BTreeMap::new();
    for q in &r.requests {
        let mut path = hops(&q.attempts);
        match &q.outcome {
            Outcome::Answered {
                static_reply: true, ..
            } => {
                by_static += 1;
                path.push(STATIC);
            }
            Outcome::Answered { .. } => by_model += 1,
            Outcome::Failed { kind } => {
                errors += 1;
                *errors_by_kind.entry(kind.as_str().to_owned()).or_default() += 1;
            }
            Outcome::Lost { .. } | Outcome::Unfinished => lost += 1,
        }
        for w in path.windows(2) {
            *fallbacks
                .entry((w[0].to_owned(), w[1].to_owned()))
                .or_default() += 1;
        }
    }
    let served = served_counts(r);
    let mut served_by: Vec<Share> = r
        .links
        .iter()
        .map(|l| l.name.as_str())
        .chain([STATIC])
        .map(|who| {
            let count = served.get(who).copied().unwrap_or(0);
            Share {
                who: who.to_owned(),
                count,
                pct: pct(count, total),
            }
        })
        .collect();
    // Anyone else who served (a link the records do not list): shown too, not hidden.
    for (who, &count) in &served {
        if !served_by.iter().any(|s| &s.who == who) {
            served_by.push(Share {
                who: who.clone(),
                count,
                pct: pct(count, total),
            });
        }
    }
    let mut lat: Vec<f64> = r.requests.iter().filter_map(|q| q.latency_ms()).collect();
    lat.sort_by(f64::total_cmp);
    let latency_ms = Latency {
        p50: percentile(&lat, 50.0),
        p95: percentile(&lat, 95.0),
        p99: percentile(&lat, 99.0),
        max: lat.last().copied().unwrap_or(0.0),
    };
    let mut per_request_link: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut wire_attempts: BTreeMap<String, usize> = BTreeMap::new();
    for w in &r.wires {
        *wire_attempts.entry(w.link.clone()).or_default() += 1;
        if let Some(id) = &w.request {
            *per_request_link
                .entry((id.as_str(), w.link.as_str()))
                .or_default() += 1;
        }
    }
    let retries: usize = per_request_link.values().map(|n| n - 1).sum();
    let trip_counts = trips(r);
    let breakers = r
        .links
        .iter()
        .map(|l| BreakerSummary {
            link: l.name.clone(),
            transitions: r.transitions.iter().filter(|t| t.link == l.name).count(),
            trips: trip_counts.get(&l.name).copied().unwrap_or(0),
            open_ms: bands(r, &l.name)
                .iter()
                .filter(|b| b.state == State::Open)
                .fold(0.0, |sum, b| sum + (b.to_ms - b.from_ms)),
            refused: r.rejections.get(&l.name).copied().unwrap_or(0),
        })
        .collect();
    let mut fallbacks: Vec<Fallback> = fallbacks
        .into_iter()
        .map(|((from, to), count)| Fallback { from, to, count })
        .collect();
    fallbacks.sort_by(|a, b| b.count.cmp(&a.count).then(a.from.cmp(&b.from)));
    Summary {
        requests: total,
        streamed: r.requests.iter().filter(|q| q.streamed).count(),
        by_model,
        by_static,
        errors,
        lost,
        success_pct: pct(by_model, total),
        static_pct: pct(by_static, total),
        error_pct: pct(errors + lost, total),
        served_by,
        errors_by_kind,
        latency_ms,
        retries_per_call: if total == 0 {
            0.0
        } else {
            retries as f64 / total as f64
        },
        attempts_per_call: if total == 0 {
            0.0
        } else {
            r.wires.len() as f64 / total as f64
        },
        fallbacks,
        breakers,
        vendor_hits: r.hits.clone(),
        wire_attempts,
        end_ms: end_ms(r),
    }
}

#[cfg(test)]
mod tests {
    use ripcord_core::ErrorKind;

    use super::super::record::{AttemptRec, CallRec, LinkInfo, RequestRec, TransitionRec};
    use super::*;

    fn attempt(p: &str, kind: Option<ErrorKind>) -> AttemptRec {
        AttemptRec {
            provider: p.into(),
            error_kind: kind,
            latency_ms: 1.0,
        }
    }

    fn req(id: &str, latency: f64, outcome: Outcome, attempts: Vec<AttemptRec>) -> RequestRec {
        RequestRec {
            streamed: id.ends_with('s'),
            deadline_ms: 3000.0,
            ..RequestRec::sample(id, 100.0, Some(100.0 + latency), outcome, attempts)
        }
    }

    fn wire(id: &str, link: &str) -> CallRec {
        CallRec {
            request: Some(id.into()),
            link: link.into(),
            start_seq: 0,
            start_ms: 0.0,
            end_seq: None,
            end_ms: None,
            end: None,
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 95.0), 95.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn summary_counts_shares_fallbacks_retries_and_open_time() {
        let served = |by: &str| Outcome::Answered {
            served_by: by.into(),
            static_reply: by == STATIC,
        };
        let e = Some(ErrorKind::Overloaded);
        let r = Records {
            links: ["primary", "backup"]
                .iter()
                .map(|n| LinkInfo::sample(n, 1, 1000))
                .collect(),
            requests: vec![
                req("a", 10.0, served("primary"), vec![attempt("primary", None)]),
                req(
                    "bs",
                    30.0,
                    served("backup"),
                    vec![
                        attempt("primary", e),
                        attempt("primary", e),
                        attempt("backup", None),
                    ],
                ),
                req(
                    "c",
                    50.0,
                    served(STATIC),
                    vec![attempt("primary", e), attempt("backup", e)],
                ),
                req(
                    "d",
                    20.0,
                    Outcome::Failed {
                        kind: ErrorKind::ContentFiltered,
                    },
                    vec![attempt("primary", Some(ErrorKind::ContentFiltered))],
                ),
            ],
            wires: vec![
                wire("a", "primary"),
                wire("bs", "primary"),
                wire("bs", "primary"),
                wire("bs", "backup"),
                wire("c", "primary"),
                wire("c", "backup"),
                wire("d", "primary"),
            ],
            transitions: vec![
                TransitionRec {
                    link: "primary".into(),
                    from: State::Closed,
                    to: State::Open,
                    seq: 1,
                    at_ms: 200.0,
                    open_for_ms: Some(1000.0),
                    cause: e,
                },
                TransitionRec {
                    link: "primary".into(),
                    from: State::Open,
                    to: State::HalfOpen,
                    seq: 2,
                    at_ms: 1500.0,
                    open_for_ms: None,
                    cause: None,
                },
                TransitionRec {
                    link: "primary".into(),
                    from: State::HalfOpen,
                    to: State::Closed,
                    seq: 3,
                    at_ms: 1600.0,
                    open_for_ms: None,
                    cause: None,
                },
            ],
            run_ms: 2000.0,
            joined: true,
            ..Records::default()
        };
        let s = summarize(&r);
        assert_eq!(
            (s.requests, s.streamed, s.by_model, s.by_static, s.errors),
            (4, 1, 2, 1, 1)
        );
        assert_eq!(
            (s.success_pct, s.static_pct, s.error_pct),
            (50.0, 25.0, 25.0)
        );
        let shares: Vec<(&str, usize)> = s
            .served_by
            .iter()
            .map(|x| (x.who.as_str(), x.count))
            .collect();
        assert_eq!(shares, [("primary", 1), ("backup", 1), (STATIC, 1)]);
        assert_eq!(s.errors_by_kind["content_filtered"], 1);
        assert_eq!(s.latency_ms.p50, 20.0);
        assert_eq!(s.latency_ms.p99, 50.0);
        assert_eq!(s.retries_per_call, 0.25);
        assert_eq!(s.attempts_per_call, 7.0 / 4.0);
        let fb: Vec<(&str, &str, usize)> = s
            .fallbacks
            .iter()
            .map(|f| (f.from.as_str(), f.to.as_str(), f.count))
            .collect();
        assert_eq!(fb, [("primary", "backup", 2), ("backup", STATIC, 1)]);
        let b = &s.breakers[0];
        assert_eq!((b.transitions, b.trips, b.open_ms), (3, 1, 1000.0));
        assert_eq!(
            bands(&r, "primary"),
            [
                Band {
                    from_ms: 200.0,
                    to_ms: 1200.0,
                    state: State::Open
                },
                Band {
                    from_ms: 1200.0,
                    to_ms: 1600.0,
                    state: State::HalfOpen
                },
            ]
        );
        assert_eq!(s.breakers[1].transitions, 0);
    }
}
