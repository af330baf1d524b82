//! Finding the prepared models in unit tests (integration tests have `tests/common`).

use std::path::PathBuf;

/// The tiny model's folder, or `None` after a loud SKIPPED line when it is missing outside CI.
///
/// # Panics
///
/// When the model (or the ONNX Runtime library) is missing and `CI` is set: CI must run
/// `cargo xtask setup-model` first.
pub(crate) fn tiny_dir_or_skip() -> Option<PathBuf> {
    let dir = crate::tiny_model_dir();
    let lib = crate::default_ort_dylib();
    if dir.join("model.onnx").is_file() && lib.is_file() {
        return Some(dir);
    }
    let msg = format!(
        "the tiny test model ({}) or ONNX Runtime ({}) is missing: run `cargo xtask setup-model`",
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

/// The tiny model's decoder (one thread), config and tokenizer, or `None` when skipped.
pub(crate) fn load_tiny() -> Option<(
    crate::engine::Decoder,
    crate::config::ModelConfig,
    tokenizers::Tokenizer,
)> {
    load_tiny_file("model.onnx")
}

/// [`load_tiny`] for one model file of the tiny model's folder (a variant).
pub(crate) fn load_tiny_file(
    file: &str,
) -> Option<(
    crate::engine::Decoder,
    crate::config::ModelConfig,
    tokenizers::Tokenizer,
)> {
    use std::path::Path;

    use crate::config::{ModelConfig, ModelFiles};
    use crate::engine::{Decoder, SessionOptions};

    let dir = tiny_dir_or_skip()?;
    let files = ModelFiles::locate(&dir, Path::new(file)).unwrap();
    let config = ModelConfig::read(&files).unwrap();
    let env = crate::runtime::environment(&crate::default_ort_dylib()).unwrap();
    let dec = Decoder::load(
        &env,
        &files.model,
        &config,
        SessionOptions {
            intra_threads: 1,
            device: crate::Device::Cpu,
        },
    )
    .unwrap();
    let tok = tokenizers::Tokenizer::from_file(&files.tokenizer).unwrap();
    Some((dec, config, tok))
}
