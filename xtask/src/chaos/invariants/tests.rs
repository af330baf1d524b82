//! The invariants' own tests, on hand-made records.

use super::super::record::{CallEnd, Leak, LinkInfo, RequestRec, TransitionRec};
use super::super::scenario::{Expect, MaxTrips, STATIC};
use super::*;

fn link(name: &str, permits: usize) -> LinkInfo {
    LinkInfo::sample(name, permits, 1000)
}

fn req(id: &str, start: f64, end: Option<f64>, outcome: Outcome) -> RequestRec {
    RequestRec::sample(id, start, end, outcome, Vec::new())
}

fn ok(by: &str) -> Outcome {
    Outcome::Answered {
        served_by: by.to_owned(),
        static_reply: by == STATIC,
    }
}

fn call(id: &str, link: &str, start: u64, end: Option<u64>, kind: Option<ErrorKind>) -> CallRec {
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
    c.assert_detail_ends_with("still busy 9.0 s after the start");
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
