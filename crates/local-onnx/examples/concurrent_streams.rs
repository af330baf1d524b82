//! Aggregate decode tokens/s and median inter-token latency of N concurrent greedy streams on
//! SmolLM2, with and without batching (the method of `ripcord-bench`'s concurrent-stream rows,
//! without the llama-server side):
//!
//! `cargo run --release -p ripcord-local-onnx --example concurrent_streams -- [FILE] [THREADS] [TOKENS]`
#![allow(clippy::unwrap_used, clippy::print_stdout)] // a measuring tool: it prints and fails loudly

use std::time::Instant;

use futures::StreamExt;
use futures::future::join_all;
use ripcord_core::{ChatModel, ChatRequest, Context, StreamEvent};
use ripcord_local_onnx::{LocalLlama, default_model_dir};

const PROMPT: &str = "Count from 1 to 300 in words, one number per line, and do not stop early.";

async fn measure(file: &str, threads: usize, n: usize, batch: bool, tokens: u32) -> (f64, f64) {
    let mut b = LocalLlama::builder(default_model_dir())
        .model_file(file)
        .threads(threads)
        .stream_buffer(4096);
    b = if batch {
        b.max_batch(n)
    } else {
        b.max_sessions(n)
    };
    let model = b.build().unwrap();
    let warm = ChatRequest::user(PROMPT).with_max_tokens(4);
    let ctx = Context::new();
    join_all((0..n).map(|_| model.chat(&warm, &ctx))).await;
    let req = ChatRequest::user(PROMPT).with_max_tokens(tokens);
    let streams = join_all((0..n).map(|_| async {
        let mut s = model.stream(&req, &Context::new()).await.unwrap();
        let mut at = Vec::new();
        while let Some(ev) = s.next().await {
            if let StreamEvent::TextDelta { .. } = ev.unwrap() {
                at.push(Instant::now());
            }
        }
        at
    }))
    .await;
    let first = streams.iter().filter_map(|s| s.first()).min().unwrap();
    let last = streams.iter().filter_map(|s| s.last()).max().unwrap();
    let passes: usize = streams.iter().map(|s| s.len().saturating_sub(1)).sum();
    let mut gaps: Vec<f64> = streams
        .iter()
        .flat_map(|s| s.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1000.0))
        .collect();
    gaps.sort_by(f64::total_cmp);
    let rate = passes as f64 / (*last - *first).as_secs_f64();
    (rate, gaps[gaps.len() / 2])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = args.first().map_or("model.q4.onnx", String::as_str);
    let threads: usize = args.get(1).map_or(2, |a| a.parse().unwrap());
    let tokens: u32 = args.get(2).map_or(64, |a| a.parse().unwrap());
    println!("{file}, {threads} thread(s), {tokens} tokens per stream");
    println!(
        "{:>7} {:>28} {:>28}",
        "streams", "batched tok/s (p50 ms)", "sessions tok/s (p50 ms)"
    );
    for n in [1usize, 4, 8] {
        let (br, bl) = measure(file, threads, n, true, tokens).await;
        let (sr, sl) = measure(file, threads, n, false, tokens).await;
        println!("{n:>7} {br:>18.1} ({bl:>6.2}) {sr:>18.1} ({sl:>6.2})");
    }
}
