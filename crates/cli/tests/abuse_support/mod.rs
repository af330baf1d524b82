//! Helpers shared by the gateway abuse tests (`gateway_abuse.rs`, `gateway_abuse_more.rs`):
//! a one-link config whose breaker opens on its first counted failure, `ripcord serve` with
//! the gateway key (optionally under `prlimit`), raw loopback connections from a second
//! address, and the child's log and memory.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking; each test file uses some of them

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ripcord_chaos::FakeVendor;
use serde_json::{Value, json};
use tokio::net::{TcpSocket, TcpStream};

use crate::support;

/// The gateway key every abuse test calls with.
pub(crate) const GW_KEY: &str = "gw-abuse-key-0123456789abcdef0123";

/// One link that tries once and whose breaker opens on its first counted failure for a
/// minute: any failure wrongly charged to the vendor shows as a refused next call.
pub(crate) fn provider(vendor: &FakeVendor) -> String {
    format!(
        "[chain]\norder = [\"main\"]\ndeadline_ms = 10000\n\n[[providers]]\nname = \"main\"\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"{}/v1\"\napi_key = \"sk-main-upstream\"\n[providers.retry]\nmax_attempts = 1\n[providers.breaker]\nfailure_threshold = 1\nopen_ms = 60000\n",
        vendor.base_url()
    )
}

pub(crate) fn config(tag: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ripcord-abuse-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `ripcord serve` with the gateway key in `GW_KEYS`.
pub(crate) fn serve(tag: &str, text: &str) -> support::Served {
    support::serve_with_env(&config(tag, text), &[("GW_KEYS", GW_KEY)])
}

/// One [`provider`] link over `vendor`, with the gateway key and the `server` lines (each
/// ending in `\n`, other tables may follow) under `[server]`.
pub(crate) fn keyed(vendor: &FakeVendor, server: &str) -> String {
    format!(
        "{}\n[server]\napi_keys_env = \"GW_KEYS\"\n{server}",
        provider(vendor)
    )
}

/// `ripcord serve` of [`keyed`].
pub(crate) fn serve_keyed(tag: &str, vendor: &FakeVendor, server: &str) -> support::Served {
    serve(tag, &keyed(vendor, server))
}

/// `ripcord serve` under `prlimit --nofile=N:N` (soft and hard: the gateway cannot raise it).
pub(crate) fn serve_with_nofile(tag: &str, text: &str, nofile: u64) -> support::Served {
    let mut cmd = std::process::Command::new("prlimit");
    cmd.arg(format!("--nofile={nofile}:{nofile}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_ripcord"))
        .env("GW_KEYS", GW_KEY);
    for var in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RIPCORD_CONFIG"] {
        cmd.env_remove(var);
    }
    support::serve_command(cmd, &config(tag, text))
}

pub(crate) fn addr(url: &str) -> SocketAddr {
    url.trim_start_matches("http://").parse().unwrap()
}

pub(crate) fn chat_body() -> Value {
    json!({"model": "ripcord", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20})
}

pub(crate) async fn chat(client: &reqwest::Client, url: &str) -> reqwest::Response {
    client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(GW_KEY)
        .json(&chat_body())
        .send()
        .await
        .unwrap()
}

/// `GET <url><path>` (`/healthz`, `/readyz`) on `client`. The caller holds the answer as long
/// as its connection must stay taken (its body unread).
pub(crate) async fn probe(client: &reqwest::Client, url: &str, path: &str) -> reqwest::Response {
    client.get(format!("{url}{path}")).send().await.unwrap()
}

/// `/readyz` of the gateway at `url` says `ready`.
pub(crate) async fn assert_ready(client: &reqwest::Client, url: &str) {
    use crate::support::Fetch;
    let ready: Value = client.get(format!("{url}/readyz")).json_body().await;
    assert_eq!(ready["status"], "ready", "{ready}");
}

/// A TCP connection to `to` from the loopback address `from` (the whole of 127.0.0.0/8 is
/// loopback on Linux: a second client address without a second machine).
pub(crate) async fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(IpAddr::V4(from), 0))?;
    s.connect(to).await
}

/// The attacking address.
pub(crate) const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// Waits (bounded) for a log line containing `needle`; returns it.
pub(crate) fn wait_for_line(served: &support::Served, needle: &str, within: Duration) -> String {
    let end = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match served.log.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(line) => seen.push(line),
            Err(e) => panic!("no log line with {needle:?} ({e}); the log: {seen:#?}"),
        }
    }
}

/// The child's resident set size in KiB (`VmRSS` of `/proc/PID/status`).
pub(crate) fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}
