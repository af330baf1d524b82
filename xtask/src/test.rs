//! `cargo xtask test`: prepares what the tests need, then runs the whole suite.
//!
//! This is the README's test command and what `.ci/run` calls. It is idempotent: a second run
//! reuses everything the first one prepared (cached under `.cache/`).

use std::path::PathBuf;
use std::process::Command;

/// The workspace root (the parent of `xtask/`).
pub(crate) fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}

/// Runs a command to completion, failing with its name when it fails.
pub(crate) fn run_cmd(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    println!("xtask: running {shown}");
    let status = cmd.status().map_err(|e| format!("could not start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}

/// Runs the task. Extra arguments are passed to `cargo test` (e.g. `-- --nocapture`).
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let root = workspace_root();
    crate::check_deps::run(&[])?;
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(&root).args(["test", "--workspace"]).args(args);
    run_cmd(&mut cmd)
}
