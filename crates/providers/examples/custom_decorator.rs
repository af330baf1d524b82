//! Your own decorator: a wrapper that counts calls and prints each one's latency, written once
//! and placed anywhere in a link's stack beside ripcord's own policies.
//!
//! A `Decorator` names its inner model and overrides only what it changes; every other
//! `ChatModel` method (`id`, `capabilities`, `refusal`, …) forwards to the inner model.
//!
//! Run: `cargo run -p ripcord-providers --example custom_decorator`
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports on the terminal"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ripcord_chaos::{FakeVendor, Wire};
use ripcord_core::{ChatModel, ChatRequest, ChatResponse, Context, Result, async_trait};
use ripcord_providers::{OpenAi, OpenAiConfig};
use ripcord_resilience::{ChatModelExt, RetryPolicy};

/// Counts the calls that pass through it and prints how long each took.
#[derive(Debug)]
struct Timed<M> {
    inner: M,
    calls: Arc<AtomicU64>,
}

// Implemented by path: with both `Decorator` and `ChatModel` imported, calling `.chat()` on a
// concrete decorator would name two methods.
#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Timed<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let started = Instant::now();
        let result = self.inner.chat(req, ctx).await;
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let outcome = match &result {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.kind().to_string(),
        };
        println!("call {n}: {outcome} in {:?}", started.elapsed());
        result
    }
}

#[tokio::main]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let fake = FakeVendor::start(Wire::OpenAi).await?;
    let calls = Arc::new(AtomicU64::new(0));
    let vendor = OpenAi::new(
        OpenAiConfig::new("gpt-4o", "sk-example").with_base_url(format!("{}/v1", fake.base_url())),
    )?;
    // Inside retry, so every attempt is timed; put it outside to time whole calls.
    let model = Timed {
        inner: vendor,
        calls: calls.clone(),
    }
    .with_retry(RetryPolicy::default());

    for question in ["Why is the sky blue?", "And the sea?"] {
        let reply = model
            .chat(&ChatRequest::user(question), &Context::default())
            .await?;
        println!("  {}", reply.text());
    }
    if calls.load(Ordering::Relaxed) != 2 || fake.hits() != 2 {
        return Err("expected two timed calls".into());
    }
    Ok(())
}
