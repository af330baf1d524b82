//! The HTML report: one self-contained file (inline CSS and SVG, no script, no fonts, no
//! links out), so it opens from disk in any browser with no network. Written as well-formed
//! XHTML-style markup (void elements closed, attributes quoted) so it also parses as XML.
//!
//! Each scenario gets an SVG timeline, seconds on the x axis:
//!
//! - who served the requests that ended in each second (stacked bars);
//! - per link, the vendor's scripted faults and its breaker's open / half-open bands;
//! - every request's latency (a dot where it ended), with its deadline as a dashed line.
//!
//! Hovering a mark shows its details (SVG `<title>` elements).

use std::fmt::Write as _;

use super::super::RunResult;
use super::super::invariants::Check;
use super::super::record::{Outcome, State};
use super::super::run::{ScenarioRun, Settings};
use super::super::scenario::{Fault, STATIC};
use super::super::stats::bands;
use super::terminal::{ms, percentiles};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 16.0;

const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1000px; color: #1d232b; padding: 0 12px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin: 36px 0 4px; border-top: 1px solid #d8dde3; padding-top: 18px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid #eceff2; }
th:first-child, td:first-child { text-align: left; }
td.l, th.l { text-align: left; }
.pass { color: #1e7a3e; font-weight: 600; }
.fail { color: #b3261e; font-weight: 600; }
.muted { color: #5f6b77; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 9px; font-size: 12px; color: #fff; vertical-align: middle; }
.badge.pass { background: #1e7a3e; }
.badge.fail { background: #b3261e; }
ul.off { margin: 2px 0 6px; color: #b3261e; font-size: 13px; }
svg { display: block; margin: 10px 0; background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: #3b4450; }
code { background: #f3f5f7; padding: 0 4px; border-radius: 3px; }
"#;

/// Escapes text for HTML and XML.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A colour per server.
fn color(who: &str, links: &[String]) -> &'static str {
    const PALETTE: &[&str] = &[
        "#2f6fd0", "#8a4fd0", "#2e9b5f", "#0f8a9a", "#b0558a", "#6c7a2e",
    ];
    match who {
        STATIC => "#e08a1e",
        "error" => "#d03a3a",
        "lost" => "#222222",
        _ => links
            .iter()
            .position(|l| l == who)
            .map_or("#8a96a3", |i| PALETTE[i % PALETTE.len()]),
    }
}

fn fault_color(f: Fault) -> Option<&'static str> {
    match f {
        Fault::Ok => None,
        Fault::LongStream { .. } => Some("#6a9fd0"),
        Fault::SlowFirstToken { .. }
        | Fault::Hang
        | Fault::Silent
        | Fault::StallMidStream { .. } => Some("#e0b020"),
        Fault::Reset
        | Fault::ResetMidStream { .. }
        | Fault::Truncated { .. }
        | Fault::MalformedJson
        | Fault::StopWithoutDone
        | Fault::MalformedEvent => Some("#a0522d"),
        Fault::RateLimited { .. } => Some("#d0702a"),
        _ => Some("#d03a3a"),
    }
}

fn who(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Answered {
            static_reply: true, ..
        } => STATIC.to_owned(),
        Outcome::Answered { served_by, .. } => served_by.clone(),
        Outcome::Failed { .. } => "error".to_owned(),
        Outcome::Lost { .. } | Outcome::Unfinished => "lost".to_owned(),
    }
}

/// The SVG timeline of one scenario.
fn timeline(r: &ScenarioRun, s: &Settings) -> String {
    let links: Vec<String> = r.records.links.iter().map(|l| l.name.clone()).collect();
    let end_s = (r.summary.end_ms / 1000.0).ceil().max(1.0);
    let seconds = end_s as usize;
    let plot = WIDTH - LEFT - RIGHT;
    let x = |ms: f64| LEFT + (ms / 1000.0 / end_s).clamp(0.0, 1.0) * plot;
    let mut svg = String::new();

    // Legend: who served (bars and dots), then what the link rows show.
    let mut legend: Vec<(String, &str)> = links
        .iter()
        .map(|l| (l.clone(), color(l, &links)))
        .collect();
    legend.extend([
        (STATIC.to_owned(), color(STATIC, &links)),
        ("error".to_owned(), color("error", &links)),
    ]);
    let rows: [(&str, &str); 6] = [
        ("fault: error status", "#d03a3a"),
        ("429", "#d0702a"),
        ("slow / stalled", "#e0b020"),
        ("broken connection", "#a0522d"),
        ("breaker open", "#7a1010"),
        ("half-open", "#f0a020"),
    ];
    let legend: Vec<(&str, &str)> = legend.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    for (y, items) in [(4, legend.as_slice()), (20, rows.as_slice())] {
        let mut lx = LEFT;
        for (name, c) in items {
            let _ = write!(
                svg,
                r#"<rect x="{lx:.1}" y="{y}" width="10" height="10" fill="{c}"/><text x="{:.1}" y="{}">{}</text>"#,
                lx + 14.0,
                y + 9,
                esc(name)
            );
            lx += 24.0 + 6.5 * name.chars().count() as f64;
        }
    }

    // Who served, per second.
    let bars_top = 42.0;
    let bars_h = 90.0;
    let mut buckets: Vec<Vec<(String, usize)>> = vec![Vec::new(); seconds];
    for q in &r.records.requests {
        let Some(end) = q.end_ms else { continue };
        let sec = ((end / 1000.0) as usize).min(seconds - 1);
        let w = who(&q.outcome);
        match buckets[sec].iter_mut().find(|(n, _)| *n == w) {
            Some((_, c)) => *c += 1,
            None => buckets[sec].push((w, 1)),
        }
    }
    let order: Vec<String> = links
        .iter()
        .cloned()
        .chain(["static", "error", "lost"].map(str::to_owned))
        .collect();
    let peak = buckets
        .iter()
        .map(|b| b.iter().map(|(_, c)| c).sum::<usize>())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let _ = write!(
        svg,
        r#"<text x="4" y="{:.1}">served / second</text><text x="{:.1}" y="{:.1}" text-anchor="end">{peak:.0}</text>"#,
        bars_top + 14.0,
        LEFT - 4.0,
        bars_top + 10.0
    );
    let slot = plot / end_s;
    for (sec, b) in buckets.iter().enumerate() {
        let mut y = bars_top + bars_h;
        for w in &order {
            let Some((_, c)) = b.iter().find(|(n, _)| n == w) else {
                continue;
            };
            let h = *c as f64 / peak * bars_h;
            y -= h;
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{}–{} s: {} × {}</title></rect>"#,
                LEFT + sec as f64 * slot + 1.0,
                (slot - 2.0).max(1.0),
                color(w, &links),
                sec,
                sec + 1,
                c,
                esc(w)
            );
        }
    }

    // Per link: scripted faults and breaker bands.
    let mut y = bars_top + bars_h + 14.0;
    for link in &links {
        let _ = write!(
            svg,
            r#"<text x="4" y="{:.1}">{} vendor</text><text x="4" y="{:.1}">{} breaker</text>"#,
            y + 9.0,
            esc(link),
            y + 23.0,
            esc(link)
        );
        let _ = write!(
            svg,
            r##"<rect x="{LEFT:.1}" y="{y:.1}" width="{plot:.1}" height="10" fill="#eef5ef"/><rect x="{LEFT:.1}" y="{:.1}" width="{plot:.1}" height="10" fill="#eef5ef"/>"##,
            y + 14.0
        );
        let phases = r.scenario.phases_of(link, s.duration);
        for (i, (at, p)) in phases.iter().enumerate() {
            let from = at.as_secs_f64() * 1000.0;
            let to = phases
                .get(i + 1)
                .map_or(end_s * 1000.0, |(n, _)| n.as_secs_f64() * 1000.0);
            let Some(c) = fault_color(p.fault).or_else(|| fault_color(p.otherwise)) else {
                continue;
            };
            let opacity = if p.p >= 1.0 { 1.0 } else { 0.35 + 0.65 * p.p };
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="10" fill="{c}" fill-opacity="{opacity:.2}"><title>{}: {} from {:.1} s</title></rect>"#,
                x(from),
                (x(to) - x(from)).max(0.5),
                esc(link),
                esc(&p.label()),
                from / 1000.0
            );
        }
        for b in bands(&r.records, link) {
            let c = if b.state == State::Open {
                "#7a1010"
            } else {
                "#f0a020"
            };
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="10" fill="{c}"><title>{} breaker {} {:.2}–{:.2} s</title></rect>"#,
                x(b.from_ms),
                y + 14.0,
                (x(b.to_ms) - x(b.from_ms)).max(0.5),
                esc(link),
                b.state.as_str(),
                b.from_ms / 1000.0,
                b.to_ms / 1000.0
            );
        }
        y += 34.0;
    }

    // Latency, on a log scale (5 ms to a little above the deadline or the slowest call).
    let lat_top = y + 6.0;
    let lat_h = 120.0;
    let deadline = s.deadline.as_secs_f64() * 1000.0;
    let (floor, top_ms) = (5.0_f64, r.summary.latency_ms.max.max(deadline * 1.3));
    let span = (top_ms / floor).ln();
    let ly =
        |v: f64| lat_top + lat_h - ((v.max(floor) / floor).ln() / span).clamp(0.0, 1.0) * lat_h;
    let _ = write!(
        svg,
        r##"<text x="4" y="{:.1}">latency</text><rect x="{LEFT:.1}" y="{lat_top:.1}" width="{plot:.1}" height="{lat_h:.1}" fill="#fafbfc" stroke="#e3e7eb"/>"##,
        lat_top + lat_h / 2.0,
    );
    for tick in [10.0, 100.0, 1000.0, 10_000.0, 100_000.0] {
        if tick < top_ms && (tick - deadline).abs() / deadline > 0.2 {
            let _ = write!(
                svg,
                r##"<line x1="{LEFT:.1}" x2="{:.1}" y1="{ty:.1}" y2="{ty:.1}" stroke="#000" stroke-opacity="0.07"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + plot,
                LEFT - 4.0,
                ly(tick) + 4.0,
                ms(tick),
                ty = ly(tick),
            );
        }
    }
    let dy = ly(deadline);
    let _ = write!(
        svg,
        r##"<line x1="{LEFT:.1}" x2="{:.1}" y1="{dy:.1}" y2="{dy:.1}" stroke="#b3261e" stroke-dasharray="5 4"/><text x="{:.1}" y="{:.1}" text-anchor="end">deadline {}</text>"##,
        LEFT + plot,
        LEFT - 4.0,
        dy + 4.0,
        ms(deadline),
    );
    for q in &r.records.requests {
        let (Some(end), Some(l)) = (q.end_ms, q.latency_ms()) else {
            continue;
        };
        let w = who(&q.outcome);
        let _ = write!(
            svg,
            r#"<circle cx="{:.1}" cy="{:.1}" r="2.2" fill="{}" fill-opacity="0.8"><title>{} ({}) {}: {}</title></circle>"#,
            x(end),
            ly(l),
            color(&w, &links),
            esc(&q.id),
            if q.streamed { "streamed" } else { "plain" },
            esc(&w),
            ms(l)
        );
    }

    // Time axis.
    let axis = lat_top + lat_h + 14.0;
    let step = if seconds <= 30 { 1 } else { 5 };
    for sec in (0..=seconds).step_by(step) {
        let px = x(sec as f64 * 1000.0);
        let _ = write!(
            svg,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{bars_top:.1}" y2="{:.1}" stroke="#000" stroke-opacity="0.06"/><text x="{px:.1}" y="{axis:.1}" text-anchor="middle">{sec}s</text>"##,
            axis - 10.0
        );
    }
    let height = axis + 8.0;
    format!(
        r#"<svg viewBox="0 0 {WIDTH} {height:.0}" width="{WIDTH}" height="{height:.0}" role="img" aria-label="timeline of {}">{svg}</svg>"#,
        esc(&r.scenario.name)
    )
}

/// The section of a scenario that runs on its own (its own chains or process): a heading with
/// its verdict (`PASS`, `FAIL`, `SKIPPED`), its description, `body` (HTML already escaped), its
/// checks and a footer line.
pub(crate) fn side_section(
    name: &str,
    description: &str,
    verdict: &str,
    body: &str,
    checks: &[Check],
    footer: &str,
) -> String {
    let class = if verdict == "PASS" { "pass" } else { "fail" };
    let mut out = format!(
        r#"<section id="{name}"><h2>{name} <span class="badge {class}">{verdict}</span></h2><p>{}</p>{body}"#,
        esc(description)
    );
    out.push_str(&checks_table("check", checks));
    let _ = write!(out, r#"<p class="muted">{}</p></section>"#, esc(footer));
    out
}

/// A table of two text columns (headings and cells escaped here).
/// A side scenario's section whose body is a two-column table: `heads` over `rows`.
pub(crate) fn table_section(
    name: &str,
    description: &str,
    passed: bool,
    heads: (&str, &str),
    rows: &[(String, String)],
    checks: &[Check],
    footer: &str,
) -> String {
    let body = two_column_table(heads.0, heads.1, rows);
    side_section(name, description, verdict(passed), &body, checks, footer)
}

pub(crate) fn two_column_table(left: &str, right: &str, rows: &[(String, String)]) -> String {
    let mut out = format!(
        r#"<table><tr><th class="l">{}</th><th class="l">{}</th></tr>"#,
        esc(left),
        esc(right)
    );
    for (l, r) in rows {
        let _ = write!(
            out,
            r#"<tr><td class="l">{}</td><td class="l">{}</td></tr>"#,
            esc(l),
            esc(r)
        );
    }
    out.push_str("</table>");
    out
}

/// Figures as an HTML list.
pub(crate) fn figure_list(figures: &[String]) -> String {
    let mut out = String::from("<ul>");
    for l in figures {
        let _ = write!(out, "<li>{}</li>", esc(l));
    }
    out.push_str("</ul>");
    out
}

/// `PASS` or `FAIL`.
pub(crate) fn verdict(passed: bool) -> &'static str {
    if passed { "PASS" } else { "FAIL" }
}

pub(crate) fn checks_table(title: &str, checks: &[Check]) -> String {
    let mut out = format!(
        r#"<table><tr><th class="l">{}</th><th class="l">verdict</th><th class="l">what was checked</th></tr>"#,
        esc(title)
    );
    for c in checks {
        let (class, word) = if c.passed {
            ("pass", "PASS")
        } else {
            ("fail", "FAIL")
        };
        let _ = write!(
            out,
            r#"<tr><td class="l">{}<br/><span class="muted">{}</span></td><td class="l {class}">{word}</td><td class="l">{}"#,
            esc(&c.title),
            esc(&c.id),
            esc(&c.detail)
        );
        if !c.passed {
            out.push_str(r#"<ul class="off">"#);
            for o in &c.offenders {
                let _ = write!(out, "<li>{}</li>", esc(o));
            }
            if c.offender_count > c.offenders.len() {
                let _ = write!(
                    out,
                    "<li>… and {} more</li>",
                    c.offender_count - c.offenders.len()
                );
            }
            out.push_str("</ul>");
        }
        out.push_str("</td></tr>");
    }
    out.push_str("</table>");
    out
}

fn anchor(name: &str) -> String {
    format!(
        "s-{}",
        name.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    )
}

/// One scenario's section.
pub(crate) fn section(r: &ScenarioRun, s: &Settings, index: usize) -> String {
    let sm = &r.summary;
    let passed = r.passed();
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<section id="{}"><h2>{}. {} <span class="badge {}">{}</span></h2><p>{} <span class="muted">({})</span></p>"#,
        anchor(&r.scenario.name),
        index + 1,
        esc(&r.scenario.name),
        if passed { "pass" } else { "fail" },
        if passed { "PASS" } else { "FAIL" },
        esc(&r.scenario.description),
        esc(&r.scenario.source)
    );
    let phases: Vec<String> = super::phases(r, s)
        .iter()
        .map(|p| format!("{} from {:.1} s: {}", p.vendor, p.at_ms / 1000.0, p.what))
        .collect();
    let _ = write!(
        out,
        r#"<p class="muted">Script: {}</p>"#,
        esc(&phases.join(" · "))
    );
    let [p50, p95, p99] = percentiles(&sm.latency_ms);
    let _ = write!(
        out,
        r#"<table><tr><th>requests</th><th>streamed</th><th>success</th><th>static</th><th>errors</th><th>p50</th><th>p95</th><th>p99</th><th>retries/call</th><th>attempts/call</th></tr><tr><td>{}</td><td>{}</td><td>{:.1}%</td><td>{:.1}%</td><td>{:.1}%</td><td>{p50}</td><td>{p95}</td><td>{p99}</td><td>{:.2}</td><td>{:.2}</td></tr></table>"#,
        sm.requests,
        sm.streamed,
        sm.success_pct,
        sm.static_pct,
        sm.error_pct,
        sm.retries_per_call,
        sm.attempts_per_call
    );
    let served: Vec<String> = sm
        .served_by
        .iter()
        .map(|x| format!("{} {:.1}% ({})", x.who, x.pct, x.count))
        .collect();
    let fallbacks: Vec<String> = sm
        .fallbacks
        .iter()
        .map(|f| format!("{}→{} {}", f.from, f.to, f.count))
        .collect();
    let breakers: Vec<String> = sm
        .breakers
        .iter()
        .map(|b| format!("{}: {}", b.link, b.counts(" ")))
        .collect();
    let _ = write!(
        out,
        r#"<table><tr><th class="l">served by</th><td class="l">{}</td></tr><tr><th class="l">fallbacks</th><td class="l">{}</td></tr><tr><th class="l">breakers</th><td class="l">{}</td></tr></table>"#,
        esc(&served.join(" · ")),
        esc(&if fallbacks.is_empty() {
            "none".to_owned()
        } else {
            fallbacks.join(" · ")
        }),
        esc(&breakers.join(" · "))
    );
    out.push_str(&timeline(r, s));
    out.push_str(&checks_table("invariant", &r.invariants));
    if !r.expectations.is_empty() {
        out.push_str(&checks_table("expectation", &r.expectations));
    }
    for n in &r.notes {
        let _ = write!(out, r#"<p class="muted">Note: {}</p>"#, esc(n));
    }
    out.push_str("</section>");
    out
}

/// The whole page.
pub(crate) fn page(result: &RunResult) -> String {
    let s = &result.settings;
    let passed = result.passed();
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/><title>ripcord chaos report</title><style>{STYLE}</style></head><body><h1>ripcord chaos report <span class="badge {}">{}</span></h1>"#,
        if passed { "pass" } else { "fail" },
        if passed { "PASS" } else { "FAIL" }
    );
    let _ = write!(
        out,
        r#"<p class="muted">{} scenarios · {} users · {:.1} s each · {} deadlines · {:.0}% streamed · seed {} · {:.1} s in all{}<br/>Chain: {}</p>"#,
        result.runs.len(),
        s.users,
        s.duration.as_secs_f64(),
        ms(s.deadline.as_secs_f64() * 1000.0),
        s.stream_share * 100.0,
        s.seed,
        result.wall.as_secs_f64(),
        if result.quick { " · --quick" } else { "" },
        esc(&result.template.source)
    );
    out.push_str(
        r#"<table><tr><th>scenario</th><th>requests</th><th>success</th><th>static</th><th>errors</th><th>p50</th><th>p95</th><th>p99</th><th>retries/call</th><th>checks</th></tr>"#,
    );
    for r in &result.runs {
        let sm = &r.summary;
        let all = r.checks();
        let ok = all.iter().filter(|c| c.passed).count();
        let [p50, p95, p99] = percentiles(&sm.latency_ms);
        let class = if ok == all.len() { "pass" } else { "fail" };
        let _ = write!(
            out,
            r##"<tr><td><a href="#{}">{}</a></td><td>{}</td><td>{:.1}%</td><td>{:.1}%</td><td>{:.1}%</td><td>{p50}</td><td>{p95}</td><td>{p99}</td><td>{:.2}</td><td class="{class}">{ok}/{}</td></tr>"##,
            anchor(&r.scenario.name),
            esc(&r.scenario.name),
            sm.requests,
            sm.success_pct,
            sm.static_pct,
            sm.error_pct,
            sm.retries_per_call,
            all.len()
        );
    }
    out.push_str("</table>");
    out.push_str(
        r#"<p class="muted">Timelines: bars count the requests that ended in each second by who answered them; under them, per link, the vendor's scripted faults (red: error statuses, orange: 429, yellow: slow or stalled, brown: broken connections; pale: only some requests) and its breaker (dark red: open, amber: half-open); then each request's latency (log scale) where it ended, coloured by who answered. Hover for details.</p>"#,
    );
    for (i, r) in result.runs.iter().enumerate() {
        out.push_str(&section(r, s, i));
    }
    if let Some(r) = &result.shared {
        out.push_str(&super::super::shared::html_section(r));
    }
    if let Some(r) = &result.vendor {
        out.push_str(&super::super::vendor_status::html_section(r));
    }
    if let Some(r) = &result.embeddings {
        out.push_str(&super::super::embeddings::html_section(r));
    }
    if let Some(r) = &result.abuse {
        out.push_str(&super::super::abuse::html_section(r));
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ripcord_core::ErrorKind;

    use super::super::super::chain::Template;
    use super::super::super::invariants;
    use super::super::super::record::{AttemptRec, LinkInfo, Records, RequestRec, TransitionRec};
    use super::super::super::scenario::builtins;
    use super::super::super::stats::summarize;
    use super::*;

    /// Checks tags balance (a tiny well-formedness check: every element closed, in order).
    fn balanced(html: &str) -> Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = html;
        while let Some(i) = rest.find('<') {
            rest = &rest[i + 1..];
            let end = rest.find('>').ok_or("unclosed tag")?;
            let tag = &rest[..end];
            rest = &rest[end + 1..];
            if tag.starts_with('!') {
                continue;
            }
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
                if open != name.trim() {
                    return Err(format!("</{name}> closes <{open}>"));
                }
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().unwrap_or("").to_owned();
                if name == "style" {
                    let close = rest.find("</style>").ok_or("unclosed style")?;
                    rest = &rest[close + "</style>".len()..];
                    continue;
                }
                stack.push(name);
            }
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed: {stack:?}"))
        }
    }

    fn result() -> RunResult {
        let settings = Settings::sample(Duration::from_secs(3));
        let scenario = builtins()
            .into_iter()
            .find(|s| s.name == "primary-outage")
            .unwrap();
        let mut records = Records {
            links: ["primary", "backup"]
                .iter()
                .map(|n| LinkInfo::sample(n, 1, 1000))
                .collect(),
            run_ms: 3000.0,
            joined: true,
            ..Records::default()
        };
        for i in 0..30 {
            let start = f64::from(i) * 100.0;
            let (outcome, attempts) = if i < 12 {
                (
                    Outcome::Answered {
                        served_by: "backup".into(),
                        static_reply: false,
                    },
                    vec![AttemptRec {
                        provider: "primary".into(),
                        error_kind: Some(ErrorKind::Overloaded),
                        latency_ms: 5.0,
                    }],
                )
            } else {
                (
                    Outcome::Answered {
                        served_by: "primary".into(),
                        static_reply: false,
                    },
                    Vec::new(),
                )
            };
            records.requests.push(RequestRec {
                streamed: i % 2 == 0,
                ..RequestRec::sample(
                    &format!("u0-{i}"),
                    start,
                    Some(start + 40.0 + f64::from(i)),
                    outcome,
                    attempts,
                )
            });
        }
        records.transitions.push(TransitionRec {
            link: "primary".into(),
            from: State::Closed,
            to: State::Open,
            seq: 1,
            at_ms: 100.0,
            open_for_ms: Some(1000.0),
            cause: Some(ErrorKind::Overloaded),
        });
        let summary = summarize(&records);
        let mut run = ScenarioRun {
            scenario,
            records,
            notes: vec!["a <note> & more".into()],
            invariants: Vec::new(),
            expectations: Vec::new(),
            summary,
            wall: Duration::from_secs(3),
        };
        run.recheck(settings.tolerance);
        run.invariants[0] = invariants::Check {
            passed: false,
            offenders: vec!["u0-1: <late>".into()],
            offender_count: 30,
            ..run.invariants[0].clone()
        };
        RunResult {
            runs: vec![run],
            template: Template::builtin(settings.deadline, false, 1).unwrap(),
            settings,
            quick: true,
            started_unix_s: 0,
            wall: Duration::from_secs(4),
            shared: None,
            vendor: None,
            abuse: None,
            embeddings: None,
        }
    }

    #[test]
    fn the_page_is_self_contained_and_well_formed() {
        let page = page(&result());
        balanced(&page).unwrap();
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert!(!page.contains("<script") && !page.contains("<link") && !page.contains("src="));
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert_eq!(page.matches("<svg").count(), 1);
        assert!(page.contains("a &lt;note&gt; &amp; more"));
        assert!(page.contains("u0-1: &lt;late&gt;"));
        assert!(page.contains("… and 29 more"));
        assert!(page.contains(r#"class="badge fail""#));
        // Bars for both servers, a band for the open breaker, a dot per request.
        assert!(page.contains("× backup") && page.contains("× primary"));
        assert!(page.contains("primary breaker open 0.10–1.10 s"));
        assert_eq!(page.matches("<circle").count(), 30);
    }

    #[test]
    fn the_shared_scenario_has_its_section_and_counts_in_the_verdict() {
        let mut r = result();
        r.runs.clear();
        let check = |passed| invariants::Check {
            passed,
            ..invariants::Check::new(
                "trip-spread",
                "the trip <reached> every replica",
                "2 calls".into(),
                Vec::new(),
            )
        };
        let mut served = std::collections::BTreeMap::new();
        served.insert("backup".to_owned(), 7);
        r.shared = Some(super::super::super::shared::SharedRun {
            skipped: None,
            checks: vec![check(true)],
            served: vec![served],
            wall: Duration::from_secs(2),
        });
        let html = page(&r);
        balanced(&html).unwrap();
        assert!(html.contains(r#"<section id="shared_redis">"#), "{html}");
        assert!(
            html.contains("backup 7") && html.contains("the trip &lt;reached&gt; every replica")
        );
        assert!(html.contains(r#"class="badge pass""#));
        let json: serde_json::Value =
            serde_json::from_str(&super::super::json(&r).unwrap()).unwrap();
        assert_eq!(json["shared"]["name"], "shared_redis");
        assert_eq!(json["shared"]["checks"][0]["id"], "trip-spread");
        assert_eq!(json["passed"], true);
        if let Some(s) = r.shared.as_mut() {
            s.checks = vec![check(false)];
        }
        assert!(page(&r).contains(r#"class="badge fail""#));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&super::super::json(&r).unwrap()).unwrap()["passed"],
            false
        );
    }

    #[test]
    fn balanced_catches_broken_markup() {
        assert!(balanced("<p><b>x</p></b>").is_err());
        assert!(balanced("<p>").is_err());
        assert!(balanced("<p><br/>x</p>").is_ok());
    }
}
