//! `cargo xtask test`: prepares what the tests need, then runs the whole suite.
//!
//! This is the README's test command and what `.ci/run` calls. Steps:
//! 1. `check-deps`: the crate graph's floors (as ARCHITECTURE.md states them) and bans;
//! 2. `setup-model`: ONNX Runtime's library and the local models (cached under `<cache>` = `$RIPCORD_CACHE`, else `~/.cache/ripcord`),
//!    and the Gemma 3 270M GGUF the converter's second architecture is tested on (`gemma_gguf`);
//! 3. the client libraries the tests drive ripcord with, pinned: Python packages (the official
//!    `openai` and `anthropic` SDKs, `openai-agents`) in the project venv `<cache>/venv`, and npm
//!    packages (the Vercel AI SDK) under `<cache>/node-sdks`, and the higher-level Python client
//!    libraries (langchain, litellm, instructor, llama-index) in a venv of their own,
//!    `<cache>/venv-clients`, so that their dependencies cannot replace the pinned SDKs;
//! 4. a real OTLP receiver (rotel) on loopback for the telemetry end-to-end tests, stopped
//!    afterwards;
//! 5. a real `redis-server` (Debian's package, installed with apt-get when missing) on loopback
//!    for the shared-state tests, stopped afterwards; and a throwaway Postgres cluster (Debian's
//!    `postgresql`, see `postgres_server`) for the store's tests (`RIPCORD_TEST_POSTGRES_URL`),
//!    stopped and removed afterwards;
//! 6. Debian's `prometheus` (with `promtool`) and `chromium` for the operator tests (the
//!    alerting rules against a real Prometheus, `/status` in a headless browser), installed
//!    with apt-get when missing;
//! 7. `cargo test --workspace` (extra arguments are passed on);
//! 8. every user example (`crate::examples::EXAMPLES`), each checking its own outcome;
//! 9. the installed binary (`crate::install`): `cargo install`, then `ripcord setup-model` and
//!    `ripcord chat` from outside the checkout, answered by the local model.
//!
//! It is idempotent: a second run reuses everything the first one prepared.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Python packages the test suite needs beyond the model tooling, pinned.
const TEST_PYTHON_PACKAGES: &[(&str, &str)] = &[
    ("openai", "3.57.0"),
    ("anthropic", "2.10.0"),
    ("openai-agents", "0.24.0"),
];

/// The higher-level Python client libraries of the client-compatibility suite
/// (crates/cli/tests/client_suite.rs, issue 33), pinned, installed in `<cache>/venv-clients`.
/// `anthropic` is the project venv's pin; `openai` is the newest 2.x, because the newest
/// llama-index-llms-openai (0.8.3) requires `openai<3` (langchain-openai needs >=2.45,
/// litellm and instructor <4).
const TEST_CLIENT_PYTHON_PACKAGES: &[(&str, &str)] = &[
    ("openai", "2.54.0"),
    ("anthropic", "2.10.0"),
    ("langchain-openai", "1.7.4"),
    ("langchain-anthropic", "1.7.10"),
    ("litellm", "1.110.2"),
    ("instructor", "1.17.0"),
    ("llama-index-llms-openai", "0.8.3"),
    ("llama-index-embeddings-openai", "0.7.0"),
];

/// npm packages the client-library tests drive `ripcord serve` with (the Vercel AI SDK and its
/// OpenAI provider), pinned, installed under `<cache>/node-sdks`.
const TEST_NODE_PACKAGES: &[(&str, &str)] = &[
    ("ai", "7.0.173"),
    ("@ai-sdk/openai", "4.0.118"),
    ("zod", "4.6.7"),
    // The client-compatibility suite (crates/cli/tests/client_suite.rs, issue 33).
    ("@ai-sdk/anthropic", "4.0.105"),
    ("openai", "7.59.0"),
];

/// The version of `package` installed under `dir/node_modules`, if any.
fn node_version(dir: &Path, package: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("version")?.as_str().map(str::to_owned)
}

/// Installs [`TEST_NODE_PACKAGES`] under `<cache>/node-sdks` with the machine's npm (Debian's
/// `nodejs` and `npm` when there is none); does nothing when they are present.
fn ensure_node_packages(cache: &Path) -> Result<(), String> {
    let dir = cache.join("node-sdks");
    let missing: Vec<String> = TEST_NODE_PACKAGES
        .iter()
        .filter(|(name, version)| node_version(&dir, name).as_deref() != Some(*version))
        .map(|(name, version)| format!("{name}@{version}"))
        .collect();
    if missing.is_empty() {
        println!("xtask: test npm packages present");
        return Ok(());
    }
    if Command::new("npm").arg("--version").output().is_err() {
        crate::debian_tools::apt_install(&["nodejs", "npm"])?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let manifest = dir.join("package.json");
    if !manifest.exists() {
        std::fs::write(
            &manifest,
            r#"{"name":"ripcord-sdk-tests","private":true,"type":"module"}"#,
        )
        .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
    }
    run_cmd(
        Command::new("npm")
            .current_dir(&dir)
            .args(["install", "--no-audit", "--no-fund", "--save-exact"])
            .args(&missing),
    )
}

/// The workspace root (the parent of `xtask/`).
pub(crate) fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}

/// The cache root: `RIPCORD_CACHE`, else the platform's cache folder (the one an installed
/// `ripcord` looks in: [`ripcord_local_onnx::default_cache_dir`]).
pub(crate) fn cache_root() -> PathBuf {
    ripcord_local_onnx::default_cache_dir()
}

/// Runs a command to completion, failing with its name when it fails; says so on stdout.
pub(crate) fn run_cmd(cmd: &mut Command) -> Result<(), String> {
    run_cmd_announced(cmd, &mut std::io::stdout())
}

/// Runs a command to completion, failing with its name when it fails; says so on `to`.
pub(crate) fn run_cmd_announced(
    cmd: &mut Command,
    to: &mut dyn std::io::Write,
) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let _ = writeln!(to, "xtask: running {shown}");
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}

fn installed_version(python: &Path, package: &str) -> Option<String> {
    let out = Command::new(python)
        .args([
            "-c",
            &format!("import importlib.metadata as m; print(m.version({package:?}))"),
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Creates `<cache>/venv-clients` (with `python3 -m venv`, as setup-model creates the project
/// venv) when missing, then installs [`TEST_CLIENT_PYTHON_PACKAGES`] into it.
fn ensure_client_python_packages(cache: &Path) -> Result<(), String> {
    let venv = cache.join("venv-clients");
    let python = venv.join("bin/python");
    if !python.exists() {
        let system_py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        run_cmd(Command::new(system_py).args(["-m", "venv"]).arg(&venv))?;
    }
    pip_install_missing(&python, TEST_CLIENT_PYTHON_PACKAGES)
}

fn ensure_python_packages(cache: &Path) -> Result<(), String> {
    let python = cache.join("venv/bin/python");
    if !python.exists() {
        return Err(format!("{} is missing after setup-model", python.display()));
    }
    pip_install_missing(&python, TEST_PYTHON_PACKAGES)
}

/// `pip install`s `packages` when any of them is not at its pinned version in `python`'s venv.
/// The whole list is passed, so that a library's dependency cannot move another pin.
fn pip_install_missing(python: &Path, packages: &[(&str, &str)]) -> Result<(), String> {
    let all_present = packages
        .iter()
        .all(|(name, version)| installed_version(python, name).as_deref() == Some(*version));
    if all_present {
        println!(
            "xtask: test Python packages present in {} ({})",
            python.display(),
            packages
                .iter()
                .map(|(n, v)| format!("{n}=={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(());
    }
    run_cmd(
        pip_install(python).args(
            packages
                .iter()
                .map(|(name, version)| format!("{name}=={version}")),
        ),
    )
}

/// `python -m pip install --quiet --disable-pip-version-check`, for the caller to add to.
pub(crate) fn pip_install(python: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]);
    cmd
}

/// Runs the task. Extra arguments are passed to `cargo test`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let root = workspace_root();
    let cache = cache_root();
    let prepared = Instant::now();
    crate::check_deps::run(&[])?;
    crate::setup_model::run(&[])?;
    crate::gemma_gguf::ensure(&cache)?;
    ensure_python_packages(&cache)?;
    ensure_client_python_packages(&cache)?;
    ensure_node_packages(&cache)?;
    crate::debian_tools::ensure_tools()?;
    let receiver = ripcord_chaos::otlp::ensure_receiver()?;
    let redis = match crate::redis_server::ensure_redis() {
        Ok(r) => r,
        Err(e) => {
            let _ = receiver.stop();
            return Err(e);
        }
    };
    let postgres = match crate::postgres_server::ensure_postgres() {
        Ok(p) => p,
        Err(e) => {
            let _ = receiver.stop();
            let _ = redis.stop();
            return Err(e);
        }
    };
    let mut cmd = crate::cargo::cargo();
    cmd.current_dir(&root)
        .env("RIPCORD_CACHE", &cache)
        .envs(receiver.env())
        .envs(redis.env())
        .envs(postgres.env())
        .args(["test", "--workspace"])
        .args(args);
    println!("xtask: preparing took {} s", prepared.elapsed().as_secs());
    let tested = Instant::now();
    let mut result = run_cmd(&mut cmd);
    println!(
        "xtask: cargo test --workspace took {} s",
        tested.elapsed().as_secs()
    );
    if result.is_ok() {
        let mut envs = vec![("RIPCORD_CACHE", cache.display().to_string())];
        envs.extend(receiver.env());
        envs.extend(redis.env());
        let ran = Instant::now();
        result = crate::examples::run_all(&root, &envs);
        println!("xtask: the examples took {} s", ran.elapsed().as_secs());
    }
    if result.is_ok() {
        let ran = Instant::now();
        result = crate::install::run(&root, &cache);
        println!(
            "xtask: installing and running the binary took {} s",
            ran.elapsed().as_secs()
        );
    }
    let stopped = receiver.stop().and(redis.stop()).and(postgres.stop());
    result.and(stopped)
}
