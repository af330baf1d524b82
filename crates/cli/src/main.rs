//! The `ripcord` binary. Its commands (`chat`, `serve`, `check-config`) land with the CLI issue;
//! until then it says so instead of pretending.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "ripcord {}: the command-line interface is not built yet (see the CLI issue)",
            env!("CARGO_PKG_VERSION")
        );
    }
    std::process::ExitCode::from(2)
}
