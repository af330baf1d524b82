//! `[alerts]` follows a live reload of a real `ripcord serve` (`SIGHUP`): two webhook receivers
//! on loopback; an outage's alerts go to receiver 1; after a reload that points `[alerts]` at
//! receiver 2, the next alert goes to receiver 2 and not to 1; after a reload that removes
//! `[alerts]`, a new outage is sent nowhere (a later reload that adds it back gets only what
//! happens after it). The reload's summary names the webhook's host, never its secret path.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail the test by panicking

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError};
use support::Received;

/// The part of the webhook URL a Slack-style webhook treats as its credential.
const SECRET_PATH: &str = "T0000/B0000/s3cr3t-webhook-path";

/// Every alert a receiver got, as (alertname, link or route) pairs, in order.
fn pairs(got: &Received) -> Vec<(String, String)> {
    got.alerts()
        .iter()
        .map(|a| {
            let l = &a["labels"];
            let scope = l["ripcord_link"].as_str().or(l["ripcord_chain"].as_str());
            (
                l["alertname"].as_str().unwrap_or("?").to_owned(),
                scope.unwrap_or("?").to_owned(),
            )
        })
        .collect()
}

fn has(got: &Received, name: &str, scope: &str) -> bool {
    pairs(got).iter().any(|(n, s)| n == name && s == scope)
}

/// A webhook receiver on loopback answering 200; its webhook URL (with the secret path).
async fn receiver() -> (String, Received) {
    let (base, got) = support::webhook(SECRET_PATH).await;
    (format!("{base}/hook/{SECRET_PATH}"), got)
}

/// Two routes without a static reply, `main` over `primary` and `other` over `second`, with
/// `[alerts]` to `webhook` (none for `None`).
fn write_config(path: &Path, vendors: [&FakeVendor; 2], webhook: Option<&str>) {
    let provider = |name: &str, v: &FakeVendor| support::tripping_link(name, &v.base_url());
    let alerts = webhook.map_or(String::new(), |url| {
        format!(
            "[alerts]\nwebhook_url = \"{url}\"\nmin_interval_ms = 20\ndedupe_ms = 600000\n\
             timeout_ms = 1000\nretries = 1\n"
        )
    });
    let text = format!(
        "[[routes]]\nname = \"main\"\norder = [\"primary\"]\ndeadline_ms = 5000\n\n\
         [[routes]]\nname = \"other\"\norder = [\"second\"]\ndeadline_ms = 5000\n\n{}{}{alerts}",
        provider("primary", vendors[0]),
        provider("second", vendors[1]),
    );
    std::fs::write(path, text).unwrap();
}

/// Polls `f` every 50 ms until it holds, for at most 20 s.
async fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `SIGHUP` and returns the reload's outcome line, every line logged meanwhile kept in
/// `log`.
fn reload(served: &support::Served, log: &mut Vec<String>) -> String {
    served.signal("HUP");
    loop {
        let line = served
            .log
            .recv_timeout(Duration::from_secs(10))
            .expect("a reload line in the log");
        log.push(line.clone());
        if line.starts_with("ripcord: reload") {
            return line;
        }
    }
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ripcord-webhook-reload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_moves_the_alerts_to_the_new_webhook_and_removing_alerts_stops_them() {
    let vendors = support::openai_fakes::<2>().await;
    for v in &vendors {
        v.set_script(Script::Always(Behavior::Error(VendorError::Auth)));
    }
    let (hook1, got1) = receiver().await;
    let (hook2, got2) = receiver().await;
    let dir = tempdir();
    let path = dir.join("ripcord.toml");
    write_config(&path, [&vendors[0], &vendors[1]], Some(&hook1));
    let served = support::serve(&path);
    let client = reqwest::Client::new();
    let mut log = Vec::new();

    // The outage on `main` (an auth failure opens the breaker at once): receiver 1 is told.
    assert_ne!(support::call_route(&client, &served.url, "main").await, 200);
    until("receiver 1 told of main's outage", || {
        has(&got1, "RipcordAlertKindError", "primary")
            && has(&got1, "RipcordBreakerOpen", "primary")
            && has(&got1, "RipcordEveryLinkFailed", "main")
    })
    .await;
    let told1 = pairs(&got1).len();
    assert_eq!(told1, 3, "{:?}", pairs(&got1));

    // Reload to receiver 2. The outage goes on; the next alert goes to receiver 2 (which has
    // heard nothing of it yet), not to receiver 1.
    write_config(&path, [&vendors[0], &vendors[1]], Some(&hook2));
    let line = reload(&served, &mut log);
    let host2 = hook2.split("/hook/").next().unwrap();
    let host1 = hook1.split("/hook/").next().unwrap();
    assert!(line.starts_with("ripcord: reloaded"), "{line}");
    assert!(
        line.contains(&format!("alerts: now sent to the webhook at {host2}"))
            && line.contains(host1),
        "{line}"
    );
    assert_ne!(support::call_route(&client, &served.url, "main").await, 200);
    until("receiver 2 told of main's outage", || {
        has(&got2, "RipcordEveryLinkFailed", "main")
    })
    .await;
    assert_eq!(
        pairs(&got1).len(),
        told1,
        "receiver 1 was told after the reload: {:?}",
        pairs(&got1)
    );

    // Remove `[alerts]`: a new outage (on `other`) is sent nowhere.
    write_config(&path, [&vendors[0], &vendors[1]], None);
    let line = reload(&served, &mut log);
    assert!(
        line.starts_with("ripcord: reloaded") && line.contains("alerts: no longer sent"),
        "{line}"
    );
    assert_ne!(
        support::call_route(&client, &served.url, "other").await,
        200
    );
    // Add `[alerts]` back (to receiver 1): only what happens after this reload is told. The
    // outage on `other` goes on (its breaker is open, so only "every link failed" recurs);
    // once receiver 1 has that, anything queued for receiver 2 before the reload would have
    // been delivered long since (a sender posts what it holds at once).
    write_config(&path, [&vendors[0], &vendors[1]], Some(&hook1));
    let line = reload(&served, &mut log);
    assert!(
        line.contains(&format!("alerts: now sent to the webhook at {host1}")),
        "{line}"
    );
    assert_ne!(
        support::call_route(&client, &served.url, "other").await,
        200
    );
    until("receiver 1 told of other's outage", || {
        has(&got1, "RipcordEveryLinkFailed", "other")
    })
    .await;
    let after_removal = |got: &Received| {
        pairs(got)
            .into_iter()
            .filter(|(_, s)| s == "other" || s == "second")
            .collect::<Vec<_>>()
    };
    assert_eq!(
        after_removal(&got2),
        Vec::<(String, String)>::new(),
        "receiver 2 was told after [alerts] was removed"
    );
    assert_eq!(
        after_removal(&got1),
        vec![("RipcordEveryLinkFailed".to_owned(), "other".to_owned())],
        "what happened while [alerts] was removed reached receiver 1"
    );

    // The webhook's secret path never reaches the log.
    log.extend(served.log.try_iter());
    assert!(
        log.iter().all(|l| !l.contains("s3cr3t")),
        "the webhook path leaked into the log:\n{}",
        log.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
