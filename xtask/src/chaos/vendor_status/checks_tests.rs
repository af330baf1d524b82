//! The checks on synthetic records: a run that keeps every rule, then one break per check.

use super::*;

const B: Bounds = Bounds {
    interval_ms: 200.0,
    sample_ms: 10.0,
    tolerance_ms: 150.0,
};

fn req(start: f64, attempted: &[&str], skipped: &[&str], served_by: &str) -> ReqRec {
    ReqRec {
        start_ms: start,
        end_ms: start + 5.0,
        attempted: attempted.iter().map(|s| (*s).to_owned()).collect(),
        skipped: skipped.iter().map(|s| (*s).to_owned()).collect(),
        served_by: served_by.to_owned(),
    }
}

fn view(at: f64, demoted: bool, held_open: bool) -> ViewRec {
    ViewRec {
        at_ms: at,
        prev_ms: at - 10.0,
        acting: demoted || held_open,
        demoted,
        held_open,
        status: Some(if demoted || held_open {
            "major_outage".to_owned()
        } else {
            "operational".to_owned()
        }),
        failures: 0,
        last_error: None,
    }
}

fn failing(at: f64, failures: u32, error: &str) -> ViewRec {
    ViewRec {
        failures,
        last_error: Some(format!("the status page {error}")),
        ..view(at, false, false)
    }
}

/// Declared at 1000 ms, acted on at 1100, backup down 2000–2800, resolved at 3000, restored
/// at 3150; requests every 100 ms.
fn declared(variant: Variant) -> VariantRec {
    let demote = variant == Variant::Demote;
    let mut requests = Vec::new();
    let mut calls = Vec::new();
    for i in 0..40 {
        let at = f64::from(i) * 100.0 + 50.0;
        let q = if !(1100.0..3150.0).contains(&at) {
            calls.push(at + 1.0);
            req(at, &[PRIMARY], &[], PRIMARY)
        } else if (2000.0..2800.0).contains(&at) {
            if demote {
                calls.push(at + 2.0);
                req(at, &[BACKUP, PRIMARY], &[], PRIMARY)
            } else {
                req(at, &[BACKUP], &[PRIMARY], STATIC)
            }
        } else if demote {
            req(at, &[BACKUP], &[], BACKUP)
        } else {
            req(at, &[BACKUP], &[PRIMARY], BACKUP)
        };
        requests.push(q);
    }
    // A request sent just before the switch flipped arrives just after it.
    let mut hits: Vec<f64> = calls.iter().map(|c| c + 1.0).collect();
    if !demote {
        hits.push(1105.0);
    }
    VariantRec {
        variant,
        declared_ms: Some(1000.0),
        resolved_ms: Some(3000.0),
        backup_down: Some((2000.0, 2800.0)),
        modes: Vec::new(),
        view: vec![
            view(20.0, false, false),
            view(1100.0, demote, !demote),
            view(3150.0, false, false),
        ],
        requests,
        primary_hits_ms: hits,
        primary_calls_ms: calls,
        page_hits: 20,
        run_ms: 4000.0,
        notes: Vec::new(),
    }
}

fn unreadable() -> VariantRec {
    let mode = |at, mode: &str, expect: &str| ModeRec {
        at_ms: at,
        mode: mode.to_owned(),
        expect: expect.to_owned(),
    };
    VariantRec {
        variant: Variant::Unreachable,
        declared_ms: None,
        resolved_ms: None,
        backup_down: None,
        modes: vec![
            mode(900.0, "unreachable", "could not be reached"),
            mode(1300.0, "hang", "did not answer within"),
            mode(1900.0, "garbage", "not Statuspage JSON"),
            mode(2900.0, "serve", ""),
        ],
        view: vec![
            view(20.0, false, false),
            failing(1000.0, 1, "could not be reached: reset"),
            failing(1500.0, 2, "did not answer within 150 ms"),
            failing(2300.0, 3, "is not Statuspage JSON (summary.json)"),
            view(3000.0, false, false),
        ],
        requests: (0..30)
            .map(|i| req(f64::from(i) * 100.0, &[PRIMARY], &[], PRIMARY))
            .collect(),
        primary_hits_ms: Vec::new(),
        primary_calls_ms: Vec::new(),
        page_hits: 9,
        run_ms: 3200.0,
        notes: Vec::new(),
    }
}

fn all() -> Vec<VariantRec> {
    vec![
        declared(Variant::Demote),
        declared(Variant::Open),
        unreadable(),
    ]
}

fn run_of(recs: &mut [VariantRec], v: Variant) -> &mut VariantRec {
    recs.iter_mut().find(|r| r.variant == v).unwrap()
}

/// Every run's record, `v`'s with `change` made to it.
fn all_with<T>(v: Variant, change: impl FnOnce(&mut VariantRec) -> T) -> Vec<VariantRec> {
    let mut recs = all();
    change(run_of(&mut recs, v));
    recs
}

#[test]
fn a_run_that_keeps_every_rule_passes_every_check() {
    let checks = check_all(&all(), B);
    let ids: Vec<&str> = checks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "acted-within-poll",
            "no-call-to-opened",
            "demoted-order",
            "order-restored",
            "unreachable-changes-nothing",
            "answered"
        ]
    );
    for c in &checks {
        assert!(c.passed, "{c:?}");
    }
    assert!(
        checks[0].detail.contains("demote: acted 100 ms after"),
        "{checks:?}"
    );
    assert!(
        checks[1].detail.contains("(1 within it)")
            && checks[1].detail.contains("8 answered by the static reply"),
        "{:?}",
        checks[1]
    );
    assert!(
        checks[2]
            .detail
            .contains("4 by primary after backup failed"),
        "{:?}",
        checks[2]
    );
    assert!(
        checks[4].detail.contains("garbage (failure 3)"),
        "{:?}",
        checks[4]
    );
}

#[test]
fn a_call_or_a_request_reaching_the_held_link_fails_no_call_to_opened() {
    let mut recs = all();
    let open = run_of(&mut recs, Variant::Open);
    open.primary_calls_ms.push(1500.0);
    open.primary_hits_ms.push(1501.0);
    let c = no_call_to_opened(&recs, B);
    assert!(!c.passed);
    assert_eq!(
        c.offenders,
        [
            "a call to primary started at 1500 ms, 400 ms after it was held open",
            "fake vendor primary received a request at 1501 ms, 401 ms after it was held open"
        ]
    );
    // A request that only arrives past the in-flight edge is not forgiven either.
    let recs = all_with(Variant::Open, |r| {
        r.primary_hits_ms.push(1100.0 + B.in_flight_ms() + 1.0)
    });
    assert_eq!(no_call_to_opened(&recs, B).offender_count, 1);
    // Never held open at all.
    let recs = all_with(Variant::Open, |r| r.view.truncate(1));
    let c = no_call_to_opened(&recs, B);
    assert!(!c.passed && c.detail.contains("not acted on"), "{c:?}");
}

#[test]
fn passed_over_passes_and_not_there_as_fallback_fails_demoted_order() {
    // Primary first while demoted: in `one_break_fails_its_check_with_these_offenders`.
    // Passed over because backup's breaker was open: not a demotion failure.
    let recs = all_with(Variant::Demote, |r| {
        r.requests.push(req(1500.0, &[PRIMARY], &[BACKUP], PRIMARY))
    });
    assert!(demoted_order(&recs, B).passed);
    // The demoted link gone instead of behind: backup's failures end in the static reply.
    let mut recs = all();
    for q in &mut run_of(&mut recs, Variant::Demote).requests {
        if q.served_by == PRIMARY && q.attempted.len() == 2 {
            q.attempted.truncate(1);
            q.served_by = STATIC.to_owned();
        }
    }
    let c = demoted_order(&recs, B);
    assert!(!c.passed);
    assert!(
        c.offenders
            .last()
            .unwrap()
            .contains("no request fell back to the demoted primary"),
        "{c:?}"
    );
    assert!(
        c.offenders[0].contains("was answered by static, not by the demoted primary"),
        "{c:?}"
    );
}

/// One break in one run's record, the check it must fail and exactly the offenders it names.
type Break = (
    &'static str,
    Variant,
    fn(&mut VariantRec),
    fn(&[VariantRec], Bounds) -> Check,
    &'static [&'static str],
);

#[test]
fn one_break_fails_its_check_with_these_offenders() {
    let cases: [Break; 5] = [
        (
            "demoted_order: primary first while demoted",
            Variant::Demote,
            |r| r.requests.push(req(1500.0, &[PRIMARY], &[], PRIMARY)),
            demoted_order,
            &["the request started at 1500 ms tried primary first (primary) while it was demoted"],
        ),
        (
            "order_restored: a late restoration",
            Variant::Demote,
            |r| r.view[2].at_ms = 3500.0,
            order_restored,
            &[
                "demote: primary was restored 500 ms after the resolution, more than one poll interval + tolerance (360 ms)",
            ],
        ),
        (
            "order_restored: another link first after it",
            Variant::Open,
            |r| r.requests.push(req(3600.0, &[BACKUP], &[PRIMARY], BACKUP)),
            order_restored,
            &[
                "open: the request started at 3600 ms (after the restoration) was answered by backup after trying backup",
            ],
        ),
        (
            "acted_within_poll: acting late",
            Variant::Demote,
            |r| r.view[1].at_ms = 1400.0,
            acted_within_poll,
            &[
                "demote: ripcord acted 400 ms after the declaration, more than one poll interval + tolerance (360 ms)",
            ],
        ),
        (
            "acted_within_poll: a wait that ran out",
            Variant::Open,
            |r| r.notes.push("a wait ran out".to_owned()),
            acted_within_poll,
            &["open: a wait ran out"],
        ),
    ];
    for (name, variant, change, check, offenders) in cases {
        let c = check(&all_with(variant, change), B);
        assert_eq!(c.offenders, offenders, "{name}: {c:?}");
    }
}

#[test]
fn restoring_never_fails_order_restored() {
    // The late restoration and another link first: in `one_break_fails_its_check_with_these_offenders`.
    let recs = all_with(Variant::Open, |r| r.view.pop());
    let c = order_restored(&recs, B);
    assert!(
        c.offenders[0].starts_with("open: ripcord did not restore primary"),
        "{c:?}"
    );
}

#[test]
fn acting_early_or_with_the_wrong_switch_fails_acted_within_poll() {
    // Acting late and a wait that ran out: in `one_break_fails_its_check_with_these_offenders`.
    let recs = all_with(Variant::Open, |r| r.view[1].at_ms = 900.0);
    assert!(acted_within_poll(&recs, B).offenders[0].contains("before the page declared"));
    let recs = all_with(Variant::Demote, |r| r.view[1].held_open = true);
    assert!(
        acted_within_poll(&recs, B).offenders[0]
            .contains("the other policy's switch was set at 1100 ms")
    );
}

#[test]
fn an_unreadable_page_that_moves_the_link_or_goes_uncounted_fails() {
    let mut recs = all();
    let u = run_of(&mut recs, Variant::Unreachable);
    u.view[2].held_open = true;
    u.requests[12] = req(1200.0, &[BACKUP], &[PRIMARY], BACKUP);
    let c = unreachable_changes_nothing(&recs);
    assert_eq!(
        c.offenders,
        [
            "at 1500 ms ripcord's view changed: acting false, demoted false, held open true",
            "the request started at 1200 ms was answered by backup after trying backup"
        ]
    );
    // The garbage went uncounted, and the good poll never cleared the count.
    let mut recs = all();
    let u = run_of(&mut recs, Variant::Unreachable);
    u.view.remove(3);
    u.view.pop();
    let c = unreachable_changes_nothing(&recs);
    assert!(!c.passed);
    assert!(
        c.offenders
            .iter()
            .any(|o| o.starts_with("the page went garbage at 1900 ms")),
        "{c:?}"
    );
    assert!(
        c.offenders
            .iter()
            .any(|o| o.contains("no good poll cleared the failures")),
        "{c:?}"
    );
    assert!(
        c.offenders
            .iter()
            .any(|o| o.contains("at most 2 failed polls")),
        "{c:?}"
    );
}

#[test]
fn an_error_in_any_run_fails_answered() {
    let mut recs = all_with(Variant::Open, |r| {
        r.requests
            .push(req(1700.0, &[BACKUP], &[PRIMARY], "error: upstream_5xx"))
    });
    let c = answered(&recs);
    assert_eq!(
        c.offenders,
        ["open: the request started at 1700 ms ended with error: upstream_5xx"]
    );
    run_of(&mut recs, Variant::Demote).requests.clear();
    assert!(
        answered(&recs)
            .offenders
            .contains(&"demote: no request was sent".to_owned())
    );
}
