//! What skipping an open-breaker link costs, measured alone: the same decorated in-memory link
//! answering behind a chain, with and without an open-breaker link in front of it. No network
//! runs, so the difference is the skip itself (the breaker's refusal, the chain recording it
//! and moving on, the provenance that says so) to the nanosecond, not lost in HTTP noise.

use std::time::Duration;

use ripcord_core::testing::FnModel;
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, ChatResponse, Context, Error, ErrorKind, ModelId,
};
use ripcord_resilience::{BreakerPolicy, BreakerState};
use serde::Serialize;
use tokio::time::Instant;

use crate::paired::median;
use crate::rows::{decorate, request, trips_at_once};

/// An in-memory link: answers at once, or fails at once with an overload.
fn memory(name: &str, fail: bool) -> impl ChatModel + 'static {
    FnModel::new(
        ModelId::new(name, "in-memory"),
        Capabilities::new(128_000, 4096),
        move |_req: &ChatRequest, _ctx: &Context| {
            if fail {
                Err(Error::new(ErrorKind::Overloaded, "overloaded"))
            } else {
                Ok(ChatResponse::new("Rayleigh scattering."))
            }
        },
    )
}

/// The result. Each round times both chains back to back (alternating which goes first); the
/// headline cost is the median of the per-round differences, which shrugs off a round that
/// the rest of the machine disturbed. The fastest round of each chain is kept beside it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SkipCost {
    /// Mean ns per call of the chain without the skipped link (fastest round).
    pub(crate) direct_ns: f64,
    /// Mean ns per call of the chain that skips an open-breaker link first (fastest round).
    pub(crate) with_skip_ns: f64,
    /// The skip's cost in ns: the median over rounds of the per-round difference.
    pub(crate) skip_ns: f64,
    /// The difference of the fastest rounds, ns (`with_skip_ns - direct_ns`).
    pub(crate) skip_fastest_ns: f64,
    /// Calls per round and chain.
    pub(crate) calls_per_round: usize,
    /// Rounds.
    pub(crate) rounds: usize,
}

async fn mean_ns(
    chain: &Chain,
    req: &ChatRequest,
    n: usize,
    served_by: &str,
) -> std::result::Result<f64, String> {
    let start = Instant::now();
    for _ in 0..n {
        let r = chain
            .chat(req, &Context::new())
            .await
            .map_err(|e| format!("skip cost: {e}"))?;
        if r.served_by() != served_by {
            return Err(format!("skip cost: served by {}", r.served_by()));
        }
    }
    Ok(start.elapsed().as_nanos() as f64 / n.max(1) as f64)
}

/// Measures `rounds` alternating rounds of `calls` calls per chain.
pub(crate) async fn measure(calls: usize, rounds: usize) -> std::result::Result<SkipCost, String> {
    let (alone, _) = decorate(memory("secondary", false), BreakerPolicy::default())?;
    let direct = Chain::builder()
        .link_arc(alone)
        .deadline(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let (open, handle) = decorate(memory("primary", true), trips_at_once()?)?;
    let (behind, _) = decorate(memory("secondary", false), BreakerPolicy::default())?;
    let skipping = Chain::builder()
        .link_arc(open)
        .link_arc(behind)
        .deadline(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let req = request();
    // Trip link 1, then check that it is skipped, not called.
    mean_ns(&skipping, &req, 1, "secondary").await?;
    if handle.state() != BreakerState::Open {
        return Err("skip cost: link 1's breaker did not open".into());
    }
    // Warm-up.
    mean_ns(&direct, &req, calls / 4 + 1, "secondary").await?;
    mean_ns(&skipping, &req, calls / 4 + 1, "secondary").await?;
    let (mut d, mut s, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    // Alternate which chain goes first, so neither always runs on a warmer cache.
    for round in 0..rounds {
        let (a, b) = if round % 2 == 0 {
            let a = mean_ns(&direct, &req, calls, "secondary").await?;
            (a, mean_ns(&skipping, &req, calls, "secondary").await?)
        } else {
            let b = mean_ns(&skipping, &req, calls, "secondary").await?;
            (mean_ns(&direct, &req, calls, "secondary").await?, b)
        };
        d.push(a);
        s.push(b);
        diff.push(b - a);
    }
    let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let (direct_ns, with_skip_ns) = (fastest(&d), fastest(&s));
    Ok(SkipCost {
        direct_ns,
        with_skip_ns,
        skip_ns: median(&mut diff),
        skip_fastest_ns: with_skip_ns - direct_ns,
        calls_per_round: calls,
        rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }

    #[tokio::test]
    async fn the_skip_is_measured_with_both_chains_answering() {
        let r = measure(50, 3).await.unwrap();
        assert!(r.direct_ns > 0.0 && r.with_skip_ns > 0.0, "{r:?}");
        assert_eq!(r.rounds, 3);
    }
}
