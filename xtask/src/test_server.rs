//! What the throwaway servers beside the test suite have in common (`redis_server`,
//! `postgres_server`): a free loopback port, a few tries at starting, and a handle that tells
//! the tests the URL and stops the process (and removes its directory) when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Child;

/// A running server: its URL, the process to stop and the directory to remove.
#[derive(Debug)]
pub(crate) struct TestServer {
    /// The process's name, in messages.
    name: &'static str,
    /// The environment variable that hands the URL to the tests.
    var: &'static str,
    /// Where the tests reach it.
    pub(crate) url: String,
    child: Option<Child>,
    /// Its data directory, removed when it stops.
    dir: Option<PathBuf>,
}

impl TestServer {
    /// The server `child` (named `name` in messages) at `url`, which the tests read from `var`;
    /// `dir` is removed when it stops.
    pub(crate) fn new(
        name: &'static str,
        var: &'static str,
        url: String,
        child: Child,
        dir: Option<PathBuf>,
    ) -> TestServer {
        TestServer {
            name,
            var,
            url,
            child: Some(child),
            dir,
        }
    }

    /// The environment variables that tell the tests about the server.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![(self.var, self.url.clone())]
    }

    /// Stops the server (kills the process it started, reaps it, removes its directory).
    pub(crate) fn stop(mut self) -> Result<(), String> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<(), String> {
        if self.child.is_none() {
            return Ok(());
        }
        let stopped = ripcord_chaos::process::stop_child(&mut self.child, self.name);
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        stopped
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// A loopback port nothing listens on right now.
pub(crate) fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free loopback port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// The first of three tries of `start` that works (another process may take the free port
/// before the server binds it), or the last try's error.
pub(crate) fn first_of_three(
    mut start: impl FnMut() -> Result<TestServer, String>,
) -> Result<TestServer, String> {
    let mut last = String::new();
    for _ in 0..3 {
        match start() {
            Ok(server) => return Ok(server),
            Err(e) => last = e,
        }
    }
    Err(last)
}
