//! `vendor-declares-outage`: the vendor's own status page declares a major outage of link A's
//! component while A keeps answering 200, and ripcord acts on the declaration — not on errors.
//!
//! Three runs, side by side on the caller's runtime, each with its own fake vendors, its own
//! fake Statuspage server (`ripcord_chaos::status_page`) and its own chain built by
//! `ripcord-cli`'s builder from a config with `[providers.status_page]` on A: `primary` (A,
//! OpenAI wire, its page polled every [`INTERVAL`], [`TIMEOUT`] per poll) → `backup` (B,
//! Anthropic wire, tried once per request, a breaker that does not trip here) → static reply.
//! A few users send plain requests all along; an observer samples ripcord's own view of A
//! (the poller's state and A's demotion / vendor switches) every [`SAMPLE`]:
//!
//! - `demote` (`on_major_outage = "demote"`) and `open` (`"open"`): healthy (the page already
//!   declares an outage of *another* component, which must change nothing) → the page declares
//!   a major outage of "API" with a major incident → once ripcord acted, 1.6 s declared, B
//!   answering 503 in the second half → resolved → healthy again.
//! - `unreachable` (`"open"`, the policy that would do most harm if a failure were misread):
//!   healthy → the page resets every connection, then hangs past the timeout, then serves
//!   garbage (each until a failed poll says so) → readable and all clear.
//!
//! | id | what must hold |
//! | --- | --- |
//! | `acted-within-poll` | under `demote` and `open`, ripcord's view took the policy's effect within one poll interval + tolerance of the declaration, never before it, and the other policy's switch stayed off |
//! | `no-call-to-opened` | under `open`, no call started on A's adapter between ripcord holding A open and letting it go, and fake vendor A received no request then (after the in-flight edge), even while B failed and the static reply answered |
//! | `demoted-order` | under `demote`, no request started while A was demoted tried A before B; while B failed, the demoted A answered (it is behind B, not gone) |
//! | `order-restored` | under `demote` and `open`, ripcord let go of A within one poll interval + tolerance of the resolution, and every request before the declaration and after the restoration was answered by A, tried first |
//! | `unreachable-changes-nothing` | a page that cannot be read never set anything (no action, no demotion, not held open), A answered every request first, each failing mode was counted as a failed poll with its reason, and the first good poll cleared them |
//! | `answered` | every request of every run got an answer (a model or the static reply) |
//! | `no-keys` | (added by `cargo xtask chaos`, which owns the key scan) no API key in any log event, span or the scenario's terminal block |
//!
//! **Where the windows start and end.** The checks measure from ripcord's view (as the
//! observer sampled it), not from when the fake page changed: the page is only read once per
//! interval. A window runs from the first sample that showed the effect to the last sample that
//! still showed it. The observer runs on the same thread as the users, so a request started
//! inside that window started while the switch was set; the call log on A's adapter therefore
//! allows no edge. Fake vendor A's own log (what A really received) allows one at the start: a
//! request already sent when the switch flipped may arrive up to the in-flight edge later.
//!
//! **Tolerances** (from the configured poll interval `I` = 200 ms, the observer's sample
//! `S` = 10 ms and the run's scheduling tolerance `T`, 150 ms by default):
//!
//! - reacting to a declaration or a resolution: at most `I + S + T` (the poll that sees the
//!   change starts within one interval; the loopback poll itself falls within `T`);
//! - the in-flight edge of fake A's log: `S + T`.
//!
//! A failed check fails `cargo xtask chaos` like any other; the checks and the runs' records
//! are in the JSON report (`vendor_status`), the HTML report (its own section) and the
//! terminal block. The whole scenario takes about 5 s of wall time.

mod checks;
mod drive;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::capture::KeySink;
use super::invariants::Check;
use super::run::Settings;
use checks::{Bounds, PRIMARY, Variant, VariantRec};

/// The scenario's name (for `--only`).
pub(crate) const NAME: &str = "vendor-declares-outage";
/// What it does, for `--list`.
pub(crate) const DESCRIPTION: &str = "primary's vendor declares a major outage on its status page while primary keeps answering: demote puts backup first, open sends primary nothing, both restore it after the resolution; an unreadable page changes nothing";

/// How often the fake status page is polled.
pub(crate) const INTERVAL: Duration = Duration::from_millis(200);
/// The time limit of one poll.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(150);
/// How often the observer samples ripcord's view.
pub(crate) const SAMPLE: Duration = Duration::from_millis(10);

/// The bounds the checks allow: the poll interval, the observer's sample and the run's
/// tolerance.
fn bounds(s: &Settings) -> Bounds {
    Bounds {
        interval_ms: INTERVAL.as_secs_f64() * 1000.0,
        sample_ms: SAMPLE.as_secs_f64() * 1000.0,
        tolerance_ms: s.tolerance.as_secs_f64() * 1000.0,
    }
}

/// What the scenario produced.
#[derive(Debug, Clone)]
pub(crate) struct VendorRun {
    pub(crate) runs: Vec<VariantRec>,
    pub(crate) checks: Vec<Check>,
    pub(crate) bounds: Bounds,
    pub(crate) wall: Duration,
}

impl VendorRun {
    /// True when every check passed.
    pub(crate) fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }
}

/// Runs the three runs side by side on the caller's runtime, then the checks.
pub(crate) async fn run(s: &Settings) -> Result<VendorRun, String> {
    let wall = std::time::Instant::now();
    let (demote, open, unreachable) = futures::future::join3(
        drive::drive(Variant::Demote, s),
        drive::drive(Variant::Open, s),
        drive::drive(Variant::Unreachable, s),
    )
    .await;
    let runs = vec![demote?, open?, unreachable?];
    let bounds = bounds(s);
    Ok(VendorRun {
        checks: checks::check_all(&runs, bounds),
        runs,
        bounds,
        wall: wall.elapsed(),
    })
}

/// Adds the `no-keys` check: the run's key scan (every log event and span at debug level and
/// up, and the scenario's terminal block) found none of the chain's API keys.
pub(crate) fn add_key_scan(r: &mut VendorRun, sink: &KeySink) {
    sink.scan_text(&format!("the terminal block of {NAME}"), &terminal_block(r));
    let (scanned, leaks) = sink.take();
    r.checks.push(Check::new(
        "no-keys",
        "no API key appeared in any log line, span or report",
        format!("{scanned} log events, spans and report texts scanned"),
        leaks
            .iter()
            .map(|l| format!("{}: the key of {}", l.place, l.key_of))
            .collect(),
    ));
}

/// One run in a line: requests, who answered, what A received, how ripcord reacted.
fn run_line(r: &VariantRec) -> String {
    let mut served: BTreeMap<&str, usize> = BTreeMap::new();
    for q in &r.requests {
        *served.entry(q.served_by.as_str()).or_default() += 1;
    }
    let served: Vec<String> = served.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let window = r.effect_window();
    let (on, off) = (window.map(|w| w.on), window.and_then(|w| w.off));
    let timing = match (r.declared_ms, on, r.resolved_ms, off) {
        (Some(d), Some(on), Some(res), Some(off)) => format!(
            " · acted +{:.0} ms after the declaration, restored +{:.0} ms after the resolution",
            on - d,
            off - res
        ),
        _ if r.variant == Variant::Unreachable => format!(
            " · {} failed polls at most, page polled {} times",
            r.view.iter().map(|v| v.failures).max().unwrap_or(0),
            r.page_hits
        ),
        _ => String::new(),
    };
    format!(
        "{} (on_major_outage = \"{}\"): {} requests, served by {}; {PRIMARY} received {}{timing}",
        r.variant.name(),
        r.variant.policy(),
        r.requests.len(),
        served.join(", "),
        r.primary_hits_ms.len()
    )
}

/// The scenario's block in the terminal report.
pub(crate) fn terminal_block(r: &VendorRun) -> String {
    let figures: Vec<String> = r.runs.iter().map(run_line).collect();
    super::report::terminal::side_block(
        NAME,
        DESCRIPTION,
        &figures,
        &r.checks,
        &format!(
            "bounds: react {:.0} ms, in-flight edge {:.0} ms; {:.1} s",
            r.bounds.react_ms(),
            r.bounds.in_flight_ms(),
            r.wall.as_secs_f64()
        ),
    )
}

/// The scenario's section of the HTML report: each run in a line, and the checks.
pub(crate) fn html_section(r: &VendorRun) -> String {
    use super::report::html::table_section;
    let rows: Vec<(String, String)> = r
        .runs
        .iter()
        .map(|v| (v.variant.name().to_owned(), run_line(v)))
        .collect();
    table_section(
        NAME,
        DESCRIPTION,
        r.passed(),
        ("run", "what happened"),
        &rows,
        &r.checks,
        &format!(
            "poll interval {} ms · react within {:.0} ms · in-flight edge {:.0} ms · {:.1} s",
            INTERVAL.as_millis(),
            r.bounds.react_ms(),
            r.bounds.in_flight_ms(),
            r.wall.as_secs_f64()
        ),
    )
}

/// The scenario in the JSON report.
#[derive(Debug, Serialize)]
pub(crate) struct VendorReport<'a> {
    name: &'static str,
    description: &'static str,
    passed: bool,
    wall_s: f64,
    interval_ms: u128,
    react_ms: f64,
    in_flight_ms: f64,
    checks: &'a [Check],
    runs: &'a [VariantRec],
}

/// The scenario's JSON report.
pub(crate) fn report(r: &VendorRun) -> VendorReport<'_> {
    VendorReport {
        name: NAME,
        description: DESCRIPTION,
        passed: r.passed(),
        wall_s: r.wall.as_secs_f64(),
        interval_ms: INTERVAL.as_millis(),
        react_ms: r.bounds.react_ms(),
        in_flight_ms: r.bounds.in_flight_ms(),
        checks: &r.checks,
        runs: &r.runs,
    }
}

#[cfg(test)]
mod tests {
    use super::super::RunResult;
    use super::super::chain::Template;
    use super::super::report;
    use super::*;

    fn result(passed: bool) -> RunResult {
        let settings = Settings::sample(Duration::from_secs(1));
        let check = Check {
            passed,
            ..Check::new(
                "no-call-to-opened",
                "no call <reaches> primary",
                "0 calls".to_owned(),
                Vec::new(),
            )
        };
        RunResult {
            runs: Vec::new(),
            template: Template::builtin(settings.deadline, false, 1).unwrap(),
            settings,
            quick: true,
            started_unix_s: 0,
            wall: Duration::from_secs(5),
            shared: None,
            abuse: None,
            embeddings: None,
            vendor: Some(VendorRun {
                runs: Vec::new(),
                checks: vec![check],
                bounds: bounds(&Settings::sample(Duration::from_secs(1))),
                wall: Duration::from_secs(4),
            }),
        }
    }

    #[test]
    fn the_reports_show_the_scenario_and_a_failed_check_fails_the_verdict() {
        let ok = result(true);
        assert!(ok.passed());
        let html = report::html::page(&ok);
        assert!(
            html.contains(&format!(r#"<section id="{NAME}">"#)),
            "{html}"
        );
        assert!(html.contains("no call &lt;reaches&gt; primary"));
        let json: serde_json::Value = serde_json::from_str(&report::json(&ok).unwrap()).unwrap();
        assert_eq!(json["vendor_status"]["name"], NAME);
        assert_eq!(json["vendor_status"]["react_ms"], 360.0);
        assert_eq!(
            json["vendor_status"]["checks"][0]["id"],
            "no-call-to-opened"
        );
        assert_eq!(json["passed"], true);
        let table = report::terminal::summary(&ok);
        assert!(table.contains("1 scenario, 1/1 checks passed"), "{table}");

        let bad = result(false);
        assert!(!bad.passed());
        assert!(report::html::page(&bad).contains(r#"class="badge fail""#));
        let json: serde_json::Value = serde_json::from_str(&report::json(&bad).unwrap()).unwrap();
        assert_eq!(json["passed"], false);
        assert_eq!(json["vendor_status"]["passed"], false);
        assert!(report::terminal::summary(&bad).contains("0/1 FAIL"));
        assert!(terminal_block(&bad.vendor.unwrap()).contains("FAIL no-call-to-opened"));
    }

    /// The scenario itself, for real: three chains on loopback, every check passing.
    #[tokio::test(flavor = "current_thread")]
    async fn the_declared_outage_is_acted_on_and_an_unreadable_page_changes_nothing() {
        let r = run(&Settings {
            users: 3,
            deadline: Duration::from_secs(3),
            seed: 7,
            ..Settings::sample(Duration::from_secs(1))
        })
        .await
        .unwrap();
        assert!(r.passed(), "{}", terminal_block(&r));
        assert_eq!(r.runs.len(), 3);
        let html = html_section(&r);
        assert!(html.contains(&format!(r#"<section id="{NAME}">"#)));
        let json = serde_json::to_value(report(&r)).unwrap();
        assert_eq!(json["checks"].as_array().map(Vec::len), Some(6));
        assert_eq!(json["runs"][1]["variant"], "open");
    }
}
