//! `[alerts]` end to end: a real `ripcord serve` in front of failing fake vendors sends its
//! alert events to a webhook receiver on loopback (a tiny axum server in this test). Under a
//! 1,000-call outage the receiver gets exactly ONE alert per condition, in Alertmanager's
//! `POST /api/v2/alerts` shape; a webhook that never answers does not slow the calls; a bad
//! `[alerts]` table is refused by file and key, and `check-config` shows the webhook's host,
//! never its secret path.
#![allow(clippy::unwrap_used)] // test helpers fail the test by panicking

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError};
use support::Received;

/// The part of the webhook URL a Slack-style webhook treats as its credential.
const SECRET_PATH: &str = "T0000/B0000/s3cr3t-webhook-path";

fn tempdir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ripcord-webhook-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A webhook receiver on loopback answering 200; its base URL.
async fn receiver() -> (String, Received) {
    support::webhook(SECRET_PATH).await
}

/// Two routes over three fake vendors: `main` (primary → backup → a static reply) and
/// `marker` (one link, no static reply), with `alerts` appended.
fn config(dir: &Path, vendors: &[&FakeVendor; 3], alerts: &str) -> PathBuf {
    let provider = |name: &str, v: &FakeVendor| support::tripping_link(name, &v.base_url());
    let text = format!(
        "[[routes]]\nname = \"main\"\norder = [\"primary\", \"backup\"]\ndeadline_ms = 5000\n\
         static_reply = \"busy\"\n\n[[routes]]\nname = \"marker\"\norder = [\"third\"]\n\
         deadline_ms = 5000\n\n{}{}{}{alerts}\n",
        provider("primary", vendors[0]),
        provider("backup", vendors[1]),
        provider("third", vendors[2]),
    );
    let path = dir.join("ripcord.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `limit`.
async fn poll<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_call_outage_sends_one_alert_per_condition() {
    let vendors = support::openai_fakes::<3>().await;
    let (hook, got) = receiver().await;
    let dir = tempdir("outage");
    let alerts = format!(
        "[alerts]\nwebhook_url = \"{hook}/hook/{SECRET_PATH}\"\nformat = \"alertmanager\"\n\
         min_interval_ms = 20\ndedupe_ms = 600000\ntimeout_ms = 1000\nretries = 2\n"
    );
    let served = support::serve(&config(
        &dir,
        &[&vendors[0], &vendors[1], &vendors[2]],
        &alerts,
    ));
    let client = reqwest::Client::new();
    assert_eq!(support::call_route(&client, &served.url, "main").await, 200);

    // The outage: the primary fails with 5xx, the backup's quota is gone. Both breakers open
    // after two failures each; every call gets the static reply.
    vendors[0].set_script(Script::Always(Behavior::Error(VendorError::ServerError)));
    vendors[1].set_script(Script::Always(Behavior::Error(VendorError::QuotaExhausted)));
    for _ in 0..1000 {
        assert_eq!(support::call_route(&client, &served.url, "main").await, 200);
    }
    // Last, distinct conditions (an auth failure on a route without a static reply: its alert
    // kind, its breaker, every link failed): the alerts are sent in order, so once those three
    // arrive, every alert the outage queued has been delivered.
    vendors[2].set_script(Script::Always(Behavior::Error(VendorError::Auth)));
    assert_ne!(
        support::call_route(&client, &served.url, "marker").await,
        200
    );
    poll(Duration::from_secs(20), "the marker's alerts", || {
        let alerts = got.alerts();
        let marker = alerts
            .iter()
            .filter(|a| {
                a["labels"]["ripcord_link"] == "third" || a["labels"]["ripcord_chain"] == "marker"
            })
            .count();
        (marker >= 3).then_some(())
    })
    .await;

    let alerts = got.alerts();
    let mut by_condition: BTreeMap<String, usize> = BTreeMap::new();
    for a in &alerts {
        let l = &a["labels"];
        let scope = l["ripcord_link"]
            .as_str()
            .or(l["ripcord_chain"].as_str())
            .unwrap_or("?");
        let key = match l["alertname"].as_str().unwrap() {
            "RipcordAlertKindError" => format!(
                "RipcordAlertKindError {scope} {}",
                l["error_type"].as_str().unwrap()
            ),
            name => format!("{name} {scope}"),
        };
        *by_condition.entry(key).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = [
        "RipcordBreakerOpen primary",
        "RipcordBreakerOpen backup",
        "RipcordAlertKindError backup quota_exhausted",
        "RipcordStaticReply main",
        "RipcordAlertKindError third auth",
        "RipcordEveryLinkFailed marker",
        // An auth failure opens the marker's breaker at once.
        "RipcordBreakerOpen third",
    ]
    .into_iter()
    .map(|k| (k.to_owned(), 1))
    .collect();
    assert_eq!(by_condition, want, "{alerts:#?}");

    // Alertmanager's shape, with the runbook section of each alert.
    for a in &alerts {
        let name = a["labels"]["alertname"].as_str().unwrap();
        assert_eq!(a["labels"]["severity"], "critical", "{a}");
        assert!(
            a["annotations"]["summary"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{a}"
        );
        assert!(
            a["annotations"]["description"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{a}"
        );
        let runbook = a["annotations"]["runbook_url"].as_str().unwrap();
        assert!(
            runbook.ends_with(&format!("docs/operating.md#{}", name.to_lowercase())),
            "{a}"
        );
        let starts = a["startsAt"].as_str().unwrap();
        assert!(
            starts.len() >= 20 && starts.ends_with('Z') && starts.contains('T'),
            "{a}"
        );
        assert!(
            a["generatorURL"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://")),
            "{a}"
        );
        assert!(
            a.get("endsAt").is_none(),
            "nothing resolved during the outage: {a}"
        );
    }
    let quota = alerts
        .iter()
        .find(|a| a["labels"]["alertname"] == "RipcordStaticReply")
        .unwrap();
    assert_eq!(quota["labels"]["ripcord_chain"], "main");

    // The webhook's secret path never reaches the server log.
    let log: Vec<String> = served.log.try_iter().collect();
    assert!(
        log.iter().all(|l| !l.contains("s3cr3t")),
        "the webhook path leaked into the log:\n{}",
        log.join("\n")
    );
}

/// The p50 of `n` outage calls (the static reply) through a gateway with `alerts`.
async fn outage_p50(vendors: &[FakeVendor; 3], alerts: &str, what: &str, n: usize) -> Duration {
    let dir = tempdir(what);
    let served = support::serve(&config(
        &dir,
        &[&vendors[0], &vendors[1], &vendors[2]],
        alerts,
    ));
    let client = reqwest::Client::new();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        assert_eq!(support::call_route(&client, &served.url, "main").await, 200);
        times.push(t.elapsed());
    }
    let _ = std::fs::remove_dir_all(&dir);
    times.sort();
    times[n / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_webhook_never_slows_the_calls() {
    let vendors = support::openai_fakes::<3>().await;
    vendors[0].set_script(Script::Always(Behavior::Error(VendorError::ServerError)));
    vendors[1].set_script(Script::Always(Behavior::Error(VendorError::Auth)));
    // A receiver that accepts connections and never answers: every POST waits its timeout.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((sock, _)) = dead.accept().await {
            keep.lock().unwrap().push(sock);
        }
    });
    let dead_alerts = format!(
        "[alerts]\nwebhook_url = \"http://{dead_addr}/hook/{SECRET_PATH}\"\n\
         min_interval_ms = 0\ndedupe_ms = 0\ntimeout_ms = 2000\nretries = 5\nqueue = 4\n"
    );
    // With no dedupe window every static reply queues an alert: the queue fills at once and
    // stays full while the sender waits on the dead receiver.
    let none = outage_p50(&vendors, "", "none", 300).await;
    let with_dead = outage_p50(&vendors, &dead_alerts, "dead", 300).await;
    eprintln!("outage p50: no webhook {none:?}, dead webhook {with_dead:?}");
    assert!(
        with_dead < none * 3 + Duration::from_millis(20),
        "a dead webhook slowed the calls: p50 {with_dead:?} against {none:?} without one"
    );
    assert!(
        !held.lock().unwrap().is_empty(),
        "the dead receiver was never called"
    );
}

#[test]
fn a_bad_alerts_table_is_refused_by_file_and_key_and_check_config_hides_the_path() {
    let dir = tempdir("config");
    let base = "[chain]\norder = [\"p\"]\n[[providers]]\nname = \"p\"\nkind = \"openai\"\n\
                model = \"gpt-4o\"\napi_key = \"sk-test\"\n";
    for (alerts, key, says) in [
        (
            "webhook_url = \"ftp://hooks.example/T0/B0/zq-hidden\"",
            "alerts.webhook_url",
            "http",
        ),
        (
            "webhook_url = \"no url at all zq-hidden\"",
            "alerts.webhook_url",
            "not a URL",
        ),
        (
            "webhook_url = \"https://hooks.example/zq-hidden\"\nformat = \"teams\"",
            "alerts.format",
            "teams",
        ),
        (
            "webhook_url = \"https://hooks.example/zq-hidden\"\ntimeout_ms = 0",
            "alerts.timeout_ms",
            "at least 1",
        ),
        (
            "webhook_url = \"https://hooks.example/zq-hidden\"\nqueue = 0",
            "alerts.queue",
            "at least 1",
        ),
        (
            "webhook_url = \"${RIPCORD_TEST_UNSET_HOOK}\"",
            "alerts.webhook_url",
            "not set",
        ),
    ] {
        let path = dir.join("bad.toml");
        std::fs::write(&path, format!("{base}[alerts]\n{alerts}\n")).unwrap();
        let out = support::ripcord()
            .env_remove("RIPCORD_TEST_UNSET_HOOK")
            .arg("check-config")
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{alerts}: accepted");
        assert!(err.contains("bad.toml"), "{alerts}: {err}");
        assert!(err.contains(&format!("key `{key}`")), "{alerts}: {err}");
        assert!(err.contains(says), "{alerts}: {err}");
        assert!(
            !err.contains("zq-hidden"),
            "{alerts}: the URL leaked: {err}"
        );
    }
    let path = dir.join("good.toml");
    std::fs::write(
        &path,
        format!(
            "{base}[alerts]\nwebhook_url = \"https://hooks.slack.example/services/{SECRET_PATH}\"\n\
             format = \"slack\"\ndedupe_ms = 60000\n"
        ),
    )
    .unwrap();
    let out = support::check_config(&path, &[]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("alerts: webhook https://hooks.slack.example (path redacted), format slack"),
        "{text}"
    );
    assert!(
        text.contains("one alert per condition per 60000 ms"),
        "{text}"
    );
    assert!(
        !text.contains("s3cr3t") && !text.contains("services"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
