//! A real Prometheus for the operators' tests (`prometheus.rs`, `prometheus_budget.rs`): find
//! Debian's binaries (a loud skip without them, a failure under `CI`), start one scraping
//! loopback targets with the shipped rules' `for:` cut to seconds, and wait for an alert.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

pub(crate) const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

pub(crate) fn rules_file() -> PathBuf {
    Path::new(ROOT).join("deploy/prometheus/alerts.yml")
}

/// `/usr/bin/<name>`, or a loud skip (a failure under CI).
pub(crate) fn tool(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from("/usr/bin").join(name);
    if p.exists() {
        return Some(p);
    }
    let msg =
        format!("{name} is missing — run `cargo xtask test`, which installs Debian's `prometheus`");
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

pub(crate) fn tempdir(what: &str) -> PathBuf {
    crate::support::temp_dir(&format!("prom-{what}"))
}

pub(crate) use crate::support::free_port;

/// A Prometheus child on loopback, killed on drop.
pub(crate) struct Prometheus {
    child: Child,
    pub(crate) url: String,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts Prometheus scraping `targets` (host:port) every second, with the shipped rules whose
/// `for:` durations are cut to 2 s.
pub(crate) fn start_prometheus(bin: &Path, targets: &[&str]) -> Prometheus {
    let dir = tempdir("server");
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    let mut short = String::new();
    for line in rules.lines() {
        match line.split_once("for: ") {
            Some((indent, _)) if indent.trim().is_empty() => {
                short.push_str(indent);
                short.push_str("for: 2s");
            }
            _ => short.push_str(line),
        }
        short.push('\n');
    }
    std::fs::write(dir.join("rules.yml"), short).unwrap();
    let targets = targets
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
         scrape_configs:\n  - job_name: ripcord\n    metrics_path: /metrics\n    static_configs:\n      - targets: [{targets}]\n",
        dir.join("rules.yml").display()
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let child = Command::new(bin)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
        dir,
    }
}

/// Every alert Prometheus at `prom_url` holds (pending or firing).
pub(crate) async fn alerts(client: &reqwest::Client, prom_url: &str) -> Vec<Value> {
    use crate::support::Fetch;
    let v: Value = client
        .get(format!("{prom_url}/api/v1/alerts"))
        .json_body()
        .await;
    let held = v["data"]["alerts"].as_array().cloned();
    held.unwrap_or_else(|| panic!("no alert list in {v}"))
}

/// The alerts Prometheus holds once `query` has reached `at_least` (it has scraped `what`) and
/// the rules have been evaluated twice since: what the traffic so far sets off.
pub(crate) async fn alerts_once_scraped(
    client: &reqwest::Client,
    prom_url: &str,
    what: &str,
    query: &str,
    at_least: f64,
) -> Vec<Value> {
    wait_for_value(client, prom_url, what, query, at_least).await;
    two_more_evaluations(client, prom_url).await;
    alerts(client, prom_url).await
}

/// The alert `name` with `labels` once it fires, after checking that its labels also hold
/// `expect` (each failure names the alert).
pub(crate) async fn assert_fires(
    client: &reqwest::Client,
    prom_url: &str,
    name: &str,
    labels: &[(&str, &str)],
    expect: &[(&str, &str)],
) -> Value {
    let alert = firing_alert_with(client, prom_url, name, labels).await;
    for (k, want) in expect {
        assert_eq!(alert["labels"][*k], *want, "{name} {k}: {alert}");
    }
    alert
}

/// The alert `name` whose labels include `labels`, once Prometheus at `prom_url` reports it
/// firing (polled for up to 60 s).
pub(crate) async fn firing_alert_with(
    client: &reqwest::Client,
    prom_url: &str,
    name: &str,
    labels: &[(&str, &str)],
) -> Value {
    poll(
        Duration::from_secs(60),
        &format!("{name} {labels:?} firing"),
        || {
            let client = client.clone();
            let url = format!("{prom_url}/api/v1/alerts");
            async move {
                let v: Value = client.get(url).send().await.ok()?.json().await.ok()?;
                v["data"]["alerts"]
                    .as_array()?
                    .iter()
                    .find(|a| {
                        a["labels"]["alertname"] == name
                            && a["state"] == "firing"
                            && labels.iter().all(|(k, want)| a["labels"][*k] == *want)
                    })
                    .cloned()
            }
        },
    )
    .await
}

/// Polls `f` every 250 ms until it returns `Some`, for at most `limit`.
pub(crate) async fn poll<T, F, Fut>(limit: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {limit:?}"
        );
    }
}

/// The first value of an instant query, when Prometheus answers one.
pub(crate) async fn query_value(client: &reqwest::Client, prom: &str, query: &str) -> Option<f64> {
    let v: Value = client
        .get(format!("{prom}/api/v1/query"))
        .query(&[("query", query)])
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// Waits until `query`'s value is at least `at_least` (Prometheus has scraped what it counts).
pub(crate) async fn wait_for_value(
    client: &reqwest::Client,
    prom: &str,
    what: &str,
    query: &str,
    at_least: f64,
) {
    poll(Duration::from_secs(60), what, || async move {
        query_value(client, prom, query)
            .await
            .filter(|n| *n >= at_least)
            .map(|_| ())
    })
    .await;
}

/// How many times Prometheus has evaluated its rule groups (the largest group's count).
pub(crate) async fn rule_evaluations(client: &reqwest::Client, prom: &str) -> Option<f64> {
    let text = client
        .get(format!("{prom}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .filter(|l| l.starts_with("prometheus_rule_group_iterations_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(f64::max)
}

/// Waits until the rules have been evaluated twice more than now, so an alert that was going
/// to be pending or firing by now is.
pub(crate) async fn two_more_evaluations(client: &reqwest::Client, prom: &str) {
    let before = poll(Duration::from_secs(10), "Prometheus's own metrics", || {
        rule_evaluations(client, prom)
    })
    .await;
    poll(
        Duration::from_secs(30),
        "two more rule evaluations",
        || async move {
            rule_evaluations(client, prom)
                .await
                .filter(|n| *n >= before + 2.0)
        },
    )
    .await;
}
