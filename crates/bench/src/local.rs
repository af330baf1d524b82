//! The local model row: SmolLM2-135M-Instruct through `LocalLlama` (ONNX Runtime), prefill and
//! decode tokens per second and peak RSS — the method of `crates/local-onnx/benches/tokens.rs`.
//!
//! Each variant runs in its own child process (`ripcord-bench --role local`), so its peak RSS
//! is that model's alone and the HTTP rows' numbers are not disturbed by ONNX Runtime's threads.
//!
//! - prefill: a prompt of at least 128 tokens (chat template included) answered with
//!   `max_tokens = 1`, end to end through the public API; best of 3.
//! - decode: the forward passes after the first token of a streamed answer, over the time from
//!   the first text delta to the finish event. An answer that ends at the end-of-sequence token
//!   spent one more pass (the one that produced it) than it shows tokens after the first, so
//!   that pass is counted; dividing only the shown tokens by the window under-reported decode
//!   speed by one token in n.

use std::process::Command;
use std::time::Instant;

use futures::StreamExt;
use ripcord_core::{ChatModel, ChatRequest, Context, FinishReason, StreamEvent};
use ripcord_local_onnx::agreement::{self, Agreement};
use ripcord_local_onnx::{LocalLlama, Variant, default_cache_dir, default_model_dir};

use crate::anchor::{self, LlamaCpp};
use crate::report::{LocalRow, Target};
use crate::streams::{self, StreamsRow};
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
    let (mut first, mut end, mut output, mut finish) = (None, None, 0u64, None);
    while let Some(ev) = s.next().await {
        match ev.map_err(|e| format!("local: decode: {e}"))? {
            StreamEvent::TextDelta { .. } if first.is_none() => first = Some(Instant::now()),
            StreamEvent::Usage { usage } => output = usage.output_tokens,
            StreamEvent::Finish { reason, .. } => {
                end = Some(Instant::now());
                finish = Some(reason);
            }
            _ => {}
        }
    }
    let (Some(first), Some(end), Some(finish)) = (first, end, finish) else {
        return Err("local: the answer had no text or no finish".into());
    };
    let decoded = decode_passes(output, &finish);
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

/// Forward passes between the first token and the finish: one per shown token after the first,
/// plus the pass that produced the end-of-sequence token when the answer stopped there (the
/// bench sets no stop sequences, so `Stop` means end-of-sequence).
fn decode_passes(output_tokens: u64, finish: &FinishReason) -> u64 {
    let after_first = output_tokens.saturating_sub(1);
    match finish {
        FinishReason::Stop if output_tokens > 0 => after_first + 1,
        _ => after_first,
    }
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

/// One variant's greedy agreement with fp32 on SmolLM2 (`--anchors`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AgreementRow {
    /// The model file.
    pub(crate) file: String,
    /// Prompts whose 16 greedy tokens equal fp32's, of 20.
    pub(crate) identical: usize,
    /// Prompts whose first token equals fp32's.
    pub(crate) same_first_token: usize,
    /// Mean common prefix, tokens.
    pub(crate) mean_common_prefix: f64,
    /// The answer to "What is the capital of France?" contains "Paris".
    pub(crate) paris: bool,
}

/// The local section of the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LocalSection {
    /// Interleaved rounds.
    pub(crate) rounds: usize,
    /// Tokens decoded per answer.
    pub(crate) decode_tokens: u32,
    /// Per variant and thread count: the best of the rounds (highest prefill and decode rates,
    /// shortest load, highest peak RSS), or why it did not run.
    pub(crate) rows: Vec<LocalRow>,
    /// Every round's measurement.
    pub(crate) per_round: Vec<LocalResult>,
    /// llama.cpp per thread count (best of the rounds), with `--anchors`.
    pub(crate) llama_cpp: Vec<LlamaCpp>,
    /// The greedy-agreement check, with `--anchors`.
    pub(crate) agreement: Vec<AgreementRow>,
    /// Concurrent streams (ripcord batched vs llama-server), with `--anchors`.
    pub(crate) streams: Vec<StreamsRow>,
    /// Targets.
    pub(crate) targets: Vec<Target>,
    /// Notes (skipped anchors, method).
    pub(crate) notes: Vec<String>,
}

fn best_of(results: &[LocalResult]) -> Option<LocalResult> {
    let mut best = results.first()?.clone();
    for r in &results[1..] {
        best.prefill_tok_s = best.prefill_tok_s.max(r.prefill_tok_s);
        best.decode_tok_s = best.decode_tok_s.max(r.decode_tok_s);
        best.load_s = best.load_s.min(r.load_s);
        best.peak_rss_mb = best.peak_rss_mb.max(r.peak_rss_mb);
    }
    Some(best)
}

/// The greedy-agreement check and the Paris check of every quantized variant, in process.
async fn agreement(threads: usize) -> Result<Vec<AgreementRow>, String> {
    let dir = default_model_dir();
    let load = |v: Variant| {
        LocalLlama::builder(&dir)
            .variant(v)
            .threads(threads)
            .build()
            .map_err(|e| format!("agreement: load {}: {e}", v.file_name()))
    };
    let paris = |m: LocalLlama| async move {
        m.chat(
            &ChatRequest::user("What is the capital of France?").with_max_tokens(32),
            &Context::new(),
        )
        .await
        .map(|r| r.text().contains("Paris"))
        .map_err(|e| format!("agreement: Paris check: {e}"))
    };
    let fp32 = load(Variant::Fp32)?;
    let reference = agreement::answers(&fp32)
        .await
        .map_err(|e| format!("agreement: fp32: {e}"))?;
    let mut rows = vec![AgreementRow {
        file: Variant::Fp32.file_name().to_owned(),
        identical: reference.len(),
        same_first_token: reference.len(),
        mean_common_prefix: agreement::TOKENS as f64,
        paris: paris(fp32).await?,
    }];
    for v in Variant::ALL.into_iter().filter(|v| *v != Variant::Fp32) {
        let m = load(v)?;
        let got = agreement::answers(&m)
            .await
            .map_err(|e| format!("agreement: {v}: {e}"))?;
        let a = Agreement::compare(&reference, &got);
        rows.push(AgreementRow {
            file: v.file_name().to_owned(),
            identical: a.identical,
            same_first_token: a.same_first_token,
            mean_common_prefix: a.mean_common_prefix,
            paris: paris(m).await?,
        });
    }
    Ok(rows)
}

/// The local section: every shipped variant at every thread count in interleaved rounds, and
/// with `anchors` llama.cpp in the same rounds plus the agreement check.
pub(crate) fn section(
    quick: bool,
    threads: &[usize],
    extra: &[String],
    anchors: bool,
) -> LocalSection {
    let files: Vec<String> = Variant::ALL
        .iter()
        .map(|v| v.file_name().to_owned())
        .chain(extra.iter().cloned())
        .collect();
    let (rounds, decode) = if quick { (1, 32) } else { (2, 64) };
    let mut notes = vec![format!(
        "each row is the best of {rounds} interleaved round(s) (variants and llama.cpp alternate within a round), each variant in its own process"
    )];
    let cache = default_cache_dir();
    let gguf = cache.join("gguf").join("SmolLM2-135M-Instruct.Q4_1.gguf");
    let llama = if anchors {
        eprintln!("ripcord-bench: building llama.cpp's llama-bench (first run only)");
        match anchor::llama_bench(&cache) {
            Ok(bin) if gguf.is_file() => Some(bin),
            Ok(_) => {
                notes.push(format!(
                    "llama.cpp anchor skipped: {} is missing (run `cargo xtask setup-model`)",
                    gguf.display()
                ));
                None
            }
            Err(e) => {
                notes.push(format!("llama.cpp anchor skipped: {e}"));
                None
            }
        }
    } else {
        None
    };
    let mut per_round = Vec::new();
    let mut skipped: Vec<(String, usize, String)> = Vec::new();
    let mut llama_runs: Vec<LlamaCpp> = Vec::new();
    for round in 0..rounds {
        for &t in threads {
            for file in &files {
                let file = file.as_str();
                eprintln!(
                    "ripcord-bench: local round {}: {file}, {t} thread(s)",
                    round + 1
                );
                match measure(file, t, decode) {
                    Ok(m) => per_round.push(m),
                    Err(e) => {
                        if !skipped.iter().any(|(f, th, _)| f == file && *th == t) {
                            skipped.push((file.to_owned(), t, e));
                        }
                    }
                }
            }
            if let Some(bin) = &llama {
                let prompt = per_round.first().map_or(137, |m| m.prefill_tokens);
                eprintln!(
                    "ripcord-bench: local round {}: llama.cpp, {t} thread(s)",
                    round + 1
                );
                match anchor::measure(bin, &gguf, t, prompt, u64::from(decode)) {
                    Ok(r) => llama_runs.push(r),
                    Err(e) => notes.push(format!("llama.cpp at {t} thread(s): {e}")),
                }
            }
        }
    }
    let mut rows = Vec::new();
    for &t in threads {
        for file in &files {
            let file = file.as_str();
            let mine: Vec<LocalResult> = per_round
                .iter()
                .filter(|m| m.file == file && m.threads == t)
                .cloned()
                .collect();
            match best_of(&mine) {
                Some(b) => rows.push(LocalRow::Measured(b)),
                None => {
                    let why = skipped
                        .iter()
                        .find(|(f, th, _)| f == file && *th == t)
                        .map_or_else(|| "not measured".to_owned(), |(_, _, e)| e.clone());
                    rows.push(LocalRow::Skipped {
                        file: format!("{file} ({t} thread(s))"),
                        skipped: why,
                    });
                }
            }
        }
    }
    let mut llama_cpp = Vec::new();
    let mut targets = Vec::new();
    for &t in threads {
        let runs: Vec<&LlamaCpp> = llama_runs.iter().filter(|r| r.threads == t).collect();
        let Some(first) = runs.first() else { continue };
        let mut best = (*first).clone();
        for r in &runs[1..] {
            best.pp_tok_s = best.pp_tok_s.max(r.pp_tok_s);
            best.tg_tok_s = best.tg_tok_s.max(r.tg_tok_s);
        }
        let fastest = rows
            .iter()
            .filter_map(|r| match r {
                LocalRow::Measured(m) if m.threads == t => Some(m),
                _ => None,
            })
            .max_by(|a, b| a.decode_tok_s.total_cmp(&b.decode_tok_s));
        if let Some(m) = fastest {
            let ratio = m.decode_tok_s / best.tg_tok_s.max(1e-9);
            targets.push(Target {
                what: format!(
                    "best local variant's decode ({}, {:.1} tok/s) / llama.cpp tg ({:.1} tok/s) at {t} thread(s)",
                    m.file, m.decode_tok_s, best.tg_tok_s
                ),
                value: ratio,
                bound: ">= 1.00".into(),
                met: ratio >= 1.0,
            });
        }
        llama_cpp.push(best);
    }
    let mut agreement_rows = Vec::new();
    if anchors {
        let t = threads.iter().copied().max().unwrap_or(1);
        eprintln!(
            "ripcord-bench: greedy agreement of every variant with fp32 (20 prompts x 16 tokens)"
        );
        let result = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("agreement: runtime: {e}"))
            .and_then(|rt| rt.block_on(agreement(t)));
        match result {
            Ok(a) => agreement_rows = a,
            Err(e) => notes.push(format!("agreement check skipped: {e}")),
        }
    }
    let mut streams_rows = Vec::new();
    if anchors {
        let t = threads.iter().copied().max().unwrap_or(1);
        streams_rows = concurrent_streams(&cache, &gguf, t, decode, &mut targets, &mut notes);
    }
    LocalSection {
        rounds,
        decode_tokens: decode,
        rows,
        per_round,
        llama_cpp,
        agreement: agreement_rows,
        streams: streams_rows,
        targets,
        notes,
    }
}

/// The concurrent-streams rows (see [`crate::streams`]): ripcord's q4 with `max_batch = N`
/// and llama-server with `--parallel N` at each stream count, alternating, with the targets
/// (ripcord's aggregate at least llama.cpp's at 4 and 8 streams, and at 1 for q4).
fn concurrent_streams(
    cache: &std::path::Path,
    gguf: &std::path::Path,
    threads: usize,
    decode: u32,
    targets: &mut Vec<Target>,
    notes: &mut Vec<String>,
) -> Vec<StreamsRow> {
    let file = Variant::Q4.file_name();
    let mut rows = Vec::new();
    eprintln!("ripcord-bench: building llama.cpp's llama-server (first run only)");
    let server = match anchor::llama_server(cache) {
        Ok(bin) if gguf.is_file() => Some(bin),
        Ok(_) => {
            notes.push(format!(
                "llama-server rows skipped: {} is missing",
                gguf.display()
            ));
            None
        }
        Err(e) => {
            notes.push(format!("llama-server rows skipped: {e}"));
            None
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            notes.push(format!("concurrent streams skipped: runtime: {e}"));
            return rows;
        }
    };
    let dir = default_model_dir();
    for n in streams::STREAMS {
        eprintln!("ripcord-bench: {n} concurrent stream(s): ripcord {file}");
        let mine = rt.block_on(streams::ripcord(&dir, file, threads, n, decode));
        let theirs = server.as_ref().map(|bin| {
            eprintln!("ripcord-bench: {n} concurrent stream(s): llama-server");
            rt.block_on(streams::llama_server(bin, gguf, threads, n, decode))
        });
        if let (Ok(m), Some(Ok(l))) = (&mine, &theirs) {
            {
                let ratio = m.aggregate_tok_s / l.aggregate_tok_s.max(1e-9);
                targets.push(Target {
                    what: format!(
                        "ripcord {file} aggregate decode ({:.1} tok/s) / llama-server ({:.1} tok/s) at {n} stream(s), {threads} thread(s)",
                        m.aggregate_tok_s, l.aggregate_tok_s
                    ),
                    value: ratio,
                    bound: ">= 1.00".into(),
                    met: ratio >= 1.0,
                });
            }
        }
        match mine {
            Ok(r) => rows.push(r),
            Err(e) => notes.push(format!("ripcord at {n} stream(s): {e}")),
        }
        match theirs {
            Some(Ok(r)) => rows.push(r),
            Some(Err(e)) => notes.push(format!("llama-server at {n} stream(s): {e}")),
            None => {}
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_ending_at_eos_counts_the_pass_that_produced_it() {
        // 10 tokens shown, then <|im_end|>: 9 passes for tokens 2..10 and 1 for the end token.
        assert_eq!(decode_passes(10, &FinishReason::Stop), 10);
        // Cut at max_tokens: the last token is not followed by another pass.
        assert_eq!(decode_passes(10, &FinishReason::Length), 9);
        assert_eq!(decode_passes(0, &FinishReason::Stop), 0);
        assert_eq!(decode_passes(1, &FinishReason::Length), 0);
    }
}
