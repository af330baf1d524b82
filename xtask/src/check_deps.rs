//! `cargo xtask check-deps`: the crate graph's bans, enforced.
//!
//! `ripcord-core` must not depend (directly or transitively) on an HTTP stack, ONNX Runtime,
//! OpenTelemetry, a rate limiter or a breaker: that is what keeps the contract light and lets
//! every other crate depend on it. The other bans are DESIGN.md's crate table: resilience pulls
//! no HTTP stack or ONNX Runtime, the local model no HTTP client, and providers, telemetry and
//! redis no ONNX Runtime.

use std::process::Command;

const BANS: &[(&str, &[&str])] = &[
    (
        "ripcord-core",
        &[
            "reqwest",
            "hyper",
            "http",
            "ort",
            "opentelemetry",
            "governor",
            "failsafe",
        ],
    ),
    ("ripcord-resilience", &["reqwest", "hyper", "ort"]),
    ("ripcord-providers", &["ort"]),
    ("ripcord-local-onnx", &["reqwest"]),
    ("ripcord-telemetry", &["ort"]),
    ("ripcord-redis", &["ort"]),
];

/// Runs the check.
pub(crate) fn run(_args: &[String]) -> Result<(), String> {
    let mut failures = Vec::new();
    for (krate, banned) in BANS {
        let out = Command::new(env!("CARGO"))
            .args([
                "tree", "-p", krate, "-e", "normal", "--prefix", "none", "--format", "{p}",
            ])
            .output()
            .map_err(|e| format!("could not run cargo tree: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo tree -p {krate} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let tree = String::from_utf8_lossy(&out.stdout);
        for line in tree.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if banned.contains(&name) {
                failures.push(format!("{krate} depends on banned crate {line}"));
            }
        }
        println!("check-deps: {krate}: none of {banned:?}");
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}
