//! The checks of a pooled link, from each deployment's own fake server: no call reaches a
//! cooled deployment before the `retry-after` its 429 carried has elapsed, traffic spreads over
//! the deployments that can serve, and nothing falls to the next link while one can.

use super::Check;
use crate::chaos::record::{DeploymentRec, Outcome, Records};

/// A request that reached a deployment this soon after a 429 was already on its way when the
/// 429 came back (loopback round trips and the fake's own scheduling take a few milliseconds):
/// the pool could not know of the cooldown yet.
pub(crate) const IN_FLIGHT_GRACE_MS: f64 = 25.0;

/// Requests this close to the end of a throttled span may have been answered by the next
/// phase: they start no cooldown the check relies on.
const EDGE_MS: f64 = 2.0;

/// The checks of every pooled link; none when the chain has no pool.
pub(crate) fn pools(r: &Records) -> Vec<Check> {
    if r.deployments.is_empty() {
        return Vec::new();
    }
    let mut checks = vec![cooldown(r), spread(r), no_fallthrough(r)];
    if let Some(base) = r.baseline_answers_per_s {
        checks.push(throughput(r, base));
    }
    checks
}

/// The share of the all-healthy run's throughput a pool must keep with its faults.
pub(crate) const MIN_THROUGHPUT_SHARE: f64 = 2.0 / 3.0;

/// Model answers (the static reply excluded) per second of the run.
pub(crate) fn answers_per_s(r: &Records) -> f64 {
    let answers = r
        .requests
        .iter()
        .filter(|q| {
            matches!(
                q.outcome,
                Outcome::Answered {
                    static_reply: false,
                    ..
                }
            )
        })
        .count();
    answers as f64 / (r.run_ms / 1000.0).max(f64::MIN_POSITIVE)
}

/// (11) Throughput stays at least two thirds of the same run with every vendor healthy.
pub(crate) fn throughput(r: &Records, base: f64) -> Check {
    let got = answers_per_s(r);
    let mut offenders = Vec::new();
    if got < base * MIN_THROUGHPUT_SHARE {
        offenders.push(format!(
            "{got:.1} answers/s, under {:.0}% of the all-healthy run's {base:.1}",
            MIN_THROUGHPUT_SHARE * 100.0
        ));
    }
    Check::new(
        "throughput",
        "throughput stays at least 2/3 of the all-healthy run",
        format!(
            "{got:.1} answers/s against {base:.1} with every vendor healthy ({:.0}%)",
            if base > 0.0 { got / base * 100.0 } else { 0.0 }
        ),
        offenders,
    )
}

/// (8) No call reaches a cooled deployment before its `retry-after` elapsed.
pub(crate) fn cooldown(r: &Records) -> Check {
    let mut offenders = Vec::new();
    let mut throttled = 0usize;
    for (name, d) in &r.deployments {
        let mut times = d.requests_ms.clone();
        times.sort_by(f64::total_cmp);
        for (i, &t) in times.iter().enumerate() {
            let Some(&(_, _, wait)) = d
                .throttled
                .iter()
                .find(|(from, to, _)| *from <= t && t < *to - EDGE_MS)
            else {
                continue;
            };
            throttled += 1;
            let until = t + wait;
            for &later in &times[i + 1..] {
                if later >= until {
                    break;
                }
                if later > t + IN_FLIGHT_GRACE_MS {
                    offenders.push(format!(
                        "{name}: a call at {later:.0} ms, {:.0} ms before the {wait:.0} ms retry-after of its 429 at {t:.0} ms ended",
                        until - later
                    ));
                }
            }
        }
    }
    Check::new(
        "cooldown",
        "no call reaches a cooled deployment before its retry-after elapsed",
        format!(
            "{} deployments, {throttled} answers 429 with retry-after (calls within {IN_FLIGHT_GRACE_MS:.0} ms of a 429 were already in flight)",
            r.deployments.len()
        ),
        offenders,
    )
}

/// (9) Every deployment that can serve takes a share of its pool's traffic: at least half an
/// even share of the calls to the pool's deployments that are not down all run, counted while
/// none of them is scripted to throttle (nor cooling from it).
pub(crate) fn spread(r: &Records) -> Check {
    let mut offenders = Vec::new();
    let mut parts = Vec::new();
    let mut down = Vec::new();
    for link in links(r) {
        let serving: Vec<(&String, &DeploymentRec)> = r
            .deployments
            .iter()
            .filter(|(_, d)| d.link == link && !d.down_all_run)
            .collect();
        let quiet: Vec<(f64, f64)> = serving
            .iter()
            .flat_map(|(_, d)| {
                d.throttled
                    .iter()
                    .map(|&(from, to, wait)| (from, to + wait))
            })
            .collect();
        let counts: Vec<(&String, usize)> = serving
            .iter()
            .map(|(n, d)| {
                let c = d
                    .requests_ms
                    .iter()
                    .filter(|&&t| !quiet.iter().any(|&(from, to)| from <= t && t < to))
                    .count();
                (*n, c)
            })
            .collect();
        let total: usize = counts.iter().map(|(_, c)| c).sum();
        let floor = total as f64 / (2.0 * counts.len().max(1) as f64);
        for (n, c) in &counts {
            parts.push(format!("{n} {c}"));
            if (*c as f64) < floor {
                offenders.push(format!(
                    "{n}: {c} of {total} calls, under half an even share ({floor:.0})"
                ));
            }
        }
        if serving.is_empty() {
            offenders.push(format!("{link}: every deployment is down all run"));
        }
        down.extend(
            r.deployments
                .iter()
                .filter(|(_, d)| d.link == link && d.down_all_run)
                .map(|(n, d)| format!("{n} {}", d.requests_ms.len())),
        );
    }
    Check::new(
        "spread",
        "traffic spreads over the deployments that can serve",
        format!(
            "calls per serving deployment while none throttles: {}; calls to deployments down all run: {}",
            parts.join(", "),
            if down.is_empty() {
                "none".to_owned()
            } else {
                down.join(", ")
            }
        ),
        offenders,
    )
}

/// (10) Nothing falls to the next link while a deployment can serve: with a deployment that
/// answers all run, every request is answered by its pool and no attempt goes elsewhere.
pub(crate) fn no_fallthrough(r: &Records) -> Check {
    let mut offenders = Vec::new();
    let mut guarded = Vec::new();
    for link in links(r) {
        let serves = r
            .deployments
            .values()
            .any(|d| d.link == link && d.healthy_all_run);
        if !serves {
            continue;
        }
        guarded.push(link.clone());
        // Only the first link of the chain has every request start on it.
        if r.links.first().map(|l| l.name.as_str()) != Some(link.as_str()) {
            continue;
        }
        for q in &r.requests {
            match &q.outcome {
                Outcome::Answered { served_by, .. } if served_by == &link => {}
                Outcome::Answered { served_by, .. } => {
                    offenders.push(format!("{}: answered by {served_by}", q.id));
                    continue;
                }
                Outcome::Failed { kind } => {
                    offenders.push(format!("{}: failed ({kind:?})", q.id));
                    continue;
                }
                Outcome::Lost { why } => {
                    offenders.push(format!("{}: lost ({why})", q.id));
                    continue;
                }
                Outcome::Unfinished => {
                    offenders.push(format!("{}: never finished", q.id));
                    continue;
                }
            }
            if let Some(a) = q.attempts.iter().find(|a| a.provider != link) {
                offenders.push(format!("{}: an attempt went to {}", q.id, a.provider));
            }
        }
        for later in r.links.iter().skip_while(|l| l.name != link).skip(1) {
            let hits = r.hits.get(&later.name).copied().unwrap_or(0);
            if hits > 0 {
                offenders.push(format!("{}: its vendor got {hits} calls", later.name));
            }
        }
    }
    Check::new(
        "no-fallthrough",
        "nothing falls to the next link while a deployment can serve",
        if guarded.is_empty() {
            "no pool has a deployment healthy all run".to_owned()
        } else {
            format!(
                "{} requests; pools with a deployment healthy all run: {}",
                r.requests.len(),
                guarded.join(", ")
            )
        },
        offenders,
    )
}

/// The pooled links, in name order.
fn links(r: &Records) -> Vec<String> {
    let mut v: Vec<String> = r.deployments.values().map(|d| d.link.clone()).collect();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::record::{AttemptRec, LinkInfo, RequestRec};

    fn dep(link: &str, times: &[f64]) -> DeploymentRec {
        DeploymentRec {
            link: link.to_owned(),
            requests_ms: times.to_vec(),
            ..DeploymentRec::default()
        }
    }

    fn link(name: &str) -> LinkInfo {
        LinkInfo::sample(name, 1, 1000)
    }

    fn answered(id: &str, by: &str) -> RequestRec {
        let attempts = AttemptRec::answered(&[by], 10.0);
        RequestRec::sample(id, 0.0, Some(10.0), Outcome::by(by), attempts)
    }

    fn pool_records() -> Records {
        let mut r = Records {
            links: vec![link("regions"), link("backup")],
            run_ms: 1000.0,
            ..Records::default()
        };
        let mut east = dep("regions", &[10.0, 20.0, 30.0, 40.0, 600.0, 700.0]);
        east.healthy_all_run = true;
        let mut west = dep("regions", &[100.0, 610.0, 620.0, 710.0]);
        west.throttled = vec![(50.0, 300.0, 500.0)];
        let mut north = dep("regions", &[5.0]);
        north.down_all_run = true;
        r.deployments = [
            ("regions/east", east),
            ("regions/west", west),
            ("regions/north", north),
        ]
        .into_iter()
        .map(|(n, d)| (n.to_owned(), d))
        .collect();
        r.requests = (0..4)
            .map(|i| answered(&format!("r{i}"), "regions"))
            .collect();
        r
    }

    #[test]
    fn no_pool_no_checks() {
        assert!(pools(&Records::default()).is_empty());
    }

    #[test]
    fn a_call_after_the_retry_after_passes_and_one_inside_it_fails() {
        let mut r = pool_records();
        let c = cooldown(&r);
        assert!(c.passed, "{c:?}");
        assert!(c.detail.contains("1 answers 429"), "{}", c.detail);
        // A call 200 ms after the 429 at 100 ms, whose retry-after ran to 600 ms.
        r.deployments
            .get_mut("regions/west")
            .unwrap()
            .requests_ms
            .push(300.0);
        let c = cooldown(&r);
        assert!(!c.passed);
        assert_eq!(c.offender_count, 1);
        assert!(c.offenders[0].contains("at 300 ms"), "{:?}", c.offenders);
        // A call already in flight when the 429 came back is not early.
        let mut r = pool_records();
        r.deployments
            .get_mut("regions/west")
            .unwrap()
            .requests_ms
            .push(110.0);
        assert!(cooldown(&r).passed);
    }

    #[test]
    fn spread_counts_the_quiet_spans_and_ignores_the_down_deployment() {
        let mut r = pool_records();
        // Outside west's throttled span and its cooldown (50..800 ms): east 4, west 0.
        let c = spread(&r);
        assert!(!c.passed, "{c:?}");
        assert!(
            c.offenders[0].starts_with("regions/west"),
            "{:?}",
            c.offenders
        );
        r.deployments
            .get_mut("regions/west")
            .unwrap()
            .requests_ms
            .extend([900.0, 910.0, 920.0]);
        let c = spread(&r);
        assert!(c.passed, "{c:?}");
        c.assert_detail_ends_with("down all run: regions/north 1");
    }

    #[test]
    fn a_fall_to_the_next_link_fails_while_a_deployment_serves() {
        let mut r = pool_records();
        assert!(no_fallthrough(&r).passed);
        r.requests.push(answered("late", "backup"));
        r.hits.insert("backup".to_owned(), 1);
        let c = no_fallthrough(&r);
        assert_eq!(c.offender_count, 2, "{c:?}");
        // With no deployment healthy all run, falling over is the chain's job.
        r.deployments
            .get_mut("regions/east")
            .unwrap()
            .healthy_all_run = false;
        assert!(no_fallthrough(&r).passed);
    }

    #[test]
    fn throughput_is_held_to_two_thirds_of_the_healthy_run() {
        let mut r = pool_records();
        // 4 answers in 1 s.
        assert!((answers_per_s(&r) - 4.0).abs() < 1e-9);
        assert!(throughput(&r, 6.0).passed);
        assert!(!throughput(&r, 6.1).passed);
        r.baseline_answers_per_s = Some(5.0);
        assert_eq!(pools(&r).len(), 4);
    }
}
