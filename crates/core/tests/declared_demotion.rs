//! `ChainBuilder::demotion`: a switch set from outside the chain (the gateway sets it while a
//! vendor's status page declares a major outage) moves its link behind the others until it is
//! cleared, under any strategy, on tokio's paused clock.

mod support;

use std::sync::Arc;

use ripcord_core::chain::{Demotion, Strategy};
use ripcord_core::testing::ScriptedModel;
use ripcord_core::{Chain, ChainBuilder, ChatModel, Context, ErrorKind};

use support::{arc, ask};

/// A chain of `a`, demoted (its switch already set), then `b`.
fn demoted_a_then_b(a: &Arc<ScriptedModel>, b: &Arc<ScriptedModel>) -> ChainBuilder {
    let d = Demotion::default();
    d.set(true);
    Chain::builder()
        .link_arc(Arc::clone(a) as Arc<dyn ChatModel>)
        .demotion(d)
        .link_arc(Arc::clone(b) as Arc<dyn ChatModel>)
}

#[tokio::test(start_paused = true)]
async fn a_demoted_link_is_tried_after_the_others_until_restored() {
    let a = arc(ScriptedModel::new("a").reply("from a"));
    let b = arc(ScriptedModel::new("b").reply("from b"));
    let c = arc(ScriptedModel::new("c").reply("from c"));
    let d = Demotion::default();
    let chain = Chain::builder()
        .link_arc(Arc::clone(&a) as Arc<dyn ChatModel>)
        .demotion(d.clone())
        .link_arc(Arc::clone(&b) as Arc<dyn ChatModel>)
        .link_arc(Arc::clone(&c) as Arc<dyn ChatModel>)
        .static_reply("busy")
        .build()
        .unwrap();
    let served = |chain: &Chain| {
        let chain = chain.clone();
        async move {
            chain
                .chat(&ask(), &Context::new())
                .await
                .unwrap()
                .served_by()
                .to_owned()
        }
    };
    assert_eq!(served(&chain).await, "a");
    assert!(!d.set(true));
    for _ in 0..30 {
        assert_eq!(served(&chain).await, "b", "no probe calls while demoted");
    }
    assert_eq!(a.calls(), 1);
    assert!(d.set(false));
    assert_eq!(served(&chain).await, "a", "restored at once");
}

#[tokio::test(start_paused = true)]
async fn a_demoted_link_still_serves_when_the_links_before_it_fail() {
    let a = arc(ScriptedModel::new("a").reply("from a"));
    let b = arc(ScriptedModel::new("b").fail(ErrorKind::ServerError));
    let chain = demoted_a_then_b(&a, &b)
        .static_reply("busy")
        .build()
        .unwrap();
    let r = chain.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(
        r.served_by(),
        "a",
        "b failed first, then the demoted a served"
    );
    assert_eq!(b.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn demotion_applies_over_another_strategy() {
    let a = arc(ScriptedModel::new("a").reply("from a"));
    let b = arc(ScriptedModel::new("b").reply("from b"));
    let chain = demoted_a_then_b(&a, &b)
        .strategy(Strategy::weighted([("a", 1), ("b", 0)]))
        .build()
        .unwrap();
    for _ in 0..5 {
        let r = chain.chat(&ask(), &Context::new()).await.unwrap();
        assert_eq!(r.served_by(), "b");
    }
    assert_eq!(a.calls(), 0);
}
