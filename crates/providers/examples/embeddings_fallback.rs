//! An embeddings fallback: two endpoints of the same embedding model (say, two regions), the
//! first failing — vectors from one model are comparable, so the chain only accepts endpoints
//! of one model.
//!
//! Run: `cargo run -p ripcord-providers --example embeddings_fallback`
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports on the terminal"
)]

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_core::{Context, EmbeddingChain, EmbeddingModel, EmbeddingRequest};
use ripcord_providers::{OpenAi, OpenAiConfig};

const MODEL: &str = "text-embedding-3-small";

fn endpoint(base: &str, name: &str) -> Result<OpenAi, ripcord_core::Error> {
    Ok(
        OpenAi::new(OpenAiConfig::new(MODEL, "sk-example").with_base_url(format!("{base}/v1")))?
            .named(name),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let us = FakeVendor::start(Wire::OpenAi).await?;
    us.set_script(Script::Always(Behavior::Error(VendorError::ServerError)));
    let eu = FakeVendor::start(Wire::OpenAi).await?;

    let chain = EmbeddingChain::builder()
        .link(endpoint(&us.base_url(), "us")?)
        .link(endpoint(&eu.base_url(), "eu")?)
        .build()?;
    let req = EmbeddingRequest::new(vec!["ripcord".to_owned(), "parachute".to_owned()]);
    let resp = chain.embed(&req, &Context::default()).await?;
    println!(
        "{} vectors of {} dimensions from {}",
        resp.vectors.len(),
        resp.vectors.first().map_or(0, Vec::len),
        resp.model
    );
    if resp.vectors.len() != 2 || eu.hits() != 1 {
        return Err("expected both vectors from the second endpoint".into());
    }
    Ok(())
}
