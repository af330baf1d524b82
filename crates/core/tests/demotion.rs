//! `Strategy::DemoteErroring`: the passive error rate moves a failing link behind the others,
//! on tokio's paused clock.

mod support;

use std::sync::Arc;

use ripcord_core::chain::{DEMOTION_PROBE_EVERY, Strategy};
use ripcord_core::testing::ScriptedModel;
use ripcord_core::{Chain, ChatModel, Context, ErrorKind};

use support::{arc, ask, chain_of};

/// Link `a`, which fails with `kind`, then `b`, which answers, under `DemoteErroring` at a 30 %
/// threshold after `min_calls` calls.
#[allow(clippy::unwrap_used)] // a test helper fails the test by panicking
fn demoting(kind: ErrorKind, min_calls: u32) -> (Arc<ScriptedModel>, Chain) {
    let a = arc(ScriptedModel::new("a").fail(kind));
    let b = arc(ScriptedModel::new("b").reply("from b"));
    let chain = chain_of(&[&a, &b])
        .strategy(Strategy::DemoteErroring {
            threshold_pct: 30,
            min_calls,
        })
        .build()
        .unwrap();
    (a, chain)
}

#[tokio::test(start_paused = true)]
async fn a_link_whose_error_rate_passes_the_threshold_moves_behind_the_others() {
    let (a, chain) = demoting(ErrorKind::ServerError, 4);
    assert_eq!(chain.strategy().name(), "demote_erroring");
    for _ in 0..DEMOTION_PROBE_EVERY {
        let r = chain.chat(&ask(), &Context::new()).await.unwrap();
        assert_eq!(r.served_by(), "b");
    }
    // Four failures (EWMA 0.1, 0.19, 0.27, 0.34) demote a; then b is tried first.
    assert_eq!(a.calls(), 4);
    // Every DEMOTION_PROBE_EVERY-th call keeps the configured order: a is tried again.
    chain.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(a.calls(), 5);
}

#[tokio::test(start_paused = true)]
async fn caller_faults_and_local_refusals_do_not_demote_a_link() {
    let (a, chain) = demoting(ErrorKind::LocalRateLimited, 1);
    for _ in 0..10 {
        chain.chat(&ask(), &Context::new()).await.unwrap();
    }
    assert_eq!(a.calls(), 10, "a local refusal says nothing of the vendor");
}
