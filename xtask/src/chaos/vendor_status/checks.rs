//! The records of `vendor-declares-outage`'s three runs and the checks on them (see the module
//! doc of [`super`] for what each check means and where its tolerances come from).
//!
//! Times are milliseconds since the run started. The records are plain data, so the checks
//! are tested on synthetic ones (`checks_tests.rs`).

use serde::Serialize;

use super::super::invariants::Check;
use super::super::scenario::STATIC;

/// Link A: the provider that listens to its vendor's status page.
pub(crate) const PRIMARY: &str = "primary";
/// Link B: the provider after it.
pub(crate) const BACKUP: &str = "backup";

/// Which of the three runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Variant {
    /// `on_major_outage = "demote"`; the page declares an outage, then resolves it.
    Demote,
    /// `on_major_outage = "open"`; the same timeline.
    Open,
    /// `on_major_outage = "open"`; the page cannot be read (reset, hang, garbage) and
    /// declares nothing.
    Unreachable,
}

impl Variant {
    /// Its name in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Demote => "demote",
            Variant::Open => "open",
            Variant::Unreachable => "unreachable",
        }
    }

    /// The `on_major_outage` its config sets.
    pub(crate) fn policy(self) -> &'static str {
        match self {
            Variant::Demote => "demote",
            Variant::Open | Variant::Unreachable => "open",
        }
    }

    /// Whether ripcord's view `v` has the policy's effect on link A (demoted, or held open).
    pub(crate) fn effect(self, v: &ViewRec) -> bool {
        match self {
            Variant::Demote => v.demoted,
            Variant::Open | Variant::Unreachable => v.held_open,
        }
    }
}

/// One request of a virtual user.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ReqRec {
    pub(crate) start_ms: f64,
    pub(crate) end_ms: f64,
    /// The links attempted, in order.
    pub(crate) attempted: Vec<String>,
    /// The links passed over without a call.
    pub(crate) skipped: Vec<String>,
    /// The link that answered, `static`, or `error: <kind>`.
    pub(crate) served_by: String,
}

impl ReqRec {
    /// A answered it, and was the first link tried.
    fn a_first(&self) -> bool {
        self.served_by == PRIMARY && self.attempted.first().is_some_and(|l| l == PRIMARY)
    }

    /// A was tried before B was tried or passed over (what a demoted A must never be).
    fn a_before_b(&self) -> bool {
        self.attempted.first().is_some_and(|l| l == PRIMARY)
            && !self.skipped.iter().any(|l| l == BACKUP)
    }

    fn errored(&self) -> bool {
        self.served_by.starts_with("error")
    }
}

/// Ripcord's view of link A, as the observer sampled it (one record per change).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ViewRec {
    pub(crate) at_ms: f64,
    /// The sample before this one, which still showed the previous view: the change happened
    /// in `(prev_ms, at_ms]`.
    pub(crate) prev_ms: f64,
    /// The poller acts on a declared major outage.
    pub(crate) acting: bool,
    /// The link's demotion switch.
    pub(crate) demoted: bool,
    /// The link's vendor switch (held open).
    pub(crate) held_open: bool,
    /// The declared status of the last good poll (`None` before the first).
    pub(crate) status: Option<String>,
    /// Failed polls in a row.
    pub(crate) failures: u32,
    /// Why the last poll failed, while the page cannot be read.
    pub(crate) last_error: Option<String>,
}

/// A change of how the fake page answers (the `unreachable` run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ModeRec {
    pub(crate) at_ms: f64,
    /// `unreachable`, `hang`, `garbage`, or `serve` (readable again, all clear).
    pub(crate) mode: String,
    /// What the poller's error must say for a poll in this mode (empty for `serve`).
    pub(crate) expect: String,
}

/// Everything one run recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct VariantRec {
    pub(crate) variant: Variant,
    /// When the fake page declared the major outage of A's component.
    pub(crate) declared_ms: Option<f64>,
    /// When the fake page resolved it.
    pub(crate) resolved_ms: Option<f64>,
    /// When B was scripted to fail (inside the declared phase).
    pub(crate) backup_down: Option<(f64, f64)>,
    /// How the page answered, from when (the `unreachable` run).
    pub(crate) modes: Vec<ModeRec>,
    pub(crate) view: Vec<ViewRec>,
    pub(crate) requests: Vec<ReqRec>,
    /// Model requests fake vendor A received.
    pub(crate) primary_hits_ms: Vec<f64>,
    /// Calls the chain started on A's adapter (every call that was sent to A).
    pub(crate) primary_calls_ms: Vec<f64>,
    /// Requests the fake status page received.
    pub(crate) page_hits: u64,
    pub(crate) run_ms: f64,
    /// What went wrong in the run itself (a wait that ran out), shown in the checks.
    pub(crate) notes: Vec<String>,
}

/// When ripcord's view of A had the policy's effect.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    /// The first sample that showed it (the switch flipped before).
    pub(crate) on: f64,
    /// The last sample that still showed it (the end of the run while it lasted).
    pub(crate) still_on: f64,
    /// The first sample that no longer showed it (the switch flipped back before).
    pub(crate) off: Option<f64>,
}

impl VariantRec {
    /// When ripcord's view took the policy's effect on A, and when it let go again.
    pub(crate) fn effect_window(&self) -> Option<Window> {
        let first = self.view.iter().position(|v| self.variant.effect(v))?;
        let on = self.view[first].at_ms;
        let release = self.view[first..].iter().find(|v| !self.variant.effect(v));
        Some(Window {
            on,
            still_on: release.map_or(self.run_ms, |v| v.prev_ms),
            off: release.map(|v| v.at_ms),
        })
    }

    /// Requests started in `(from, to)`.
    fn started_in(&self, from: f64, to: f64) -> impl Iterator<Item = &ReqRec> {
        self.requests
            .iter()
            .filter(move |q| q.start_ms > from && q.start_ms < to)
    }

    fn label(&self) -> &'static str {
        self.variant.name()
    }
}

/// The bounds the checks allow, from the configured poll interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bounds {
    /// The status page's `interval_ms`.
    pub(crate) interval_ms: f64,
    /// How often the observer samples ripcord's view.
    pub(crate) sample_ms: f64,
    /// Lateness forgiven to timers and polls on a loaded machine.
    pub(crate) tolerance_ms: f64,
}

impl Bounds {
    /// How long after the page changed ripcord's view may change: the poll that reads the
    /// change starts at most one interval after the page changed; the poll itself (loopback)
    /// and the scheduling fall within the tolerance, and the observer sees it within a sample.
    pub(crate) fn react_ms(&self) -> f64 {
        self.interval_ms + self.sample_ms + self.tolerance_ms
    }

    /// How long after the view changed vendor A may still receive a request: one already sent
    /// (in flight on loopback) when the switch flipped.
    pub(crate) fn in_flight_ms(&self) -> f64 {
        self.sample_ms + self.tolerance_ms
    }
}

fn of(recs: &[VariantRec], v: Variant) -> Option<&VariantRec> {
    recs.iter().find(|r| r.variant == v)
}

/// The run of `v`, or the failed check `id` that says it is missing.
fn run_of<'a>(
    recs: &'a [VariantRec],
    v: Variant,
    id: &str,
    title: &str,
) -> Result<&'a VariantRec, Check> {
    of(recs, v).ok_or_else(|| {
        Check::unmet(
            id,
            title,
            format!("no {} run", v.name()),
            format!("the {} run is missing", v.name()),
        )
    })
}

/// The run of `v` and when ripcord acted on its declared outage (the first sample that showed
/// the effect, the last that still did), or the failed check `id`: the run is missing, or
/// the outage was `never` acted on.
fn acted_window<'a>(
    recs: &'a [VariantRec],
    v: Variant,
    id: &str,
    title: &str,
    never: &str,
) -> Result<(&'a VariantRec, f64, f64), Check> {
    let r = run_of(recs, v, id, title)?;
    match r.effect_window() {
        Some(Window { on, still_on, .. }) => Ok((r, on, still_on)),
        None => Err(Check::unmet(
            id,
            title,
            never.to_owned(),
            "the declared outage was not acted on".to_owned(),
        )),
    }
}

fn ms(v: f64) -> String {
    format!("{v:.0} ms")
}

/// `acted-within-poll`: under `demote` and `open`, ripcord's view took the policy's effect
/// within one poll interval (+ tolerance) of the page declaring the outage, not before it,
/// and the other policy's switch stayed off.
pub(crate) fn acted_within_poll(recs: &[VariantRec], b: Bounds) -> Check {
    let mut offenders = Vec::new();
    let mut shown = Vec::new();
    for v in [Variant::Demote, Variant::Open] {
        let Some(r) = of(recs, v) else {
            offenders.push(format!("{}: the run is missing", v.name()));
            continue;
        };
        offenders.extend(r.notes.iter().map(|n| format!("{}: {n}", r.label())));
        let Some(declared) = r.declared_ms else {
            offenders.push(format!("{}: the page never declared the outage", r.label()));
            continue;
        };
        match r.effect_window().map(|w| w.on) {
            None => offenders.push(format!(
                "{}: ripcord never acted on the declared outage",
                r.label()
            )),
            Some(at) if at < declared => offenders.push(format!(
                "{}: ripcord acted at {} before the page declared anything ({})",
                r.label(),
                ms(at),
                ms(declared)
            )),
            Some(at) => {
                let took = at - declared;
                shown.push(format!("{}: acted {} after", r.label(), ms(took)));
                if took > b.react_ms() {
                    offenders.push(format!(
                        "{}: ripcord acted {} after the declaration, more than one poll interval + tolerance ({})",
                        r.label(),
                        ms(took),
                        ms(b.react_ms())
                    ));
                }
            }
        }
        let wrong = r.view.iter().find(|x| match v {
            Variant::Demote => x.held_open,
            _ => x.demoted,
        });
        if let Some(x) = wrong {
            offenders.push(format!(
                "{}: the other policy's switch was set at {}",
                r.label(),
                ms(x.at_ms)
            ));
        }
    }
    Check::new(
        "acted-within-poll",
        "ripcord acts on a declared major outage within one poll interval, and not before",
        format!(
            "{} (bound {})",
            if shown.is_empty() {
                "no action seen".to_owned()
            } else {
                shown.join("; ")
            },
            ms(b.react_ms())
        ),
        offenders,
    )
}

/// `no-call-to-opened`: under `open`, no call was sent to A between ripcord holding it open and
/// letting it go, and fake vendor A received nothing then (after the in-flight edge).
pub(crate) fn no_call_to_opened(recs: &[VariantRec], b: Bounds) -> Check {
    let id = "no-call-to-opened";
    let title = "open: no call reaches primary while its declared outage holds it open";
    let (r, on, off) = match acted_window(
        recs,
        Variant::Open,
        id,
        title,
        "primary was never held open",
    ) {
        Ok(w) => w,
        Err(failed) => return failed,
    };
    let mut offenders = Vec::new();
    for at in r.primary_calls_ms.iter().filter(|t| **t > on && **t < off) {
        offenders.push(format!(
            "a call to primary started at {}, {} after it was held open",
            ms(*at),
            ms(at - on)
        ));
    }
    let edge = on + b.in_flight_ms();
    let in_edge = r
        .primary_hits_ms
        .iter()
        .filter(|t| **t > on && **t <= edge)
        .count();
    for at in r.primary_hits_ms.iter().filter(|t| **t > edge && **t < off) {
        offenders.push(format!(
            "fake vendor primary received a request at {}, {} after it was held open",
            ms(*at),
            ms(at - on)
        ));
    }
    let during: Vec<&ReqRec> = r.started_in(on, off).collect();
    let statics = during.iter().filter(|q| q.served_by == STATIC).count();
    let mut c = Check::new(
        id,
        title,
        format!(
            "held open {}–{}: {} requests, {} calls to primary, fake primary received {} after the {} in-flight edge ({} within it); {statics} answered by the static reply while backup was down",
            ms(on),
            ms(off),
            during.len(),
            r.primary_calls_ms
                .iter()
                .filter(|t| **t > on && **t < off)
                .count(),
            r.primary_hits_ms
                .iter()
                .filter(|t| **t > edge && **t < off)
                .count(),
            ms(b.in_flight_ms()),
            in_edge
        ),
        offenders,
    );
    if during.is_empty() {
        c = c.failed("no request was sent while primary was held open".to_owned());
    }
    c
}

/// `demoted-order`: under `demote`, every request started while A was demoted tried B first,
/// and while B failed A still answered (as the fallback).
pub(crate) fn demoted_order(recs: &[VariantRec], b: Bounds) -> Check {
    let id = "demoted-order";
    let title = "demote: backup answers first while primary's outage is declared; primary still serves when backup fails";
    let (r, on, off) = match acted_window(
        recs,
        Variant::Demote,
        id,
        title,
        "primary was never demoted",
    ) {
        Ok(w) => w,
        Err(failed) => return failed,
    };
    let mut offenders = Vec::new();
    let during: Vec<&ReqRec> = r.started_in(on, off).collect();
    for q in during.iter().filter(|q| q.a_before_b()) {
        offenders.push(format!(
            "the request started at {} tried primary first ({}) while it was demoted",
            ms(q.start_ms),
            q.attempted.join(" → ")
        ));
    }
    let by_b = during.iter().filter(|q| q.served_by == BACKUP).count();
    let mut fell_back = 0;
    if let Some((down, up)) = r.backup_down {
        // Requests that reached backup while it failed: sent after its failure began and
        // early enough not to arrive after it ended (the in-flight edge on both sides).
        let failing: Vec<&&ReqRec> = during
            .iter()
            .filter(|q| q.start_ms > down + b.in_flight_ms() && q.start_ms < up - b.in_flight_ms())
            .collect();
        fell_back = failing
            .iter()
            .filter(|q| q.served_by == PRIMARY && q.attempted.first().is_some_and(|l| l == BACKUP))
            .count();
        for q in failing.iter().filter(|q| q.served_by != PRIMARY) {
            offenders.push(format!(
                "the request started at {} while backup failed was answered by {}, not by the demoted primary",
                ms(q.start_ms),
                q.served_by
            ));
        }
        if fell_back == 0 {
            offenders.push(
                "while backup failed, no request fell back to the demoted primary".to_owned(),
            );
        }
    }
    let mut c = Check::new(
        id,
        title,
        format!(
            "demoted {}–{}: {} requests, {by_b} answered by backup, {fell_back} by primary after backup failed",
            ms(on),
            ms(off),
            during.len()
        ),
        offenders,
    );
    if during.is_empty() {
        c = c.failed("no request was sent while primary was demoted".to_owned());
    }
    c
}

/// `order-restored`: under `demote` and `open`, ripcord let go of A within one poll interval
/// (+ tolerance) of the resolution, and from then on (as before the declaration) A answered
/// every request first.
pub(crate) fn order_restored(recs: &[VariantRec], b: Bounds) -> Check {
    let mut offenders = Vec::new();
    let mut shown = Vec::new();
    for v in [Variant::Demote, Variant::Open] {
        let Some(r) = of(recs, v) else {
            offenders.push(format!("{}: the run is missing", v.name()));
            continue;
        };
        let window = r.effect_window();
        let on = window.map(|w| w.on);
        let Some(resolved) = r.resolved_ms else {
            offenders.push(format!("{}: the page never resolved the outage", r.label()));
            continue;
        };
        let Some(off) = window.and_then(|w| w.off) else {
            offenders.push(format!(
                "{}: ripcord did not restore primary after the resolution at {}",
                r.label(),
                ms(resolved)
            ));
            continue;
        };
        let took = off - resolved;
        if took < 0.0 {
            offenders.push(format!(
                "{}: primary was restored at {}, before the page resolved the outage ({})",
                r.label(),
                ms(off),
                ms(resolved)
            ));
        } else if took > b.react_ms() {
            offenders.push(format!(
                "{}: primary was restored {} after the resolution, more than one poll interval + tolerance ({})",
                r.label(),
                ms(took),
                ms(b.react_ms())
            ));
        }
        let before = r.declared_ms.unwrap_or(0.0).min(on.unwrap_or(f64::MAX));
        let healthy: Vec<&ReqRec> = r
            .requests
            .iter()
            .filter(|q| q.start_ms < before || q.start_ms > off)
            .collect();
        let after = healthy.iter().filter(|q| q.start_ms > off).count();
        for q in healthy.iter().filter(|q| !q.a_first()) {
            offenders.push(format!(
                "{}: the request started at {} ({}) was answered by {} after trying {}",
                r.label(),
                ms(q.start_ms),
                if q.start_ms > off {
                    "after the restoration"
                } else {
                    "before the declaration"
                },
                q.served_by,
                q.attempted.join(" → ")
            ));
        }
        if after == 0 {
            offenders.push(format!(
                "{}: no request was sent after the restoration",
                r.label()
            ));
        }
        shown.push(format!(
            "{}: restored {} after the resolution, then {after} requests",
            r.label(),
            ms(took)
        ));
    }
    Check::new(
        "order-restored",
        "after the resolution, primary answers first again within one poll interval",
        format!("{} (bound {})", shown.join("; "), ms(b.react_ms())),
        offenders,
    )
}

/// `unreachable-changes-nothing`: a page that resets, hangs or serves garbage never moved A
/// (no effect, no action), A answered every request first, and every failed poll was counted
/// (each mode's failure seen, then cleared by the first good poll).
pub(crate) fn unreachable_changes_nothing(recs: &[VariantRec]) -> Check {
    let id = "unreachable-changes-nothing";
    let title = "a status page that cannot be read (reset, hang, garbage) changes nothing, and each failure is counted";
    let r = match run_of(recs, Variant::Unreachable, id, title) {
        Ok(r) => r,
        Err(failed) => return failed,
    };
    let mut offenders: Vec<String> = r.notes.clone();
    for v in r
        .view
        .iter()
        .filter(|v| v.acting || v.demoted || v.held_open)
    {
        offenders.push(format!(
            "at {} ripcord's view changed: acting {}, demoted {}, held open {}",
            ms(v.at_ms),
            v.acting,
            v.demoted,
            v.held_open
        ));
    }
    for q in r.requests.iter().filter(|q| !q.a_first()) {
        offenders.push(format!(
            "the request started at {} was answered by {} after trying {}",
            ms(q.start_ms),
            q.served_by,
            if q.attempted.is_empty() {
                "nothing".to_owned()
            } else {
                q.attempted.join(" → ")
            }
        ));
    }
    let mut counted = Vec::new();
    let failing: Vec<&ModeRec> = r.modes.iter().filter(|m| m.mode != "serve").collect();
    for m in &r.modes {
        // Each mode's failure says something no other mode's does, so any view after the
        // mode began counts (the observer may see it after the next mode began).
        let seen: Vec<&ViewRec> = r.view.iter().filter(|v| v.at_ms >= m.at_ms).collect();
        if m.mode == "serve" {
            if !seen
                .iter()
                .any(|v| v.failures == 0 && v.last_error.is_none())
            {
                offenders.push(format!(
                    "the page was readable again from {} but no good poll cleared the failures",
                    ms(m.at_ms)
                ));
            }
            continue;
        }
        match seen.iter().find(|v| {
            v.last_error
                .as_deref()
                .is_some_and(|e| e.contains(&m.expect))
        }) {
            Some(v) => counted.push(format!("{} (failure {})", m.mode, v.failures)),
            None => offenders.push(format!(
                "the page went {} at {} and no failed poll saying {:?} was counted",
                m.mode,
                ms(m.at_ms),
                m.expect
            )),
        }
    }
    let most = r.view.iter().map(|v| v.failures).max().unwrap_or(0);
    if (most as usize) < failing.len() {
        offenders.push(format!(
            "{} failing modes but at most {most} failed polls in a row were counted",
            failing.len()
        ));
    }
    if r.page_hits == 0 {
        offenders.push("the status page was never polled".to_owned());
    }
    let mut c = Check::new(
        id,
        title,
        format!(
            "{} requests, all answered first by primary; failed polls counted: {}; {} page requests",
            r.requests.len(),
            if counted.is_empty() {
                "none".to_owned()
            } else {
                counted.join(", ")
            },
            r.page_hits
        ),
        offenders,
    );
    if failing.is_empty() {
        c = c.failed("the page never stopped answering".to_owned());
    }
    if r.requests.is_empty() {
        c = c.failed("no request was sent".to_owned());
    }
    c
}

/// `answered`: every request of every run got an answer (a model or the static reply).
pub(crate) fn answered(recs: &[VariantRec]) -> Check {
    let mut offenders = Vec::new();
    let mut shown = Vec::new();
    for r in recs {
        for q in r.requests.iter().filter(|q| q.errored()) {
            offenders.push(format!(
                "{}: the request started at {} ended with {}",
                r.label(),
                ms(q.start_ms),
                q.served_by
            ));
        }
        if r.requests.is_empty() {
            offenders.push(format!("{}: no request was sent", r.label()));
        }
        shown.push(format!("{} {}", r.label(), r.requests.len()));
    }
    Check::new(
        "answered",
        "every request got an answer (a model or the static reply)",
        format!("requests: {}", shown.join(", ")),
        offenders,
    )
}

/// Every check, in report order.
pub(crate) fn check_all(recs: &[VariantRec], b: Bounds) -> Vec<Check> {
    vec![
        acted_within_poll(recs, b),
        no_call_to_opened(recs, b),
        demoted_order(recs, b),
        order_restored(recs, b),
        unreachable_changes_nothing(recs),
        answered(recs),
    ]
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
