//! `cargo xtask features`: every feature set a user can pick builds, warning-free, and its
//! gated tests pass.
//!
//! Users pick vendors à la carte (`default-features = false, features = ["anthropic"]`), so each
//! feature must compile on its own, without code that only another feature's `cfg` brings in.
//! This runs, each with `--no-default-features`:
//!
//! - `ripcord-providers` with no feature, then with each feature of its `[features]` table
//!   alone: the library's unit tests and every integration test whose `required-features`
//!   that one feature meets;
//! - `ripcord-resilience` with no feature, `rate-limit` alone and `redact` alone;
//! - `ripcord-cli` with no vendor beyond OpenAI and Anthropic, and with a chosen subset
//!   (`deepseek`, `bedrock`): the binary builds and its config tests pass (a kind left out of
//!   the build is refused naming its feature).
//!
//! Doctests are left to the workspace's default run (they show the default features). It prints
//! one line per set with its passed tests and time, and fails on the first set that does not
//! build, warns, or fails a test.
//!
//! `--check` only type-checks each set (`cargo check --all-targets`), for a quicker look.
//!
//! Disk: each set links its own copy of every test binary (tens of megabytes each, about a
//! gigabyte per set with incremental state), which filled CI's disk fourteen sets in. So the sets
//! build without incremental compilation (each is built once), and the test executables a set
//! linked are deleted once it has passed; the libraries stay for the sets after it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One crate built with one set of features.
struct Set {
    krate: &'static str,
    /// `None`: no feature at all.
    features: Option<String>,
    /// What `cargo test` runs (`--lib --tests`, or one test target).
    targets: &'static [&'static str],
}

/// The feature names in `crates/providers/Cargo.toml`, `default` left out, sorted by name.
pub(crate) fn vendor_features(manifest: &str) -> Result<Vec<String>, String> {
    let doc: toml::Table = manifest
        .parse()
        .map_err(|e| format!("crates/providers/Cargo.toml: {e}"))?;
    let features = doc
        .get("features")
        .and_then(|f| f.as_table())
        .ok_or("crates/providers/Cargo.toml has no [features] table")?;
    Ok(features
        .keys()
        .filter(|k| k.as_str() != "default")
        .cloned()
        .collect())
}

/// The number of tests `cargo test` reports as passed, summed over its `test result:` lines.
fn passed(output: &str) -> usize {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
        .sum()
}

/// Every set, in the order they run.
fn sets(providers_manifest: &str) -> Result<Vec<Set>, String> {
    const LIB_AND_TESTS: &[&str] = &["--lib", "--tests"];
    let mut sets = vec![Set {
        krate: "ripcord-providers",
        features: None,
        targets: LIB_AND_TESTS,
    }];
    sets.extend(
        vendor_features(providers_manifest)?
            .into_iter()
            .map(|f| Set {
                krate: "ripcord-providers",
                features: Some(f),
                targets: LIB_AND_TESTS,
            }),
    );
    for f in [None, Some("rate-limit"), Some("redact")] {
        sets.push(Set {
            krate: "ripcord-resilience",
            features: f.map(str::to_owned),
            targets: LIB_AND_TESTS,
        });
    }
    for f in [None, Some("deepseek,bedrock")] {
        sets.push(Set {
            krate: "ripcord-cli",
            features: f.map(str::to_owned),
            targets: &["--bins", "--test", "config"],
        });
    }
    Ok(sets)
}

/// Where cargo puts the dev profile's binaries: `$CARGO_TARGET_DIR/debug/deps`, else
/// `target/debug/deps` under the workspace root.
fn deps_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("debug")
        .join("deps")
}

/// The executable files directly in `dir` (test binaries and bins; libraries are not executable).
fn executables(dir: &Path) -> HashSet<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return HashSet::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(|e| e.path())
        .collect()
}

/// The crates that warned, from cargo's `warning: `crate` (…) generated N warnings` lines.
fn warned(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("warning: `") && l.contains(" generated "))
        .collect()
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let check_only = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        other => {
            return Err(format!(
                "unknown arguments {other:?} (usage: features [--check])"
            ));
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent directory")?;
    let manifest_path = root.join("crates/providers/Cargo.toml");
    let manifest = std::fs::read_to_string(&manifest_path)
        .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let sets = sets(&manifest)?;

    let deps = deps_dir(root);
    let started = Instant::now();
    for set in &sets {
        let t = Instant::now();
        let before = executables(&deps);
        let mut cmd = crate::cargo::cargo();
        cmd.current_dir(root).env("CARGO_INCREMENTAL", "0");
        if check_only {
            cmd.args(["check", "-p", set.krate, "--all-targets"]);
        } else {
            cmd.args(["test", "-p", set.krate]).args(set.targets);
        }
        cmd.arg("--no-default-features");
        if let Some(f) = &set.features {
            cmd.args(["--features", f]);
        }
        let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
        let name = format!(
            "{} [{}]",
            set.krate,
            set.features.as_deref().unwrap_or("no feature")
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("{name} failed:\n{stdout}\n{stderr}"));
        }
        let warnings = warned(&stderr);
        if !warnings.is_empty() {
            return Err(format!(
                "{name} builds with warnings ({}):\n{stderr}",
                warnings.join("; ")
            ));
        }
        for linked in executables(&deps).difference(&before) {
            std::fs::remove_file(linked)
                .map_err(|e| format!("{name}: cannot remove {}: {e}", linked.display()))?;
        }
        let what = if check_only {
            "checked".to_owned()
        } else {
            format!("{} tests passed", passed(&stdout))
        };
        println!("{name:<44} {what:<20} {:>6.1} s", t.elapsed().as_secs_f64());
    }
    println!(
        "{} feature sets in {:.0} s",
        sets.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_are_read_sorted_without_default() {
        let m = "[package]\nname = \"x\"\n[features]\ndefault = [\"b\"]\nb = []\na = [\"b\"]\n";
        assert_eq!(vendor_features(m).unwrap(), ["a", "b"]);
        assert!(vendor_features("[package]\nname = \"x\"\n").is_err());
    }

    #[test]
    fn warnings_are_found_by_cargo_s_summary_line() {
        let err = "   Compiling x v0.1.0\nwarning: unused import: `a`\n\
                   warning: `ripcord-providers` (lib) generated 1 warning\n";
        assert_eq!(warned(err).len(), 1);
        assert!(warned("   Compiling x v0.1.0\n    Finished `dev`").is_empty());
    }

    #[test]
    fn every_set_names_a_workspace_crate() {
        let m = "[package]\nname = \"x\"\n[features]\ndefault = []\nopenai = []\n";
        let sets = sets(m).unwrap();
        assert_eq!(sets[0].features, None);
        assert!(sets.iter().any(|s| s.krate == "ripcord-cli"));
        assert!(sets.iter().any(|s| s.features.as_deref() == Some("redact")));
    }

    #[test]
    fn only_executable_files_are_listed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("xtask-features-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("libx.rlib"), b"").unwrap();
        std::fs::write(dir.join("t-123"), b"").unwrap();
        std::fs::set_permissions(dir.join("t-123"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let found = executables(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found, HashSet::from([dir.join("t-123")]));
        assert!(
            executables(&dir).is_empty(),
            "a missing folder lists nothing"
        );
    }

    #[test]
    fn passed_counts_sum_over_binaries() {
        let out = "running 2 tests\ntest result: ok. 2 passed; 0 failed\n\
                   test result: ok. 5 passed; 0 failed; 1 ignored\n";
        assert_eq!(passed(out), 7);
        assert_eq!(passed("no tests here"), 0);
    }
}
