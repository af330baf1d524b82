//! Prefill and decode tokens/s and peak RSS of `LocalLlama` on SmolLM2-135M, every shipped
//! variant (fp32, q8, q4), next to ONNX Runtime's own Python API on the same model file and
//! thread count.
//!
//! `cargo bench -p ripcord-local-onnx --bench tokens` (after `cargo xtask setup-model`).
//! Every measurement runs in its own process, so each peak RSS is that model's alone:
//! this binary re-runs itself once per variant, and runs the converter script's `bench`
//! subcommand with the venv's Python for the reference.
//!
//! - prefill tok/s: a prompt of P tokens (the chat template included) answered with
//!   `max_tokens = 1`, end to end through the public streaming API (template, tokenizer,
//!   ONNX Runtime, sampling); best of 3. The Python reference runs one forward pass of the
//!   same number of tokens.
//! - decode tok/s: the forward passes after the first token of a greedy answer (the one that
//!   produced an end-of-sequence token included), divided by the time from the first text
//!   delta to the finish event. The Python reference feeds its own argmax back,
//!   one token per `session.run`, with the KV cache.
//!
//! Environment: `RIPCORD_BENCH_THREADS` (default 1), `RIPCORD_BENCH_DECODE` (default 64).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use futures::StreamExt;
use ripcord_core::{ChatModel, ChatRequest, Context, FinishReason, StreamEvent};
use ripcord_local_onnx::{LocalLlama, Variant, default_cache_dir, default_model_dir};
use serde_json::{Value, json};

const CHILD: &str = "RIPCORD_BENCH_CHILD";
const VARIANTS: [&str; 3] = [
    Variant::Fp32.file_name(),
    Variant::Q8.file_name(),
    Variant::Q4.file_name(),
];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A user message whose rendered prompt (template included) is at least `target` tokens.
async fn prompt_of(model: &LocalLlama, target: usize) -> ChatRequest {
    let base = "Count from 1 to 300 in words, one number per line, and do not stop early.";
    let filler = " The quick brown fox jumps over the lazy dog near the river bank.";
    // What the template adds around the user's text.
    let probe = model
        .chat(&ChatRequest::user(base).with_max_tokens(1), &Context::new())
        .await
        .unwrap();
    let overhead = probe.usage.input_tokens as usize - model.count_tokens(base).await.unwrap();
    let mut text = base.to_owned();
    while model.count_tokens(&text).await.unwrap() + overhead < target {
        text.push_str(filler);
    }
    ChatRequest::user(text)
}

async fn child(file: &str) -> Value {
    let threads = env_usize("RIPCORD_BENCH_THREADS", 1);
    let decode = env_usize("RIPCORD_BENCH_DECODE", 64);
    let t0 = Instant::now();
    let model = LocalLlama::builder(default_model_dir())
        .model_file(file)
        .threads(threads)
        .build()
        .expect("load");
    let load_s = t0.elapsed().as_secs_f64();
    let req = prompt_of(&model, 128).await;

    let mut prefill_best = f64::MAX;
    let mut prompt_tokens = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let r = model
            .chat(&req.clone().with_max_tokens(1), &Context::new())
            .await
            .unwrap();
        prefill_best = prefill_best.min(t.elapsed().as_secs_f64());
        prompt_tokens = r.usage.input_tokens as usize;
    }

    let mut s = model
        .stream(
            &req.clone().with_max_tokens(decode as u32 + 1),
            &Context::new(),
        )
        .await
        .unwrap();
    let mut first = None;
    let mut output_tokens = 0;
    let mut end = Instant::now();
    let mut at_eos = false;
    while let Some(ev) = s.next().await {
        match ev.unwrap() {
            StreamEvent::TextDelta { .. } if first.is_none() => first = Some(Instant::now()),
            StreamEvent::Usage { usage } => output_tokens = usage.output_tokens as usize,
            StreamEvent::Finish { reason, .. } => {
                end = Instant::now();
                // No stop sequences are set: `Stop` means the end-of-sequence token, whose
                // forward pass is inside the window too.
                at_eos = reason == FinishReason::Stop;
            }
            _ => {}
        }
    }
    let decode_s = (end - first.expect("no text")).as_secs_f64();
    let passes = output_tokens.saturating_sub(1) + usize::from(at_eos && output_tokens > 0);
    json!({
        "runtime": "ripcord (Rust, ort)",
        "threads": threads,
        "load_s": load_s,
        "prefill_tokens": prompt_tokens,
        "prefill_tok_s": prompt_tokens as f64 / prefill_best,
        "decode_tokens": passes,
        "decode_tok_s": passes as f64 / decode_s,
        "peak_rss_mb": peak_rss_mb(),
    })
}

fn last_json_line(out: &[u8]) -> Option<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
}

fn run_child(file: &str) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .env(CHILD, file)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("{file}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    last_json_line(&out.stdout).ok_or_else(|| format!("{file}: no result"))
}

fn run_python(py: &Path, script: &Path, model: &Path, prompt_tokens: u64) -> Result<Value, String> {
    let threads = env_usize("RIPCORD_BENCH_THREADS", 1).to_string();
    let decode = env_usize("RIPCORD_BENCH_DECODE", 64).to_string();
    let out = Command::new(py)
        .arg(script)
        .args(["bench", "--model"])
        .arg(model)
        .args([
            "--threads",
            &threads,
            "--prompt-tokens",
            &prompt_tokens.to_string(),
            "--decode-tokens",
            &decode,
        ])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    last_json_line(&out.stdout).ok_or_else(|| "python bench printed no result".to_owned())
}

fn main() -> ExitCode {
    if let Ok(file) = std::env::var(CHILD) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        println!("{}", rt.block_on(child(&file)));
        return ExitCode::SUCCESS;
    }
    let dir = default_model_dir();
    let py: PathBuf = default_cache_dir().join("venv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("model/ripcord_model.py");
    if !VARIANTS.iter().all(|f| dir.join(f).is_file()) || !py.is_file() {
        eprintln!(
            "SKIPPED: {} or {} is missing: run `cargo xtask setup-model`",
            dir.display(),
            py.display()
        );
        return if std::env::var_os("CI").is_some() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    println!(
        "SmolLM2-135M-Instruct, {} intra-op thread(s), {} decode tokens; each row is its own process",
        env_usize("RIPCORD_BENCH_THREADS", 1),
        env_usize("RIPCORD_BENCH_DECODE", 64)
    );
    println!(
        "{:<16} {:<22} {:>7} {:>8} {:>14} {:>13} {:>13}",
        "model", "runtime", "load s", "prompt", "prefill tok/s", "decode tok/s", "peak RSS MB"
    );
    let mut failed = false;
    for file in VARIANTS {
        let rust = match run_child(file) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("{e}");
                failed = true;
                continue;
            }
        };
        let prompt = rust["prefill_tokens"].as_u64().unwrap_or(128);
        let rows = [Ok(rust), run_python(&py, &script, &dir.join(file), prompt)];
        for row in rows {
            match row {
                Ok(v) => println!(
                    "{:<16} {:<22} {:>7.2} {:>8} {:>14.1} {:>13.1} {:>13.0}",
                    file,
                    v["runtime"].as_str().unwrap_or("?"),
                    v["load_s"].as_f64().unwrap_or(0.0),
                    v["prefill_tokens"].as_u64().unwrap_or(0),
                    v["prefill_tok_s"].as_f64().unwrap_or(0.0),
                    v["decode_tok_s"].as_f64().unwrap_or(0.0),
                    v["peak_rss_mb"].as_f64().unwrap_or(0.0),
                ),
                Err(e) => {
                    eprintln!("{file}: {e}");
                    failed = true;
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
