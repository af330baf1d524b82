//! `cargo xtask check-deps`: the crate graph's floors and bans, enforced.
//!
//! Each ripcord crate imports only the ripcord crates on the floors below it (`FLOORS`, the
//! table of ARCHITECTURE.md).
//!
//! `ripcord-core` must not depend (directly or transitively) on an HTTP stack, ONNX Runtime,
//! OpenTelemetry, a rate limiter or a breaker: that is what keeps the contract light and lets
//! every other crate depend on it. The other bans keep each floor light (see ARCHITECTURE.md): resilience pulls
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

/// The floors of ARCHITECTURE.md: the ripcord crates each crate may import (normal
/// dependencies; `ripcord-chaos` fakes are dev-dependencies and not listed).
const FLOORS: &[(&str, &[&str])] = &[
    ("ripcord-core", &[]),
    ("ripcord-chaos", &["ripcord-core"]),
    ("ripcord-providers", &["ripcord-core"]),
    ("ripcord-resilience", &["ripcord-core"]),
    ("ripcord-local-onnx", &["ripcord-core"]),
    ("ripcord-telemetry", &["ripcord-core", "ripcord-providers"]),
    ("ripcord-redis", &["ripcord-core", "ripcord-resilience"]),
    (
        "ripcord-cli",
        &[
            "ripcord-core",
            "ripcord-providers",
            "ripcord-resilience",
            "ripcord-local-onnx",
            "ripcord-telemetry",
            "ripcord-redis",
        ],
    ),
];

/// `cargo tree -p KRATE -e normal` with `extra` arguments, one package per line.
fn tree(krate: &str, extra: &[&str]) -> Result<String, String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree", "-p", krate, "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .args(extra)
        .output()
        .map_err(|e| format!("could not run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree -p {krate} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs the check.
pub(crate) fn run(_args: &[String]) -> Result<(), String> {
    let mut failures = Vec::new();
    for (krate, allowed) in FLOORS {
        let direct = tree(krate, &["--depth", "1"])?;
        for line in direct.lines().skip(1) {
            let name = line.split_whitespace().next().unwrap_or("");
            if name.starts_with("ripcord-") && !allowed.contains(&name) {
                failures.push(format!(
                    "{krate} imports {name}, which is not on a floor below it (ARCHITECTURE.md)"
                ));
            }
        }
        println!("check-deps: {krate} imports only {allowed:?}");
    }
    for (krate, banned) in BANS {
        for line in tree(krate, &[])?.lines() {
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
