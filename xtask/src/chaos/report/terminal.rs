//! The terminal report: a block per scenario as it finishes, and a summary table at the end.

use std::fmt::Write as _;

use super::super::RunResult;
use super::super::invariants::Check;
use super::super::run::ScenarioRun;
use super::super::stats::Latency;

/// `61ms`, `1.24s`.
pub(crate) fn ms(v: f64) -> String {
    if v < 1000.0 {
        format!("{v:.0}ms")
    } else {
        format!("{:.2}s", v / 1000.0)
    }
}

/// The p50, p95 and p99 latencies as the reports show them.
pub(crate) fn percentiles(l: &Latency) -> [String; 3] {
    [ms(l.p50), ms(l.p95), ms(l.p99)]
}

fn verdict(c: &Check) -> &'static str {
    if c.passed { "PASS" } else { "FAIL" }
}

/// The block printed when a scenario finishes.
pub(crate) fn scenario_block(r: &ScenarioRun, n: usize, total: usize) -> String {
    let s = &r.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "━━ [{n}/{total}] {} — {}",
        r.scenario.name, r.scenario.description
    );
    let _ = writeln!(
        out,
        "   {:>8} {:>8} {:>7} {:>7} {:>8} {:>8} {:>8} {:>12}",
        "requests", "success", "static", "errors", "p50", "p95", "p99", "retries/call"
    );
    let [p50, p95, p99] = percentiles(&s.latency_ms);
    let _ = writeln!(
        out,
        "   {:>8} {:>7.1}% {:>6.1}% {:>6.1}% {p50:>8} {p95:>8} {p99:>8} {:>12.2}",
        s.requests, s.success_pct, s.static_pct, s.error_pct, s.retries_per_call
    );
    let served: Vec<String> = s
        .served_by
        .iter()
        .map(|x| format!("{} {:.1}%", x.who, x.pct))
        .collect();
    let _ = writeln!(out, "   served by  {}", served.join(" · "));
    if !s.errors_by_kind.is_empty() {
        let errs: Vec<String> = s
            .errors_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(out, "   errors     {}", errs.join(" · "));
    }
    let fallbacks: Vec<String> = s
        .fallbacks
        .iter()
        .map(|f| format!("{}→{} {}", f.from, f.to, f.count))
        .collect();
    let _ = writeln!(
        out,
        "   fallbacks  {}",
        if fallbacks.is_empty() {
            "none".to_owned()
        } else {
            fallbacks.join(" · ")
        }
    );
    let breakers: Vec<String> = s
        .breakers
        .iter()
        .map(|b| {
            if b.transitions == 0 {
                format!("{} closed throughout", b.link)
            } else {
                format!("{} {}", b.link, b.counts(""))
            }
        })
        .collect();
    let _ = writeln!(out, "   breakers   {}", breakers.join(" · "));
    let hits: Vec<String> = r
        .records
        .links
        .iter()
        .filter_map(|l| {
            s.vendor_hits
                .get(&l.name)
                .map(|n| format!("{} {n}", l.name))
        })
        .collect();
    let _ = writeln!(
        out,
        "   vendors    hits {} · {:.2} attempts/call · run {:.1}s wall",
        hits.join(" · "),
        s.attempts_per_call,
        r.wall.as_secs_f64()
    );
    for note in &r.notes {
        let _ = writeln!(out, "   note       {note}");
    }
    for c in r.invariants.iter().chain(&r.expectations) {
        let _ = writeln!(
            out,
            "   {} {:<14} {} ({})",
            verdict(c),
            c.id,
            c.title,
            c.detail
        );
        if !c.passed {
            offender_lines(&mut out, "        ", c);
        }
    }
    out
}

/// The table at the end: one row per scenario.
pub(crate) fn summary(result: &RunResult) -> String {
    let mut out = String::new();
    let width = result
        .runs
        .iter()
        .map(|r| r.scenario.name.len())
        .chain(
            result
                .vendor
                .as_ref()
                .map(|_| super::super::vendor_status::NAME.len()),
        )
        .max()
        .unwrap_or(8)
        .max(8);
    let _ = writeln!(
        out,
        "\n{:<width$} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8}  checks",
        "scenario", "requests", "success", "static", "errors", "p50", "p95", "p99", "retries"
    );
    let (mut checks, mut passed) = (0, 0);
    for r in &result.runs {
        let s = &r.summary;
        let all = r.checks();
        let ok = all.iter().filter(|c| c.passed).count();
        checks += all.len();
        passed += ok;
        let [p50, p95, p99] = percentiles(&s.latency_ms);
        let mark = if ok == all.len() { "PASS" } else { "FAIL" };
        let _ = writeln!(
            out,
            "{:<width$} {:>8} {:>7.1}% {:>6.1}% {:>6.1}% {p50:>7} {p95:>7} {p99:>7} {:>8.2}  {ok}/{} {mark}",
            r.scenario.name,
            s.requests,
            s.success_pct,
            s.static_pct,
            s.error_pct,
            s.retries_per_call,
            all.len(),
        );
    }
    let mut scenarios = result.runs.len();
    if let Some(v) = &result.vendor {
        // Its own chains: requests and checks, no latency table.
        let ok = v.checks.iter().filter(|c| c.passed).count();
        checks += v.checks.len();
        passed += ok;
        scenarios += 1;
        let _ = writeln!(
            out,
            "{:<width$} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8}  {ok}/{} {}",
            super::super::vendor_status::NAME,
            v.runs.iter().map(|r| r.requests.len()).sum::<usize>(),
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            v.checks.len(),
            if v.passed() { "PASS" } else { "FAIL" },
        );
    }
    let _ = writeln!(
        out,
        "\nchaos: {scenarios} scenario{}, {passed}/{checks} checks passed, {:.1}s in all",
        if scenarios == 1 { "" } else { "s" },
        result.wall.as_secs_f64()
    );
    out
}

/// The terminal block of a scenario that runs on its own (its own chains or process): a
/// heading, its figures, each check with its offenders, and a footer (its bounds, its wall time)
/// in parentheses.
pub(crate) fn side_block(
    name: &str,
    description: &str,
    figures: &[String],
    checks: &[Check],
    footer: &str,
) -> String {
    let mut out = format!("── {name} ── {description}\n");
    for l in figures {
        let _ = writeln!(out, "  {l}");
    }
    let width = checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in checks {
        let _ = writeln!(
            out,
            "  {} {:<width$} {} — {}",
            if c.passed { "PASS" } else { "FAIL" },
            c.id,
            c.title,
            c.detail
        );
        offender_lines(&mut out, "       ", c);
    }
    let _ = writeln!(out, "  ({footer})");
    out
}

/// A check's listed offenders, one a line, and how many more there were.
fn offender_lines(out: &mut String, indent: &str, c: &Check) {
    for o in &c.offenders {
        let _ = writeln!(out, "{indent}✗ {o}");
    }
    if c.offender_count > c.offenders.len() {
        let _ = writeln!(
            out,
            "{indent}… and {} more",
            c.offender_count - c.offenders.len()
        );
    }
}
