//! Helpers the chain tests share: one question, links behind `Arc`s, and a request on a fresh
//! context that must succeed.
// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // test helpers fail the test by panicking

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{Chain, ChatModel, ChatRequest, ChatResponse, Context, stream};

pub(crate) fn ask() -> ChatRequest {
    ChatRequest::user("Why is the sky blue?")
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn arc(m: ScriptedModel) -> Arc<ScriptedModel> {
    Arc::new(m)
}

/// A chain builder over `links`, in order.
pub(crate) fn chain_of(links: &[&Arc<ScriptedModel>]) -> ripcord_core::ChainBuilder {
    let mut b = Chain::builder();
    for l in links {
        b = b.link_arc(Arc::clone(l) as Arc<dyn ChatModel>);
    }
    b
}

/// The answer `m` gives `req` on a fresh context.
pub(crate) async fn chat_ok(m: &impl ChatModel, req: &ChatRequest) -> ChatResponse {
    m.chat(req, &Context::new()).await.unwrap()
}

/// The answer `m` streams for `req` on a fresh context, collected.
pub(crate) async fn collect_ok(m: &impl ChatModel, req: &ChatRequest) -> ChatResponse {
    stream::collect(m.stream(req, &Context::new()).await.unwrap())
        .await
        .unwrap()
}
