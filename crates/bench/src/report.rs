//! The table on stdout and the JSON file.

use std::fmt::Write as _;

use serde::Serialize;

use crate::local::{LocalResult, LocalSection};
use crate::runner::{Meter, Phase, Plan, Row};
use crate::skipcost::SkipCost;

/// One phase of a row, as reported.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PhaseReport {
    /// Successful calls measured.
    pub(crate) calls: u64,
    /// Failed calls (warm-up included).
    pub(crate) errors: u64,
    /// Median latency, µs.
    pub(crate) p50_us: f64,
    /// 99th percentile, µs.
    pub(crate) p99_us: f64,
    /// Mean, µs.
    pub(crate) mean_us: f64,
    /// Largest, µs.
    pub(crate) max_us: f64,
    /// Calls per second over the phase's wall time.
    pub(crate) calls_per_s: f64,
    /// CPU µs per call of the bench process (client side: reqwest, ripcord, the runtime).
    pub(crate) cpu_us_bench: f64,
    /// CPU µs per call of each child process, by name.
    pub(crate) cpu_us_children: Vec<(String, f64)>,
    /// Per-round p50 (µs, concurrency 1) or calls/s (concurrency 64).
    pub(crate) per_round: Vec<f64>,
}

/// One row, as reported.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RowReport {
    /// Stable key.
    pub(crate) key: String,
    /// Label.
    pub(crate) label: String,
    /// The row it is compared with.
    pub(crate) floor: Option<String>,
    /// Concurrency 1.
    pub(crate) c1: PhaseReport,
    /// Concurrency 64 (latency here is under load).
    pub(crate) c64: PhaseReport,
    /// p50 at concurrency 1 over the floor's.
    pub(crate) p50_ratio: Option<f64>,
    /// Throughput at concurrency 64 over the floor's.
    pub(crate) rps_ratio: Option<f64>,
    /// The first error seen, if any.
    pub(crate) first_error: Option<String>,
}

/// A target of the issue and whether this run met it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Target {
    /// What is measured.
    pub(crate) what: String,
    /// The figure.
    pub(crate) value: f64,
    /// The bound.
    pub(crate) bound: String,
    /// Met.
    pub(crate) met: bool,
}

/// The local model, or why it did not run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum LocalRow {
    /// Measured.
    Measured(LocalResult),
    /// Not measured.
    Skipped {
        /// The model file.
        file: String,
        /// Why.
        skipped: String,
    },
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// How to reproduce.
    pub(crate) command: String,
    /// `--quick`.
    pub(crate) quick: bool,
    /// CPUs online.
    pub(crate) cpus: usize,
    /// 1-minute load average at the start and the end.
    pub(crate) load_average: (f64, f64),
    /// Rounds, batch sizes and phase lengths.
    pub(crate) plan: Plan,
    /// What the upstream is.
    pub(crate) upstream: String,
    /// The HTTP rows.
    pub(crate) rows: Vec<RowReport>,
    /// The isolated skip cost: in a fresh process, then after the HTTP rows.
    pub(crate) skip_cost: Vec<SkipCost>,
    /// The local model section (`None` with `--no-local`).
    pub(crate) local: Option<LocalSection>,
    /// Issue 36's pool against a single link, paired (`None` unless both rows ran).
    pub(crate) pool_paired: Option<crate::paired::Paired>,
    /// The issue's targets.
    pub(crate) targets: Vec<Target>,
    /// Notes.
    pub(crate) notes: Vec<String>,
}

fn phase(p: &Phase, meters: &[Meter]) -> PhaseReport {
    PhaseReport {
        calls: p.calls,
        errors: p.errors,
        p50_us: p.quantile_us(0.5),
        p99_us: p.quantile_us(0.99),
        mean_us: p.mean_us(),
        max_us: p.hist.max() as f64 / 1000.0,
        calls_per_s: p.rate(),
        cpu_us_bench: p.cpu_self_us(),
        cpu_us_children: meters
            .iter()
            .enumerate()
            .map(|(i, m)| (m.name.to_owned(), p.cpu_child_us(i)))
            .collect(),
        per_round: p.per_round.clone(),
    }
}

/// Turns measured rows into reported rows with their ratios.
pub(crate) fn rows(rows: &[Row], meters: &[Meter]) -> Vec<RowReport> {
    let find = |key: &str| rows.iter().find(|r| r.key == key);
    rows.iter()
        .map(|r| {
            let base = r.floor.and_then(find);
            let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
            RowReport {
                key: r.key.to_owned(),
                label: r.label.to_owned(),
                floor: r.floor.map(str::to_owned),
                c1: phase(&r.stats.latency, meters),
                c64: phase(&r.stats.load, meters),
                p50_ratio: base.and_then(|b| {
                    ratio(
                        r.stats.latency.quantile_us(0.5),
                        b.stats.latency.quantile_us(0.5),
                    )
                }),
                rps_ratio: base.and_then(|b| ratio(r.stats.load.rate(), b.stats.load.rate())),
                first_error: r.stats.first_error.clone(),
            }
        })
        .collect()
}

fn child_cpu(p: &PhaseReport, name: &str) -> Option<f64> {
    p.cpu_us_children
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
}

pub(crate) fn opt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}x"))
}

impl Target {
    /// Its line in the terminal report, with the figure as `value` shows it.
    fn line(&self, value: &str) -> String {
        let verdict = if self.met { "met " } else { "miss" };
        format!(
            "  [{verdict}] {}: {value} (target {})",
            self.what, self.bound
        )
    }
}

/// Renders the report as text.
pub(crate) fn render(r: &Report, via: &dyn Fn(&str) -> Option<&'static str>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ripcord bench{} — {} CPUs, load average {:.2} -> {:.2}; {} interleaved rounds: {} sequential calls per row (c=1), {:.1} s per row at c={}",
        if r.quick { " --quick" } else { "" },
        r.cpus,
        r.load_average.0,
        r.load_average.1,
        r.plan.rounds,
        r.plan.batch,
        r.plan.load_for.as_secs_f64(),
        r.plan.concurrency,
    );
    let _ = writeln!(out, "upstream: {}", r.upstream);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<40} {:>8} {:>8} {:>8} {:>8} │ {:>8} {:>8} {:>8} │ {:>7} {:>7} {:>7} │ {:>6}",
        "row (c=1 latency; streams: to first text)",
        "p50 µs",
        "p99 µs",
        "mean µs",
        "×floor",
        "rps@64",
        "p99@64",
        "×floor",
        "cpu:me",
        "up",
        "gw",
        "errors",
    );
    let _ = writeln!(
        out,
        "{}",
        "─".repeat(40 + 4 * 9 + 3 + 3 * 9 + 3 + 3 * 8 + 3 + 7)
    );
    for row in &r.rows {
        let gw = via(&row.key)
            .and_then(|middle| child_cpu(&row.c64, middle))
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        let _ = writeln!(
            out,
            "{:<40} {:>8.1} {:>8.1} {:>8.1} {:>8} │ {:>8.0} {:>8.0} {:>8} │ {:>7.1} {:>7.1} {:>7} │ {:>6}",
            row.label,
            row.c1.p50_us,
            row.c1.p99_us,
            row.c1.mean_us,
            opt_ratio(row.p50_ratio),
            row.c64.calls_per_s,
            row.c64.p99_us,
            opt_ratio(row.rps_ratio),
            row.c64.cpu_us_bench,
            child_cpu(&row.c64, "upstream").unwrap_or(0.0),
            gw,
            row.c1.errors + row.c64.errors,
        );
    }
    let _ = writeln!(
        out,
        "×floor compares with: the floor (reqwest POST + parse) for ripcord rows, the stream floor for stream rows, \
         the SDK wire sent straight to the upstream for the gateway and bare proxy rows, the raw client on the upstream for the raw gateway row."
    );
    let _ = writeln!(
        out,
        "cpu: CPU µs per call at c=64 — me = this process (client + ripcord, getrusage), up = the upstream child, gw = the ripcord serve child (on the bare proxy's row: the bare proxy child)."
    );
    if !r.skip_cost.is_empty() {
        let _ = writeln!(out);
    }
    for (s, when) in r
        .skip_cost
        .iter()
        .zip(["fresh process", "after the HTTP rows"])
    {
        let _ = writeln!(
            out,
            "skip cost, isolated, {when} ({} rounds of {} calls per chain, in-memory links): the skip adds {:.0} ns (median of per-round differences; fastest rounds: {:.0} ns without, {:.0} ns with, {:.0} ns apart)",
            s.rounds, s.calls_per_round, s.skip_ns, s.direct_ns, s.with_skip_ns, s.skip_fastest_ns
        );
    }
    if let Some(p) = &r.pool_paired {
        let _ = writeln!(out);
        let _ = writeln!(out, "{}", p.line());
    }
    if let Some(local) = &r.local {
        render_local(&mut out, local);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "targets (one run, this machine):");
    for t in &r.targets {
        let _ = writeln!(out, "{}", t.line(&format!("{:.4}", t.value)));
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(out, "command: {}", r.command);
    out
}

/// The local section: every variant per thread count, llama.cpp beside them, the agreement
/// check and the local targets.
pub(crate) fn render_local(out: &mut String, l: &LocalSection) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<44} {:>8} {:>8} {:>14} {:>13} {:>12} {:>8}",
        "local model (SmolLM2-135M, own process)",
        "threads",
        "prompt",
        "prefill tok/s",
        "decode tok/s",
        "peak RSS MB",
        "load s"
    );
    for row in &l.rows {
        match row {
            LocalRow::Measured(m) => {
                let _ = writeln!(
                    out,
                    "{:<44} {:>8} {:>8} {:>14.1} {:>13.1} {:>12.0} {:>8.2}",
                    m.file,
                    m.threads,
                    m.prefill_tokens,
                    m.prefill_tok_s,
                    m.decode_tok_s,
                    m.peak_rss_mb,
                    m.load_s
                );
            }
            LocalRow::Skipped { file, skipped } => {
                let _ = writeln!(out, "{file:<44} skipped: {skipped}");
            }
        }
    }
    for a in &l.llama_cpp {
        let _ = writeln!(
            out,
            "{:<44} {:>8} {:>8} {:>14.1} {:>13.1} {:>12} {:>8}",
            "llama.cpp llama-bench, Q4_1 GGUF (pp / tg)",
            a.threads,
            a.prompt_tokens,
            a.pp_tok_s,
            a.tg_tok_s,
            "-",
            "-"
        );
    }
    if !l.streams.is_empty() {
        let _ = writeln!(
            out,
            "{:<44} {:>8} {:>8} {:>14} {:>13}",
            "concurrent streams (same prompt, greedy)",
            "streams",
            "threads",
            "aggregate tok/s",
            "p50 ITL ms"
        );
        for s in &l.streams {
            let _ = writeln!(
                out,
                "  {:<42} {:>8} {:>8} {:>14.1} {:>13.2}",
                s.engine, s.streams, s.threads, s.aggregate_tok_s, s.p50_itl_ms
            );
        }
    }
    if !l.agreement.is_empty() {
        let _ = writeln!(
            out,
            "greedy agreement with model.onnx (20 prompts x 16 tokens): identical / same first token / mean common prefix / Paris"
        );
        for a in &l.agreement {
            let _ = writeln!(
                out,
                "  {:<20} {:>2}/20  {:>2}/20  {:>5.2}  {}",
                a.file,
                a.identical,
                a.same_first_token,
                a.mean_common_prefix,
                if a.paris { "Paris" } else { "NO PARIS" }
            );
        }
    }
    for t in &l.targets {
        let _ = writeln!(out, "{}", t.line(&format!("{:.3}x", t.value)));
    }
    for n in &l.notes {
        let _ = writeln!(out, "note (local): {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_print_as_multipliers() {
        assert_eq!(opt_ratio(Some(1.0234)), "1.023x");
        assert_eq!(opt_ratio(None), "-");
    }

    #[test]
    fn a_target_line_says_met_or_miss() {
        let t = |met| Target {
            what: "p50 ratio".into(),
            value: 1.02,
            bound: "<= 1.10".into(),
            met,
        };
        assert_eq!(
            t(true).line("1.0200"),
            "  [met ] p50 ratio: 1.0200 (target <= 1.10)"
        );
        assert_eq!(
            t(false).line("1.020x"),
            "  [miss] p50 ratio: 1.020x (target <= 1.10)"
        );
    }

    #[test]
    fn the_plan_reports_its_measuring_part_with_the_load_in_seconds() {
        let plan = Plan {
            rounds: 3,
            batch: 200,
            concurrency: 64,
            load_for: std::time::Duration::from_millis(1500),
            warm_calls: 50,
            warm_load: std::time::Duration::from_secs(1),
        };
        assert_eq!(
            serde_json::to_string(&plan).unwrap(),
            r#"{"rounds":3,"batch":200,"concurrency":64,"load_s":1.5}"#
        );
    }
}
