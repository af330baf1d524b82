//! Debian tools the operator tests drive (issue 25): `prometheus` (with `promtool`) scrapes a
//! real `ripcord serve` and evaluates the shipped alerting rules; `chromium` renders `/status`
//! headless.
//!
//! `ensure_tools` installs the missing ones with apt-get (CI runs as root on a fresh machine),
//! like `redis_server` does for `redis-server`. The tests themselves only look for the binaries
//! and skip loudly without them (fail under `CI`).

use std::path::Path;
use std::process::Command;

/// (binary that must exist, Debian package that provides it).
const TOOLS: &[(&str, &str)] = &[
    ("/usr/bin/prometheus", "prometheus"),
    ("/usr/bin/promtool", "prometheus"),
    ("/usr/bin/chromium", "chromium"),
];

/// Installs the Debian packages of the tools that are missing.
///
/// # Errors
///
/// apt-get could not run or failed, or a tool is still missing after it ran.
pub(crate) fn ensure_tools() -> Result<(), String> {
    let mut missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(bin, _)| !Path::new(bin).exists())
        .map(|(_, pkg)| *pkg)
        .collect();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    apt_install(&missing)?;
    match TOOLS.iter().find(|(bin, _)| !Path::new(bin).exists()) {
        None => Ok(()),
        Some((bin, pkg)) => Err(format!("apt-get installed {pkg}, but {bin} is missing")),
    }
}

/// `apt-get update` and `apt-get install -y --no-install-recommends <packages>`.
///
/// # Errors
///
/// apt-get could not run or failed.
pub(crate) fn apt_install(packages: &[&str]) -> Result<(), String> {
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(packages);
    for args in [&["update"][..], &install[..]] {
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| {
                format!(
                    "{} missing and apt-get could not run: {e}",
                    packages.join(", ")
                )
            })?;
        if !status.success() {
            return Err(format!(
                "{} missing and `apt-get {}` failed with {status} (install: apt-get install {})",
                packages.join(", "),
                args.join(" "),
                packages.join(" ")
            ));
        }
    }
    Ok(())
}
