//! Runs the model tool's own tests (`model/tests/`, Python's `unittest`) with the venv
//! `cargo xtask setup-model` makes: the converter's pieces, `tiny` end to end on the real GGUF's
//! tokenizer, and the verifier passing the tiny model and naming what is wrong with broken ones.

#![allow(clippy::expect_used, clippy::panic, clippy::print_stderr)] // a test fails by panicking

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn cache() -> PathBuf {
    ripcord_local_onnx::default_cache_dir()
}

#[test]
fn the_converter_and_the_verifier_pass_their_tests_on_the_tiny_model() {
    let python = cache().join("venv/bin/python");
    let tiny = cache().join("models/tiny-llama/model.onnx");
    if !python.is_file() || !tiny.is_file() {
        let msg = format!(
            "{} or {} is missing — run `cargo xtask test` (or `cargo xtask setup-model`)",
            python.display(),
            tiny.display()
        );
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        eprintln!("SKIPPED: {msg}");
        return;
    }
    let out = Command::new(&python)
        .current_dir(root())
        .env("RIPCORD_CACHE", cache())
        .args(["-m", "unittest", "discover", "-s", "model/tests", "-v"])
        .output()
        .expect("the venv's Python starts");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the model tool's tests failed:\n{log}"
    );
    let ran: usize = log
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `Ran N tests` line in:\n{log}"));
    assert!(ran >= 19, "only {ran} tests ran:\n{log}");
    // With the cache present nothing may be skipped: a skip would hide a missing model.
    assert!(!log.contains("skipped"), "some tests were skipped:\n{log}");
}
