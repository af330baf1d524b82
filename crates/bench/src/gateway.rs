//! The gateway under test: the real `ripcord serve` binary, in its own process, configured with
//! two routes, the first over the same three-link chain as the chain row (its own policy stack
//! from the config: health → breaker → retry → rate limit → adapter) in front of the upstream.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The running gateway; dropping it stops the process.
#[derive(Debug)]
pub(crate) struct Gateway {
    child: Child,
    /// Stop with SIGTERM and wait (so a profiler wrapping the gateway can write its output).
    gentle: bool,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
}

impl Gateway {
    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if self.gentle {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(0));
            if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_ok() {
                let _ = self.child.wait();
                return;
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config: two routes over three OpenAI links on the upstream, generous limits. The
/// benchmark's requests name `MODEL`, an alias of the first route ("smart": all three links);
/// the second route ("fast") shares the third link, so the gateway runs as a team would
/// deploy it: a model lookup per request and links shared between routes.
pub(crate) fn config(upstream: &str) -> String {
    let mut s = format!(
        "[[routes]]\nname = \"smart\"\naliases = [\"{model}\"]\n\
         order = [\"primary\", \"secondary\", \"tertiary\"]\ndeadline_ms = 30000\n\n\
         [[routes]]\nname = \"fast\"\norder = [\"tertiary\"]\ndeadline_ms = 30000\n",
        model = crate::rows::MODEL,
    );
    for name in ["primary", "secondary", "tertiary"] {
        s.push_str(&format!(
            "\n[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nmodel = \"{model}\"\n\
             base_url = \"{upstream}/v1\"\napi_key = \"{key}\"\n\
             [providers.rate_limit]\nrpm = 1000000000\ntpm = 4000000000\n",
            model = crate::rows::MODEL,
            key = crate::rows::KEY,
        ));
    }
    s
}

/// The `ripcord` binary: `explicit`, else next to this executable (the same target folder).
pub(crate) fn find_binary(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--ripcord {}: no such file", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let sibling = exe.with_file_name("ripcord");
    if sibling.is_file() {
        Ok(sibling)
    } else {
        Err(format!(
            "the ripcord binary is not at {} — build it with `cargo build --release -p ripcord-cli` \
             (cargo xtask bench does), or pass --ripcord PATH",
            sibling.display()
        ))
    }
}

/// Writes the config under `dir` and starts `ripcord serve` on an ephemeral loopback port,
/// under `wrapper` (e.g. `valgrind --tool=callgrind`) when given.
pub(crate) fn spawn(
    binary: &Path,
    upstream: &str,
    dir: &Path,
    wrapper: Option<&str>,
) -> Result<Gateway, String> {
    spawn_with(binary, upstream, dir, wrapper, "gateway", "")
}

/// The gateway of [`spawn`] with a ledger: `[store]` on `url` (issue 38's bench rows; the
/// ledger's defaults otherwise), its config and spool named after `name` under `dir`.
pub(crate) fn spawn_ledger(
    binary: &Path,
    upstream: &str,
    dir: &Path,
    name: &str,
    url: &str,
) -> Result<Gateway, String> {
    let spool = dir.join(format!("{name}-spool.jsonl"));
    let _ = std::fs::remove_file(&spool);
    let tail = format!(
        "\n[store]\nurl = \"{url}\"\nspool = \"{}\"\n",
        spool.display()
    );
    spawn_with(binary, upstream, dir, None, name, &tail)
}

/// The two ledger gateways of the bench: one on a fresh SQLite file under `dir`, and one on
/// the Postgres `RIPCORD_BENCH_POSTGRES_URL` names (`cargo xtask bench` starts one), or a note
/// in `notes` saying why that row is skipped.
pub(crate) fn spawn_ledgers(
    binary: &Path,
    upstream: &str,
    dir: &Path,
    notes: &mut Vec<String>,
) -> Result<(Gateway, Option<Gateway>), String> {
    let db = dir.join("ledger.db");
    let _ = std::fs::remove_file(&db);
    eprintln!("ripcord-bench: starting serve with its ledger on SQLite");
    let sqlite = spawn_ledger(
        binary,
        upstream,
        dir,
        "gateway-ledger-sqlite",
        &format!("sqlite://{}", db.display()),
    )?;
    let postgres = match std::env::var("RIPCORD_BENCH_POSTGRES_URL") {
        Ok(url) => {
            eprintln!("ripcord-bench: starting serve with its ledger on Postgres");
            Some(spawn_ledger(
                binary,
                upstream,
                dir,
                "gateway-ledger-postgres",
                &url,
            )?)
        }
        Err(_) => {
            notes.push(
                "row gateway_ledger_postgres skipped: RIPCORD_BENCH_POSTGRES_URL is not set (cargo xtask bench starts a Postgres)"
                    .to_owned(),
            );
            None
        }
    };
    Ok((sqlite, postgres))
}

fn spawn_with(
    binary: &Path,
    upstream: &str,
    dir: &Path,
    wrapper: Option<&str>,
    name: &str,
    tail: &str,
) -> Result<Gateway, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("gateway: create {}: {e}", dir.display()))?;
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config(upstream) + tail)
        .map_err(|e| format!("gateway: write {}: {e}", path.display()))?;
    let mut words = wrapper.unwrap_or_default().split_whitespace();
    let mut cmd = match words.next() {
        Some(program) => {
            let mut c = Command::new(program);
            c.args(words).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    let mut child = cmd
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RIPCORD_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("gateway: cannot start {}: {e}", binary.display()))?;
    let stderr = child.stderr.take().ok_or("gateway: no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let url = match ripcord_chaos::process::serving_url(&mut lines) {
        Ok((url, _)) => url,
        Err(e) => {
            let _ = child.wait();
            return Err(format!("gateway: {e}"));
        }
    };
    // Keep draining stderr so the gateway never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Ok(Gateway {
        child,
        gentle: wrapper.is_some(),
        url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_two_routes_over_three_links_on_the_upstream() {
        let c = config("http://127.0.0.1:9");
        assert_eq!(c.matches("[[providers]]").count(), 3);
        assert_eq!(c.matches("base_url = \"http://127.0.0.1:9/v1\"").count(), 3);
        let parsed: toml::Table = c.parse().unwrap();
        let routes = parsed["routes"].as_array().unwrap();
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0]["aliases"][0].as_str(), Some(crate::rows::MODEL));
    }

    #[test]
    fn a_missing_binary_is_named() {
        let e = find_binary(Some(Path::new("/nonexistent/ripcord"))).unwrap_err();
        assert!(e.contains("/nonexistent/ripcord"), "{e}");
    }
}
