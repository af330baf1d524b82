//! The `ripcord serve` child of `gateway-under-abuse`: the binary (built from the workspace),
//! started under a low descriptor limit, its address, its log, its peak memory.
//!
//! The limit is set without an external tool and without unsafe code: the child is started as
//! `xtask with-nofile N -- ripcord serve …`, a trampoline that lowers its own soft and hard
//! `RLIMIT_NOFILE` to N and then *execs* `ripcord` ([`exec_with_nofile`]), so the gateway runs
//! in that same process (the same pid) with a hard limit it cannot raise.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The hidden xtask task that runs a program under a descriptor limit.
pub(crate) const TRAMPOLINE: &str = "with-nofile";

/// `xtask with-nofile N -- PROGRAM ARGS…`: sets the soft and hard descriptor limit to N, then
/// replaces this process with PROGRAM. Returns only on failure.
pub(crate) fn exec_with_nofile(args: &[String]) -> Result<(), String> {
    let (n, program, rest) = parse_trampoline(args)?;
    exec(n, program, rest)
}

/// Splits `N -- PROGRAM ARGS…`.
pub(crate) fn parse_trampoline(args: &[String]) -> Result<(u64, &str, &[String]), String> {
    let usage = "usage: xtask with-nofile N -- PROGRAM [ARGS...]";
    let [n, sep, program, rest @ ..] = args else {
        return Err(usage.to_owned());
    };
    if sep != "--" {
        return Err(usage.to_owned());
    }
    let n: u64 = n.parse().ok().filter(|n| *n >= 16).ok_or_else(|| {
        format!("with-nofile: the limit must be a number of at least 16, got {n:?}")
    })?;
    Ok((n, program, rest))
}

#[cfg(unix)]
fn exec(n: u64, program: &str, rest: &[String]) -> Result<(), String> {
    use nix::sys::resource::{Resource, setrlimit};
    use std::os::unix::process::CommandExt;
    setrlimit(Resource::RLIMIT_NOFILE, n, n)
        .map_err(|e| format!("with-nofile: cannot set the descriptor limit to {n}: {e}"))?;
    let e = Command::new(program).args(rest).exec();
    Err(format!("with-nofile: cannot run {program}: {e}"))
}

#[cfg(not(unix))]
fn exec(_: u64, _: &str, _: &[String]) -> Result<(), String> {
    Err("with-nofile needs a Unix system".to_owned())
}

/// Raises this process's soft descriptor limit to its hard one (the harness opens many
/// sockets); returns the soft limit in force.
#[cfg(unix)]
pub(crate) fn raise_own_nofile() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}

#[cfg(not(unix))]
pub(crate) fn raise_own_nofile() -> Option<u64> {
    None
}

/// The `ripcord` binary: `RIPCORD_BIN` when set, else built from the workspace with cargo
/// (`cargo build -p ripcord-cli --bin ripcord`: the cli alone, in the dev profile, the same
/// build as `cargo xtask test`'s `cargo install --debug --path crates/cli`). Started through
/// [`crate::cargo::cargo`], so it shares fingerprints with the shell's builds and is fresh
/// (well under a second) when nothing changed.
pub(crate) fn ripcord_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("RIPCORD_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("RIPCORD_BIN={} is not a file", p.display()))
        };
    }
    let out = crate::cargo::cargo()
        .current_dir(crate::test::workspace_root())
        .args([
            "build",
            "--quiet",
            "-p",
            "ripcord-cli",
            "--bin",
            "ripcord",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo build for the ripcord binary: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build -p ripcord-cli --bin ripcord failed with {}",
            out.status
        ));
    }
    executable_of(&String::from_utf8_lossy(&out.stdout), "ripcord")
        .ok_or_else(|| "cargo build -p ripcord-cli --bin ripcord named no executable".to_owned())
}

/// The executable of binary `name` in cargo's JSON messages.
pub(crate) fn executable_of(messages: &str, name: &str) -> Option<PathBuf> {
    messages.lines().find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        (v["reason"] == "compiler-artifact" && v["target"]["name"] == name)
            .then(|| v["executable"].as_str().map(PathBuf::from))
            .flatten()
    })
}

/// A running `ripcord serve`, killed and reaped on drop.
pub(crate) struct Gateway {
    child: Option<Child>,
    pub(crate) pid: u32,
    pub(crate) url: String,
    /// Lines it wrote on stderr after "serving on", counted.
    pub(crate) log_lines: Arc<AtomicUsize>,
    /// What it said at start about its connection cap under the descriptor limit.
    pub(crate) cap_line: Arc<std::sync::Mutex<Option<String>>>,
    /// The connections it said it dropped as slow consumers, as its log lines were read.
    pub(crate) slow_drops: SlowDrops,
}

/// The gateway's slow-consumer drops, shared with the clients that wait for theirs.
pub(crate) type SlowDrops = Arc<std::sync::Mutex<Vec<SlowDrop>>>;

/// One connection the gateway dropped because its client stopped taking its answer, as its
/// log line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlowDrop {
    /// The client's address and port.
    pub(crate) peer: SocketAddr,
    /// How long its writes had been refused when it was dropped, by the gateway's count.
    pub(crate) stalled_ms: u64,
    /// When the line was read from the child's stderr.
    pub(crate) seen: Instant,
}

/// The text that marks the gateway's slow-consumer line.
const SLOW_CONSUMER: &str = "connection dropped (slow consumer)";

/// The peer and `stalled_ms` of a slow-consumer log line (`… stalled_ms=2412
/// peer=127.0.0.4:40132`), or `None` for any other line.
pub(crate) fn slow_drop_of(line: &str) -> Option<(SocketAddr, u64)> {
    if !line.contains(SLOW_CONSUMER) {
        return None;
    }
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
    };
    Some((
        field("peer")?.parse().ok()?,
        field("stalled_ms")?.parse().ok()?,
    ))
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = ripcord_chaos::process::stop_child(&mut self.child, "ripcord serve");
    }
}

/// Starts `ripcord serve --config CONFIG --listen 127.0.0.1:0` under a descriptor limit of
/// `nofile` with `env`, and waits for its address.
pub(crate) fn start(
    binary: &Path,
    config: &Path,
    nofile: u64,
    env: &[(&str, &str)],
) -> Result<Gateway, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find the xtask binary: {e}"))?;
    let mut cmd = Command::new(me);
    cmd.args([TRAMPOLINE, &nofile.to_string(), "--"])
        .arg(binary)
        .args(["serve", "--config"])
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .envs(env.iter().copied())
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("RIPCORD_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start ripcord serve: {e}"))?;
    let pid = child.id();
    let Some(stderr) = child.stderr.take() else {
        return Err("ripcord serve has no stderr".to_owned());
    };
    let mut slot = Some(child);
    let mut lines = BufReader::new(stderr).lines();
    let url = match ripcord_chaos::process::serving_url(&mut lines) {
        Ok((url, _)) => url,
        Err(e) => {
            let _ = ripcord_chaos::process::stop_child(&mut slot, "ripcord serve");
            return Err(e);
        }
    };
    let cap_line = Arc::new(std::sync::Mutex::new(None));
    let log_lines = Arc::new(AtomicUsize::new(0));
    let slow_drops = SlowDrops::default();
    let (count, cap, drops) = (
        Arc::clone(&log_lines),
        Arc::clone(&cap_line),
        Arc::clone(&slow_drops),
    );
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            count.fetch_add(1, Ordering::Relaxed);
            if line.contains("connections at once") {
                *cap.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(line);
            } else if let Some((peer, stalled_ms)) = slow_drop_of(&line) {
                drops
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(SlowDrop {
                        peer,
                        stalled_ms,
                        seen: Instant::now(),
                    });
            }
        }
    });
    Ok(Gateway {
        child: slot,
        pid,
        url,
        log_lines,
        cap_line,
        slow_drops,
    })
}

/// A field of `/proc/PID/status` in KiB (`VmHWM`, `VmRSS`).
pub(crate) fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The soft and hard "Max open files" of `/proc/PID/limits`.
pub(crate) fn open_files_limit(limits: &str) -> Option<(u64, u64)> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut nums = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .filter_map(|w| w.parse().ok());
    Some((nums.next()?, nums.next()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trampoline_takes_a_limit_and_a_program_and_refuses_the_rest() {
        let a: Vec<String> = ["512", "--", "/bin/ripcord", "serve"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let (n, p, rest) = parse_trampoline(&a).unwrap();
        assert_eq!((n, p, rest), (512, "/bin/ripcord", &a[3..]));
        for bad in [
            &["512"][..],
            &["512", "x", "p"],
            &["many", "--", "p"],
            &["3", "--", "p"],
        ] {
            let bad: Vec<String> = bad.iter().map(|s| (*s).to_owned()).collect();
            assert!(parse_trampoline(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn proc_files_are_read_for_peak_memory_and_the_descriptor_limit() {
        let status =
            "Name:\tripcord\nVmPeak:\t  900000 kB\nVmHWM:\t   61234 kB\nVmRSS:\t   50000 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(61234));
        assert_eq!(status_kib(status, "VmRSS"), Some(50000));
        assert_eq!(status_kib(status, "VmSwap"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            512                  512                  files\n";
        assert_eq!(open_files_limit(limits), Some((512, 512)));
    }

    #[test]
    fn the_gateways_slow_consumer_line_gives_the_client_and_its_stall() {
        // As `ripcord serve` writes it on stderr.
        let line = "2026-12-02T14:24:32.674858Z  INFO ripcord::gateway: a client stopped taking its answer: connection dropped (slow consumer) stalled_ms=2455 peer=127.0.0.7:47073";
        assert_eq!(
            slow_drop_of(line),
            Some(("127.0.0.7:47073".parse().unwrap(), 2455))
        );
        for other in [
            "2026-12-02T14:24:32Z  INFO ripcord::gateway: accept failed peer=127.0.0.7:47073",
            "… connection dropped (slow consumer) stalled_ms=2455",
            "… connection dropped (slow consumer) stalled_ms=x peer=127.0.0.7:47073",
        ] {
            assert_eq!(slow_drop_of(other), None, "{other}");
        }
    }

    #[test]
    fn the_binary_is_found_in_cargo_messages() {
        let m = r#"{"reason":"compiler-artifact","target":{"name":"ripcord_cli"},"executable":null}
{"reason":"compiler-artifact","target":{"name":"ripcord"},"executable":"/t/debug/ripcord"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            executable_of(m, "ripcord"),
            Some(PathBuf::from("/t/debug/ripcord"))
        );
        assert_eq!(executable_of(m, "other"), None);
    }
}
