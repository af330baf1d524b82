//! Finding the prepared models in unit tests (integration tests have `tests/common`).

use std::path::PathBuf;

#[path = "../tests/common/skip.rs"]
mod skip;

/// The tiny model's folder, or `None` after a loud SKIPPED line when it is missing outside CI.
///
/// # Panics
///
/// When the model (or the ONNX Runtime library) is missing and `CI` is set: CI must run
/// `cargo xtask setup-model` first.
pub(crate) fn tiny_dir_or_skip() -> Option<PathBuf> {
    let dir = crate::tiny_model_dir();
    let what = format!("the tiny test model ({})", dir.display());
    skip::unless_missing(dir, &crate::default_ort_dylib(), &what)
}

/// How the tests load a model: one thread on the CPU.
pub(crate) const ONE_CPU_THREAD: crate::engine::SessionOptions = crate::engine::SessionOptions {
    intra_threads: 1,
    device: crate::Device::Cpu,
};

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
    use crate::engine::Decoder;

    let dir = tiny_dir_or_skip()?;
    let files = ModelFiles::locate(&dir, Path::new(file)).unwrap();
    let config = ModelConfig::read(&files).unwrap();
    let env = crate::runtime::environment(&crate::default_ort_dylib()).unwrap();
    let dec = Decoder::load(&env, &files.model, &config, ONE_CPU_THREAD).unwrap();
    let tok = tokenizers::Tokenizer::from_file(&files.tokenizer).unwrap();
    Some((dec, config, tok))
}

/// Greedy ids of `prompt` decoded alone through a one-row cache, step by step by hand: the
/// reference the generation loop and the batch are compared with.
pub(crate) fn greedy_ids(dec: &mut crate::engine::Decoder, prompt: &[u32], n: usize) -> Vec<u32> {
    let opts = ort::session::RunOptions::new().unwrap();
    let mut cache = dec.empty_cache(prompt.len() + n + 1).unwrap();
    let mut logits = dec.forward(prompt, &mut cache, &opts).unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = crate::sampling::argmax(&logits).unwrap();
        ids.push(id);
        logits = dec.forward(&[id], &mut cache, &opts).unwrap();
    }
    ids
}
