//! Streaming with fallback: the primary's stream is cut before its first word, so the chain
//! falls over to the backup and the caller sees only the backup's answer — one model's words,
//! never two models' halves spliced together.
//!
//! Run: `cargo run -p ripcord-providers --example streaming_fallback`
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports on the terminal"
)]

use std::io::Write as _;

use futures::StreamExt;
use ripcord_chaos::{Behavior, FakeVendor, Script, Wire};
use ripcord_core::{Chain, ChatModel, ChatRequest, Context, StreamEvent, stream};
use ripcord_providers::{Anthropic, AnthropicConfig, OpenAi, OpenAiConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let primary_fake = FakeVendor::start(Wire::OpenAi).await?;
    // The connection drops after the headers, before any content event.
    primary_fake.set_script(Script::Always(Behavior::ResetBeforeResponse));
    let backup_fake = FakeVendor::start(Wire::Anthropic).await?;

    let chain = Chain::builder()
        .link(
            OpenAi::new(
                OpenAiConfig::new("gpt-4o", "sk-example")
                    .with_base_url(format!("{}/v1", primary_fake.base_url())),
            )?
            .named("primary"),
        )
        .link(
            Anthropic::new(
                AnthropicConfig::new("claude-sonnet-4-5", "sk-ant-example")
                    .with_base_url(backup_fake.base_url()),
            )?
            .named("backup"),
        )
        .build()?;

    // The watch keeps the stream's last provenance: where the answer came from, in one call.
    let (mut events, watch) = stream::watch_provenance(
        chain
            .stream(&ChatRequest::user("Tell me a joke."), &Context::default())
            .await?,
    );
    let mut text = String::new();
    while let Some(event) = events.next().await {
        if let StreamEvent::TextDelta { text: piece } = event? {
            print!("{piece}");
            std::io::stdout().flush()?;
            text.push_str(&piece);
        }
    }
    let served_by = watch.get().map(|p| p.served_by().to_owned());
    println!("\n[served by {}]", served_by.as_deref().unwrap_or("?"));
    if served_by.as_deref() != Some("backup") || text.is_empty() {
        return Err("expected the backup's whole answer".into());
    }
    Ok(())
}
