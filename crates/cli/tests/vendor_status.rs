//! The vendors' own status pages through the real `ripcord serve` (`[providers.status_page]`),
//! against a fake Statuspage on loopback polled every 200 ms: a declared major outage of the
//! "API" component demotes the provider (or, with `on_major_outage = "open"`, holds it refused
//! so no call reaches it) within a poll, the resolution restores it, `/status` and `/metrics`
//! show the declared state beside ripcord's own, and a page that cannot be read changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod knobs_support;
mod support;

use std::time::{Duration, Instant};
use support::Fetch;

use knobs_support::*;
use ripcord_chaos::Script;
use ripcord_chaos::status_page::{FakeStatusPage, PageMode};
use serde_json::Value;

const INTERVAL_MS: u64 = 200;

/// Two OpenAI fakes, `primary` listening to `url` with `policy`, `backup` after it.
fn config(primary: &str, backup: &str, page: &str, format: &str, policy: &str) -> String {
    let status = format!(
        "[providers.status_page]\nurl = \"{page}\"\ncomponents = [\"API\"]\nformat = \"{format}\"\ninterval_ms = {INTERVAL_MS}\ntimeout_ms = 150\non_major_outage = \"{policy}\"\n"
    );
    format!(
        "[chain]\norder = [\"primary\", \"backup\"]\ndeadline_ms = 5000\nstatic_reply = \"busy\"\n{}{status}{}",
        provider("primary", "gpt-4o", primary, ""),
        provider("backup", "gpt-4o-mini", backup, ""),
    )
}

/// `GET /status` as JSON: the vendor entry of `primary`.
async fn vendor(url: &str) -> Value {
    let body: Value = reqwest::Client::new()
        .get(format!("{url}/status"))
        .header("accept", "application/json")
        .json_body()
        .await;
    body["vendor_status"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["provider"] == "primary").cloned())
        .unwrap_or_else(|| panic!("no vendor entry for primary in {body}"))
}

/// Polls `/status` until `done` holds (at most `within`); how long it took.
async fn until(url: &str, within: Duration, what: &str, done: impl Fn(&Value) -> bool) -> Duration {
    let start = Instant::now();
    loop {
        let v = vendor(url).await;
        if done(&v) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{what} did not happen within {within:?}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The two fakes, the status page and `ripcord serve` of [`config`] over them.
struct Setup {
    primary: ripcord_chaos::FakeVendor,
    backup: ripcord_chaos::FakeVendor,
    page: FakeStatusPage,
    dir: std::path::PathBuf,
    served: support::Served,
}

/// Where the gateway reads the fake page, and the `format` it is read in.
type Feed = (fn(&FakeStatusPage) -> String, &'static str);
/// The page's Statuspage JSON summary.
const SUMMARY: Feed = (FakeStatusPage::summary_url, "statuspage");
/// The page's RSS feed of incidents.
const RSS: Feed = (FakeStatusPage::rss_url, "rss");

/// A status page listing `components`, read as `feed`; fakes answering "from primary" and
/// "from backup"; and the gateway (config in the temp dir `name`, polling with `policy`) once
/// its first poll has seen the page operational.
async fn start(components: &[&str], name: &str, feed: Feed, policy: &str) -> Setup {
    let (url_of, format) = feed;
    let primary = fake("from primary", Script::default()).await;
    let backup = fake("from backup", Script::default()).await;
    let page = FakeStatusPage::start(components).await.unwrap();
    let dir = tempdir(name);
    let text = config(
        &primary.base_url(),
        &backup.base_url(),
        &url_of(&page),
        format,
        policy,
    );
    let served = support::serve(&write_config(&dir, &text));
    until(
        &served.url,
        Duration::from_secs(10),
        "the first poll",
        |v| v["declared"]["status"] == "operational",
    )
    .await;
    Setup {
        primary,
        backup,
        page,
        dir,
        served,
    }
}

impl Setup {
    /// An answer while the backup fails; the backup is healthy again afterwards.
    async fn ask_while_the_backup_fails(&self) -> Answer {
        let failing = ripcord_chaos::Behavior::Error(ripcord_chaos::VendorError::ServerError);
        self.backup.set_script(Script::Always(failing));
        let a = ask(&self.served.url, &[]).await;
        self.backup.set_script(Script::default());
        a
    }

    /// Waits (up to `within`) for `what`: the link back in place, the primary serving again;
    /// then removes the temp dir.
    async fn restored(self, within: Duration, what: &str) {
        until(&self.served.url, within, what, |v| {
            v["ripcord"]["effect"] == "in place"
        })
        .await;
        assert_eq!(content(&ask(&self.served.url, &[]).await), "from primary");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `GET /metrics` of the gateway at `url`.
async fn metrics_text(url: &str) -> String {
    reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Within one poll interval, with room for the poll itself and a loaded machine.
fn one_poll() -> Duration {
    Duration::from_millis(INTERVAL_MS) + Duration::from_millis(1_300)
}

#[tokio::test]
async fn a_major_incident_on_the_api_demotes_the_provider_until_it_resolves() {
    let t = start(&["API", "ChatGPT"], "vendor-demote", SUMMARY, "demote").await;
    assert_eq!(content(&ask(&t.served.url, &[]).await), "from primary");

    // An outage of another component is not the provider's.
    t.page.set_component("ChatGPT", "major_outage");
    t.page
        .open_incident("ChatGPT is down", "critical", &["ChatGPT"]);
    tokio::time::sleep(Duration::from_millis(3 * INTERVAL_MS)).await;
    assert_eq!(vendor(&t.served.url).await["ripcord"]["effect"], "in place");
    assert_eq!(content(&ask(&t.served.url, &[]).await), "from primary");

    t.page.set_component("API", "major_outage");
    let incident = t
        .page
        .open_incident("Elevated error rates on the API", "major", &["API"]);
    let took = until(&t.served.url, one_poll(), "the demotion", |v| {
        v["ripcord"]["effect"] == "demoted"
    })
    .await;
    eprintln!("demoted {took:?} after the incident opened (interval {INTERVAL_MS} ms)");
    let v = vendor(&t.served.url).await;
    assert_eq!(v["declared"]["status"], "major_outage", "{v}");
    assert_eq!(v["declared"]["component"], "API", "{v}");
    assert_eq!(
        v["declared"]["incident"], "Elevated error rates on the API",
        "{v}"
    );
    assert_eq!(
        v["ripcord"]["breaker"], "closed",
        "ripcord's own view stays its own: {v}"
    );
    let before = chats(&t.primary);
    for _ in 0..5 {
        assert_eq!(content(&ask(&t.served.url, &[]).await), "from backup");
    }
    assert_eq!(
        chats(&t.primary),
        before,
        "a demoted link was tried before the backup"
    );

    // The declared state is a metric too.
    let metrics = metrics_text(&t.served.url).await;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("ripcord_vendor_status{") && l.contains("ripcord_link=\"primary\""))
        .unwrap_or_else(|| panic!("no ripcord_vendor_status series for primary:\n{metrics}"));
    assert!(line.contains("vendor_component=\"API\""), "{line}");
    let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(value, 3.0, "{line}");

    // The demoted link still serves when the backup fails.
    let a = t.ask_while_the_backup_fails().await;
    assert_eq!(content(&a), "from primary");

    t.page.set_component("API", "operational");
    assert!(t.page.resolve_incident(&incident));
    t.restored(one_poll(), "the restoration").await;
}

#[tokio::test]
async fn open_sends_no_call_to_the_link_until_the_incident_resolves() {
    // Read from the RSS feed: an unresolved entry naming "API" is a major outage.
    let t = start(&["API"], "vendor-open", RSS, "open").await;
    assert_eq!(content(&ask(&t.served.url, &[]).await), "from primary");
    let incident = t
        .page
        .open_incident("Elevated errors on the API", "major", &["API"]);
    until(&t.served.url, one_poll(), "holding the link open", |v| {
        v["ripcord"]["effect"] == "held open"
    })
    .await;
    let before = chats(&t.primary);
    for _ in 0..10 {
        assert_eq!(content(&ask(&t.served.url, &[]).await), "from backup");
    }
    // Even with the backup failing, nothing reaches the held link: the static reply answers.
    let a = t.ask_while_the_backup_fails().await;
    assert_eq!(content(&a), "busy", "{}", a.body);
    assert_eq!(chats(&t.primary), before, "a call reached a link held open");
    let v = vendor(&t.served.url).await;
    assert_eq!(
        v["declared"]["incident"], "Elevated errors on the API",
        "{v}"
    );

    t.page.resolve_incident(&incident);
    t.restored(one_poll(), "the link taking calls again").await;
}

#[tokio::test]
async fn a_page_that_cannot_be_read_changes_nothing() {
    let t = start(&["API"], "vendor-unreachable", SUMMARY, "open").await;

    // Healthy, then unreachable: the provider keeps serving.
    t.page.set_mode(PageMode::Unreachable);
    until(
        &t.served.url,
        Duration::from_secs(5),
        "two failed polls",
        |v| v["declared"]["failures"].as_u64() >= Some(2),
    )
    .await;
    let v = vendor(&t.served.url).await;
    assert!(
        v["declared"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("could not be reached")),
        "{v}"
    );
    assert_eq!(v["declared"]["status"], "operational", "{v}");
    assert_eq!(content(&ask(&t.served.url, &[]).await), "from primary");

    // Declared down, then the page breaks in each way: the link stays held, nothing resets it.
    t.page.set_mode(PageMode::Serve);
    t.page.set_component("API", "major_outage");
    until(
        &t.served.url,
        Duration::from_secs(8),
        "holding the link open",
        |v| v["ripcord"]["effect"] == "held open",
    )
    .await;
    for (mode, says) in [
        (PageMode::Garbage, "not Statuspage JSON"),
        (PageMode::Status(503), "HTTP 503"),
        (PageMode::Hang, "did not answer within"),
    ] {
        t.page.set_mode(mode);
        until(&t.served.url, Duration::from_secs(8), says, |v| {
            v["declared"]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains(says))
        })
        .await;
        let v = vendor(&t.served.url).await;
        assert_eq!(v["ripcord"]["effect"], "held open", "{says}: {v}");
        assert_eq!(v["declared"]["status"], "major_outage", "{says}: {v}");
        assert_eq!(content(&ask(&t.served.url, &[]).await), "from backup");
    }
    let metrics = metrics_text(&t.served.url).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("ripcord_vendor_poll_failures_total{")
                && l.contains("ripcord_link=\"primary\"")),
        "{metrics}"
    );
    // Readable again and all clear: restored.
    t.page.set_mode(PageMode::Serve);
    t.page.all_clear();
    t.restored(Duration::from_secs(8), "the restoration").await;
}

/// Parses a config of one OpenAI (or `kind`) provider with `status` as its status page section.
fn parse_status(kind: &str, status: &str) -> Result<ripcord_cli::config::Config, String> {
    let text = format!(
        "[chain]\norder = [\"p\"]\n\n[[providers]]\nname = \"p\"\nkind = \"{kind}\"\nmodel = \"m\"\napi_key = \"sk-test\"\n\n[providers.status_page]\n{status}\n"
    );
    let env = |_: &str| -> Option<String> { None };
    ripcord_cli::config::parse("vendor.toml", &text, &env).map_err(|e| e.to_string())
}

#[test]
fn the_section_is_validated_with_the_file_and_key_named() {
    let ok = parse_status(
        "openai",
        "url = \"preset\"\ncomponents = [\"API\"]\non_major_outage = \"demote\"",
    )
    .unwrap();
    let described = ok.describe();
    assert!(
        described.contains(
            "status page: https://status.openai.com/api/v2/summary.json (statuspage) components [API], every 60000 ms (timeout 5000 ms), on major outage: demote"
        ),
        "{described}"
    );
    let anthropic = parse_status(
        "anthropic",
        "url = \"preset\"\ncomponents = [\"Claude API\"]",
    )
    .unwrap()
    .describe();
    assert!(
        anthropic.contains("status.anthropic.com/api/v2/summary.json")
            && anthropic.contains("on major outage: alert"),
        "{anthropic}"
    );
    let cases = [
        (
            "openai",
            "components = [\"API\"]",
            "status_page.url",
            "url = \"preset\"",
        ),
        (
            "deepseek",
            "url = \"preset\"\ncomponents = [\"API\"]",
            "status_page.url",
            "no status page preset for deepseek",
        ),
        (
            "openai",
            "url = \"ftp://x/summary.json\"\ncomponents = [\"API\"]",
            "status_page.url",
            "http:// or https://",
        ),
        (
            "openai",
            "url = \"https://status.example.com/\"\ncomponents = [\"API\"]",
            "status_page.format",
            "cannot tell the format",
        ),
        (
            "openai",
            "url = \"https://s.example.com/a.json\"\ncomponents = [\"API\"]\nformat = \"json\"",
            "status_page.format",
            "unknown format \"json\"",
        ),
        (
            "openai",
            "url = \"https://s.example.com/a.json\"",
            "status_page.components",
            "name the components",
        ),
        (
            "openai",
            "url = \"https://s.example.com/a.json\"\ncomponents = [\" \"]",
            "status_page.components",
            "empty",
        ),
        (
            "openai",
            "url = \"https://s.example.com/a.json\"\ncomponents = [\"API\"]\ninterval_ms = 10",
            "status_page.interval_ms",
            "at least 50 ms",
        ),
        (
            "openai",
            "url = \"https://s.example.com/a.json\"\ncomponents = [\"API\"]\ntimeout_ms = 0",
            "status_page.timeout_ms",
            "at least 1 ms",
        ),
        (
            "openai",
            "url = \"https://s.example.com/a.json\"\ncomponents = [\"API\"]\non_major_outage = \"panic\"",
            "status_page.on_major_outage",
            "unknown policy \"panic\"",
        ),
        (
            "openai",
            "url = \"https://s.example.com/a.json\"\ncomponents = [\"API\"]\nintervall_ms = 100",
            "intervall_ms",
            "unknown field",
        ),
    ];
    for (kind, section, key, says) in cases {
        let e = parse_status(kind, section).expect_err(section);
        assert!(e.contains("vendor.toml"), "{section}: {e}");
        assert!(e.contains(key), "{section}: {e}");
        assert!(e.contains(says), "{section}: {e}");
    }
    // Nothing is polled unless the section is written.
    let text = "[chain]\norder = [\"p\"]\n\n[[providers]]\nname = \"p\"\nkind = \"openai\"\nmodel = \"m\"\napi_key = \"sk-test\"\n";
    let env = |_: &str| -> Option<String> { None };
    let plain = ripcord_cli::config::parse("plain.toml", text, &env).unwrap();
    assert!(plain.chain.iter().all(|p| p.status_page.is_none()));
    assert!(!plain.describe().contains("status page"));
}
