//! The local model row: SmolLM2-135M-Instruct through `LocalLlama` (ONNX Runtime), prefill and
//! decode tokens per second and peak RSS — the method of `crates/local-onnx/benches/tokens.rs`.
//!
//! Each variant runs in its own child process (`ripcord-bench --role local`), so its peak RSS
//! is that model's alone and the HTTP rows' numbers are not disturbed by ONNX Runtime's threads.
//!
//! - prefill: a prompt of at least 128 tokens (chat template included) answered with
//!   `max_tokens = 1`, end to end through the public API; best of 3.
//! - decode: the tokens after the first of a streamed answer, over the time from the first
//!   text delta to the finish event.

use std::process::Command;
use std::time::Instant;

use futures::StreamExt;
use ripcord_core::{ChatModel, ChatRequest, Context, StreamEvent};
use ripcord_local_onnx::{LocalLlama, default_model_dir};
use serde::{Deserialize, Serialize};

/// One variant's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LocalResult {
    /// The model file.
    pub(crate) file: String,
    /// ONNX Runtime intra-op threads.
    pub(crate) threads: usize,
    /// Load time (session creation), seconds.
    pub(crate) load_s: f64,
    /// Prompt tokens prefilled.
    pub(crate) prefill_tokens: u64,
    /// Prefill tokens per second (best of 3).
    pub(crate) prefill_tok_s: f64,
    /// Tokens decoded after the first.
    pub(crate) decode_tokens: u64,
    /// Decode tokens per second.
    pub(crate) decode_tok_s: f64,
    /// Peak resident set, MiB.
    pub(crate) peak_rss_mb: f64,
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A user message whose rendered prompt (template included) has at least `target` tokens.
async fn prompt_of(model: &LocalLlama, target: usize) -> Result<ChatRequest, String> {
    let base = "Count from 1 to 300 in words, one number per line, and do not stop early.";
    let filler = " The quick brown fox jumps over the lazy dog near the river bank.";
    let probe = model
        .chat(&ChatRequest::user(base).with_max_tokens(1), &Context::new())
        .await
        .map_err(|e| format!("local: probe: {e}"))?;
    let base_tokens = model.count_tokens(base).await.map_err(|e| e.to_string())?;
    let overhead = usize::try_from(probe.usage.input_tokens)
        .unwrap_or(0)
        .saturating_sub(base_tokens);
    let mut text = base.to_owned();
    while model.count_tokens(&text).await.map_err(|e| e.to_string())? + overhead < target {
        text.push_str(filler);
    }
    Ok(ChatRequest::user(text))
}

async fn run(file: &str, threads: usize, decode: u32) -> Result<LocalResult, String> {
    let t0 = Instant::now();
    let model = LocalLlama::builder(default_model_dir())
        .model_file(file)
        .threads(threads)
        .build()
        .map_err(|e| format!("local: load {file}: {e}"))?;
    let load_s = t0.elapsed().as_secs_f64();
    let req = prompt_of(&model, 128).await?;
    let mut best = f64::MAX;
    let mut prompt_tokens = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let r = model
            .chat(&req.clone().with_max_tokens(1), &Context::new())
            .await
            .map_err(|e| format!("local: prefill: {e}"))?;
        best = best.min(t.elapsed().as_secs_f64());
        prompt_tokens = r.usage.input_tokens;
    }
    let mut s = model
        .stream(&req.clone().with_max_tokens(decode + 1), &Context::new())
        .await
        .map_err(|e| format!("local: decode: {e}"))?;
    let (mut first, mut end, mut output) = (None, None, 0u64);
    while let Some(ev) = s.next().await {
        match ev.map_err(|e| format!("local: decode: {e}"))? {
            StreamEvent::TextDelta { .. } if first.is_none() => first = Some(Instant::now()),
            StreamEvent::Usage { usage } => output = usage.output_tokens,
            StreamEvent::Finish { .. } => end = Some(Instant::now()),
            _ => {}
        }
    }
    let (Some(first), Some(end)) = (first, end) else {
        return Err("local: the answer had no text or no finish".into());
    };
    let decoded = output.saturating_sub(1);
    Ok(LocalResult {
        file: file.to_owned(),
        threads,
        load_s,
        prefill_tokens: prompt_tokens,
        prefill_tok_s: prompt_tokens as f64 / best,
        decode_tokens: decoded,
        decode_tok_s: decoded as f64 / (end - first).as_secs_f64().max(1e-9),
        peak_rss_mb: peak_rss_mb(),
    })
}

/// The child's main: measure one variant, print it as one JSON line.
pub(crate) fn child_main(file: &str, threads: usize, decode: u32) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("local: runtime: {e}"))?;
    let r = rt.block_on(run(file, threads, decode))?;
    serde_json::to_string(&r).map_err(|e| e.to_string())
}

/// Why the local row cannot run, if it cannot.
pub(crate) fn missing(file: &str) -> Option<String> {
    let path = default_model_dir().join(file);
    (!path.is_file()).then(|| {
        format!(
            "{} is missing: run `cargo xtask setup-model`",
            path.display()
        )
    })
}

/// Runs one variant in a child process.
pub(crate) fn measure(file: &str, threads: usize, decode: u32) -> Result<LocalResult, String> {
    if let Some(why) = missing(file) {
        return Err(why);
    }
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let out = Command::new(exe)
        .args(["--role", "local", "--model-file", file])
        .args([
            "--threads",
            &threads.to_string(),
            "--decode",
            &decode.to_string(),
        ])
        .output()
        .map_err(|e| format!("local: cannot start the child: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "local {file}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<LocalResult>(l).ok())
        .ok_or_else(|| format!("local {file}: the child printed no result"))
}
