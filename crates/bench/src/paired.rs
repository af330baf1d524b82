//! Issue 36's target measured paired: the chain whose link 1 is a pool of three deployments
//! against the same chain with link 1 a single link, in one task, on one upstream, alternating.
//!
//! A p50 of 40-80 µs is inside this machine's noise: two rows measured a few seconds apart can
//! differ by more than the 5% the target allows, in either direction. So the two chains are
//! called in *blocks*: each block alternates short runs of calls (`run` calls of one chain,
//! then `run` of the other, the order swapped every run, ABBA), so both see the same moments
//! of the machine. Each block yields its own ratio of medians (pool p50 / single-link p50) and
//! of CPU per call (`getrusage` of this process around each run: the HTTP client plus ripcord;
//! the upstream's CPU is the same for both and left out). The headline is the ratio of the
//! medians over all calls; the spread over blocks says how far one block can stray.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::cpu;
use crate::runner::Call;

/// How much to measure.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct PairedPlan {
    /// Blocks.
    pub(crate) blocks: usize,
    /// Calls of each chain per block.
    pub(crate) per_block: usize,
    /// Calls of one chain in a row before the other's turn.
    pub(crate) run: usize,
    /// Calls of each chain before measuring.
    pub(crate) warm: usize,
}

impl PairedPlan {
    pub(crate) fn new(quick: bool) -> PairedPlan {
        if quick {
            PairedPlan {
                blocks: 10,
                per_block: 400,
                run: 20,
                warm: 300,
            }
        } else {
            PairedPlan {
                blocks: 20,
                per_block: 1000,
                run: 20,
                warm: 1000,
            }
        }
    }
}

/// The result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Paired {
    /// The plan it ran.
    pub(crate) plan: PairedPlan,
    /// p50 of every single-link call, µs.
    pub(crate) single_p50_us: f64,
    /// p50 of every pool call, µs.
    pub(crate) pool_p50_us: f64,
    /// `pool_p50_us / single_p50_us`.
    pub(crate) p50_ratio: f64,
    /// Each block's ratio of medians.
    pub(crate) block_ratios: Vec<f64>,
    /// CPU µs per single-link call (this process).
    pub(crate) single_cpu_us: f64,
    /// CPU µs per pool call (this process).
    pub(crate) pool_cpu_us: f64,
    /// `pool_cpu_us / single_cpu_us`.
    pub(crate) cpu_ratio: f64,
    /// Each block's CPU-per-call ratio.
    pub(crate) block_cpu_ratios: Vec<f64>,
}

impl Paired {
    /// The report line.
    pub(crate) fn line(&self) -> String {
        format!(
            "pool of 3 vs single link, paired: p50 ratio {:.3} (blocks: {}), CPU/call ratio {:.3} (blocks: {}); \
             p50 {:.1} vs {:.1} µs, CPU {:.1} vs {:.1} µs per call; {} blocks of {} calls each, alternating runs of {}",
            self.p50_ratio,
            range(&self.block_ratios),
            self.cpu_ratio,
            range(&self.block_cpu_ratios),
            self.pool_p50_us,
            self.single_p50_us,
            self.pool_cpu_us,
            self.single_cpu_us,
            self.plan.blocks,
            self.plan.per_block,
            self.plan.run,
        )
    }
}

/// `min..max (median m)` of `v`.
fn range(v: &[f64]) -> String {
    let mut s = v.to_vec();
    if s.is_empty() {
        return "-".into();
    }
    let m = median(&mut s);
    format!("{:.3}..{:.3}, median {m:.3}", s[0], s[s.len() - 1])
}

/// The median of `v` (sorted in place); 0 for none.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One side's calls in a block: latencies (ns) and CPU spent.
#[derive(Default)]
struct Side {
    lat: Vec<f64>,
    cpu: Duration,
}

/// `n` sequential calls of `call`, appended to `side`.
async fn run_calls(call: &Call, n: usize, side: &mut Side) -> Result<(), String> {
    let cpu0 = cpu::self_cpu();
    for _ in 0..n {
        let started = Instant::now();
        let own = call().await?;
        let d = own.unwrap_or_else(|| started.elapsed());
        side.lat.push(d.as_secs_f64() * 1e9);
    }
    side.cpu += cpu::self_cpu().saturating_sub(cpu0);
    Ok(())
}

/// Measures `pool` against `single` (see the module docs), on a runtime worker.
pub(crate) async fn measure(single: Call, pool: Call, plan: PairedPlan) -> Result<Paired, String> {
    tokio::spawn(measure_here(single, pool, plan))
        .await
        .map_err(|e| format!("the paired comparison's task failed: {e}"))?
}

async fn measure_here(single: Call, pool: Call, plan: PairedPlan) -> Result<Paired, String> {
    let run = plan.run.max(1);
    for _ in 0..plan.warm.div_ceil(run) {
        run_calls(&single, run, &mut Side::default()).await?;
        run_calls(&pool, run, &mut Side::default()).await?;
    }
    let mut all_single = Vec::new();
    let mut all_pool = Vec::new();
    let (mut cpu_single, mut cpu_pool) = (Duration::ZERO, Duration::ZERO);
    let mut block_ratios = Vec::new();
    let mut block_cpu_ratios = Vec::new();
    let runs = plan.per_block.div_ceil(run);
    for b in 0..plan.blocks {
        let (mut s, mut p) = (Side::default(), Side::default());
        for r in 0..runs {
            // ABBA: who goes first alternates every run, and every block starts with the
            // other one than the block before.
            if (r + b) % 2 == 0 {
                run_calls(&single, run, &mut s).await?;
                run_calls(&pool, run, &mut p).await?;
            } else {
                run_calls(&pool, run, &mut p).await?;
                run_calls(&single, run, &mut s).await?;
            }
        }
        let (ms, mp) = (median(&mut s.lat.clone()), median(&mut p.lat.clone()));
        if ms > 0.0 {
            block_ratios.push(mp / ms);
        }
        if !s.cpu.is_zero() {
            block_cpu_ratios.push(p.cpu.as_secs_f64() / s.cpu.as_secs_f64());
        }
        cpu_single += s.cpu;
        cpu_pool += p.cpu;
        all_single.extend(s.lat);
        all_pool.extend(p.lat);
    }
    let calls = (all_single.len().max(1)) as f64;
    let single_p50 = median(&mut all_single) / 1000.0;
    let pool_p50 = median(&mut all_pool) / 1000.0;
    let single_cpu_us = cpu_single.as_secs_f64() * 1e6 / calls;
    let pool_cpu_us = cpu_pool.as_secs_f64() * 1e6 / calls;
    Ok(Paired {
        plan,
        single_p50_us: single_p50,
        pool_p50_us: pool_p50,
        p50_ratio: if single_p50 > 0.0 {
            pool_p50 / single_p50
        } else {
            f64::NAN
        },
        block_ratios,
        single_cpu_us,
        pool_cpu_us,
        cpu_ratio: if single_cpu_us > 0.0 {
            pool_cpu_us / single_cpu_us
        } else {
            f64::NAN
        },
        block_cpu_ratios,
    })
}
