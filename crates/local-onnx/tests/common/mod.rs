//! Shared helpers of the integration tests: finding the prepared models, temp copies.
#![allow(dead_code)] // each test file uses some of the helpers
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ripcord_core::{ChatModel, ChatRequest, ChatResponse, Context, ErrorKind};
use ripcord_local_onnx::LocalLlama;

mod skip;

/// The question the tests ask.
pub(crate) const Q: &str = "What is the capital of France?";

/// A call for `tokens` tokens of answer to [`Q`] that must be answered within a minute (the
/// place a held stream took is free again, or another is).
pub(crate) async fn chat_within_a_minute(m: &LocalLlama, tokens: u32) -> ChatResponse {
    let req = ChatRequest::user(Q).with_max_tokens(tokens);
    tokio::time::timeout(Duration::from_secs(60), m.chat(&req, &Context::new()))
        .await
        .unwrap()
        .unwrap()
}

/// A short call under a 300 ms deadline, which waits for a busy place until the deadline.
pub(crate) async fn assert_waits_out_its_deadline(m: &LocalLlama) {
    let waiting = Context::new().with_timeout(Duration::from_millis(300));
    let req = ChatRequest::user(Q).with_max_tokens(2);
    let e = m.chat(&req, &waiting).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded);
}

/// `dir` when it holds `model.onnx` and ONNX Runtime is installed; else `None` after a loud
/// SKIPPED line — or a panic when `CI` is set (CI must run `cargo xtask setup-model` first).
pub(crate) fn model_or_skip(dir: PathBuf) -> Option<PathBuf> {
    let what = format!("the model in {}", dir.display());
    skip::unless_missing(dir, &ripcord_local_onnx::default_ort_dylib(), &what)
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
