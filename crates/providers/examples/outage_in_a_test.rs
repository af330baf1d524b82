//! A scripted vendor outage inside your own test: the shape to copy into a `#[tokio::test]` of
//! your application. The primary answers, then returns 503 for a stretch (an outage), then
//! recovers; the test checks what your chain did — every call answered, the breaker stopped
//! calling the primary during the outage, and traffic went back to it afterwards.
//!
//! Run: `cargo run -p ripcord-providers --example outage_in_a_test`
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports on the terminal"
)]

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_core::{Chain, ChatModel, ChatRequest, Context};
use ripcord_providers::{OpenAi, OpenAiConfig};
use ripcord_resilience::{BreakerPolicy, ChatModelExt};

fn link(fake: &FakeVendor, name: &str) -> Result<OpenAi, ripcord_core::Error> {
    Ok(OpenAi::new(
        OpenAiConfig::new("gpt-4o", "sk-example").with_base_url(format!("{}/v1", fake.base_url())),
    )?
    .named(name))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let primary = FakeVendor::start(Wire::OpenAi).await?;
    let backup = FakeVendor::start(Wire::OpenAi).await?;
    // Two good answers, then the outage: 503 for every request until the script is replaced.
    let mut script = vec![Behavior::Ok, Behavior::Ok];
    script.push(Behavior::Error(VendorError::Overloaded));
    primary.set_script(Script::Sequence(script));

    let open_for = Duration::from_secs(2);
    let breaker = BreakerPolicy::builder()
        .consecutive_failures(2)
        .open_for(open_for)
        .build()?;
    let chain = Chain::builder()
        .link(link(&primary, "primary")?.with_breaker(breaker))
        .link(link(&backup, "backup")?)
        .build()?;

    let req = ChatRequest::user("hi");
    let mut served = Vec::new();
    for _ in 0..12 {
        served.push(
            chain
                .chat(&req, &Context::new())
                .await?
                .served_by()
                .to_owned(),
        );
    }
    let during = primary.hits();
    // The vendor recovers; once the open spell is over, a probe finds it healthy and traffic
    // returns (polled, since the spell ends in real time).
    primary.set_script(Script::Always(Behavior::Ok));
    let give_up = std::time::Instant::now() + open_for * 3;
    let after = loop {
        let r = chain.chat(&req, &Context::new()).await?;
        if r.served_by() == "primary" || std::time::Instant::now() > give_up {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "served by, in order: {served:?}, then {}",
        after.served_by()
    );
    println!("primary calls during the outage: {during} (12 chat calls)");
    let checks = [
        (
            served[..2].iter().all(|s| s == "primary"),
            "the first two calls were the primary's",
        ),
        (
            served[2..].iter().all(|s| s == "backup"),
            "the outage was served by the backup",
        ),
        (
            during == 4,
            "the breaker stopped calls to the primary after two failures",
        ),
        (
            after.served_by() == "primary",
            "the primary took traffic again after recovering",
        ),
    ];
    for (ok, what) in checks {
        if !ok {
            return Err(format!("failed: {what}").into());
        }
        println!("ok: {what}");
    }
    Ok(())
}
