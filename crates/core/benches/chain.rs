//! The chain's own cost per call, with instant in-memory models, next to a direct call.
//!
//! `cargo bench -p ripcord-core` prints ns per call for: a direct call of the model, success on
//! the first link, one fallback, skipping a link that refuses at once (an open breaker), and a
//! 5-deep chain whose first four links fail.

#![allow(clippy::expect_used)] // a benchmark binary: failing to build its fixtures should abort it

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use ripcord_core::testing::FnModel;
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, ChatResponse, Context, Error, ErrorKind, ModelId,
    Usage,
};

/// An instant model: answers, or fails with a fixed kind.
fn model(name: &str, fail: Option<ErrorKind>) -> Arc<dyn ChatModel> {
    Arc::new(FnModel::new(
        ModelId::new(name, "m"),
        Capabilities::new(128_000, 4096),
        move |_: &ChatRequest, _: &Context| match fail {
            None => Ok(ChatResponse::new("ok").with_usage(Usage::new(10, 1))),
            Some(kind) => Err(Error::new(kind, "instant failure")),
        },
    ))
}

fn chain(links: Vec<Arc<dyn ChatModel>>) -> Chain {
    links
        .into_iter()
        .fold(Chain::builder(), |b, l| b.link_arc(l))
        .static_reply("unavailable")
        .build()
        .expect("valid chain")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let req = ChatRequest::user("Why is the sky blue?");
    let ctx = Context::new();
    let direct = model("a", None);
    let success = chain(vec![model("a", None), model("b", None), model("c", None)]);
    let fallback = chain(vec![
        model("a", Some(ErrorKind::Overloaded)),
        model("b", None),
    ]);
    let skip = chain(vec![
        model("a", Some(ErrorKind::CircuitOpen)),
        model("b", None),
    ]);
    let deep = chain(vec![
        model("a", Some(ErrorKind::Overloaded)),
        model("b", Some(ErrorKind::ServerError)),
        model("c", Some(ErrorKind::Auth)),
        model("d", Some(ErrorKind::QuotaExhausted)),
        model("e", None),
    ]);

    let mut g = c.benchmark_group("chain");
    g.bench_function("direct call", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(direct.chat(&req, &ctx).await) })
    });
    for (name, chain) in [
        ("success on link 1", &success),
        ("one fallback", &fallback),
        ("skip open link", &skip),
        ("5-deep, served by link 5", &deep),
    ] {
        g.bench_function(name, |b| {
            b.to_async(&rt)
                .iter(|| async { black_box(chain.chat(&req, &ctx).await) })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
