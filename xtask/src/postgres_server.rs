//! A throwaway Postgres on loopback for the store's tests (issue 38).
//!
//! `ensure_postgres` finds Debian's server binaries (`/usr/lib/postgresql/<version>/bin`),
//! installing the `postgresql` package with apt-get when they are missing (CI runs as root on a
//! fresh machine), `initdb`s a cluster in a fresh temp directory, starts `postgres` on
//! 127.0.0.1 on a free port (durability off: `fsync`, `synchronous_commit`), waits until
//! `pg_isready` says it accepts connections, and hands back the URL for the tests
//! (`RIPCORD_TEST_POSTGRES_URL`, superuser `postgres`, trust auth on loopback only).
//!
//! Postgres refuses to run as root: when xtask is root, the cluster's directory is given to
//! the `nobody` user and `initdb` and `postgres` run through `runuser -u nobody`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::test_server::{TestServer, first_of_three, free_port};

const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The newest `/usr/lib/postgresql/<version>/bin` holding `initdb` and `postgres`.
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").exists() && bin.join("postgres").exists()).then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program` run as `nobody` when we are root, else as we are.
fn command(program: &Path, root: bool) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Waits until `pg_isready` says the server accepts connections, or it exits, or time is up.
#[expect(
    clippy::disallowed_methods,
    reason = "a synchronous tool: a short pause between probes is what it needs"
)]
fn wait_ready(child: &mut Child, bin: &Path, port: u16) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("postgres: {e}"))? {
            return Err(format!("postgres exited with {status} before it was ready"));
        }
        let ready = Command::new(bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q"])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(format!(
                "postgres did not accept connections within {READY_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn start(bin: &Path) -> Result<TestServer, String> {
    let root = is_root();
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("ripcord-pg-{}-{n:x}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if root {
        let ok = Command::new("chown")
            .args(["nobody"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("could not give {} to nobody", dir.display()));
        }
    }
    let data = dir.join("data");
    let init = command(&bin.join("initdb"), root)
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("could not run initdb: {e}"))?;
    if !init.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "initdb failed with {}: {}",
            init.status,
            String::from_utf8_lossy(&init.stderr).trim()
        ));
    }
    let port = free_port()?;
    let spawned = command(&bin.join("postgres"), root)
        .arg("-D")
        .arg(&data)
        .arg("-k")
        .arg(&dir)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
        .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("could not start postgres: {e}"));
        }
    };
    if let Err(e) = wait_ready(&mut child, bin, port) {
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    Ok(TestServer::new(
        "postgres",
        "RIPCORD_TEST_POSTGRES_URL",
        format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        child,
        Some(dir),
    ))
}

/// Installs Debian's `postgresql` when missing, starts a throwaway cluster on a free loopback
/// port and waits until it accepts connections. Retries with a new port when another process
/// took the first one in between.
pub(crate) fn ensure_postgres() -> Result<TestServer, String> {
    let bin = match bin_dir() {
        Some(b) => b,
        None => {
            crate::debian_tools::apt_install(&["postgresql"])?;
            bin_dir().ok_or(
                "apt-get installed postgresql, but /usr/lib/postgresql/*/bin has no initdb",
            )?
        }
    };
    first_of_three(|| start(&bin))
}
