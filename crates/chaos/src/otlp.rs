//! A real OTLP receiver on loopback for the telemetry end-to-end tests: `rotel`, a Rust
//! OpenTelemetry collector shipped as a Python wheel. `cargo xtask test` starts one for the
//! whole suite; a test run on its own starts an installed one itself.
//!
//! [`ensure_receiver`] installs it into the project venv (`<cache>/venv`, created
//! with `python3 -m venv` when missing; `pip install --pre rotel==…`, a no-op once installed),
//! starts it on two free loopback ports (OTLP/gRPC and OTLP/HTTP) with its debug exporter
//! writing every received span — with kind, resource, attributes and events — to a log file,
//! and waits until both ports accept connections. The test learns where to send and where to
//! read from the environment variables of [`ReceiverInfo::env`]:
//!
//! - `RIPCORD_OTLP_GRPC_ENDPOINT` — `http://127.0.0.1:PORT` (OTLP/gRPC)
//! - `RIPCORD_OTLP_HTTP_ENDPOINT` — `http://127.0.0.1:PORT` (OTLP/HTTP; `/v1/traces` appended)
//! - `RIPCORD_OTLP_QUERY` — `rotel-log:<path>`: the debug log to read the spans back from
//!
//! The receiver runs until [`ReceiverInfo::stop`] (or drop). Typical use in `cargo xtask test`:
//!
//! ```ignore
//! let receiver = ripcord_chaos::otlp::ensure_receiver()?;
//! cmd.envs(receiver.env());
//! let result = run_cmd(&mut cmd);
//! receiver.stop()?;
//! result
//! ```
//!
//! It uses only `std`: no async runtime is needed to start or stop the receiver.

use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The rotel release installed (a pre-release; pinned so every machine runs the same one).
pub const ROTEL_REQUIREMENT: &str = "rotel==0.0.1a15";

/// How long the receiver may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running receiver: where to send, where to read, and the process to stop.
#[derive(Debug)]
pub struct ReceiverInfo {
    /// `http://127.0.0.1:PORT` for OTLP/gRPC.
    pub grpc_endpoint: String,
    /// `http://127.0.0.1:PORT` for OTLP/HTTP.
    pub http_endpoint: String,
    /// The debug log holding every span received.
    pub log: PathBuf,
    child: Option<Child>,
}

impl ReceiverInfo {
    /// The environment variables that tell the tests about the receiver.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("RIPCORD_OTLP_GRPC_ENDPOINT", self.grpc_endpoint.clone()),
            ("RIPCORD_OTLP_HTTP_ENDPOINT", self.http_endpoint.clone()),
            (
                "RIPCORD_OTLP_QUERY",
                format!("rotel-log:{}", self.log.display()),
            ),
        ]
    }

    /// Stops the receiver (kills the process it started and reaps it).
    pub fn stop(mut self) -> Result<(), String> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<(), String> {
        crate::process::stop_child(&mut self.child, "rotel")
    }
}

impl Drop for ReceiverInfo {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// The workspace root: the nearest ancestor of this crate with a `[workspace]` manifest.
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for dir in here.ancestors() {
        let manifest = dir.join("Cargo.toml");
        if std::fs::read_to_string(&manifest).is_ok_and(|s| s.contains("[workspace]")) {
            return dir.to_path_buf();
        }
    }
    here
}

/// The project venv, `<cache>/venv`. The cache is found as `ripcord_local_onnx::default_cache_dir`
/// finds it (this crate sits below that one, so it cannot call it):
/// `$RIPCORD_CACHE`, else `$XDG_CACHE_HOME/ripcord`, else `~/.cache/ripcord`, else
/// `<workspace>/.cache`.
pub fn venv_dir(root: &Path) -> PathBuf {
    let set = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let cache = set("RIPCORD_CACHE")
        .or_else(|| {
            set("XDG_CACHE_HOME")
                .filter(|p| p.is_absolute())
                .map(|p| p.join("ripcord"))
        })
        .or_else(|| {
            set("HOME")
                .filter(|p| p.is_absolute())
                .map(|p| p.join(".cache/ripcord"))
        })
        .unwrap_or_else(|| root.join(".cache"));
    cache.join("venv")
}

fn venv_python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{shown} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The path of the installed `rotel-agent` binary, if rotel is installed in the venv.
pub fn installed_agent(root: &Path) -> Option<PathBuf> {
    let python = venv_python(&venv_dir(root));
    if !python.exists() {
        return None;
    }
    let found = run(Command::new(&python).args([
        "-c",
        "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))",
    ]))
    .ok()?;
    let agent = PathBuf::from(found);
    agent.is_file().then_some(agent)
}

/// Installs rotel into the project venv (creating the venv if needed) unless it is there.
pub fn install(root: &Path) -> Result<PathBuf, String> {
    if let Some(agent) = installed_agent(root) {
        return Ok(agent);
    }
    let venv = venv_dir(root);
    if !venv_python(&venv).exists() {
        if let Some(cache) = venv.parent() {
            std::fs::create_dir_all(cache)
                .map_err(|e| format!("could not create {}: {e}", cache.display()))?;
        }
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    run(Command::new(venv_python(&venv)).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--pre",
        ROTEL_REQUIREMENT,
    ]))?;
    installed_agent(root)
        .ok_or_else(|| "rotel installed, but its rotel-agent binary was not found".to_owned())
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free loopback port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

fn unique_dir() -> Result<PathBuf, String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("ripcord-otlp-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Waits until both ports accept connections, or the process exits, or the time is up.
#[expect(
    clippy::disallowed_methods,
    reason = "a synchronous tool: a short pause between probes is what it needs"
)]
fn wait_ready(child: &mut Child, ports: [u16; 2], log: &Path) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("rotel: {e}"))? {
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!(
                "rotel exited with {status} before it was ready: {}",
                tail.trim()
            ));
        }
        let ready = ports.iter().all(|&p| {
            TcpStream::connect_timeout(
                &SocketAddr::from(([127, 0, 0, 1], p)),
                Duration::from_millis(200),
            )
            .is_ok()
        });
        if ready {
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(format!(
                "rotel did not accept connections within {READY_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts the installed agent on free loopback ports and waits until it is ready. Retries with
/// new ports when another process took one in between.
pub fn start(agent: &Path) -> Result<ReceiverInfo, String> {
    let dir = unique_dir()?;
    let mut last = String::new();
    for attempt in 0..3 {
        let (grpc, http) = (free_port()?, free_port()?);
        if grpc == http {
            continue;
        }
        let log = dir.join(format!("rotel-{attempt}.log"));
        let out =
            File::create(&log).map_err(|e| format!("could not create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("could not open the log twice: {e}"))?;
        let mut child = Command::new(agent)
            .arg("start")
            .args(["--exporter", "blackhole"])
            .args(["--debug-log", "traces", "--debug-log", "metrics"])
            .args(["--debug-log-verbosity", "detailed"])
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
            .args(["--batch-timeout", "50ms"])
            .arg("--pid-file")
            .arg(dir.join(format!("rotel-{attempt}.pid")))
            .arg("--log-file")
            .arg(dir.join(format!("rotel-{attempt}.agent.log")))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", agent.display()))?;
        match wait_ready(&mut child, [grpc, http], &log) {
            Ok(()) => {
                return Ok(ReceiverInfo {
                    grpc_endpoint: format!("http://127.0.0.1:{grpc}"),
                    http_endpoint: format!("http://127.0.0.1:{http}"),
                    log,
                    child: Some(child),
                });
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                last = e;
            }
        }
    }
    Err(format!("could not start rotel: {last}"))
}

/// Installs the receiver if needed, starts it on loopback and waits until it is ready.
///
/// # Errors
///
/// A message naming what failed: creating the venv, `pip install`, starting rotel, or rotel
/// not becoming ready within 30 s.
pub fn ensure_receiver() -> Result<ReceiverInfo, String> {
    let agent = install(&workspace_root())?;
    start(&agent)
}

/// Starts the receiver only if it is already installed (no network): `Ok(None)` otherwise.
/// The OTLP tests use it when they run outside `cargo xtask test`.
pub fn start_if_installed() -> Result<Option<ReceiverInfo>, String> {
    match installed_agent(&workspace_root()) {
        Some(agent) => start(&agent).map(Some),
        None => Ok(None),
    }
}
