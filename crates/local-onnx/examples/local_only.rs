//! The local model alone: SmolLM2-135M on ONNX Runtime in this process, no network at all,
//! streamed token by token, behind a static reply in case the model files are missing.
//!
//! Prepare the model once (`cargo xtask setup-model`, or `ripcord setup-model`), then run:
//! `cargo run --release -p ripcord-local-onnx --example local_only`
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports on the terminal"
)]

use std::io::Write as _;
use std::time::Duration;

use futures::StreamExt;
use ripcord_core::{Chain, ChatModel, ChatRequest, Context, StreamEvent, stream};
use ripcord_local_onnx::{LocalLlama, default_model_dir};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = default_model_dir();
    let local =
        LocalLlama::load(&dir).map_err(|e| format!("{e} (run `cargo xtask setup-model` first)"))?;
    let chain = Chain::builder()
        .link(local)
        .static_reply("The assistant is unavailable right now.")
        .deadline(Duration::from_secs(60))
        .build()?;

    let req = ChatRequest::user("What is the capital of France? Answer in one word.");
    let (mut events, watch) = stream::watch_provenance(chain.stream(&req, &Context::new()).await?);
    let mut answer = String::new();
    while let Some(event) = events.next().await {
        if let StreamEvent::TextDelta { text } = event? {
            print!("{text}");
            std::io::stdout().flush()?;
            answer.push_str(&text);
        }
    }
    let served_by = watch
        .get()
        .map(|p| p.served_by().to_owned())
        .unwrap_or_default();
    println!("\n[served by {served_by}]");
    if !answer.contains("Paris") {
        return Err(format!("the local model answered {answer:?}").into());
    }
    Ok(())
}
