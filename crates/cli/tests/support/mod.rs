//! Shared helpers for the binary's tests: run `ripcord`, find the project's Python venv.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

pub(crate) mod prom;

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

/// A gateway key `secret` of `tenant` (from `env TEST_KEY`) with no limits or controls.
pub(crate) fn gateway_key(secret: &str, tenant: Option<&str>) -> ripcord_cli::config::GatewayKey {
    ripcord_cli::config::GatewayKey {
        tenant: tenant.map(str::to_owned),
        source: "env TEST_KEY".to_owned(),
        secret: secrecy::SecretString::from(secret.to_owned()),
        routes: None,
        sub_tenants: false,
        rpm: None,
        tpm: None,
        controls: Default::default(),
    }
}

/// A loopback port that was free a moment ago (for a listener the gateway opens itself).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// The `ripcord` binary built for these tests, with no vendor keys in its environment.
pub(crate) fn ripcord() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ripcord"));
    for var in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RIPCORD_CONFIG"] {
        c.env_remove(var);
    }
    c
}

/// Runs `ripcord check-config <path>` with `env` and returns its output.
pub(crate) fn check_config(path: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    ripcord()
        .arg("check-config")
        .arg(path)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// [`check_config`] that must succeed (else the test fails with its stderr): its stdout.
pub(crate) fn check_config_ok(path: &std::path::Path, env: &[(&str, &str)]) -> String {
    stdout_of("ripcord check-config", &check_config(path, env))
}

/// The stdout of a finished command that must have succeeded (else the test fails with `what`
/// and its stderr).
pub(crate) fn stdout_of(what: &str, out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
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

/// `path` under [`cache_dir`], when present (see [`require`]).
pub(crate) fn cached(path: &str, what: &str) -> Option<PathBuf> {
    require(cache_dir().join(path), what)
}

/// The JSON a `ripcord chat --json` run printed, and its stderr; the run must have succeeded
/// (else the test fails with its stderr).
pub(crate) fn chat_json(out: &std::process::Output) -> (serde_json::Value, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

/// The project's Python (with the `openai` SDK installed by `cargo xtask test`).
pub(crate) fn python() -> Option<PathBuf> {
    cached("venv/bin/python", "the project's Python venv")
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

    /// Sends the signal `sig` (`HUP`, `TERM`, `KILL`) to the server with `kill`, which must
    /// succeed.
    pub(crate) fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} failed");
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
    let (url, _) = ripcord_chaos::process::serving_url(&mut lines).unwrap();
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
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(script).args(args);
    script_json("Python", cmd).await
}

/// Runs `cmd` off the async runtime and parses what it prints as JSON; a script that fails
/// fails the test with its stderr (`what` names its language).
async fn script_json(what: &str, mut cmd: Command) -> serde_json::Value {
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    serde_json::from_str(&stdout_of(&format!("{what} script"), &out)).unwrap()
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
    write_config(
        dir,
        &format!(
            "[chain]\norder = [\"primary\", \"backup\"]\ndeadline_ms = 5000\nstatic_reply = \"busy\"\n{}{}{extra}\n",
            tripping_link("primary", primary),
            openai_link("backup", "gpt-4o-mini", backup, "sk-test"),
        ),
    )
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
    write_config(
        dir,
        &format!(
            "[chain]\norder = [\"primary\", \"backup\"]\ndeadline_ms = 10000\n{}",
            openai_then_anthropic_links(primary_url, backup_url)
        ),
    )
}

/// The two links of [`openai_then_anthropic`] as `[[providers]]` sections, for a config that
/// puts its own chain or routes before them.
pub(crate) fn openai_then_anthropic_links(primary_url: &str, backup_url: &str) -> String {
    format!(
        r#"
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
    )
}

/// One `[[providers]]` section: the link `name` of `kind` serving `model` at `base_url`, with
/// the upstream key `api_key`.
pub(crate) fn link(name: &str, kind: &str, model: &str, base_url: &str, api_key: &str) -> String {
    format!(
        "\n[[providers]]\nname = \"{name}\"\nkind = \"{kind}\"\nmodel = \"{model}\"\n\
         base_url = \"{base_url}\"\napi_key = \"{api_key}\"\n"
    )
}

/// [`link`] of kind `openai` at the fake (or server) `url`, whose API is under `/v1`.
pub(crate) fn openai_link(name: &str, model: &str, url: &str, api_key: &str) -> String {
    link(name, "openai", model, &format!("{url}/v1"), api_key)
}

/// [`link`] of kind `anthropic` at the fake (or server) `url`.
pub(crate) fn anthropic_link(name: &str, model: &str, url: &str, api_key: &str) -> String {
    link(name, "anthropic", model, url, api_key)
}

/// The lines after a `[[providers]]` section that make its link try once.
pub(crate) const ONE_ATTEMPT: &str = "[providers.retry]\nmax_attempts = 1\n";

/// A fresh, empty directory `ripcord-<name>-<pid>` under the system temp dir.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ripcord-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` as `dir/ripcord.toml` (creating `dir`) and returns its path.
pub(crate) fn write_config(dir: &std::path::Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("ripcord.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A fake vendor speaking `wire` that answers `reply`.
pub(crate) async fn fake(
    wire: ripcord_chaos::Wire,
    reply: ripcord_chaos::Reply,
) -> ripcord_chaos::FakeVendor {
    ripcord_chaos::FakeVendor::start_with(
        wire,
        ripcord_chaos::FakeOptions::default().with_reply(reply),
    )
    .await
    .unwrap()
}

/// Reads `stream` until the peer closes it, within `limit` (else the test fails: `what` did not
/// come): the bytes read.
pub(crate) async fn read_to_close<R: tokio::io::AsyncRead + Unpin>(
    stream: &mut R,
    limit: std::time::Duration,
    what: &str,
) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut got))
        .await
        .unwrap_or_else(|_| panic!("{what} did not come within {limit:?}"))
        .unwrap();
    got
}

/// The JSON body of the last request `vendor` received.
pub(crate) fn last_sent(vendor: &ripcord_chaos::FakeVendor) -> serde_json::Value {
    vendor.requests().last().unwrap().json().unwrap()
}

/// `N` OpenAI-wire fake vendors, answering with their defaults.
pub(crate) async fn openai_fakes<const N: usize>() -> [ripcord_chaos::FakeVendor; N] {
    let mut fakes = Vec::with_capacity(N);
    for _ in 0..N {
        fakes.push(
            ripcord_chaos::FakeVendor::start(ripcord_chaos::Wire::OpenAi)
                .await
                .unwrap(),
        );
    }
    match fakes.try_into() {
        Ok(fakes) => fakes,
        Err(_) => unreachable!("{N} fakes were started"),
    }
}

/// A fake vendor speaking `wire` that fails every call with `error`.
pub(crate) async fn fake_failing(
    wire: ripcord_chaos::Wire,
    error: ripcord_chaos::VendorError,
) -> ripcord_chaos::FakeVendor {
    let vendor = ripcord_chaos::FakeVendor::start(wire).await.unwrap();
    vendor.set_script(ripcord_chaos::Script::Always(
        ripcord_chaos::Behavior::Error(error),
    ));
    vendor
}

/// `POST url` with `body` as JSON: the status, the headers and the body text.
pub(crate) async fn post_full(
    url: &str,
    body: serde_json::Value,
) -> (u16, reqwest::header::HeaderMap, String) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

/// `POST url` with `body` as JSON: the status and the body text.
pub(crate) async fn post(url: &str, body: serde_json::Value) -> (u16, String) {
    let (status, _, text) = post_full(url, body).await;
    (status, text)
}

/// `POST url` with `body` as JSON, which must answer 200: the body text.
pub(crate) async fn post_ok(url: &str, body: serde_json::Value) -> String {
    let (status, text) = post(url, body).await;
    assert_eq!(status, 200, "{text}");
    text
}

/// [`post_ok`]'s body, as JSON.
pub(crate) async fn post_ok_json(url: &str, body: serde_json::Value) -> serde_json::Value {
    serde_json::from_str(&post_ok(url, body).await).unwrap()
}

/// `(event name, data)` of every SSE event in a body (`""` with no name, `null` with no data).
pub(crate) fn sse_events(body: &str) -> Vec<(String, serde_json::Value)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or_default();
            let data = e
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or("null");
            (name.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// The `data:` payloads of an SSE body, as JSON (`[DONE]` left out; anything else that is
/// not JSON fails the test).
pub(crate) fn sse_data(body: &str) -> Vec<serde_json::Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("not JSON ({e}): {d}")))
        .collect()
}

/// `ripcord serve` of [`two_routes`] over the fakes `gpt` and `claude`, its config in a temp
/// dir that is removed on drop.
pub(crate) struct TwoRoutes {
    pub(crate) gpt: ripcord_chaos::FakeVendor,
    pub(crate) claude: ripcord_chaos::FakeVendor,
    pub(crate) dir: PathBuf,
    pub(crate) served: Served,
}

impl TwoRoutes {
    /// Serves the route `gpt` (the fake `gpt`, as `gpt_model`) and the route `claude` from a
    /// config in the temp dir `name`.
    pub(crate) fn serve(
        name: &str,
        gpt: ripcord_chaos::FakeVendor,
        claude: ripcord_chaos::FakeVendor,
        gpt_model: &str,
    ) -> Self {
        let dir = temp_dir(name);
        let served = serve(&two_routes(
            &dir,
            &gpt.base_url(),
            &claude.base_url(),
            gpt_model,
        ));
        Self {
            gpt,
            claude,
            dir,
            served,
        }
    }

    /// The gateway's URL of `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.served.url)
    }
}

impl Drop for TwoRoutes {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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
    let mut cmd = Command::new("node");
    cmd.arg(&file).args(args).current_dir(&dir);
    script_json("Node.js", cmd).await
}

/// A config with two routes of one link each: `gpt` (an OpenAI-wire link of `gpt_model` at
/// `openai`) and `claude` (an Anthropic link at `anthropic`), written to `dir/ripcord.toml`.
pub(crate) fn two_routes(
    dir: &std::path::Path,
    openai: &str,
    anthropic: &str,
    gpt_model: &str,
) -> PathBuf {
    two_routes_named(dir, "gpt", openai, anthropic, gpt_model)
}

/// [`two_routes`] with the OpenAI-wire link's route named `gpt_route`.
pub(crate) fn two_routes_named(
    dir: &std::path::Path,
    gpt_route: &str,
    openai: &str,
    anthropic: &str,
    gpt_model: &str,
) -> PathBuf {
    write_config(
        dir,
        &format!(
            "[[routes]]\nname = \"{gpt_route}\"\norder = [\"gpt\"]\n\n\
             [[routes]]\nname = \"claude\"\norder = [\"claude\"]\n{}{}",
            openai_link("gpt", gpt_model, openai, "sk-test"),
            anthropic_link("claude", "claude-sonnet-4-5", anthropic, "sk-ant-test"),
        ),
    )
}

/// An OpenAI-wire link `name` of `model` (key `sk-test`) at the fake `url` that tries once and
/// whose breaker opens only after `failures` failures, without the background probe: set
/// higher than a test's calls, it stays closed through the test.
pub(crate) fn steady_link(name: &str, model: &str, url: &str, failures: u32) -> String {
    format!(
        "{}{ONE_ATTEMPT}[providers.breaker]\nfailure_threshold = {failures}\nbackground_probe_ms = 0\n",
        openai_link(name, model, url, "sk-test")
    )
}

/// A `[[routes]]` section: the route `name` over the links `order` (lines of its own may
/// follow).
pub(crate) fn route(name: &str, order: &[&str]) -> String {
    format!("\n[[routes]]\nname = \"{name}\"\norder = {order:?}\n")
}

/// An OpenAI-wire link `name` (`gpt-4o`, key `sk-test`) at the fake `url` that tries once and
/// whose breaker trips after 2 failures and stays open for 10 minutes, without the background
/// model-list probe (which would re-admit it as soon as the fake's `/models` answers).
pub(crate) fn tripping_link(name: &str, url: &str) -> String {
    format!(
        "{}{ONE_ATTEMPT}[providers.breaker]\nfailure_threshold = 2\nopen_ms = 600000\n\
         background_probe_ms = 0\n",
        openai_link(name, "gpt-4o", url, "sk-test")
    )
}

/// Every JSON body a [`webhook`] receiver got, in order.
#[derive(Clone, Default)]
pub(crate) struct Received(std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>);

impl Received {
    /// Every alert of every body (an Alertmanager body is an array).
    pub(crate) fn alerts(&self) -> Vec<serde_json::Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .flat_map(|b| b.as_array().cloned().unwrap_or_default())
            .collect()
    }
}

/// A webhook receiver on loopback answering 200 to `POST /hook/<path>`: its base URL, and what
/// it got.
pub(crate) async fn webhook(path: &str) -> (String, Received) {
    use axum::extract::State;
    let got = Received::default();
    let app =
        axum::Router::new()
            .route(
                &format!("/hook/{path}"),
                axum::routing::post(
                    |State(got): State<Received>,
                     axum::Json(body): axum::Json<serde_json::Value>| async move {
                        got.0.lock().unwrap().push(body);
                        "ok"
                    },
                ),
            )
            .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), got)
}

/// One chat call to `route` at the gateway `url`; its status (the body read and dropped).
pub(crate) async fn call_route(client: &reqwest::Client, url: &str, route: &str) -> u16 {
    call_route_with(client, url, route, None, 5).await.0
}

/// [`call_route`] with the gateway key `key` (when given) and `max_tokens`: the status and the
/// body text.
pub(crate) async fn call_route_with(
    client: &reqwest::Client,
    url: &str,
    route: &str,
    key: Option<&str>,
    max_tokens: u32,
) -> (u16, String) {
    let mut req = client
        .post(format!("{url}/v1/chat/completions"))
        .json(&serde_json::json!({"model": route, "max_tokens": max_tokens, "messages": [{"role": "user", "content": "hi"}]}));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

/// The header `name` of `resp` as text (the test fails when it is absent or not text).
pub(crate) fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()[name].to_str().unwrap().to_owned()
}

/// `GET url` (no key), which must answer 200 with a `content-type` starting with
/// `content_type`: its body.
pub(crate) async fn get_page(url: &str, content_type: &str) -> String {
    let resp = reqwest::get(url).await.unwrap();
    assert_eq!(resp.status(), 200, "{url}");
    let got = header(&resp, "content-type");
    assert!(got.starts_with(content_type), "{url}: {got}");
    resp.text().await.unwrap()
}

/// A Redis server for `what` (see `RedisServer::start_or_skip`), or `None` when the test is
/// skipped.
pub(crate) async fn redis(what: &str) -> Option<ripcord_redis::server::RedisServer> {
    ripcord_redis::server::RedisServer::start_or_skip(what)
        .await
        .unwrap()
}

/// `GET url` with the bearer key `key`; the response, whatever its status.
pub(crate) async fn get_keyed(url: &str, key: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(url)
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
}

/// The `error.message` of an error body (the test fails when it has none).
pub(crate) fn error_message(body: &serde_json::Value) -> &str {
    text(&body["error"]["message"])
}

/// The string `v` holds (the test fails when it holds none).
pub(crate) fn text(v: &serde_json::Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// Asserts that the object `v[at]` holds each `(field, value)` of `want`; a failure names the
/// field and shows all of `v`.
pub(crate) fn assert_holds(v: &serde_json::Value, at: &str, want: &[(&str, &str)]) {
    for (field, value) in want {
        assert_eq!(v[at][*field], *value, "{at}.{field}: {v}");
    }
}

/// The strings of the array `v` (the test fails on anything else).
pub(crate) fn strs(v: &serde_json::Value) -> Vec<&str> {
    let items = v.as_array().unwrap_or_else(|| panic!("not an array: {v}"));
    items.iter().map(text).collect()
}

/// A `[[server.keys]]` section: the gateway key of `tenant`, read from the variable `key_env`.
pub(crate) fn tenant_key(tenant: &str, key_env: &str) -> String {
    format!("\n[[server.keys]]\ntenant = \"{tenant}\"\nkey_env = \"{key_env}\"\n")
}

/// Who served an answer: its `x-ripcord-served-by` header (`""` when absent).
pub(crate) fn served_by(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("x-ripcord-served-by")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}
