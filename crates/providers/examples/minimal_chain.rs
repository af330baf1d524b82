//! A minimal chain: OpenAI, then Anthropic, then an honest static reply — each vendor link
//! with retry and a circuit breaker, and one deadline for the whole call.
//!
//! The vendors here are ripcord-chaos fakes on loopback (no key, no network): OpenAI answers
//! every call with 503, Anthropic answers. Point the configs at the real vendors instead with
//! `OpenAiConfig::from_env("gpt-4o")` / `AnthropicConfig::from_env(…)` and the code is unchanged.
//!
//! Run: `cargo run -p ripcord-providers --example minimal_chain`
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports on the terminal"
)]

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_core::{Chain, ChatModel, ChatRequest, Context};
use ripcord_providers::{Anthropic, AnthropicConfig, OpenAi, OpenAiConfig};
use ripcord_resilience::{BreakerPolicy, ChatModelExt, RetryPolicy};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let openai_fake = FakeVendor::start(Wire::OpenAi).await?;
    openai_fake.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let anthropic_fake = FakeVendor::start(Wire::Anthropic).await?;

    // OpenAI's base URL ends in `/v1`; Anthropic's is the host alone.
    let openai = OpenAi::new(
        OpenAiConfig::new("gpt-4o", "sk-example")
            .with_base_url(format!("{}/v1", openai_fake.base_url())),
    )?;
    let claude = Anthropic::new(
        AnthropicConfig::new("claude-sonnet-4-5", "sk-ant-example")
            .with_base_url(anthropic_fake.base_url()),
    )?;

    let retry = RetryPolicy::builder().max_attempts(2).build()?;
    let breaker = BreakerPolicy::builder().consecutive_failures(3).build()?;
    let chain = Chain::builder()
        .link(
            openai
                .named("primary")
                .with_retry(retry.clone())
                .with_breaker(breaker.clone()),
        )
        .link(
            claude
                .named("backup")
                .with_retry(retry)
                .with_breaker(breaker),
        )
        .static_reply("The assistant is busy right now; please try again in a few minutes.")
        .deadline(Duration::from_secs(15))
        .build()?;

    let reply = chain
        .chat(
            &ChatRequest::user("Why is the sky blue?"),
            &Context::default(),
        )
        .await?;
    println!(
        "{}\n[served by {}, degraded: {}, attempts: {}]",
        reply.text(),
        reply.served_by(),
        reply.degraded(),
        reply.provenance.attempts.len()
    );
    if reply.served_by() != "backup" || !reply.degraded() {
        return Err(format!("expected the backup to answer, got {}", reply.served_by()).into());
    }
    Ok(())
}
