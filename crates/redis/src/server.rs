//! A real `redis-server` child process on loopback, for tests and benchmarks (feature
//! `server`). Debian's package provides the binary (`apt-get install redis-server`;
//! `cargo xtask test` installs it when it is missing).

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why a [`RedisServer`] did not start.
#[derive(Debug)]
pub enum StartError {
    /// `redis-server` is not on `PATH`.
    NotInstalled,
    /// It could not be started, or did not answer `PING` in time.
    Failed(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::NotInstalled => {
                f.write_str("redis-server not found on PATH (apt-get install redis-server)")
            }
            StartError::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for StartError {}

/// A `redis-server` on 127.0.0.1 with nothing persisted, killed (and reaped) on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
}

impl RedisServer {
    /// Starts one on a free port and waits (up to 10 s) until it answers `PING`.
    ///
    /// # Errors
    ///
    /// [`StartError::NotInstalled`] without the binary; [`StartError::Failed`] otherwise.
    pub async fn start() -> Result<RedisServer, StartError> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| StartError::Failed(format!("no free loopback port: {e}")))?;
        RedisServer::start_on(port).await
    }

    /// Starts one on `port` (e.g. again where a killed one ran).
    ///
    /// # Errors
    ///
    /// As [`RedisServer::start`].
    pub async fn start_on(port: u16) -> Result<RedisServer, StartError> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => StartError::NotInstalled,
                _ => StartError::Failed(format!("cannot start redis-server: {e}")),
            })?;
        let server = RedisServer {
            child: Some(child),
            port,
        };
        let until = Instant::now() + Duration::from_secs(10);
        while server.command("PING").as_deref() != Some("+PONG") {
            if Instant::now() > until {
                return Err(StartError::Failed(format!(
                    "redis-server on port {port} did not answer PING within 10 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(server)
    }

    /// For tests: [`RedisServer::start`], or `Ok(None)` after a loud `SKIPPED` line naming
    /// `what` when the binary is missing — unless the `CI` variable is set, where a missing
    /// binary is an error (CI installs it, so the tests must run there).
    ///
    /// # Errors
    ///
    /// The binary is missing under CI, or it did not start.
    pub async fn start_or_skip(what: &str) -> Result<Option<RedisServer>, StartError> {
        match RedisServer::start().await {
            Ok(s) => Ok(Some(s)),
            Err(StartError::NotInstalled) if std::env::var_os("CI").is_none() => {
                // Written to the real stderr, past libtest's capture, so the skip is seen.
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: {}; {what} did not run",
                    StartError::NotInstalled
                );
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends one inline command and returns the first line of the reply (`None` when the
    /// server does not answer within 2 s).
    pub fn command(&self, cmd: &str) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        s.write_all(format!("{cmd}\r\n").as_bytes()).ok()?;
        let mut out = Vec::new();
        let mut byte = [0u8; 1];
        while !out.ends_with(b"\r\n") {
            s.read_exact(&mut byte).ok()?;
            out.push(byte[0]);
        }
        out.truncate(out.len() - 2);
        Some(String::from_utf8_lossy(&out).into_owned())
    }

    /// How many Lua scripts (`EVAL` and `EVALSHA`) the server has run since it started, read
    /// from `INFO commandstats` (`None` when it does not answer). Tests count the round trips
    /// a store makes with it.
    pub async fn script_calls(&self) -> Option<u64> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut con = client.get_multiplexed_async_connection().await.ok()?;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut con)
            .await
            .ok()?;
        Some(
            info.lines()
                .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
                .filter_map(|l| {
                    l.split("calls=")
                        .nth(1)?
                        .split(',')
                        .next()?
                        .parse::<u64>()
                        .ok()
                })
                .sum(),
        )
    }

    /// Kills it now (a Redis outage), and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
