//! The upstream: ripcord-chaos's fake OpenAI-wire vendor in fast mode (no recording), run in a
//! child process so that its CPU time is its own and the bench process's CPU is the client's.
//!
//! The child (`ripcord-bench --role upstream`) starts two servers — `ok` answers every request
//! (JSON, or SSE when the body asks for a stream), `down` answers every request with OpenAI's
//! 503 overload error — prints their base URLs as one JSON line, and serves until its standard
//! input closes (the parent dropping its handle), so it never outlives the bench.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Script, VendorError, Wire};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use crate::cpu;

/// Where the child's servers listen.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Urls {
    /// Answers every request.
    pub(crate) ok: String,
    /// Answers every request with a 503 overload error.
    pub(crate) down: String,
}

/// A child process of this binary in another `--role`, which prints one line when it is ready
/// and runs until its standard input closes; dropping this stops it.
#[derive(Debug)]
pub(crate) struct RoleChild {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl RoleChild {
    /// Starts `ripcord-bench ARGS` and reads the first line it prints; `what` names the child
    /// in errors.
    pub(crate) fn spawn(what: &str, args: &[&str]) -> Result<(RoleChild, String), String> {
        let exe = std::env::current_exe().map_err(|e| format!("{what}: own path: {e}"))?;
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{what}: cannot start the child process: {e}"))?;
        let stdin = child.stdin.take();
        // Owned from here: a failure below drops (and so stops) the child.
        let mut running = RoleChild { child, stdin };
        let stdout = running
            .child
            .stdout
            .take()
            .ok_or(format!("{what}: the child has no stdout"))?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("{what}: reading the child's first line: {e}"))?;
        Ok((running, line))
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for RoleChild {
    fn drop(&mut self) {
        // Closing stdin ends the child; kill covers a child that is stuck.
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In a role child: waits until the parent closes this process's standard input.
pub(crate) async fn until_stdin_closes() {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while let Ok(n) = stdin.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

/// The running upstream child; dropping it stops the child.
#[derive(Debug)]
pub(crate) struct Upstream {
    child: RoleChild,
    /// Its servers.
    pub(crate) urls: Urls,
}

impl Upstream {
    /// Starts the child and waits for its URLs.
    pub(crate) fn spawn() -> Result<Upstream, String> {
        let (child, line) = RoleChild::spawn("upstream", &["--role", "upstream"])?;
        let urls: Urls = serde_json::from_str(line.trim()).map_err(|e| {
            format!("upstream: the child printed {line:?} instead of its URLs: {e}")
        })?;
        Ok(Upstream { child, urls })
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The child's CPU time so far.
    pub(crate) fn cpu(&self) -> Duration {
        cpu::process_cpu(self.pid()).unwrap_or_default()
    }
}

/// The child's main: serve until stdin closes.
pub(crate) fn child_main() -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("upstream: runtime: {e}"))?;
    rt.block_on(async {
        let ok = FakeVendor::start_with(Wire::OpenAi, FakeOptions::fast())
            .await
            .map_err(|e| format!("upstream: bind: {e}"))?;
        let down = FakeVendor::start_with(
            Wire::OpenAi,
            FakeOptions::fast()
                .with_script(Script::Always(Behavior::Error(VendorError::Overloaded))),
        )
        .await
        .map_err(|e| format!("upstream: bind: {e}"))?;
        let urls = Urls {
            ok: ok.base_url(),
            down: down.base_url(),
        };
        let line = serde_json::to_string(&urls).map_err(|e| e.to_string())?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").map_err(|e| format!("upstream: stdout: {e}"))?;
        out.flush().map_err(|e| format!("upstream: stdout: {e}"))?;
        drop(out);
        until_stdin_closes().await;
        drop((ok, down));
        Ok(())
    })
}
