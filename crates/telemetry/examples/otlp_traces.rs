//! Traces and metrics to an OTLP receiver: a chain whose primary fails, so the trace shows one
//! `chain` span with a failed `chat` attempt, a `ripcord.fallback` event and the backup's
//! successful attempt — viewable in Jaeger or any OpenTelemetry Collector.
//!
//! `OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
//!  cargo run -p ripcord-telemetry --example otlp_traces` (`cargo xtask test` runs it against its
//! own loopback receiver through `RIPCORD_OTLP_GRPC_ENDPOINT`). The example fails when an export
//! fails, so a wrong endpoint is seen, not silent.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports on the terminal"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{Chain, ChatModel, ChatRequest, Context, ErrorKind};
use ripcord_telemetry::Protocol;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let failed = Arc::new(AtomicBool::new(false));
    let seen = failed.clone();
    let mut telemetry = ripcord_telemetry::init().service_name("otlp-example");
    // The xtask's receiver; otherwise the standard OTEL_* variables apply.
    if let Ok(endpoint) = std::env::var("RIPCORD_OTLP_GRPC_ENDPOINT") {
        telemetry = telemetry.endpoint(endpoint).protocol(Protocol::Grpc);
    }
    let guard = telemetry
        .on_export_failure(move |f| {
            eprintln!(
                "export of {} to {} failed: {}",
                f.signal, f.endpoint, f.error
            );
            seen.store(true, Ordering::Relaxed);
        })
        .install()?;

    let chain = Chain::builder()
        .name("support-bot")
        .link(ScriptedModel::new("primary").fail(ErrorKind::Overloaded))
        .link(ScriptedModel::new("backup").reply("Hello from the backup."))
        .build()?;
    let reply = chain
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await?;
    println!("{} [served by {}]", reply.text(), reply.served_by());

    guard.shutdown()?; // flushes both signals before returning
    if failed.load(Ordering::Relaxed) {
        return Err("an export failed (see above)".into());
    }
    println!("trace and metrics exported");
    Ok(())
}
