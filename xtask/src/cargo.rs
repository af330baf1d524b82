//! The nested `cargo` every task runs, without what `cargo run` added to xtask's environment.
//!
//! `cargo xtask …` is `cargo run -p xtask`, and cargo hands the program it runs the package's
//! variables (`CARGO_MANIFEST_DIR=…/xtask`, `CARGO_PKG_NAME=xtask`, …). A cargo started from
//! here inherits them, and some build scripts say they depend on them: ring's prints
//! `rerun-if-env-changed=CARGO_MANIFEST_DIR` (and `CARGO_PKG_NAME`, the version parts,
//! `OUT_DIR`). Cargo compares such a variable with its *own* environment, so a nested build saw
//! `CARGO_MANIFEST_DIR` set where the shell's build (the one that builds xtask itself) saw it
//! unset: each re-ran ring's build script and rebuilt everything above it (rustls, reqwest,
//! the providers, the cli) — about 40 s for the nested build and 18 s for the next `cargo
//! xtask`, every time, with nothing changed. Started without those variables, the nested cargo
//! sees what the shell's cargo sees and shares its fingerprints.

use std::ffi::OsStr;
use std::process::Command;

/// The variables `cargo run` sets for the program it runs that are not in the caller's shell
/// (the dynamic-library path it extends is left alone: no build script here depends on it).
fn set_by_cargo_run(name: &OsStr) -> bool {
    let Some(n) = name.to_str() else {
        return false;
    };
    n.starts_with("CARGO_PKG_")
        || n.starts_with("CARGO_MANIFEST_")
        || matches!(
            n,
            "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE" | "OUT_DIR"
        )
}

/// `cargo` (the one that runs xtask), started without the variables `cargo run` set for xtask.
pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    for (name, _) in std::env::vars_os() {
        if set_by_cargo_run(&name) {
            cmd.env_remove(name);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_variables_of_cargo_run_are_removed_and_the_rest_kept() {
        for n in [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_CRATE_NAME",
            "OUT_DIR",
        ] {
            assert!(set_by_cargo_run(OsStr::new(n)), "{n}");
        }
        for n in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "RUSTFLAGS",
            "PATH",
        ] {
            assert!(!set_by_cargo_run(OsStr::new(n)), "{n}");
        }
        // Under `cargo test` (as under `cargo run`) CARGO_MANIFEST_DIR is set: the command
        // removes it.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let cmd = cargo();
        let removed: Vec<&OsStr> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k)
            .collect();
        assert!(
            removed.contains(&OsStr::new("CARGO_MANIFEST_DIR")),
            "{removed:?}"
        );
        assert!(!removed.contains(&OsStr::new("CARGO_TARGET_DIR")));
    }
}
