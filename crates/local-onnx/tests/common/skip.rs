//! Skipping a test whose prepared model is missing, shared by the integration tests
//! (`tests/common`) and the unit tests (`src/test_support.rs` includes this file).

use std::path::{Path, PathBuf};

/// `dir` when it holds `model.onnx` and ONNX Runtime (`lib`) is installed; else `None` after a
/// loud SKIPPED line saying `what` or the runtime is missing.
///
/// # Panics
///
/// When either is missing and `CI` is set: CI must run `cargo xtask setup-model` first.
pub(crate) fn unless_missing(dir: PathBuf, lib: &Path, what: &str) -> Option<PathBuf> {
    if dir.join("model.onnx").is_file() && lib.is_file() {
        return Some(dir);
    }
    let msg = format!(
        "{what} or ONNX Runtime ({}) is missing: run `cargo xtask setup-model`",
        lib.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    // Straight to the stderr handle: libtest captures `eprintln!` of passing tests.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("SKIPPED: {msg}\n").as_bytes(),
    );
    None
}
