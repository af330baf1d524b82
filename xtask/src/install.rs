//! The installed binary, as a user without the source gets it: `cargo install --path
//! crates/cli --root <tmp>` (the debug profile, so it reuses what the suite built), then from a
//! folder outside the checkout `ripcord setup-model` (over the prepared cache: it checks the
//! files and reuses them) and `ripcord chat` with no API keys, which must be answered by the
//! local model, found in the platform's cache folder (`$XDG_CACHE_HOME/ripcord`) with no
//! `RIPCORD_CACHE` set.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// The variables that would give a cloud link a key: the installed binary runs without them.
const VENDOR_KEYS: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "RIPCORD_CONFIG",
];

/// Installs the binary under `<root>/target/install-test` and runs it from outside the checkout.
pub(crate) fn run(root: &Path, cache: &Path) -> Result<(), String> {
    let dir = root.join("target").join("install-test");
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    let elsewhere = dir.join("home");
    let xdg = dir.join("xdg");
    fs::create_dir_all(&elsewhere)
        .and_then(|()| fs::create_dir_all(&xdg))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let bin_root = dir.join("root");
    crate::test::run_cmd(
        crate::cargo::cargo()
            .current_dir(root)
            .args([
                "install",
                "--quiet",
                "--locked",
                "--debug",
                "--path",
                "crates/cli",
            ])
            .arg("--root")
            .arg(&bin_root),
    )?;
    let ripcord = bin_root.join("bin").join("ripcord");
    if !ripcord.is_file() {
        return Err(format!("cargo install left no {}", ripcord.display()));
    }

    let setup = output(
        Command::new(&ripcord)
            .current_dir(&elsewhere)
            .env("RIPCORD_CACHE", cache)
            .arg("setup-model"),
        "ripcord setup-model",
    )?;
    if !setup.contains("setup-model: ready") {
        return Err(format!(
            "ripcord setup-model did not say it is ready:\n{setup}"
        ));
    }

    // The platform's cache folder holds the prepared cache (a link, so nothing is copied).
    std::os::unix::fs::symlink(cache, xdg.join("ripcord")).map_err(|e| {
        format!(
            "cannot link {} into {}: {e}",
            cache.display(),
            xdg.display()
        )
    })?;
    let mut chat = Command::new(&ripcord);
    chat.current_dir(&elsewhere)
        .env_remove("RIPCORD_CACHE")
        .env("XDG_CACHE_HOME", &xdg)
        .env("HOME", &elsewhere)
        .args([
            "chat",
            "--max-tokens",
            "24",
            "What is the capital of France?",
        ]);
    for k in VENDOR_KEYS {
        chat.env_remove(k);
    }
    let out = chat
        .output()
        .map_err(|e| format!("cannot start {}: {e}", ripcord.display()))?;
    let (answer, said) = texts(&out);
    if !out.status.success() || !said.contains("served by local") || !answer.contains("Paris") {
        return Err(format!(
            "the installed `ripcord chat` was not answered \"Paris\" by the local model ({}):\nstdout: {answer}\nstderr: {said}",
            out.status
        ));
    }
    println!(
        "xtask: the installed binary answered from the local model: {:?} ({})",
        answer.trim(),
        said.trim().lines().last().unwrap_or_default()
    );
    fs::remove_dir_all(&dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn output(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let (stdout, stderr) = texts(&out);
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{what} failed with {}:\n{stdout}\n{stderr}",
            out.status
        ))
    }
}
