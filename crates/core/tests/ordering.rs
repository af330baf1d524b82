//! Link ordering strategies and the vendor-independence rule, on tokio's paused clock:
//! scripted latencies are exact, so EWMA values and orders are deterministic.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::chain::{LATENCY_EWMA_ALPHA, Strategy};
use ripcord_core::stream;
use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{
    BuildError, Capabilities, ChatModel, Context, ErrorKind, Locality, Price, SkipReason,
    StreamEvent, ToolSpec,
};

use support::{arc, ask, chain_of, chat_ok, collect_ok, ms};

/// The providers of every attempt, in the order they were made.
fn attempted(p: &ripcord_core::Provenance) -> Vec<String> {
    p.attempts.iter().map(|a| a.provider.to_string()).collect()
}

/// The answer to `ask()` of a chain of `links` that prefers independent fallbacks.
#[allow(clippy::unwrap_used)] // a test helper fails the test by panicking
async fn independent(links: &[&Arc<ScriptedModel>]) -> ripcord_core::ChatResponse {
    let chain = chain_of(links)
        .prefer_independent_fallbacks(true)
        .build()
        .unwrap();
    chat_ok(&chain, &ask()).await
}

fn assert_close(got: Duration, want: Duration) {
    let diff = got.abs_diff(want);
    assert!(
        diff < Duration::from_micros(2),
        "got {got:?}, want {want:?}"
    );
}

// ---- default --------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_default_strategy_is_the_configured_order_and_keeps_no_latency() {
    let a = arc(ScriptedModel::new("a").reply_after("from a", ms(500)));
    let b = arc(ScriptedModel::new("b").reply_after("from b", ms(10)));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    assert_eq!(chain.strategy(), &Strategy::Ordered);
    for _ in 0..3 {
        let r = chat_ok(&chain, &ask()).await;
        assert_eq!(r.served_by(), "a");
        assert!(!r.degraded());
    }
    assert_eq!(b.calls(), 0);
    assert_eq!(chain.link_latency("a"), None, "only lowest_latency samples");
}

// ---- lowest latency -------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn lowest_latency_orders_sampled_links_by_their_ewma_once_they_have_min_samples() {
    // Configured order: a (slow), c (never sampled), b (fast).
    let a = arc(ScriptedModel::new("a")
        .reply_after("from a", ms(300))
        .reply_after("from a", ms(300))
        .fail(ErrorKind::Overloaded)
        .fail(ErrorKind::Overloaded)
        .reply_after("from a", ms(300)));
    let c = arc(ScriptedModel::new("c").reply_after("from c", ms(50)));
    let b = arc(ScriptedModel::new("b").reply_after("from b", ms(100)));
    let chain = chain_of(&[&a, &c, &b])
        .strategy(Strategy::LowestLatency { min_samples: 2 })
        .build()
        .unwrap();
    let ctx = Context::new();

    // Two successful calls give a its two samples; alone, it is not reordered.
    for _ in 0..2 {
        assert_eq!(chain.chat(&ask(), &ctx).await.unwrap().served_by(), "a");
    }
    let lat = chain.link_latency("a").unwrap();
    assert_eq!(lat.samples, 2);
    assert_close(lat.ewma, ms(300));

    // a fails: c is next in configured order and serves, sampled once.
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    assert_eq!(attempted(&r.provenance), ["a", "c"]);
    // c has one sample (< min_samples): a still goes first, c again serves.
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    assert_eq!(
        attempted(&r.provenance),
        ["a", "c"],
        "min_samples respected"
    );
    assert_eq!(chain.link_latency("c").unwrap().samples, 2);
    assert_eq!(chain.link_latency("b"), None, "b never served yet");

    // Now a (300ms) and c (50ms) both have 2 samples: c goes first, and is not a fallback.
    let before = chain.stats().fallbacks;
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    assert_eq!(attempted(&r.provenance), ["c"]);
    assert!(
        !r.degraded(),
        "the strategy's first choice is not a fallback"
    );
    assert_eq!(chain.stats().fallbacks, before);
    assert_eq!(a.calls(), 4);
    assert_eq!(b.calls(), 0);
}

/// Link `name`: answers "from <name>" after `latency`, then fails with `Overloaded`, then
/// answers after `latency` again.
fn answer_fail_answer(name: &str, latency: Duration) -> Arc<ScriptedModel> {
    let text = format!("from {name}");
    arc(ScriptedModel::new(name)
        .reply_after(&text, latency)
        .fail(ErrorKind::Overloaded)
        .reply_after(&text, latency))
}

#[tokio::test(start_paused = true)]
async fn unsampled_links_keep_their_configured_position() {
    // a: slow, then failing; m: unsampled middle link that fails; z: fast last link.
    let a = answer_fail_answer("a", ms(400));
    let m = arc(ScriptedModel::new("m").fail(ErrorKind::ServerError));
    let z = answer_fail_answer("z", ms(20));
    let chain = chain_of(&[&a, &m, &z])
        .strategy(Strategy::LowestLatency { min_samples: 1 })
        .build()
        .unwrap();
    let ctx = Context::new();
    assert_eq!(chain.chat(&ask(), &ctx).await.unwrap().served_by(), "a");
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    assert_eq!(attempted(&r.provenance), ["a", "m", "z"]);
    // Sampled: a 400ms, z 20ms. They swap their positions (0 and 2); m stays in the middle.
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    assert_eq!(attempted(&r.provenance), ["z", "m", "a"]);
    assert_eq!(r.served_by(), "a");
    assert!(r.degraded());
}

#[tokio::test(start_paused = true)]
async fn the_ewma_follows_a_link_that_slows_down() {
    let a = answer_fail_answer("a", ms(200));
    let b = arc(ScriptedModel::new("b")
        .reply_after("from b", ms(100))
        .reply_after("from b", ms(1000))
        .reply_after("from b", ms(100)));
    let chain = chain_of(&[&a, &b])
        .strategy(Strategy::LowestLatency { min_samples: 1 })
        .build()
        .unwrap();
    let ctx = Context::new();
    assert_eq!(chain.chat(&ask(), &ctx).await.unwrap().served_by(), "a");
    assert_eq!(chain.chat(&ask(), &ctx).await.unwrap().served_by(), "b");
    // b (100ms) is now first; it answers in 1s this time.
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    assert_eq!(attempted(&r.provenance), ["b"]);
    let expected = 100.0 + LATENCY_EWMA_ALPHA * 900.0;
    assert_close(
        chain.link_latency("b").unwrap().ewma,
        Duration::from_secs_f64(expected / 1000.0),
    );
    // 325ms > 200ms: a is first again.
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    assert_eq!(attempted(&r.provenance), ["a"]);
}

#[tokio::test(start_paused = true)]
async fn samples_from_outside_a_call_reorder_links_too() {
    let a = arc(ScriptedModel::new("a").reply_after("from a", ms(300)));
    let b = arc(ScriptedModel::new("b").reply_after("from b", ms(30)));
    let chain = chain_of(&[&a, &b])
        .strategy(Strategy::LowestLatency { min_samples: 1 })
        .build()
        .unwrap();
    assert_eq!(chat_ok(&chain, &ask()).await.served_by(), "a");
    // e.g. a health probe measured b.
    assert!(chain.record_latency("b", ms(30)));
    assert!(!chain.record_latency("nope", ms(30)));
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(attempted(&r.provenance), ["b"]);
    assert_eq!(chain.link_latency("b").unwrap().samples, 2);

    let ordered = chain_of(&[&a, &b]).build().unwrap();
    assert!(
        !ordered.record_latency("b", ms(30)),
        "ordered chains keep no latency"
    );
}

#[tokio::test(start_paused = true)]
async fn streams_sample_the_time_to_first_content_not_the_whole_answer() {
    let a = arc(ScriptedModel::new("a")
        .stream_items(text_stream(&["slow"], ms(300)))
        .fail(ErrorKind::Overloaded)
        .stream_items(text_stream(&["slow"], ms(300))));
    // b's first token comes after 50ms, the rest of its answer 2s later.
    let b = arc(ScriptedModel::new("b").stream_items(vec![
        (ms(50), StreamItem::Event(StreamEvent::text("quick "))),
        (ms(2000), StreamItem::Event(StreamEvent::text("start"))),
        (
            Duration::ZERO,
            StreamItem::Event(StreamEvent::finish(ripcord_core::FinishReason::Stop)),
        ),
    ]));
    let chain = chain_of(&[&a, &b])
        .strategy(Strategy::LowestLatency { min_samples: 1 })
        .build()
        .unwrap();
    let ctx = Context::new();
    let r = stream::collect(chain.stream(&ask(), &ctx).await.unwrap())
        .await
        .unwrap();
    assert_eq!(r.served_by(), "a");
    assert_close(chain.link_latency("a").unwrap().ewma, ms(300));
    let r = stream::collect(chain.stream(&ask(), &ctx).await.unwrap())
        .await
        .unwrap();
    assert_eq!(r.text(), "quick start");
    assert_close(chain.link_latency("b").unwrap().ewma, ms(50));
    // b is faster to first token: it goes first.
    let r = stream::collect(chain.stream(&ask(), &ctx).await.unwrap())
        .await
        .unwrap();
    assert_eq!(attempted(&r.provenance), ["b"]);
    assert_eq!(a.calls(), 2);
}

// ---- lowest cost ----------------------------------------------------------------------------

fn priced(name: &str, price: Option<Price>, tools: bool) -> Arc<ScriptedModel> {
    let mut caps = Capabilities::new(128_000, 4_096)
        .with_tools(tools)
        .with_locality(Locality::cloud(name));
    if let Some(p) = price {
        caps = caps.with_price(p);
    }
    arc(ScriptedModel::new(name)
        .with_caps(caps)
        .fail(ErrorKind::Overloaded))
}

#[tokio::test(start_paused = true)]
async fn lowest_cost_tries_the_cheapest_capable_link_first_and_unknown_prices_last() {
    let unknown = priced("unknown", None, true);
    let dear = priced("dear", Some(Price::per_million(10.0, 30.0)), true);
    let cheap = priced("cheap", Some(Price::per_million(0.5, 1.5)), true);
    let cheapest = priced("cheapest", Some(Price::per_million(0.1, 0.2)), false);
    let chain = chain_of(&[&unknown, &dear, &cheap, &cheapest])
        .strategy(Strategy::LowestCost)
        .static_reply("unavailable")
        .build()
        .unwrap();

    let r = chat_ok(&chain, &ask()).await;
    assert!(r.provenance.static_reply);
    assert_eq!(
        attempted(&r.provenance),
        ["cheapest", "cheap", "dear", "unknown"]
    );

    // A tool request: the cheapest link lacks tools and goes last, where it is skipped.
    let req = ask().with_tool(ToolSpec::new(
        "f",
        "does f",
        serde_json::json!({"type": "object"}),
    ));
    let r = chat_ok(&chain, &req).await;
    assert_eq!(attempted(&r.provenance), ["cheap", "dear", "unknown"]);
    assert_eq!(r.provenance.skipped.len(), 1);
    assert_eq!(&*r.provenance.skipped[0].provider, "cheapest");
    assert_eq!(r.provenance.skipped[0].reason, SkipReason::NoTools);
}

#[tokio::test(start_paused = true)]
async fn lowest_cost_prices_the_estimated_output_too() {
    // in_cheap: cheap prompt, dear output; out_cheap: the reverse.
    let in_cheap = priced("in_cheap", Some(Price::per_million(1.0, 100.0)), false);
    let out_cheap = priced("out_cheap", Some(Price::per_million(50.0, 2.0)), false);
    let chain = chain_of(&[&out_cheap, &in_cheap])
        .strategy(Strategy::LowestCost)
        .static_reply("unavailable")
        .build()
        .unwrap();
    let short = ask().with_max_tokens(1);
    let r = chat_ok(&chain, &short).await;
    assert_eq!(attempted(&r.provenance), ["in_cheap", "out_cheap"]);
    let long = ask().with_max_tokens(2_000);
    let r = chat_ok(&chain, &long).await;
    assert_eq!(attempted(&r.provenance), ["out_cheap", "in_cheap"]);
}

#[tokio::test(start_paused = true)]
async fn lowest_cost_serves_streams_from_the_cheapest_link_without_calling_by_config_order() {
    let dear = arc(ScriptedModel::new("dear")
        .with_caps(Capabilities::new(128_000, 4_096).with_price(Price::per_million(5.0, 15.0))));
    let free = arc(ScriptedModel::new("free")
        .with_caps(Capabilities::new(8_192, 1_024).with_price(Price::FREE))
        .stream_items(text_stream(&["local ", "answer"], ms(5))));
    let chain = chain_of(&[&dear, &free])
        .strategy(Strategy::LowestCost)
        .build()
        .unwrap();
    let r = collect_ok(&chain, &ask()).await;
    assert_eq!(r.text(), "local answer");
    assert_eq!(r.served_by(), "free");
    assert!(!r.degraded());
    assert_eq!(dear.calls(), 0);
}

// ---- weighted -------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn weighted_first_picks_follow_the_shares() {
    let a = arc(ScriptedModel::new("a"));
    let b = arc(ScriptedModel::new("b"));
    let c = arc(ScriptedModel::new("c"));
    let chain = chain_of(&[&a, &b, &c])
        .strategy(Strategy::weighted([("a", 1), ("b", 3)]))
        .seed(42)
        .build()
        .unwrap();
    const N: usize = 4_000;
    for _ in 0..N {
        let r = chat_ok(&chain, &ask()).await;
        assert!(!r.degraded(), "a weighted first pick is not a fallback");
    }
    assert_eq!(c.calls(), 0, "a link without a share is never drawn first");
    let share_b = b.calls() as f64 / N as f64;
    assert!((share_b - 0.75).abs() < 0.03, "b got {share_b}");
    assert_eq!(a.calls() + b.calls(), N);
    assert_eq!(chain.stats().fallbacks, 0);
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_draws_the_same_sequence() {
    async fn draws(seed: u64) -> Vec<String> {
        let a = arc(ScriptedModel::new("a"));
        let b = arc(ScriptedModel::new("b"));
        let chain = chain_of(&[&a, &b])
            .strategy(Strategy::weighted([("a", 1), ("b", 1)]))
            .seed(seed)
            .build()
            .unwrap();
        let mut out = Vec::new();
        for _ in 0..64 {
            let r = chat_ok(&chain, &ask()).await;
            out.push(r.served_by().to_owned());
        }
        out
    }
    let first = draws(7).await;
    assert_eq!(first, draws(7).await);
    assert!(first.iter().any(|s| s == "a") && first.iter().any(|s| s == "b"));
}

#[tokio::test(start_paused = true)]
async fn after_the_weighted_pick_fails_the_rest_follow_in_configured_order() {
    let a = arc(ScriptedModel::new("a").fail(ErrorKind::ServerError));
    let b = arc(ScriptedModel::new("b").fail(ErrorKind::ServerError));
    let c = arc(ScriptedModel::new("c").fail(ErrorKind::Overloaded));
    let chain = chain_of(&[&a, &b, &c])
        .strategy(Strategy::weighted([("c", 5)]))
        .static_reply("unavailable")
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(attempted(&r.provenance), ["c", "a", "b"]);
}

#[test]
fn weighted_shares_are_validated() {
    let a = arc(ScriptedModel::new("a"));
    let err = chain_of(&[&a])
        .strategy(Strategy::weighted([("nope", 1)]))
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::UnknownWeightTarget("nope".into()));
    assert!(err.to_string().contains("\"nope\""), "{err}");
    let err = chain_of(&[&a])
        .strategy(Strategy::weighted([("a", 0)]))
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::ZeroWeights);
}

#[test]
fn strategies_have_config_names() {
    assert_eq!(Strategy::Ordered.name(), "ordered");
    assert_eq!(
        Strategy::LowestLatency { min_samples: 3 }.name(),
        "lowest_latency"
    );
    assert_eq!(Strategy::LowestCost.name(), "lowest_cost");
    assert_eq!(Strategy::weighted([("a", 1)]).name(), "weighted");
}

// ---- vendor independence --------------------------------------------------------------------

fn at(name: &str, locality: Locality) -> ScriptedModel {
    ScriptedModel::new(name).with_caps(Capabilities::new(128_000, 4_096).with_locality(locality))
}

#[tokio::test(start_paused = true)]
async fn independent_fallbacks_prefer_another_vendor_after_a_failure() {
    let o1 = arc(at("o1", Locality::cloud_in("openai", "us")).fail(ErrorKind::ServerError));
    let o2 = arc(at("o2", Locality::cloud_in("openai", "eu")).reply("from o2"));
    let an = arc(at("an", Locality::cloud("anthropic")).fail(ErrorKind::Overloaded));
    let local = arc(at("local", Locality::Local).reply("from local"));

    // Without the rule: the next link in order, same vendor.
    let plain = chain_of(&[&o1, &o2, &an, &local]).build().unwrap();
    let r = chat_ok(&plain, &ask()).await;
    assert_eq!(attempted(&r.provenance), ["o1", "o2"]);

    // With it: o1 (openai) fails -> anthropic; anthropic fails -> local, the only domain where
    // nothing failed yet, before o2.
    let r = independent(&[&o1, &o2, &an, &local]).await;
    assert_eq!(attempted(&r.provenance), ["o1", "an", "local"]);

    // No fresh domain left: anything but the vendor that just failed (o2, not anthropic's twin).
    let an2 = arc(at("an2", Locality::cloud("anthropic")).reply("from an2"));
    let r = independent(&[&o1, &an, &an2, &o2]).await;
    assert_eq!(attempted(&r.provenance), ["o1", "an", "o2"]);
    assert_eq!(an2.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn independent_fallbacks_treat_local_models_as_their_own_domain() {
    let o1 = arc(at("o1", Locality::cloud("openai")).fail(ErrorKind::Overloaded));
    let o2 = arc(at("o2", Locality::cloud("OpenAI")).reply("from o2"));
    let local = arc(at("local", Locality::Local).reply("from local"));
    let r = independent(&[&o1, &o2, &local]).await;
    assert_eq!(r.served_by(), "local");
    assert_eq!(o2.calls(), 0, "vendor names compare case-insensitively");
}

#[tokio::test(start_paused = true)]
async fn independent_fallbacks_use_the_same_vendor_when_no_other_is_left() {
    let o1 = arc(at("o1", Locality::cloud("openai")).fail(ErrorKind::Overloaded));
    let o2 = arc(at("o2", Locality::cloud("openai")).reply("from o2"));
    let r = independent(&[&o1, &o2]).await;
    assert_eq!(attempted(&r.provenance), ["o1", "o2"]);
}

#[tokio::test(start_paused = true)]
async fn independent_fallbacks_pass_over_a_skipped_link_to_the_next_other_vendor() {
    let o1 = arc(at("o1", Locality::cloud("openai")).fail(ErrorKind::Overloaded));
    let o2 = arc(at("o2", Locality::cloud("openai")).reply("from o2"));
    // Another vendor, but it cannot take a LocalOnly request; local can.
    let an = arc(at("an", Locality::cloud("anthropic")).reply("from an"));
    let local_a = arc(at("local_a", Locality::Local).fail(ErrorKind::ServerError));
    let local_b = arc(at("local_b", Locality::Local).reply("from local_b"));
    let chain = chain_of(&[&local_a, &local_b, &o1, &o2, &an])
        .prefer_independent_fallbacks(true)
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    // local_a fails -> o1, the first link outside local; it fails -> anthropic, the first link
    // in a domain where nothing failed (local_b is local, o2 openai).
    assert_eq!(attempted(&r.provenance), ["local_a", "o1", "an"]);
    let ctx = Context::new().with_locality(ripcord_core::LocalityRequirement::LocalOnly);
    let r = chain.chat(&ask(), &ctx).await.unwrap();
    // Every other domain is skipped for locality: local_b still serves.
    assert_eq!(attempted(&r.provenance), ["local_a", "local_b"]);
    assert_eq!(r.provenance.skipped.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn routes_win_over_vendor_independence() {
    let o1 = arc(at("o1", Locality::cloud("openai")).fail(ErrorKind::QuotaExhausted));
    let an = arc(at("an", Locality::cloud("anthropic")).reply("from an"));
    let o2 = arc(at("o2", Locality::cloud("openai")).reply("from o2"));
    let chain = chain_of(&[&o1, &an, &o2])
        .prefer_independent_fallbacks(true)
        .route(ErrorKind::QuotaExhausted, "o2")
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(r.served_by(), "o2");
    assert_eq!(an.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn routes_win_over_a_computed_order() {
    let a = arc(ScriptedModel::new("a").fail(ErrorKind::Auth));
    let b = arc(ScriptedModel::new("b").reply("from b"));
    let c = arc(ScriptedModel::new("c").reply("from c"));
    let chain = chain_of(&[&b, &c, &a])
        .strategy(Strategy::weighted([("a", 1)]))
        .route(ErrorKind::Auth, "c")
        .build()
        .unwrap();
    let r = chat_ok(&chain, &ask()).await;
    assert_eq!(attempted(&r.provenance), ["a", "c"]);
    assert!(r.degraded());
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_computed_order_keeps_the_deadline() {
    let a = arc(ScriptedModel::new("a").hang());
    let b = arc(ScriptedModel::new("b").hang());
    let chain = chain_of(&[&a, &b])
        .strategy(Strategy::weighted([("b", 1)]))
        .deadline(ms(200))
        .static_reply("unavailable")
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let r = chat_ok(&chain, &ask()).await;
    assert!(r.provenance.static_reply);
    assert_eq!(started.elapsed(), ms(200));
    assert_eq!(b.calls(), 1);
    assert_eq!(a.calls(), 0, "the deadline ran out on the first pick");
}
