//! A throwaway `redis-server` on loopback for the shared-state tests (issue 11).
//!
//! `ensure_redis` installs Debian's `redis-server` with apt-get when it is missing (CI runs as
//! root on a fresh machine), starts it on 127.0.0.1 on a free port with persistence off, waits
//! until it answers PING, and hands back the URL for the tests (`RIPCORD_REDIS_URL`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::test_server::{TestServer, first_of_three, free_port};

const READY_TIMEOUT: Duration = Duration::from_secs(15);

fn installed() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs Debian's redis-server package (needs root, as in CI).
fn install() -> Result<(), String> {
    for args in [
        &["update"][..],
        &["install", "-y", "--no-install-recommends", "redis-server"][..],
    ] {
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| format!("redis-server is missing and apt-get could not run: {e}"))?;
        if !status.success() {
            return Err(format!(
                "redis-server is missing and `apt-get {}` failed with {status} \
                 (install it: apt-get install redis-server)",
                args.join(" ")
            ));
        }
    }
    if installed() {
        Ok(())
    } else {
        Err("apt-get installed redis-server, but `redis-server --version` fails".to_owned())
    }
}

fn pings(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Waits until the server answers PING, or exits, or the time is up.
#[expect(
    clippy::disallowed_methods,
    reason = "a synchronous tool: a short pause between probes is what it needs"
)]
fn wait_ready(child: &mut Child, port: u16) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("redis-server: {e}"))? {
            return Err(format!(
                "redis-server exited with {status} before it was ready"
            ));
        }
        if pings(port) {
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(format!(
                "redis-server did not answer PING within {READY_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start() -> Result<TestServer, String> {
    let port = free_port()?;
    let mut child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start redis-server: {e}"))?;
    if let Err(e) = wait_ready(&mut child, port) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(TestServer::new(
        "redis-server",
        "RIPCORD_REDIS_URL",
        format!("redis://127.0.0.1:{port}"),
        child,
        None,
    ))
}

/// Installs redis-server when missing (the chaos run's shared-state scenario, under CI).
pub(crate) fn ensure_installed() -> Result<(), String> {
    if installed() { Ok(()) } else { install() }
}

/// Installs redis-server when missing, starts it on a free loopback port and waits for PING.
/// Retries with a new port when another process took the first one in between.
pub(crate) fn ensure_redis() -> Result<TestServer, String> {
    if !installed() {
        install()?;
    }
    first_of_three(start)
}
