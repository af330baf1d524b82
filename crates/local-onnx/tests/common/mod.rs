//! Shared helpers of the integration tests: finding the prepared models, temp copies.
#![allow(dead_code)] // each test file uses some of the helpers
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `dir` when it holds `model.onnx` and ONNX Runtime is installed; else `None` after a loud
/// SKIPPED line — or a panic when `CI` is set (CI must run `cargo xtask setup-model` first).
pub(crate) fn model_or_skip(dir: PathBuf) -> Option<PathBuf> {
    let lib = ripcord_local_onnx::default_ort_dylib();
    if dir.join("model.onnx").is_file() && lib.is_file() {
        return Some(dir);
    }
    let msg = format!(
        "the model in {} or ONNX Runtime ({}) is missing: run `cargo xtask setup-model`",
        dir.display(),
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

/// The tiny random-weight model, or `None` (see [`model_or_skip`]).
pub(crate) fn tiny() -> Option<PathBuf> {
    model_or_skip(ripcord_local_onnx::tiny_model_dir())
}

/// A fresh folder under the system temp dir.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ripcord-local-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// A copy of every file of `src` in a fresh temp folder named `name`.
pub(crate) fn copy_model(src: &Path, name: &str) -> PathBuf {
    let dir = temp_dir(name).join(name);
    fs::create_dir_all(&dir).unwrap();
    for entry in fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    dir
}
