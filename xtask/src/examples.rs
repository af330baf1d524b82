//! The examples users start from, each built and run by `cargo xtask test`: an example that
//! stops compiling, or stops doing what its text says (each checks its own outcome and exits
//! non-zero otherwise), fails the test command.

use std::path::Path;
use std::time::Instant;

/// `(package, example)`, in the order a reader meets them.
pub(crate) const EXAMPLES: &[(&str, &str)] = &[
    ("ripcord-providers", "minimal_chain"),
    ("ripcord-providers", "streaming_fallback"),
    ("ripcord-providers", "custom_decorator"),
    ("ripcord-providers", "embeddings_fallback"),
    ("ripcord-providers", "outage_in_a_test"),
    ("ripcord-local-onnx", "local_only"),
    ("ripcord-redis", "shared_breaker"),
    ("ripcord-telemetry", "otlp_traces"),
];

/// Runs every example with `envs` (the cache, the OTLP receiver, the Redis URL).
pub(crate) fn run_all(root: &Path, envs: &[(&str, String)]) -> Result<(), String> {
    for (package, example) in EXAMPLES {
        let t = Instant::now();
        let out = crate::cargo::cargo()
            .current_dir(root)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .args(["run", "-q", "-p", package, "--example", example])
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "example {package}/{example} failed ({}):\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        println!(
            "example {package}/{example}: ok ({:.1} s)",
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Examples that measure rather than show (profiling and benchmark tools), run by hand.
    const MEASUREMENTS: &[(&str, &str)] = &[("ripcord-local-onnx", "concurrent_streams")];

    /// Every listed example exists where cargo looks for it, and every example file is listed.
    #[test]
    fn the_list_matches_the_example_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        for (package, example) in EXAMPLES {
            let dir = package.trim_start_matches("ripcord-");
            let file = root.join(format!("crates/{dir}/examples/{example}.rs"));
            assert!(file.is_file(), "{} is missing", file.display());
        }
        // The resilience crate's measurement example is a profiling tool, not a user example.
        for dir in [
            "providers",
            "local-onnx",
            "redis",
            "telemetry",
            "core",
            "chaos",
        ] {
            let Ok(entries) = std::fs::read_dir(root.join(format!("crates/{dir}/examples"))) else {
                continue;
            };
            for e in entries {
                let name = e.unwrap().file_name().to_string_lossy().replace(".rs", "");
                let key = (format!("ripcord-{dir}"), name.clone());
                let listed = |list: &[(&str, &str)]| {
                    list.iter()
                        .any(|(p, e)| (*p, *e) == (key.0.as_str(), key.1.as_str()))
                };
                assert!(
                    listed(EXAMPLES) || listed(MEASUREMENTS),
                    "crates/{dir}/examples/{name}.rs is not run by the test command"
                );
            }
        }
    }
}
