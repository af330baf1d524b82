//! `cargo xtask bench [--quick] [...]`: what ripcord costs per call, against the floor.
//!
//! Builds the `ripcord` binary (the gateway rows run the real `ripcord serve`), then runs
//! `cargo run --release -p ripcord-bench -- <args>`, which prints the table and writes
//! `target/bench/bench.json`. See `crates/bench` for the method.

use std::process::Command;

/// Runs a command to completion; says so on stderr (stdout carries the benchmark's table).
fn run_cmd(cmd: &mut Command) -> Result<(), String> {
    crate::test::run_cmd_announced(cmd, &mut std::io::stderr())
}

/// Runs the task; arguments go to the benchmark (`--quick`, `--json PATH`, `--no-gateway`,
/// `--no-local`, `--ripcord PATH`, `--local-threads N`, `--only gateway`).
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let root = crate::test::workspace_root();
    let gateway = !args
        .iter()
        .any(|a| a == "--no-gateway" || a == "--local-only");
    // The ledger rows' Postgres (issue 38), like the test command's: a throwaway cluster on
    // loopback, stopped when the bench ends. Without it the Postgres row is skipped and said so.
    let postgres = if gateway {
        match crate::postgres_server::ensure_postgres() {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("xtask bench: no Postgres for the ledger row: {e}");
                None
            }
        }
    } else {
        None
    };
    if gateway && !args.iter().any(|a| a.starts_with("--ripcord")) {
        run_cmd(crate::cargo::cargo().current_dir(&root).args([
            "build",
            "--release",
            "-p",
            "ripcord-cli",
            "--bin",
            "ripcord",
        ]))?;
    }
    let mut bench = crate::cargo::cargo();
    bench
        .current_dir(&root)
        .args(["run", "--release", "-p", "ripcord-bench", "--"])
        .args(args);
    if let Some(p) = &postgres {
        bench.env("RIPCORD_BENCH_POSTGRES_URL", &p.url);
    }
    run_cmd(&mut bench)
}
