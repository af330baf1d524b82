//! The reports: a terminal block per scenario and a summary table, a JSON file, and a
//! self-contained HTML file with an SVG timeline per scenario.
//!
//! Every text that leaves the process is scanned for the run's API keys: each scenario's
//! block, JSON and HTML section before its `no-keys` verdict is settled, and the written files
//! again after they are written.

pub(crate) mod html;
pub(crate) mod terminal;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::RunResult;
use super::capture::KeySink;
use super::invariants::Check;
use super::record::{Leak, LinkInfo, RequestRec, TransitionRec};
use super::run::{ScenarioRun, Settings};
use super::stats::Summary;

/// A phase of a scenario, as reported.
#[derive(Debug, Serialize)]
pub(crate) struct PhaseReport {
    pub(crate) vendor: String,
    pub(crate) at_ms: f64,
    pub(crate) what: String,
}

/// One scenario in the JSON report.
#[derive(Debug, Serialize)]
pub(crate) struct ScenarioReport<'a> {
    pub(crate) name: &'a str,
    pub(crate) description: &'a str,
    pub(crate) source: &'a str,
    pub(crate) passed: bool,
    pub(crate) wall_s: f64,
    pub(crate) phases: Vec<PhaseReport>,
    pub(crate) notes: &'a [String],
    pub(crate) summary: &'a Summary,
    pub(crate) invariants: &'a [Check],
    pub(crate) expectations: &'a [Check],
    pub(crate) transitions: &'a [TransitionRec],
    pub(crate) requests: &'a [RequestRec],
}

/// The shared-state scenario in the JSON report.
#[derive(Debug, Serialize)]
struct SharedReport<'a> {
    name: &'static str,
    description: &'static str,
    passed: bool,
    /// Why it did not run (no redis-server).
    skipped: Option<&'a str>,
    wall_s: f64,
    /// Per replica: who answered its requests, and how many.
    served: &'a [std::collections::BTreeMap<String, usize>],
    checks: &'a [Check],
}

/// The JSON report.
#[derive(Debug, Serialize)]
struct RunReport<'a> {
    tool: &'static str,
    passed: bool,
    quick: bool,
    seed: u64,
    users: usize,
    duration_s: f64,
    deadline_ms: f64,
    streamed_share: f64,
    chain: &'a str,
    links: &'a [LinkInfo],
    started_unix_s: u64,
    wall_s: f64,
    scenarios: Vec<ScenarioReport<'a>>,
    /// The shared-state scenario (three replicas on Redis), when it was run.
    shared: Option<SharedReport<'a>>,
    /// The vendor-status scenario (three chains with fake status pages), when it was run.
    vendor_status: Option<super::vendor_status::VendorReport<'a>>,
    /// The gateway-under-abuse scenario (a `ripcord serve` child), when it was run.
    abuse: Option<super::abuse::AbuseReport<'a>>,
    /// The embeddings-outage scenario (its own embedding chain), when it was run.
    embeddings: Option<super::embeddings::EmbeddingsReport<'a>>,
}

/// A scenario that runs on its own (its own chains or process) as its terminal block and HTML
/// section show it: its figures, one line each, above its checks, and its wall time.
#[derive(Debug)]
pub(crate) struct SideFigures<'a> {
    name: &'static str,
    description: &'static str,
    figures: Vec<String>,
    checks: &'a [Check],
    wall: Duration,
}

impl<'a> SideFigures<'a> {
    /// The scenario's name and description, figure lines, checks and wall time.
    pub(crate) fn new(
        name: &'static str,
        description: &'static str,
        figures: Vec<String>,
        checks: &'a [Check],
        wall: Duration,
    ) -> SideFigures<'a> {
        SideFigures {
            name,
            description,
            figures,
            checks,
            wall,
        }
    }

    /// It passed: it made checks, and every one passed.
    pub(crate) fn passed(checks: &[Check]) -> bool {
        !checks.is_empty() && checks.iter().all(|c| c.passed)
    }

    /// Its block in the terminal report.
    pub(crate) fn terminal_block(&self) -> String {
        terminal::side_block(
            self.name,
            self.description,
            &self.figures,
            self.checks,
            &self.footer(),
        )
    }

    /// Its section of the HTML report.
    pub(crate) fn html_section(&self) -> String {
        html::side_section(
            self.name,
            self.description,
            html::verdict(SideFigures::passed(self.checks)),
            &html::figure_list(&self.figures),
            self.checks,
            &self.footer(),
        )
    }

    fn footer(&self) -> String {
        format!("{:.1} s", self.wall.as_secs_f64())
    }
}

/// The phases of a scenario with their offsets in this run.
pub(crate) fn phases(r: &ScenarioRun, s: &Settings) -> Vec<PhaseReport> {
    let mut out: Vec<PhaseReport> = r
        .scenario
        .phases
        .iter()
        .map(|p| PhaseReport {
            vendor: p.vendor.clone(),
            at_ms: p.at.offset(s.duration).as_secs_f64() * 1000.0,
            what: p.label(),
        })
        .collect();
    out.sort_by(|a, b| a.vendor.cmp(&b.vendor).then(a.at_ms.total_cmp(&b.at_ms)));
    out
}

pub(crate) fn scenario_report<'a>(r: &'a ScenarioRun, s: &Settings) -> ScenarioReport<'a> {
    ScenarioReport {
        name: &r.scenario.name,
        description: &r.scenario.description,
        source: &r.scenario.source,
        passed: r.passed(),
        wall_s: r.wall.as_secs_f64(),
        phases: phases(r, s),
        notes: &r.notes,
        summary: &r.summary,
        invariants: &r.invariants,
        expectations: &r.expectations,
        transitions: &r.records.transitions,
        requests: &r.records.requests,
    }
}

/// Scans what the reports will show of this scenario, and settles its checks.
pub(crate) fn scan_scenario(r: &mut ScenarioRun, sink: &KeySink, s: &Settings) {
    let json = serde_json::to_string(&scenario_report(r, s)).unwrap_or_default();
    sink.scan_text(&format!("the JSON report of {}", r.scenario.name), &json);
    sink.scan_text(
        &format!("the terminal table of {}", r.scenario.name),
        &terminal::scenario_block(r, 1, 1),
    );
    sink.scan_text(
        &format!("the HTML report of {}", r.scenario.name),
        &html::section(r, s, 0),
    );
    let (scanned, leaks) = sink.take();
    r.records.scanned += scanned;
    r.records.leaks.extend(leaks);
    r.recheck(s.tolerance);
}

/// The written files, and any key found in them afterwards.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) json: PathBuf,
    pub(crate) html: PathBuf,
    pub(crate) leaks: Vec<Leak>,
}

/// The JSON report's text.
pub(crate) fn json(result: &RunResult) -> Result<String, String> {
    let s = &result.settings;
    let report = RunReport {
        tool: "cargo xtask chaos",
        passed: result.passed(),
        quick: result.quick,
        seed: s.seed,
        users: s.users,
        duration_s: s.duration.as_secs_f64(),
        deadline_ms: s.deadline.as_secs_f64() * 1000.0,
        streamed_share: s.stream_share,
        chain: &result.template.source,
        links: &result.template.links,
        started_unix_s: result.started_unix_s,
        wall_s: result.wall.as_secs_f64(),
        scenarios: result.runs.iter().map(|r| scenario_report(r, s)).collect(),
        shared: result.shared.as_ref().map(|r| SharedReport {
            name: super::shared::NAME,
            description: super::shared::DESCRIPTION,
            passed: r.passed(),
            skipped: r.skipped.as_deref(),
            wall_s: r.wall.as_secs_f64(),
            served: &r.served,
            checks: &r.checks,
        }),
        vendor_status: result.vendor.as_ref().map(super::vendor_status::report),
        abuse: result.abuse.as_ref().map(super::abuse::json_report),
        embeddings: result
            .embeddings
            .as_ref()
            .map(super::embeddings::json_report),
    };
    serde_json::to_string_pretty(&report).map_err(|e| format!("cannot render the JSON report: {e}"))
}

/// Writes `report.json` and `report.html` into `dir`, then scans them for keys.
pub(crate) fn write(result: &RunResult, dir: &Path, sink: &KeySink) -> Result<Written, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the report folder {}: {e}", dir.display()))?;
    let json_path = dir.join("report.json");
    let html_path = dir.join("report.html");
    let texts = [
        (&json_path, json(result)?),
        (&html_path, html::page(result)),
    ];
    for (path, text) in &texts {
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let _ = sink.take();
    for (path, _) in &texts {
        let written = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read back {}: {e}", path.display()))?;
        sink.scan_text(&path.display().to_string(), &written);
    }
    sink.scan_text("the summary table", &terminal::summary(result));
    let (_, leaks) = sink.take();
    Ok(Written {
        json: json_path,
        html: html_path,
        leaks,
    })
}
