//! The invariants of `gateway-under-abuse`, each a named check over what the run recorded.

use std::collections::BTreeMap;

use serde::Serialize;

use super::super::invariants::Check;

/// Who made a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) enum Who {
    /// A legitimate caller on a kept-alive connection.
    Legit,
    /// A legitimate caller naming a new sub-tenant on each call.
    SubTenant,
    /// One connection of the burst beyond the descriptor limit.
    Burst,
    /// A stream reader that stops reading.
    SlowReader,
}

impl Who {
    fn label(self) -> &'static str {
        match self {
            Who::Legit => "legit",
            Who::SubTenant => "sub-tenant",
            Who::Burst => "burst",
            Who::SlowReader => "slow reader",
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) enum Outcome {
    /// An answer with this status.
    Status { code: u16, retry_after: bool },
    /// The connection ended before a byte of an answer.
    Closed,
    /// No answer: timed out, cut, or a connect failure.
    NoAnswer(String),
}

/// One authenticated call.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CallRec {
    pub(crate) who: Who,
    pub(crate) outcome: Outcome,
    /// When it started, since the run began.
    pub(crate) at_ms: f64,
    pub(crate) ms: f64,
}

/// One health probe.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProbeRec {
    pub(crate) at_ms: f64,
    /// How long until `/healthz` answered 200; `None` when it did not within the bound.
    pub(crate) answered_ms: Option<f64>,
    /// Connections it took (more than one: closed at the door, opened again).
    pub(crate) tries: u32,
}

/// How big each attack was meant to be, and how big it was.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Attack {
    pub(crate) name: &'static str,
    /// What was counted.
    pub(crate) unit: &'static str,
    pub(crate) floor: u64,
    pub(crate) reached: u64,
}

/// `attacks-ran`: every attack reached its stated size.
pub(crate) fn attacks_ran(attacks: &[Attack]) -> Check {
    let offenders: Vec<String> = attacks
        .iter()
        .filter(|a| a.reached < a.floor)
        .map(|a| {
            format!(
                "{}: {} {}, below its floor of {}",
                a.name, a.reached, a.unit, a.floor
            )
        })
        .collect();
    let shown: Vec<String> = attacks
        .iter()
        .map(|a| format!("{} {} {} (≥ {})", a.name, a.reached, a.unit, a.floor))
        .collect();
    let mut c = Check::new(
        "attacks-ran",
        "each attack reached its stated size",
        shown.join("; "),
        offenders,
    );
    if attacks.is_empty() {
        c = c.failed("no attack was counted".to_owned());
    }
    c
}

/// `answered-or-shed`: every authenticated request the gateway read was answered (2xx) or
/// shed with `Retry-After` (429/503). A callers' connection ending without an answer is an
/// offence too — except a burst connection, which the gateway may close at the door (past its
/// connection cap and reserve, before reading the request), as documented; those are counted.
pub(crate) fn answered_or_shed(calls: &[CallRec]) -> Check {
    let mut offenders = Vec::new();
    let mut tally: BTreeMap<(Who, String), usize> = BTreeMap::new();
    for c in calls {
        let class = match &c.outcome {
            Outcome::Status { code, .. } if (200..300).contains(code) => "2xx".to_owned(),
            Outcome::Status {
                code: code @ (429 | 503),
                retry_after: true,
            } => format!("{code}+Retry-After"),
            Outcome::Status { code, retry_after } => {
                offenders.push(format!(
                    "{} call at {:.0} ms: {code}{}",
                    c.who.label(),
                    c.at_ms,
                    if *retry_after {
                        ""
                    } else {
                        " without Retry-After"
                    }
                ));
                format!("{code}")
            }
            Outcome::Closed if c.who == Who::Burst => "closed at the door".to_owned(),
            Outcome::Closed => {
                offenders.push(format!(
                    "{} call at {:.0} ms: the connection closed without an answer",
                    c.who.label(),
                    c.at_ms
                ));
                "closed".to_owned()
            }
            Outcome::NoAnswer(why) => {
                offenders.push(format!(
                    "{} call at {:.0} ms: no answer ({why})",
                    c.who.label(),
                    c.at_ms
                ));
                "no answer".to_owned()
            }
        };
        *tally.entry((c.who, class)).or_default() += 1;
    }
    let shown: Vec<String> = tally
        .iter()
        .map(|((who, class), n)| format!("{} {class} {n}", who.label()))
        .collect();
    let mut c = Check::new(
        "answered-or-shed",
        "every authenticated request answered 2xx or shed 429/503 with Retry-After",
        format!("{} calls: {}", calls.len(), shown.join(", ")),
        offenders,
    );
    if !calls
        .iter()
        .any(|c| c.who == Who::Legit && matches!(c.outcome, Outcome::Status { code: 200, .. }))
    {
        c = c.failed("no legitimate call was answered".to_owned());
    }
    c
}

/// `healthz-reachable`: every probe got its 200 within the bound.
pub(crate) fn healthz_reachable(probes: &[ProbeRec], bound_ms: f64) -> Check {
    let offenders: Vec<String> = probes
        .iter()
        .filter(|p| p.answered_ms.is_none_or(|ms| ms > bound_ms))
        .map(|p| match p.answered_ms {
            None => format!(
                "probe at {:.0} ms: no 200 within {bound_ms:.0} ms ({} tries)",
                p.at_ms, p.tries
            ),
            Some(ms) => format!("probe at {:.0} ms: answered after {ms:.0} ms", p.at_ms),
        })
        .collect();
    let mut times: Vec<f64> = probes.iter().filter_map(|p| p.answered_ms).collect();
    times.sort_by(f64::total_cmp);
    let worst = times.last().copied().unwrap_or(0.0);
    let p50 = times.get(times.len() / 2).copied().unwrap_or(0.0);
    let retried = probes.iter().filter(|p| p.tries > 1).count();
    let mut c = Check::new(
        "healthz-reachable",
        "/healthz answers every probe within its bound",
        format!(
            "{} probes, bound {bound_ms:.0} ms: p50 {p50:.0} ms, worst {worst:.0} ms, {retried} needed a second connection",
            probes.len()
        ),
        offenders,
    );
    if probes.is_empty() {
        c = c.failed("no probe was made".to_owned());
    }
    c
}

/// What `/metrics` said about the breakers after the attack.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct BreakerView {
    /// `/metrics` answered 200 with the request counter in it (the view is real).
    pub(crate) read: bool,
    /// Transitions to open, summed over every link.
    pub(crate) opened: f64,
    /// Links whose breaker state is not closed (0).
    pub(crate) not_closed: Vec<String>,
    /// `/readyz` answered 200.
    pub(crate) ready: bool,
}

/// Reads the breaker series of a Prometheus text page.
pub(crate) fn breaker_view(metrics: &str) -> BreakerView {
    let mut v = BreakerView {
        read: metrics
            .lines()
            .any(|l| l.starts_with("ripcord_requests_total")),
        ..BreakerView::default()
    };
    for l in metrics.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = l.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = value.parse().unwrap_or(0.0);
        if series.starts_with("ripcord_breaker_transitions_total") && series.contains("to=\"open\"")
        {
            v.opened += value;
        }
        if series.starts_with("ripcord_breaker_state") && value != 0.0 {
            v.not_closed.push(format!("{series} = {value}"));
        }
    }
    v
}

/// `no-breaker-opened`: the healthy vendor's breaker never opened.
pub(crate) fn no_breaker_opened(v: &BreakerView) -> Check {
    let mut offenders = Vec::new();
    if v.opened > 0.0 {
        offenders.push(format!("{} transition(s) to open", v.opened));
    }
    offenders.extend(v.not_closed.iter().map(|s| format!("not closed: {s}")));
    if !v.ready {
        offenders.push("/readyz did not answer 200 after the attack".to_owned());
    }
    let mut c = Check::new(
        "no-breaker-opened",
        "no breaker opened on the healthy vendors (the child's /metrics and /readyz)",
        format!(
            "{} transitions to open, {} breaker(s) not closed, ready {}",
            v.opened,
            v.not_closed.len(),
            v.ready
        ),
        offenders,
    );
    if !v.read {
        c = c.failed("/metrics could not be read (no request counter)".to_owned());
    }
    c
}

/// `memory-bounded`: the child's peak resident set stayed under the bound.
pub(crate) fn memory_bounded(
    hwm_kib: Option<u64>,
    start_kib: Option<u64>,
    bound_mib: u64,
) -> Check {
    let Some(hwm) = hwm_kib else {
        return Check::unmet(
            "memory-bounded",
            "the gateway's peak RSS (VmHWM) stays under its bound",
            "VmHWM could not be read".to_owned(),
            "no measurement".to_owned(),
        );
    };
    let mib = hwm as f64 / 1024.0;
    let offenders = if hwm > bound_mib * 1024 {
        vec![format!(
            "peak RSS {mib:.1} MiB over the bound of {bound_mib} MiB"
        )]
    } else {
        Vec::new()
    };
    Check::new(
        "memory-bounded",
        "the gateway's peak RSS (VmHWM) stays under its bound",
        format!(
            "peak {mib:.1} MiB (at start {:.1} MiB), bound {bound_mib} MiB",
            start_kib.unwrap_or(0) as f64 / 1024.0
        ),
        offenders,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(who: Who, outcome: Outcome) -> CallRec {
        CallRec {
            who,
            outcome,
            at_ms: 100.0,
            ms: 5.0,
        }
    }

    fn ok() -> Outcome {
        Outcome::Status {
            code: 200,
            retry_after: false,
        }
    }

    #[test]
    fn answered_or_shed_allows_2xx_and_shedding_with_a_wait_and_names_the_rest() {
        let shed = Outcome::Status {
            code: 503,
            retry_after: true,
        };
        let good = [
            call(Who::Legit, ok()),
            call(Who::SubTenant, shed.clone()),
            call(Who::Burst, Outcome::Closed),
            call(
                Who::Burst,
                Outcome::Status {
                    code: 429,
                    retry_after: true,
                },
            ),
        ];
        let c = answered_or_shed(&good);
        assert!(c.passed, "{c:?}");
        assert!(c.detail.contains("burst closed at the door 1"), "{c:?}");
        // A 503 without Retry-After, a legit caller's closed connection, a timeout: each named.
        let bad = [
            call(Who::Legit, ok()),
            call(
                Who::Burst,
                Outcome::Status {
                    code: 503,
                    retry_after: false,
                },
            ),
            call(Who::Legit, Outcome::Closed),
            call(
                Who::SubTenant,
                Outcome::NoAnswer("not answered in time".into()),
            ),
            call(
                Who::SlowReader,
                Outcome::Status {
                    code: 500,
                    retry_after: true,
                },
            ),
        ];
        let c = answered_or_shed(&bad);
        assert!(!c.passed);
        assert_eq!(c.offender_count, 4, "{c:?}");
        assert!(c.offenders[0].contains("503 without Retry-After"), "{c:?}");
        assert!(c.offenders[1].contains("legit call") && c.offenders[1].contains("closed"));
        // Nothing legitimate answered is not a pass.
        assert!(!answered_or_shed(&[call(Who::Burst, Outcome::Closed)]).passed);
    }

    #[test]
    fn healthz_reachable_fails_a_late_or_missing_answer_and_an_empty_run() {
        let p = |answered_ms, tries| ProbeRec {
            at_ms: 0.0,
            answered_ms,
            tries,
        };
        let c = healthz_reachable(&[p(Some(3.0), 1), p(Some(900.0), 3)], 2000.0);
        assert!(c.passed, "{c:?}");
        assert!(c.detail.contains("1 needed a second connection"), "{c:?}");
        let c = healthz_reachable(&[p(Some(3.0), 1), p(None, 40)], 2000.0);
        assert!(
            !c.passed && c.offenders[0].contains("no 200 within 2000 ms"),
            "{c:?}"
        );
        assert!(!healthz_reachable(&[p(Some(2500.0), 1)], 2000.0).passed);
        assert!(!healthz_reachable(&[], 2000.0).passed);
    }

    #[test]
    fn the_breaker_check_reads_metrics_and_fails_an_open_or_unread_breaker() {
        let healthy = "# TYPE ripcord_requests_total counter\nripcord_requests_total{ripcord_link=\"main\"} 4200\n";
        let mut v = breaker_view(healthy);
        v.ready = true;
        assert!(no_breaker_opened(&v).passed, "{v:?}");
        let tripped = format!(
            "{healthy}ripcord_breaker_transitions_total{{ripcord_link=\"main\",from=\"closed\",to=\"open\"}} 1\nripcord_breaker_transitions_total{{ripcord_link=\"main\",from=\"open\",to=\"half_open\"}} 1\nripcord_breaker_state{{ripcord_link=\"main\"}} 1\n"
        );
        let mut v = breaker_view(&tripped);
        v.ready = true;
        assert_eq!(v.opened, 1.0);
        let c = no_breaker_opened(&v);
        assert!(!c.passed);
        assert_eq!(c.offender_count, 2, "{c:?}");
        // A page without the request counter is not a reading.
        let mut v = breaker_view("");
        v.ready = true;
        assert!(!no_breaker_opened(&v).passed);
        let v = breaker_view(healthy);
        assert!(!no_breaker_opened(&v).passed, "not ready is a failure");
    }

    #[test]
    fn memory_and_attack_sizes_fail_past_their_bounds() {
        assert!(memory_bounded(Some(100 * 1024), Some(30 * 1024), 256).passed);
        let c = memory_bounded(Some(300 * 1024), Some(30 * 1024), 256);
        assert!(
            !c.passed && c.offenders[0].contains("over the bound of 256 MiB"),
            "{c:?}"
        );
        assert!(!memory_bounded(None, None, 256).passed);
        let a = |reached| Attack {
            name: "silent sockets",
            unit: "opened",
            floor: 1000,
            reached,
        };
        assert!(attacks_ran(&[a(1500)]).passed);
        let c = attacks_ran(&[a(1500), a(10)]);
        assert_eq!(
            c.offenders,
            ["silent sockets: 10 opened, below its floor of 1000"]
        );
        assert!(!attacks_ran(&[]).passed);
    }
}
