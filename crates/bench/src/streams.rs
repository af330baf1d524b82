//! Concurrent streams on the local model (`--anchors`): aggregate decode tokens/s and per-stream
//! median inter-token latency at 1, 4 and 8 streams, for ripcord's `LocalLlama` with
//! `max_batch = N` (one session, batched decode steps) and for llama.cpp's `llama-server` with
//! `--parallel N` slots, the same threads and the same model file (the Q4_1 GGUF that ripcord's
//! q4 variant is converted from).
//!
//! Method, the same on both sides: N requests start together, each asking for `tokens` tokens
//! (ripcord: `max_tokens`; llama-server: `n_predict` with `ignore_eos`), greedy. Each stream's
//! text events are timestamped as they arrive. The aggregate rate is the decode passes of all
//! streams (tokens after each stream's first) over the window from the earliest first token to
//! the latest last token; the latency is the median gap between two events of one stream, over
//! all streams. The machine is shared, so the figures are compared as ratios within one run.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use ripcord_core::{ChatModel, ChatRequest, Context, StreamEvent};
use ripcord_local_onnx::LocalLlama;
use serde::Serialize;

/// The stream counts measured.
pub(crate) const STREAMS: [usize; 3] = [1, 4, 8];

/// One engine at one stream count.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StreamsRow {
    /// `ripcord model.q4.onnx` or `llama-server Q4_1 GGUF`.
    pub(crate) engine: String,
    /// Concurrent streams (and batch slots).
    pub(crate) streams: usize,
    /// Threads.
    pub(crate) threads: usize,
    /// Decode passes counted, all streams.
    pub(crate) decode_tokens: u64,
    /// Aggregate decode tokens per second.
    pub(crate) aggregate_tok_s: f64,
    /// Median inter-token latency of one stream, milliseconds.
    pub(crate) p50_itl_ms: f64,
}

/// The arrival times of one stream's text events.
type Arrivals = Vec<Instant>;

/// The row of `engine` from the arrivals of its streams (one per stream); `who` names it in the
/// error when nothing was decoded.
fn row(
    engine: String,
    threads: usize,
    streams: &[Arrivals],
    who: &str,
) -> Result<StreamsRow, String> {
    let (decode_tokens, aggregate_tok_s, p50_itl_ms) =
        summarize(streams).ok_or_else(|| format!("{who}: no decoded tokens"))?;
    Ok(StreamsRow {
        engine,
        streams: streams.len(),
        threads,
        decode_tokens,
        aggregate_tok_s,
        p50_itl_ms,
    })
}

/// Aggregate tokens/s and median inter-token latency (ms) of concurrent streams.
fn summarize(streams: &[Arrivals]) -> Option<(u64, f64, f64)> {
    let first = streams.iter().filter_map(|s| s.first()).min()?;
    let last = streams.iter().filter_map(|s| s.last()).max()?;
    let passes: u64 = streams
        .iter()
        .map(|s| s.len().saturating_sub(1) as u64)
        .sum();
    let mut gaps: Vec<f64> = streams
        .iter()
        .flat_map(|s| s.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1000.0))
        .collect();
    if passes == 0 || gaps.is_empty() {
        return None;
    }
    gaps.sort_by(f64::total_cmp);
    let p50 = gaps[gaps.len() / 2];
    let window = (*last - *first).as_secs_f64().max(1e-9);
    Some((passes, passes as f64 / window, p50))
}

const PROMPT: &str = "Count from 1 to 300 in words, one number per line, and do not stop early.";

/// ripcord: `max_batch = n` on `file` of `dir`, `n` streams of `tokens` tokens.
pub(crate) async fn ripcord(
    dir: &Path,
    file: &str,
    threads: usize,
    n: usize,
    tokens: u32,
) -> Result<StreamsRow, String> {
    let model = LocalLlama::builder(dir)
        .model_file(file)
        .threads(threads)
        .max_batch(n)
        .stream_buffer(4096)
        .build()
        .map_err(|e| format!("streams: load {file}: {e}"))?;
    // Warm the session (first-run allocations) before timing.
    model
        .chat(
            &ChatRequest::user(PROMPT).with_max_tokens(4),
            &Context::new(),
        )
        .await
        .map_err(|e| format!("streams: warm-up: {e}"))?;
    let req = ChatRequest::user(PROMPT).with_max_tokens(tokens);
    let runs = (0..n).map(|_| async {
        let ctx = Context::new();
        let mut s = model
            .stream(&req, &ctx)
            .await
            .map_err(|e| format!("streams: {e}"))?;
        let mut arrivals = Vec::new();
        while let Some(ev) = s.next().await {
            if let StreamEvent::TextDelta { .. } = ev.map_err(|e| format!("streams: {e}"))? {
                arrivals.push(Instant::now());
            }
        }
        Ok::<Arrivals, String>(arrivals)
    });
    let streams: Vec<Arrivals> = join_all(runs).await.into_iter().collect::<Result<_, _>>()?;
    row(
        format!("ripcord {file} (max_batch {n})"),
        threads,
        &streams,
        "streams",
    )
}

/// A running `llama-server`, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

async fn start_server(
    bin: &Path,
    gguf: &Path,
    threads: usize,
    n: usize,
    client: &reqwest::Client,
) -> Result<Server, String> {
    let port = free_port()?;
    // Each slot gets 1024 tokens of context (the server divides -c among its slots).
    let ctx = 1024 * n;
    // The server's own log, beside the binary, so that a failed request can be explained.
    let log_path = server_log(bin, n);
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("llama-server: cannot create {}: {e}", log_path.display()))?;
    let child = Command::new(bin)
        .arg("-m")
        .arg(gguf)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["-t", &threads.to_string(), "-tb", &threads.to_string()])
        .args(["--parallel", &n.to_string(), "-c", &ctx.to_string()])
        .args(["--cont-batching", "--no-webui"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("llama-server: cannot start {}: {e}", bin.display()))?;
    let mut server = Server { child, port };
    let health = format!("http://127.0.0.1:{port}/health");
    let started = Instant::now();
    loop {
        if let Ok(r) = client.get(&health).send().await
            && r.status().is_success()
        {
            return Ok(server);
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!("llama-server exited at start ({status})"));
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err("llama-server did not become healthy in 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Where the `--parallel n` server's stderr goes.
fn server_log(bin: &Path, n: usize) -> std::path::PathBuf {
    bin.with_file_name(format!("llama-server-parallel-{n}.log"))
}

/// The `content` of one `data: {...}` line of llama-server's `/completion` stream (`None` for
/// other lines and for the final summary event, which carries `"stop": true`).
fn sse_content(line: &str) -> Option<String> {
    let data = line.strip_prefix("data: ")?;
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    if v.get("stop").and_then(serde_json::Value::as_bool) == Some(true) {
        return None;
    }
    v.get("content")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

async fn server_stream(
    client: &reqwest::Client,
    port: u16,
    prompt: &str,
    tokens: u32,
) -> Result<Arrivals, String> {
    let body = serde_json::json!({
        "prompt": prompt,
        "n_predict": tokens,
        "ignore_eos": true,
        "temperature": 0.0,
        "cache_prompt": false,
        "stream": true,
    });
    let resp = client
        .post(format!("http://127.0.0.1:{port}/completion"))
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("llama-server: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("llama-server answered {}", resp.status()));
    }
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut arrivals = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("llama-server: {e}"))?;
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find('\n') {
            let line: String = buf.drain(..=end).collect();
            if sse_content(line.trim_end()).is_some() {
                arrivals.push(Instant::now());
            }
        }
    }
    Ok(arrivals)
}

/// llama-server with `--parallel n`, `n` streams of `tokens` tokens.
pub(crate) async fn llama_server(
    bin: &Path,
    gguf: &Path,
    threads: usize,
    n: usize,
    tokens: u32,
) -> Result<StreamsRow, String> {
    // No idle connection is reused: one run failed with "error sending request" on the first
    // request after the health check (the server's stderr was not kept then; it is now).
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| format!("llama-server client: {e}"))?;
    let server = start_server(bin, gguf, threads, n, &client).await?;
    // The prompt as SmolLM2's chat template renders it, like ripcord's.
    let prompt = format!(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n{PROMPT}<|im_end|>\n<|im_start|>assistant\n"
    );
    let with_log = |e: String| format!("{e} (its log: {})", server_log(bin, n).display());
    server_stream(&client, server.port, &prompt, 4)
        .await
        .map_err(with_log)?;
    let runs = (0..n).map(|_| server_stream(&client, server.port, &prompt, tokens));
    let streams: Vec<Arrivals> = join_all(runs)
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(with_log)?;
    row(
        format!("llama-server Q4_1 GGUF (--parallel {n})"),
        threads,
        &streams,
        "llama-server",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_passes_after_each_first_token_and_takes_the_median_gap() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        // Two streams: gaps 10, 10, 30 and 20, 20.
        let a = vec![ms(0), ms(10), ms(20), ms(50)];
        let b = vec![ms(5), ms(25), ms(45)];
        let (passes, rate, p50) = summarize(&[a, b]).unwrap();
        assert_eq!(passes, 5);
        assert!((rate - 5.0 / 0.050).abs() < 1e-6, "{rate}");
        assert!((p50 - 20.0).abs() < 1e-9, "{p50}");
        assert!(summarize(&[vec![ms(0)]]).is_none());
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn reads_llama_server_stream_lines() {
        assert_eq!(
            sse_content(r#"data: {"content":" one","stop":false,"id_slot":0}"#).as_deref(),
            Some(" one")
        );
        assert_eq!(
            sse_content(r#"data: {"content":"","stop":true,"tokens_predicted":64}"#),
            None
        );
        assert_eq!(sse_content(""), None);
        assert_eq!(sse_content("data: [DONE]"), None);
    }
}
