//! Operators' view of a real `ripcord serve`: a REAL Prometheus (Debian's `prometheus`)
//! scrapes its `/metrics` over loopback and evaluates the shipped alerting rules
//! (`deploy/prometheus/alerts.yml`, with their `for:` shortened to seconds): silent while the
//! vendors are healthy, then, while the primary vendor is down and the backup's quota runs out,
//! the breaker, failure-streak, error-ratio, static-reply, every-link-failed, fallback and
//! alert-kind rules must fire. `promtool check rules` must accept the shipped file,
//! `promtool test rules` must pass the shipped unit tests (`alerts_test.yml`: every rule fires on
//! its failing series and stays silent on healthy ones), every rule must carry a severity and a
//! runbook section that `docs/operating.md` has, and every query of the shipped Grafana
//! dashboard (`deploy/grafana/ripcord.json`) must name series that `/metrics` exports after the
//! run.
//!
//! Without Prometheus the tests skip loudly, unless `CI` is set, where they fail (`cargo xtask
//! test` installs it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use serde_json::{Value, json};
use support::Fetch;
use support::prom::{self, ROOT, poll, rules_file, start_prometheus, tempdir, tool};

fn dashboard_file() -> PathBuf {
    Path::new(ROOT).join("deploy/grafana/ripcord.json")
}

#[test]
fn promtool_accepts_the_shipped_rules() {
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let out = Command::new(promtool)
        .args(["check", "rules"])
        .arg(rules_file())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check rules failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SUCCESS: 12 rules found"), "{text}");
}

#[test]
fn promtool_unit_tests_fire_every_rule_and_keep_healthy_series_silent() {
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let tests = Path::new(ROOT).join("deploy/prometheus/alerts_test.yml");
    let out = Command::new(promtool)
        .args(["test", "rules"])
        .arg(&tests)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool test rules failed:\n{text}");
    assert!(text.contains("SUCCESS"), "{text}");
    // Every rule of the shipped file is tested for firing by name.
    let cases = std::fs::read_to_string(&tests).unwrap();
    for name in rule_names() {
        let fires = cases
            .split("alertname: ")
            .skip(1)
            .filter(|c| c.starts_with(&format!("{name}\n")))
            .any(|c| c.contains("exp_labels"));
        assert!(fires, "alerts_test.yml never expects {name} to fire");
    }
}

/// The alert names of the shipped rules, in order.
fn rule_names() -> Vec<String> {
    std::fs::read_to_string(rules_file())
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_rule_has_a_severity_and_a_runbook_section_that_exists() {
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    let runbook = std::fs::read_to_string(Path::new(ROOT).join("docs/operating.md")).unwrap();
    let names = rule_names();
    assert!(names.len() >= 12, "{names:?}");
    for chunk in rules.split("- alert: ").skip(1) {
        let name = chunk.lines().next().unwrap().trim();
        let severity = chunk
            .lines()
            .find_map(|l| l.trim().strip_prefix("severity: "))
            .unwrap_or_else(|| panic!("{name} has no severity"));
        assert!(
            ["critical", "warning"].contains(&severity),
            "{name}: severity {severity}"
        );
        let url = chunk
            .lines()
            .find_map(|l| l.trim().strip_prefix("runbook_url: "))
            .unwrap_or_else(|| panic!("{name} has no runbook_url"))
            .trim_matches('"');
        let anchor = url
            .strip_suffix(&format!("docs/operating.md#{}", name.to_lowercase()))
            .unwrap_or_else(|| {
                panic!("{name}: runbook_url {url} is not its section of docs/operating.md")
            });
        assert!(anchor.starts_with("https://"), "{name}: {url}");
        assert!(
            runbook.lines().any(|l| l == format!("## {name}")),
            "docs/operating.md has no section `## {name}`"
        );
    }
}

fn config_file(dir: &Path, primary: &FakeVendor, backup: &FakeVendor) -> PathBuf {
    let backup_policies = "[providers.retry]
max_attempts = 2
base_delay_ms = 10
[providers.breaker]
failure_threshold = 2
open_ms = 300";
    support::two_link_config(
        dir,
        &primary.base_url(),
        &backup.base_url(),
        backup_policies,
    )
}

/// One call; the link that served it.
async fn ask(client: &reqwest::Client, url: &str, stream: bool) -> String {
    let resp = client
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({
            "model": "ripcord",
            "max_tokens": 10,
            "stream": stream,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "hi"}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let served = support::served_by(&resp);
    resp.bytes().await.unwrap();
    served
}

/// The series names a PromQL expression reads: identifiers that start like ripcord's series
/// (`ripcord_…`, `gen_ai_…`), histogram suffixes included.
fn series_in(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut cur = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            cur.push(c);
        } else {
            if (cur.starts_with("ripcord_") || cur.starts_with("gen_ai_"))
                && !expr.contains(&format!("{cur}=")) // a label name, not a series
                && !expr.contains(&format!("{cur} ="))
                && !expr.contains(&format!("by ({cur}"))
                && !expr.contains(&format!(", {cur}"))
            {
                out.insert(cur.clone());
            }
            cur.clear();
        }
    }
    out
}

/// The series names in a Prometheus text exposition (histograms as their `_bucket`, `_sum` and
/// `_count` lines).
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// Every panel of the dashboard with its queries.
fn dashboard_queries() -> Vec<(String, String)> {
    let d: Value = serde_json::from_str(&std::fs::read_to_string(dashboard_file()).unwrap())
        .expect("the dashboard is not JSON");
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("dashboard has panels") {
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().unwrap_or_default().to_owned();
        let targets = p["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("panel {title} has no targets"));
        assert!(!targets.is_empty(), "panel {title} has no queries");
        for t in targets {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {title}: a target without expr"));
            out.push((title.clone(), expr.to_owned()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_fires_the_rules_on_an_outage_stays_silent_while_healthy_and_the_dashboard_reads_real_series()
 {
    let (Some(prom_bin), Some(_)) = (tool("prometheus"), tool("promtool")) else {
        return;
    };
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = tempdir("gateway");
    let served = support::serve(&config_file(&dir, &primary, &backup));
    // A second gateway on the same vendors whose route has no static reply: its calls end in
    // an error when every link fails.
    let bare_dir = tempdir("bare");
    let bare_config = config_file(&bare_dir, &primary, &backup);
    let text = std::fs::read_to_string(&bare_config).unwrap();
    std::fs::write(&bare_config, text.replace("static_reply = \"busy\"\n", "")).unwrap();
    let bare = support::serve(&bare_config);
    let targets = [&served.url, &bare.url].map(|u| u.trim_start_matches("http://").to_owned());
    let prom = start_prometheus(&prom_bin, &[&targets[0], &targets[1]]);
    let client = reqwest::Client::new();

    // A small chaos run. Healthy traffic first (answers, streams with a first chunk, tokens).
    for i in 0..4 {
        assert_eq!(ask(&client, &served.url, i % 2 == 1).await, "primary");
    }
    assert_eq!(ask(&client, &bare.url, false).await, "primary");

    // Healthy: once Prometheus holds those calls from both gateways and has evaluated the
    // rules twice since, no alert is pending or firing.
    let held = prom::alerts_once_scraped(
        &client,
        &prom.url,
        "Prometheus holding the healthy calls",
        "count(ripcord_chain_calls_total)",
        2.0,
    )
    .await;
    assert_eq!(held, Vec::<Value>::new(), "alerts while healthy");

    // The primary goes down for good: two failures trip its breaker, the rest skip it. The
    // backup stumbles once (a retry inside the link).
    primary.set_script(Script::Always(Behavior::Error(VendorError::ServerError)));
    backup.set_script(Script::Sequence(vec![
        Behavior::Error(VendorError::ServerError),
        Behavior::Ok,
    ]));
    for i in 0..6 {
        assert_eq!(ask(&client, &served.url, i % 2 == 1).await, "backup");
    }
    // The backup's quota runs out: static replies, an alert, and its breaker opens (300 ms)
    // and lets a probe through now and then, which fails again: failures in a row pile up.
    backup.set_script(Script::Always(Behavior::Error(VendorError::QuotaExhausted)));
    for _ in 0..2 {
        assert_eq!(ask(&client, &served.url, false).await, "static");
    }
    poll(
        Duration::from_secs(20),
        "5 failed backup attempts in a row",
        || {
            let client = client.clone();
            let url = served.url.clone();
            async move {
                assert_eq!(ask(&client, &url, false).await, "static");
                let metrics = client.get(format!("{url}/metrics")).text_body().await;
                metrics
                    .lines()
                    .find(|l| {
                        l.starts_with("ripcord_link_consecutive_failures{")
                            && l.contains("ripcord_link=\"backup\"")
                    })
                    .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .filter(|n| *n >= 5.0)
            }
        },
    )
    .await;
    // On the gateway without a static reply the same outage is an error to the caller.
    let resp = client
        .post(format!("{}/v1/chat/completions", bare.url))
        .json(&json!({"model": "ripcord", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert!(!resp.status().is_success(), "{}", resp.status());

    let backup_link = &[("ripcord_link", "backup")][..];
    for (name, labels, expect) in [
        (
            "RipcordLinkConsecutiveFailures",
            backup_link,
            &[("severity", "warning")][..],
        ),
        // Only the gateway without a static reply has such calls (the rules sum over replicas).
        (
            "RipcordEveryLinkFailed",
            &[],
            &[("severity", "critical"), ("ripcord_chain", "ripcord")],
        ),
        ("RipcordStaticReply", &[], &[("severity", "critical")]),
        (
            "RipcordBreakerHalfOpen",
            backup_link,
            &[("severity", "warning")],
        ),
        // The backup's probes keep failing between scrapes (the primary's two failures came
        // before its error series was first scraped, so rate() sees no rise there).
        (
            "RipcordProviderErrorRatio",
            backup_link,
            &[("gen_ai_provider_name", "openai")],
        ),
        ("RipcordFallbackShare", &[], &[("ripcord_chain", "ripcord")]),
    ] {
        prom::assert_fires(&client, &prom.url, name, labels, expect).await;
    }

    // …until the quota is topped up: once its breaker lets a probe through, it serves again.
    backup.set_script(Script::Always(Behavior::Ok));
    poll(Duration::from_secs(10), "the backup serving again", || {
        let client = client.clone();
        let url = served.url.clone();
        async move { (ask(&client, &url, false).await == "backup").then_some(()) }
    })
    .await;

    // Prometheus is up and scraping both gateways.
    poll(
        Duration::from_secs(60),
        "a successful scrape of ripcord",
        || {
            let client = client.clone();
            let url = format!("{}/api/v1/targets", prom.url);
            async move {
                let v: Value = client.get(url).send().await.ok()?.json().await.ok()?;
                let all_up = v["data"]["activeTargets"]
                    .as_array()?
                    .iter()
                    .all(|t| t["health"] == "up");
                all_up.then_some(())
            }
        },
    )
    .await;

    // The breaker-open rule fires for the primary.
    let primary_link = [("ripcord_link", "primary")];
    let critical = [("severity", "critical")];
    prom::assert_fires(
        &client,
        &prom.url,
        "RipcordBreakerOpen",
        &primary_link,
        &critical,
    )
    .await;

    // The backup's exhausted quota pages too (one ripcord alert, however many requests).
    let kind = [
        ("ripcord_link", "backup"),
        ("error_type", "quota_exhausted"),
    ];
    prom::assert_fires(&client, &prom.url, "RipcordAlertKindError", &[], &kind).await;

    // Every query of the dashboard reads series that /metrics exports after this run.
    let metrics = client
        .get(format!("{}/metrics", served.url))
        .text_body()
        .await;
    let have = exported(&metrics);
    let queries = dashboard_queries();
    assert!(
        queries.len() >= 10,
        "the dashboard has only {} queries",
        queries.len()
    );
    let mut missing = Vec::new();
    for (title, expr) in &queries {
        let names = series_in(expr);
        assert!(
            !names.is_empty(),
            "panel {title}: no ripcord series in {expr}"
        );
        for n in names {
            if !have.contains(&n) {
                missing.push(format!("panel {title:?}: {n}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "series the dashboard reads but /metrics does not export:\n{}\n\nexported: {have:?}",
        missing.join("\n")
    );

    // And Prometheus itself has data for each of them (the names survived the scrape).
    for (title, expr) in queries.iter().take(3) {
        let v: Value = client
            .get(format!("{}/api/v1/query", prom.url))
            .query(&[(
                "query",
                expr.replace("$__rate_interval", "1m")
                    .replace("$__range", "5m"),
            )])
            .json_body()
            .await;
        assert_eq!(v["status"], "success", "panel {title}: {v}");
    }
}
