//! The measurement: every row runs in the same process, in rounds, interleaved — round `r`
//! runs each row once in a rotated order — so that a slow spell of the shared machine falls on
//! all rows alike instead of on whichever row happened to be running.
//!
//! - Latency: at concurrency 1, a batch of sequential calls per row per round, each call
//!   recorded in an HDR histogram (nanoseconds, 3 significant digits). A row may report its
//!   own latency (time to first content for streams) instead of the whole call's.
//! - Throughput: at concurrency 64, 64 tasks call in a loop until the phase's time is up; the
//!   rate is completed calls over the wall time until the last one ended.
//! - CPU: this process's `getrusage` and each child's CPU time, read around every batch and
//!   divided by the calls the batch made.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::cpu;

/// One call's future: `Ok(Some(d))` reports its own latency, `Ok(None)` the whole call's.
pub(crate) type CallFuture = Pin<Box<dyn Future<Output = Result<Option<Duration>, String>> + Send>>;
/// Makes one call.
pub(crate) type Call = Arc<dyn Fn() -> CallFuture + Send + Sync>;

/// A process whose CPU time is read around each batch.
#[derive(Debug, Clone)]
pub(crate) struct Meter {
    /// Its name in the table.
    pub(crate) name: &'static str,
    /// Its process id.
    pub(crate) pid: u32,
}

impl Meter {
    fn read(&self) -> Duration {
        cpu::process_cpu(self.pid).unwrap_or_default()
    }
}

/// A row of the table: what it calls and what it is compared with.
pub(crate) struct Row {
    /// Short stable key (JSON).
    pub(crate) key: &'static str,
    /// The row's label.
    pub(crate) label: &'static str,
    /// The key of the row it is compared with.
    pub(crate) floor: Option<&'static str>,
    /// Which child meters are relevant to this row (by name); others are still read.
    pub(crate) via: &'static [&'static str],
    /// The call.
    pub(crate) call: Call,
    /// Results so far.
    pub(crate) stats: Stats,
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Row")
            .field("key", &self.key)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// Accumulated results of one phase (latency at concurrency 1, or throughput at 64).
#[derive(Debug, Clone)]
pub(crate) struct Phase {
    /// Latencies in nanoseconds.
    pub(crate) hist: Histogram<u64>,
    /// Successful calls.
    pub(crate) calls: u64,
    /// Failed calls.
    pub(crate) errors: u64,
    /// Wall time spent.
    pub(crate) wall: Duration,
    /// This process's CPU time spent.
    pub(crate) cpu_self: Duration,
    /// Each meter's CPU time spent, in meter order.
    pub(crate) cpu_children: Vec<Duration>,
    /// Per-round p50 (latency) or rate (throughput), for spread.
    pub(crate) per_round: Vec<f64>,
}

impl Phase {
    fn new(meters: usize) -> Phase {
        Phase {
            hist: new_hist(),
            calls: 0,
            errors: 0,
            wall: Duration::ZERO,
            cpu_self: Duration::ZERO,
            cpu_children: vec![Duration::ZERO; meters],
            per_round: Vec::new(),
        }
    }

    /// Calls per second.
    pub(crate) fn rate(&self) -> f64 {
        if self.wall.is_zero() {
            0.0
        } else {
            self.calls as f64 / self.wall.as_secs_f64()
        }
    }

    /// A quantile in microseconds.
    pub(crate) fn quantile_us(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    /// The mean in microseconds.
    pub(crate) fn mean_us(&self) -> f64 {
        self.hist.mean() / 1000.0
    }

    /// CPU microseconds per call of this process.
    pub(crate) fn cpu_self_us(&self) -> f64 {
        per_call_us(self.cpu_self, self.calls)
    }

    /// CPU microseconds per call of meter `i`.
    pub(crate) fn cpu_child_us(&self, i: usize) -> f64 {
        per_call_us(
            self.cpu_children.get(i).copied().unwrap_or_default(),
            self.calls,
        )
    }
}

fn per_call_us(d: Duration, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        d.as_secs_f64() * 1e6 / calls as f64
    }
}

/// Both phases and the first error seen.
#[derive(Debug, Clone)]
pub(crate) struct Stats {
    /// Concurrency 1.
    pub(crate) latency: Phase,
    /// Concurrency 64.
    pub(crate) load: Phase,
    /// The first error, to show why a row failed.
    pub(crate) first_error: Option<String>,
}

impl Stats {
    pub(crate) fn new(meters: usize) -> Stats {
        Stats {
            latency: Phase::new(meters),
            load: Phase::new(meters),
            first_error: None,
        }
    }
}

/// An empty histogram: 100 ns to 100 s, 3 significant digits.
#[expect(
    clippy::expect_used,
    reason = "constant bounds that `new_with_bounds` accepts: it cannot fail"
)]
pub(crate) fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(100, 100_000_000_000, 3).expect("constant, valid bounds")
}

/// How long and how much to measure. The report shows the measuring part (the warm-up is
/// left out), with the throughput phase's length in seconds (`load_s`).
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Plan {
    /// Interleaved rounds.
    pub(crate) rounds: usize,
    /// Sequential calls per row per round.
    pub(crate) batch: usize,
    /// Calls in flight during the throughput phase.
    pub(crate) concurrency: usize,
    /// Length of each row's throughput phase per round.
    #[serde(rename = "load_s", serialize_with = "seconds")]
    pub(crate) load_for: Duration,
    /// Sequential warm-up calls per row.
    #[serde(skip)]
    pub(crate) warm_calls: usize,
    /// Warm-up time at full concurrency per row.
    #[serde(skip)]
    pub(crate) warm_load: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

struct Sample {
    wall: Duration,
    cpu_self: Duration,
    cpu_children: Vec<Duration>,
}

fn start_sample(meters: &[Meter]) -> (Vec<Duration>, Duration, Instant) {
    // Children first and our own CPU last, so reading /proc is (mostly) outside our window.
    let children = meters.iter().map(Meter::read).collect();
    (children, cpu::self_cpu(), Instant::now())
}

fn end_sample(meters: &[Meter], start: (Vec<Duration>, Duration, Instant)) -> Sample {
    let wall = start.2.elapsed();
    let cpu_self = cpu::self_cpu().saturating_sub(start.1);
    let cpu_children = meters
        .iter()
        .zip(start.0)
        .map(|(m, before)| m.read().saturating_sub(before))
        .collect();
    Sample {
        wall,
        cpu_self,
        cpu_children,
    }
}

fn add_sample(p: &mut Phase, s: &Sample) {
    p.wall += s.wall;
    p.cpu_self += s.cpu_self;
    for (acc, d) in p.cpu_children.iter_mut().zip(&s.cpu_children) {
        *acc += *d;
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Sequential calls; returns the histogram, successes, errors and the first error.
async fn sequential(call: Call, n: usize) -> (Histogram<u64>, u64, u64, Option<String>) {
    let mut hist = new_hist();
    let (mut ok, mut errors, mut first) = (0, 0, None);
    for _ in 0..n {
        let started = Instant::now();
        match call().await {
            Ok(own) => {
                hist.saturating_record(nanos(own.unwrap_or_else(|| started.elapsed())));
                ok += 1;
            }
            Err(e) => {
                errors += 1;
                first.get_or_insert(e);
            }
        }
    }
    (hist, ok, errors, first)
}

/// `concurrency` tasks calling until `until`; they share one histogram (a short lock per
/// call, never held across an await).
async fn concurrent(
    call: Call,
    concurrency: usize,
    until: Instant,
) -> (Histogram<u64>, u64, u64, Option<String>) {
    let hist = Arc::new(Mutex::new(new_hist()));
    let mut set = JoinSet::new();
    for _ in 0..concurrency {
        let call = call.clone();
        let hist = hist.clone();
        set.spawn(async move {
            let (mut ok, mut errors, mut first) = (0u64, 0u64, None);
            while Instant::now() < until {
                let started = Instant::now();
                match call().await {
                    Ok(own) => {
                        let d = nanos(own.unwrap_or_else(|| started.elapsed()));
                        hist.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .saturating_record(d);
                        ok += 1;
                    }
                    Err(e) => {
                        errors += 1;
                        first.get_or_insert(e);
                    }
                }
            }
            (ok, errors, first)
        });
    }
    let (mut ok, mut errors, mut first) = (0, 0, None);
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((o, e, f)) => {
                ok += o;
                errors += e;
                if first.is_none() {
                    first = f;
                }
            }
            Err(e) => {
                errors += 1;
                first.get_or_insert(format!("a load task failed: {e}"));
            }
        }
    }
    let hist = std::mem::replace(
        &mut *hist.lock().unwrap_or_else(PoisonError::into_inner),
        new_hist(),
    );
    (hist, ok, errors, first)
}

/// Runs a sequential batch on a runtime worker (where application code runs), not on the
/// thread blocked in `block_on`.
async fn spawned_sequential(call: Call, n: usize) -> (Histogram<u64>, u64, u64, Option<String>) {
    match tokio::spawn(sequential(call, n)).await {
        Ok(r) => r,
        Err(e) => (
            new_hist(),
            0,
            1,
            Some(format!("a latency task failed: {e}")),
        ),
    }
}

/// Warms every row up: sequential calls, then a burst at full concurrency (which also opens
/// each client's pool of connections). Errors here are reported like measured ones.
pub(crate) async fn warm_up(rows: &mut [Row], plan: &Plan) {
    for row in rows.iter_mut() {
        let (_, _, e1, f1) = spawned_sequential(row.call.clone(), plan.warm_calls).await;
        let until = Instant::now() + plan.warm_load;
        let (_, _, e2, f2) = concurrent(row.call.clone(), plan.concurrency, until).await;
        row.stats.latency.errors += e1;
        row.stats.load.errors += e2;
        if row.stats.first_error.is_none() {
            row.stats.first_error = f1.or(f2);
        }
    }
}

/// The measured rounds.
pub(crate) async fn measure(rows: &mut [Row], meters: &[Meter], plan: &Plan) {
    let n = rows.len();
    for round in 0..plan.rounds {
        for k in 0..n {
            let row = &mut rows[(round + k) % n];
            let s = start_sample(meters);
            let (hist, ok, errors, first) = spawned_sequential(row.call.clone(), plan.batch).await;
            let sample = end_sample(meters, s);
            let p = &mut row.stats.latency;
            add_sample(p, &sample);
            p.per_round
                .push(hist.value_at_quantile(0.5) as f64 / 1000.0);
            let _ = p.hist.add(&hist);
            p.calls += ok;
            p.errors += errors;
            if row.stats.first_error.is_none() {
                row.stats.first_error = first;
            }
        }
        for k in 0..n {
            let row = &mut rows[(round + k) % n];
            let s = start_sample(meters);
            let until = Instant::now() + plan.load_for;
            let (hist, ok, errors, first) =
                concurrent(row.call.clone(), plan.concurrency, until).await;
            let sample = end_sample(meters, s);
            let p = &mut row.stats.load;
            p.per_round
                .push(ok as f64 / sample.wall.as_secs_f64().max(1e-9));
            add_sample(p, &sample);
            let _ = p.hist.add(&hist);
            p.calls += ok;
            p.errors += errors;
            if row.stats.first_error.is_none() {
                row.stats.first_error = first;
            }
        }
    }
}
