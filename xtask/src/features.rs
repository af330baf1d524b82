//! `cargo xtask features`: every vendor feature of `ripcord-providers` builds and tests alone.
//!
//! Users pick vendors à la carte (`default-features = false, features = ["anthropic"]`), so each
//! feature must compile on its own, without code that only another feature's `cfg` brings in.
//! For each feature in the crate's `[features]` table (and for none at all) this runs
//! `cargo test -p ripcord-providers --no-default-features --features F`: the library's unit
//! tests and every integration test whose `required-features` that one feature meets. It prints
//! one line per feature set with its passed tests and time, and fails on the first that does
//! not build or pass.
//!
//! `--check` only type-checks each set (`cargo check --all-targets`), for a quicker look.

use std::path::Path;
use std::time::Instant;

/// The crate whose features are checked one by one.
const KRATE: &str = "ripcord-providers";

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
    let mut sets: Vec<Option<String>> = vec![None];
    sets.extend(vendor_features(&manifest)?.into_iter().map(Some));

    let started = Instant::now();
    for set in &sets {
        let t = Instant::now();
        let mut cmd = crate::cargo::cargo();
        cmd.current_dir(root);
        if check_only {
            cmd.args([
                "check",
                "-p",
                KRATE,
                "--all-targets",
                "--no-default-features",
            ]);
        } else {
            cmd.args(["test", "-p", KRATE, "--no-default-features"]);
        }
        if let Some(f) = set {
            cmd.args(["--features", f]);
        }
        let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
        let name = set.as_deref().unwrap_or("(no vendor)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "{KRATE} with only {name:?} failed:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let what = if check_only {
            "checked".to_owned()
        } else {
            format!("{} tests passed", passed(&stdout))
        };
        println!("{name:<18} {what:<20} {:>6.1} s", t.elapsed().as_secs_f64());
    }
    println!(
        "{} feature sets of {KRATE} in {:.0} s",
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
    fn passed_counts_sum_over_binaries() {
        let out = "running 2 tests\ntest result: ok. 2 passed; 0 failed\n\
                   test result: ok. 5 passed; 0 failed; 1 ignored\n";
        assert_eq!(passed(out), 7);
        assert_eq!(passed("no tests here"), 0);
    }
}
