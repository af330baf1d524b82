//! Shared helpers for the binary's tests: run `ripcord`, find the project's Python venv.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A gateway served in this process on an ephemeral loopback port: stopped when `stop` is
/// sent or dropped.
pub(crate) struct InProcess {
    /// `http://127.0.0.1:<port>`.
    pub(crate) url: String,
    /// Sending (or dropping) it stops the gateway.
    pub(crate) stop: tokio::sync::oneshot::Sender<()>,
    /// The serving task, which ends once the gateway has stopped.
    pub(crate) task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Serves `state` in this process on an ephemeral loopback port (every in-process gateway
/// test starts its gateway here).
pub(crate) async fn start_gateway(state: ripcord_cli::gateway::GatewayState) -> InProcess {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(ripcord_cli::gateway::serve(
        listener,
        std::sync::Arc::new(state),
        async move {
            let _ = rx.await;
        },
    ));
    InProcess {
        url: format!("http://{addr}"),
        stop,
        task,
    }
}

/// The `ripcord` binary built for these tests, with no vendor keys in its environment.
pub(crate) fn ripcord() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ripcord"));
    for var in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RIPCORD_CONFIG"] {
        c.env_remove(var);
    }
    c
}

/// The cache folder `cargo xtask setup-model` fills.
pub(crate) fn cache_dir() -> PathBuf {
    ripcord_local_onnx::default_cache_dir()
}

/// Returns `Some(path)` when present; when absent, fails under CI and skips loudly elsewhere.
pub(crate) fn require(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let msg = format!(
        "{what} is missing at {} — run `cargo xtask test` (or `cargo xtask setup-model`)",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

/// The project's Python (with the `openai` SDK installed by `cargo xtask test`).
pub(crate) fn python() -> Option<PathBuf> {
    require(
        cache_dir().join("venv/bin/python"),
        "the project's Python venv",
    )
}

/// A running `ripcord serve`, killed on drop.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) url: String,
    /// The lines it writes on stderr after "serving on" (its server log).
    pub(crate) log: std::sync::mpsc::Receiver<String>,
}

impl Served {
    /// The first line of its log that starts with `prefix`, waiting at most `within` for each
    /// line.
    pub(crate) fn line_starting(&self, prefix: &str, within: std::time::Duration) -> String {
        loop {
            let line = self
                .log
                .recv_timeout(within)
                .unwrap_or_else(|_| panic!("no log line starting with {prefix:?}"));
            if line.starts_with(prefix) {
                return line;
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `ripcord serve --config <config> --listen 127.0.0.1:0` and waits for its address.
pub(crate) fn serve(config: &std::path::Path) -> Served {
    serve_with_env(config, &[])
}

/// [`serve`] with extra environment variables (e.g. gateway keys).
pub(crate) fn serve_with_env(config: &std::path::Path, env: &[(&str, &str)]) -> Served {
    let mut cmd = ripcord();
    cmd.envs(env.iter().copied());
    serve_command(cmd, config)
}

/// `ripcord serve --config <config> --listen 127.0.0.1:0` run by `cmd` (the binary, or a
/// wrapper such as `prlimit` whose arguments end with the binary), waiting for its address.
pub(crate) fn serve_command(mut cmd: Command, config: &std::path::Path) -> Served {
    let mut child = cmd
        .args(["serve", "--config"])
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start ripcord serve");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("ripcord serve exited before listening")
            .unwrap();
        if let Some(rest) = line.strip_prefix("ripcord: serving on ") {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    // Keep draining stderr so the child never blocks on a full pipe; the lines go to `log`
    // (a test that does not read them just leaves them queued).
    let (tx, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    Served { child, url, log }
}

/// Runs `script` (`python -c`) with `args` off the async runtime and parses what it prints as
/// JSON; a script that fails fails the test with its stderr.
pub(crate) async fn python_json(
    python: PathBuf,
    script: &'static str,
    args: Vec<String>,
) -> serde_json::Value {
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg("-c")
            .arg(script)
            .args(args)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "Python script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Writes `dir/ripcord.toml`: two OpenAI-wire links, `primary` then `backup` (their base URLs),
/// and a static reply; the primary tries once and its breaker trips after 2 failures and stays
/// open for 10 minutes — without the background model-list probe, which would re-admit it as
/// soon as the fake's `/models` answers (it always does). `extra` follows the backup's section
/// (its own policies, gateway keys).
pub(crate) fn two_link_config(
    dir: &std::path::Path,
    primary: &str,
    backup: &str,
    extra: &str,
) -> PathBuf {
    let path = dir.join("ripcord.toml");
    let text = format!(
        r#"
[chain]
order = ["primary", "backup"]
deadline_ms = 5000
static_reply = "busy"

[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
base_url = "{primary}/v1"
api_key = "sk-test"
[providers.retry]
max_attempts = 1
[providers.breaker]
failure_threshold = 2
open_ms = 600000
background_probe_ms = 0

[[providers]]
name = "backup"
kind = "openai"
model = "gpt-4o-mini"
base_url = "{backup}/v1"
api_key = "sk-test"
{extra}
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Sends a request and reads its whole body, failing the test on any error on the way.
pub(crate) trait Fetch {
    /// The body, as JSON.
    async fn json_body(self) -> serde_json::Value;
    /// The body, as text.
    async fn text_body(self) -> String;
}

impl Fetch for reqwest::RequestBuilder {
    async fn json_body(self) -> serde_json::Value {
        self.send().await.unwrap().json().await.unwrap()
    }
    async fn text_body(self) -> String {
        self.send().await.unwrap().text().await.unwrap()
    }
}

/// Writes `dir/ripcord.toml`: an OpenAI-wire `primary` (`gpt-4o`, one attempt) at
/// `primary_url`, then an Anthropic `backup` (`claude-sonnet-4-5`) at `backup_url`, with
/// upstream keys the tests look for where they must (and must not) go.
pub(crate) fn openai_then_anthropic(
    dir: &std::path::Path,
    primary_url: &str,
    backup_url: &str,
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("ripcord.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[chain]
order = ["primary", "backup"]
deadline_ms = 10000

[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
base_url = "{primary_url}/v1"
api_key = "sk-primary-upstream-key"
[providers.retry]
max_attempts = 1

[[providers]]
name = "backup"
kind = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{backup_url}"
api_key = "sk-ant-backup-upstream-key"
"#
        ),
    )
    .unwrap();
    config
}

/// Runs a Node.js `script` (an ES module written to `dir`, where its packages are installed)
/// with `args` off the async runtime and parses what it prints as JSON; a script that fails
/// fails the test with its stderr.
pub(crate) async fn node_json(
    dir: PathBuf,
    script: &'static str,
    args: Vec<String>,
) -> serde_json::Value {
    let file = dir.join(format!("ripcord-test-{}.mjs", std::process::id()));
    std::fs::write(&file, script).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(&file)
            .args(args)
            .current_dir(&dir)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "Node.js script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A config with two routes of one link each: `gpt` (an OpenAI-wire link of `gpt_model` at
/// `openai`) and `claude` (an Anthropic link at `anthropic`), written to `dir/ripcord.toml`.
pub(crate) fn two_routes(
    dir: &std::path::Path,
    openai: &str,
    anthropic: &str,
    gpt_model: &str,
) -> PathBuf {
    let path = dir.join("ripcord.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[[routes]]
name = "gpt"
order = ["gpt"]

[[routes]]
name = "claude"
order = ["claude"]

[[providers]]
name = "gpt"
kind = "openai"
model = "{gpt_model}"
base_url = "{openai}/v1"
api_key = "sk-test"

[[providers]]
name = "claude"
kind = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{anthropic}"
api_key = "sk-ant-test"
"#
        ),
    )
    .unwrap();
    path
}
